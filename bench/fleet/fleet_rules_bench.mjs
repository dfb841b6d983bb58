// The shipped rules at fleet scale (docs/benchmarks.md, "Rules at 1,000 nodes"): one real
// Prometheus scraping N simulated nodes' worth of real ncclscope output and evaluating the shipped
// rule files (deploy/prometheus/rules, unchanged), timing each rule group and the dashboards' queries.
//
// The node: tests/deploy/simulated_node.mjs (the real agent at its defaults, ncclscope-sim playing
// node 0 of a 4-node job through the real plugin, 8 fake InfiniBand rails, 8 x 18 fake NVLinks),
// scraped twice 10 s apart. Every series then gets its value at the second scrape and, for
// counters and histograms, its rate between the two. A fleet server replays that page for N nodes
// at /node/NNNN, each value advanced at its rate to the scrape time (gauges held; timestamps
// move with the clock), relabelled per node as a cluster of 4-node jobs would be: `job_id`, the
// communicators of multi-node communicators shared by the job's 4 nodes (and their ranks offset by
// the node's place in the job), single-node communicators, GPU UUIDs and hostnames per node.
// Prometheus adds `instance` (node-NNNN:9824) and `node` as the shipped ServiceMonitor's relabelling
// does. Simplified: every node of the fleet replays the same healthy page (values scaled by a
// per-node factor within 5 %); network peer labels are not renumbered.
//
// Reported: head series, samples ingested per second, Prometheus's RSS and the cores it used after
// the warm-up (with --rules 0, ingestion's alone), and per rule group the
// evaluation time (median and max of the evaluations after the warm-up, as /api/v1/rules reports
// it) against its interval, and the max of those that met no garbage collection cycle of
// Prometheus's (from Go's GODEBUG=gctrace=1 trace); then each dashboard opened as Grafana opens
// it, for one job or node and for the whole fleet (its queries timed, see "The dashboards'
// queries" below); then each group's rules on a quiet server (the same TSDB reopened without
// scraping or rules: --quiet 0 skips it), and those of --compare's rule files (another version of
// deploy/prometheus/rules) on the same data.
//
// Usage: node [--max-old-space-size=8192] fleet_rules_bench.mjs --agent BIN --sim BIN --plugin SO
//          --fabric BIN --nvml SO --prometheus BIN [--nodes 1000] [--minutes 12] [--scrape 30s]
//          [--evaluation 30s] [--dashboards one|all|one,all|0] [--quiet 0] [--compare RULE_DIR] [--json FILE]
//          [--keep-tsdb DIR] [--rules 0] [--gogc N] [--gomemlimit SIZE]   (--rules 0: no rule files,
//          ingestion alone; --gogc, --gomemlimit: the ingesting Prometheus's GOGC and GOMEMLIMIT)
//        node fleet_rules_bench.mjs --prometheus BIN --quiet-from DIR [--compare RULE_DIR] [--json FILE]
//          (the quiet timings only, of the rule files as they are, on a TSDB kept with --keep-tsdb)
//        node fleet_rules_bench.mjs --prometheus BIN --dashboards-from DIR [--dashboards one,all]
//          [--compare-dashboards DASHBOARD_DIR] [--json FILE]   (the dashboards' queries only, on a
//          quiet server over a kept TSDB, beside another version's)
import { readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { availableParallelism, totalmem } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort, sleep, startPrometheus } from "../../tests/deploy/prometheus.mjs";
import { startSimulatedNode } from "../../tests/deploy/simulated_node.mjs";
import { cliOptions } from "../../tests/deploy/cli_options.mjs";
import { FIRST, panelsOf, resolveVariables } from "../../tests/deploy/grafana_variables.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "../..");
const args = cliOptions(["agent", "sim", "plugin", "fabric", "nvml", "prometheus", "nodes", "minutes", "scrape", "evaluation", "dashboards", "quiet", "compare", "json", "keep-tsdb", "quiet-from", "dashboards-from", "compare-dashboards", "rules", "gogc", "gomemlimit"],
  ["prometheus"]);
for (const required of ["agent", "sim", "plugin", "fabric", "nvml"]) {
  if (!args["quiet-from"] && !args["dashboards-from"] && args[required] === undefined) {
    throw new Error(`--${required} is required (all but --prometheus are, without --quiet-from or --dashboards-from)`);
  }
}
const NODES = Number(args.nodes ?? 1000);
const MINUTES = Number(args.minutes ?? 12);
const SCRAPE = args.scrape ?? "30s";
const EVALUATION = args.evaluation ?? "30s";
// Evaluations are taken once the 5m windows are full (half the run for short trial runs).
const WARMUP_S = Math.min(6 * 60, (MINUTES * 60) / 2);
const NODES_PER_JOB = 4;
const t0 = Date.now();
const log = (...m) => console.log(`[${((Date.now() - t0) / 1000).toFixed(0).padStart(5)} s]`, ...m);
const seconds = (d) => Number(d.replace(/s$/, "").replace(/m$/, "")) * (d.endsWith("m") ? 60 : 1);

// The machine's CPU jiffies, busy (all but idle and iowait) and in all, from /proc/stat.
function machineCpu() {
  const f = readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1).map(Number);
  const total = f.reduce((a, x) => a + x, 0);
  return { busy: total - f[3] - f[4], total };
}

// /proc/PID/stat of the Prometheus serving DIR (found by its --storage.tsdb.path), its fields from
// the 3rd on; undefined if it is not found. Its major page faults: field 12.
function prometheusStat(dir) {
  for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(`--storage.tsdb.path=${join(dir, "data")}`)) continue;
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      return stat.slice(stat.lastIndexOf(")") + 2).split(" "); // fields from the 3rd (state) on
    } catch { /* gone meanwhile */ }
  }
  return undefined;
}
const majorFaults = (dir) => Number(prometheusStat(dir)?.[9] ?? NaN); // majflt, field 12

// When the Prometheus in `dir` started, Unix seconds (10 ms resolution): the machine's boot time
// plus the process's start in clock ticks since boot (field 22; USER_HZ is 100 on Linux).
function processStart(dir) {
  const btime = Number(readFileSync("/proc/stat", "utf8").match(/^btime (\d+)$/m)[1]);
  return btime + Number(prometheusStat(dir)?.[19] ?? NaN) / 100;
}

// Go's garbage collection cycles from the runtime's trace (GODEBUG=gctrace=1, one line per cycle
// on stderr: "gc N @T s P%: A+B+C ms clock, ..." with T since the process started, A and C the two
// stop-the-world pauses and B the concurrent mark, wall clock; then the heap before, at the end
// and live after it, MB): [{ start, end, heap_mb, live_mb }], Unix seconds.
function gcCycles(log, started) {
  const line = /^gc \d+ @([\d.]+)s \d+%: ([\d.]+)\+([\d.]+)\+([\d.]+) ms clock, [^,]*, (\d+)->\d+->(\d+) MB/gm;
  return [...log.matchAll(line)].map((m) => {
    const start = started + Number(m[1]);
    return { start, end: start + (Number(m[2]) + Number(m[3]) + Number(m[4])) / 1000, heap_mb: Number(m[5]), live_mb: Number(m[6]) };
  });
}

// --- one node's page, as values and rates ----------------------------------------------------------
function parsePage(text) {
  const types = new Map();
  const series = new Map(); // "name{labels}" -> { name, labels: [[k, v]...], value }
  for (const line of text.split("\n")) {
    if (line.startsWith("# TYPE ")) { const [, , name, type] = line.split(" "); types.set(name, type); continue; }
    if (line === "" || line.startsWith("#")) continue;
    const brace = line.indexOf("{");
    const space = line.lastIndexOf(" ");
    const name = brace >= 0 && brace < space ? line.slice(0, brace) : line.slice(0, space);
    const labelText = brace >= 0 && brace < space ? line.slice(brace + 1, line.lastIndexOf("}")) : "";
    const labels = [...labelText.matchAll(/([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1], m[2]]);
    series.set(line.slice(0, space), { name, labels, value: Number(line.slice(space + 1)) });
  }
  const familyType = (name) => {
    if (types.has(name)) return types.get(name);
    for (const s of ["_bucket", "_sum", "_count"]) if (name.endsWith(s) && types.get(name.slice(0, -s.length)) === "histogram") return "counter";
    return "untyped";
  };
  return { types, series, familyType };
}

function template(p0, p1, dtSeconds) {
  const rows = [];
  for (const [key, s] of p1.series) {
    const type = p1.familyType(s.name);
    const before = p0.series.get(key);
    const rate = type === "counter" && before ? Math.max(0, (s.value - before.value) / dtSeconds) : 0;
    rows.push({ name: s.name, labels: s.labels, value: s.value, rate, clock: s.name.endsWith("_timestamp_seconds") && s.value > 1e9 });
  }
  // What each communicator is: multi-node ones are shared by the job's nodes.
  const comms = new Map();
  for (const s of p1.series.values()) {
    if (s.name !== "ncclscope_nccl_comm_info") continue;
    const l = Object.fromEntries(s.labels);
    comms.set(l.comm, { nnodes: Number(l.nnodes), perNode: Number(l.nranks) / Number(l.nnodes) });
  }
  return { rows, comms };
}

// 64-bit-ish mix of a communicator hash and an index, as hex like NCCL's commHash labels.
function mixComm(comm, index) {
  let h = 0x811c9dc5n ^ BigInt(index + 1);
  for (const c of comm) h = ((h ^ BigInt(c.charCodeAt(0))) * 0x100000001b3n) & 0xffffffffffffffffn;
  return `0x${h.toString(16).padStart(16, "0")}`;
}

// Per node: the series' name{labels} text once, relabelled.
function nodeKeys(tpl, n) {
  const job = Math.floor(n / NODES_PER_JOB);
  const k = n % NODES_PER_JOB;
  const commOf = new Map();
  for (const [comm, c] of tpl.comms) commOf.set(comm, { id: c.nnodes > 1 ? mixComm(comm, job) : mixComm(comm, 100000 + n), offset: c.nnodes > 1 ? k * c.perNode : 0 });
  return tpl.rows.map((r) => {
    const c = commOf.get(r.labels.find(([key]) => key === "comm")?.[1]);
    const labels = r.labels.map(([key, v]) => {
      if (key === "comm" && c) return `comm="${c.id}"`;
      if (key === "rank" && c && /^\d+$/.test(v)) return `rank="${Number(v) + c.offset}"`;
      if (key === "job_id") return `job_id="job-${job}"`;
      if (key === "UUID" && v !== "") return `UUID="${v}-n${n}"`;
      if (key === "process_hostname") return `process_hostname="node-${n}"`;
      return `${key}="${v}"`;
    });
    return labels.length ? `${r.name}{${labels.join(",")}}` : r.name;
  });
}

// --- the quiet server ----------------------------------------------------------------------------
// Rule groups as Prometheus parses them from a directory of rule files (a throwaway server with an
// empty TSDB lists their expressions); `suffix` is appended to each group's name.
async function ruleGroups(ruleDir, suffix = "") {
  const names = readdirSync(ruleDir).filter((f) => f.endsWith(".yaml")).sort();
  const files = Object.fromEntries(names.map((f) => [f, readFileSync(join(ruleDir, f), "utf8")]));
  const lister = await startPrometheus(args.prometheus, { config: `global:\n  evaluation_interval: ${EVALUATION}\nrule_files: [${names.map((f) => JSON.stringify(f)).join(", ")}]\n`, files });
  try {
    return (await (await fetch(`${lister.base}/api/v1/rules`)).json()).data.groups.map((g) => ({ ...g, name: `${g.name}${suffix}` }));
  } finally {
    await lister.stop();
  }
}

// Prometheus on the TSDB in `dir` (stopped with { keep: true }), without scraping or rules, the
// collector deferred (quietTimings below says why).
async function startQuietServer(dir) {
  const restarted = Date.now();
  const env = { ...process.env, GOGC: "off", GOMEMLIMIT: String(Math.floor(0.6 * totalmem())) };
  const quiet = await startPrometheus(args.prometheus, { config: "global:\n  evaluation_interval: 1h\n", dir, readyTimeoutMs: 15 * 60000, env });
  log(`quiet server: the TSDB replayed in ${((Date.now() - restarted) / 1000).toFixed(0)} s`);
  return quiet;
}

// Each group's rules on a quiet server: while ingesting, on this VM, the groups share two cores
// with the ingestion of every scrape and with each other (Prometheus runs groups concurrently), so
// their times are those of a starved server. Prometheus is restarted on the TSDB in `dir` without
// scraping or rules, and each group's rules are evaluated one after another, as the group does, as
// instant queries at `at` (the run's last full minute); each wrapped in count() so that sending the
// result back is not timed (a rule appends its result instead: not timed either).
//
// With the Go garbage collector deferred (GOGC=off, GOMEMLIMIT at 60 % of this machine's memory):
// Prometheus holds ~8 GiB of heap at 1,000 nodes, and on two cores a collection cycle marking it
// stalls whichever query triggered it (with the collector on, the same unchanged rule measured
// 0.5 s and 1.8 s in two runs). A many-core server marks on other cores (Go gives the collector
// 25 % of them) while the rule evaluates; deferring it here times the evaluation itself. Five
// rounds over every rule after one untimed pass; a group's time is the sum of its rules' medians,
// and the sum of their minimums is shown beside it.
async function quietTimings(dir, at, groups) {
  const quiet = await startQuietServer(dir);
  const out = [];
  try {
    // One untimed pass first: the first query to touch a series reads its chunks from disk, and
    // whichever version was timed first paid for it (the first --compare run: every group of the
    // version timed first was slower, unchanged rules included).
    for (const g of groups) for (const r of g.rules) await quiet.query(`count(${r.query})`, at, "120s");
    // Five rounds over every rule of every group (of both versions with --compare), not five
    // repetitions of one rule in a row: with the collector deferred the heap grows into fresh
    // pages until GOMEMLIMIT, and page faults cost much on this VM, so whatever was timed first
    // was slower (the same unchanged group measured 2x apart between the two versions). Rounds
    // spread that over every rule alike.
    const times = groups.map((g) => g.rules.map(() => []));
    const counts = groups.map((g) => g.rules.map(() => 0));
    for (let round = 0; round < 5; round++) {
      for (const [gi, g] of groups.entries()) {
        for (const [ri, r] of g.rules.entries()) {
          const a = performance.now();
          const q = await quiet.query(`count(${r.query})`, at, "120s");
          times[gi][ri].push((performance.now() - a) / 1000);
          if (!q.ok) throw new Error(`${g.name} / ${r.name}: ${q.error}`);
          counts[gi][ri] = Number(q.result[0]?.value?.[1] ?? 0);
        }
      }
    }
    for (const [gi, g] of groups.entries()) {
      let sum = 0;
      let sumMin = 0;
      let empty = 0;
      const rules = [];
      for (const [ri, r] of g.rules.entries()) {
        const t = times[gi][ri].sort((x, y) => x - y);
        const n = counts[gi][ri];
        sum += t[2];
        sumMin += t[0];
        rules.push({ name: r.name, seconds: t[2], min_s: t[0], max_s: t[4], series: n });
        if (r.type === "recording" && n === 0) empty++;
      }
      out.push({ name: g.name, interval_s: g.interval, seconds: sum, min_s: sumMin, empty_recordings: empty, rules });
    }
  } finally {
    await quiet.stop({ keep: true });
  }
  console.log("\nQuiet server, each group's rules one after another (sum of the rules' medians of 5; of their minimums):\n\n" +
    "| Rule group | Interval | Evaluation | Minimum | Share of interval |\n|---|---|---|---|---|");
  for (const g of out) {
    console.log(`| ${g.name} | ${g.interval_s} s | ${g.seconds.toFixed(3)} s | ${g.min_s.toFixed(3)} s | ${(100 * g.seconds / g.interval_s).toFixed(1)} %${g.empty_recordings ? ` (${g.empty_recordings} recordings empty)` : ""} |`);
  }
  console.log("\nCostliest rules on the quiet server (median of 5):");
  for (const r of out.flatMap((g) => g.rules.map((x) => ({ ...x, group: g.name }))).sort((a, b) => b.seconds - a.seconds).slice(0, 15)) {
    console.log(`  ${r.seconds.toFixed(3)} s (min ${r.min_s.toFixed(3)} s, ${r.series} series)  ${r.group} / ${r.name}`);
  }
  const over = out.filter((g) => g.seconds > 0.1 * g.interval_s);
  console.log(over.length ? `\nquiet: OVER 10 % of the interval: ${over.map((g) => g.name).join(", ")}` : "\nquiet: every rule group under 10 % of its interval");
  return out;
}

// --- the dashboards' queries ---------------------------------------------------------------------
// The dashboards' queries as Grafana sends them when a dashboard is opened. Modes: `one`: each
// dashboard opened for one job (job, glance: the first job_id) or one node (node, fabric: the
// first node), every other variable as Grafana defaults it ("All" where the variable includes it,
// else its first option): what an operator following an alert does. `all`: every variable at
// Grafana's default, i.e. the whole fleet (a dashboard saved without a selection). Time series and
// stat targets are range queries over the dashboards' default hour (the run's last min(60,
// --minutes) minutes here) at a step of one scrape interval (Grafana's step for an hour on a
// ~1,000 px panel is 3.6 s, raised to the data source's scrape interval), with $__rate_interval =
// max(4 x scrape, step + scrape) as Grafana computes it; table targets are instant queries at the
// end. Each query times out after 30 s (Grafana's default), counted failed. Simplified: one query
// at a time (Grafana sends a page's queries a few at a time), so a page's time is the sum of its
// queries', an upper bound of what a user waits.
// Returns [{ mode, dashboard, picked, panel, ref, instant, expr }], `expr` interpolated.
async function dashboardQueries(prometheus, dashDir, modes, at, windowS, scrapeS) {
  const builtins = { __rate_interval: `${4 * scrapeS}s` /* max(4 x scrape, step + scrape), step = scrape */, __interval: `${scrapeS}s`, __interval_ms: String(scrapeS * 1000),
    __range: `${windowS}s`, __range_s: String(windowS), __range_ms: String(windowS * 1000) };
  const pickOne = { "ncclscope-job": { job_id: FIRST }, "ncclscope-glance": { job_id: FIRST }, "ncclscope-node": { node: FIRST }, "ncclscope-fabric": { node: FIRST } };
  const out = [];
  for (const mode of modes) {
    if (mode !== "one" && mode !== "all") throw new Error(`--dashboards ${mode}: one, all or 0`);
    for (const file of readdirSync(dashDir).filter((f) => f.endsWith(".json")).sort()) {
      const d = JSON.parse(readFileSync(join(dashDir, file), "utf8"));
      const chosen = mode === "one" ? pickOne[d.uid] ?? {} : {};
      const { interpolate, values } = await resolveVariables(d, prometheus, { chosen, builtins, start: at - windowS, grafanaDefault: true });
      const picked = Object.entries(chosen).map(([k]) => `${k}=${values[k]}`).join(" ");
      for (const p of panelsOf(d)) {
        for (const t of p.targets ?? []) {
          if (t.expr) out.push({ mode, dashboard: d.uid, picked, panel: p.title, ref: t.refId, instant: Boolean(t.instant), expr: interpolate(t.expr) });
        }
      }
    }
  }
  return out;
}

// One dashboard query timed: { seconds, ok, error, series }.
async function timeQuery(prometheus, q, at, windowS, scrapeS) {
  const a = performance.now();
  const r = q.instant ? await prometheus.query(q.expr, at, "30s") : await prometheus.queryRange(q.expr, at - windowS, at, scrapeS, "30s");
  return { seconds: (performance.now() - a) / 1000, ok: r.ok, error: r.error, series: r.ok ? r.result.length : 0 };
}

// Per mode and dashboard: queries, their total and slowest, failed and empty ones; printed as a table.
function dashboardTable(queries, title) {
  const rows = [];
  for (const key of new Set(queries.map((q) => `${q.mode} ${q.dashboard}`))) {
    const qs = queries.filter((q) => `${q.mode} ${q.dashboard}` === key);
    const slowest = qs.reduce((a, b) => (b.seconds > a.seconds ? b : a));
    rows.push({ mode: qs[0].mode, dashboard: qs[0].dashboard, picked: qs[0].picked, queries: qs.length,
      seconds: qs.reduce((a, q) => a + q.seconds, 0), slowest_s: slowest.seconds, slowest_panel: slowest.panel, failed: qs.filter((q) => !q.ok).length,
      empty: qs.filter((q) => q.ok && q.series === 0).length });
  }
  console.log(`\n${title}:\n\n| Mode | Dashboard | Selection | Queries | All queries | Slowest | Failed (30 s) | No data |\n|---|---|---|---|---|---|---|---|\n` +
    rows.map((x) => `| ${x.mode} | ${x.dashboard} | ${x.picked || "All"} | ${x.queries} | ${x.seconds.toFixed(1)} s | ${x.slowest_s.toFixed(2)} s (${x.slowest_panel}) | ${x.failed} | ${x.empty} |`).join("\n"));
  return rows;
}

// --quiet-from DIR: only the quiet timings, on the TSDB a run kept (--keep-tsdb DIR), of the rule
// files as they are now (and --compare's).
if (args["quiet-from"]) {
  const dir = args["quiet-from"];
  const kept = JSON.parse(readFileSync(join(dir, "fleet.json"), "utf8"));
  const groups = await ruleGroups(join(root, "deploy/prometheus/rules"));
  if (args.compare) groups.push(...(await ruleGroups(args.compare, ` (${args.compare})`)));
  log(`quiet timings on ${dir}: ${kept.nodes} nodes x ${kept.series_per_node} series`);
  const quiet = await quietTimings(dir, kept.at, groups);
  if (args.json) writeFileSync(args.json, JSON.stringify({ ...kept, quiet }, null, 1));
  process.exit(0);
}

// --dashboards-from DIR: the dashboards' queries (--dashboards' modes, default one,all) on a quiet
// server over the TSDB a run kept (--keep-tsdb DIR), at the time the run ended: the shipped
// dashboards and, with --compare-dashboards DIR, another version of deploy/grafana/dashboards side
// by side. Three rounds, the versions' queries in turn; each query's median of three is reported
// (the first round also reads what the page cache dropped). A query both versions send alike is
// run once a round, for both.
if (args["dashboards-from"]) {
  const dir = args["dashboards-from"];
  const kept = JSON.parse(readFileSync(join(dir, "fleet.json"), "utf8"));
  const windowS = Math.min(60, kept.minutes ?? MINUTES) * 60;
  const scrapeS = seconds(kept.scrape ?? SCRAPE);
  const modes = String(args.dashboards ?? "one,all").split(",");
  const versions = [{ name: "shipped", dir: join(root, "deploy/grafana/dashboards") }];
  if (args["compare-dashboards"]) versions.push({ name: args["compare-dashboards"], dir: args["compare-dashboards"] });
  log(`dashboards on ${dir}: ${kept.nodes} nodes x ${kept.series_per_node} series`);
  const quiet = await startQuietServer(dir);
  try {
    for (const v of versions) v.queries = await dashboardQueries(quiet, v.dir, modes, kept.at, windowS, scrapeS);
    const longest = Math.max(...versions.map((v) => v.queries.length));
    for (let round = 0; round < 3; round++) {
      const timed = new Map(); // `${instant} ${expr}` -> this round's timing
      for (let i = 0; i < longest; i++) {
        for (const q of versions.map((v) => v.queries[i]).filter(Boolean)) {
          const key = `${q.instant} ${q.expr}`;
          if (!timed.has(key)) timed.set(key, await timeQuery(quiet, q, kept.at, windowS, scrapeS));
          (q.runs ??= []).push(timed.get(key));
        }
      }
      log(`round ${round + 1} of 3`);
    }
    for (const v of versions) {
      v.queries = v.queries.map(({ runs, ...q }) => ({ ...q, ...runs.sort((a, b) => a.seconds - b.seconds)[1] }));
      v.dashboards = dashboardTable(v.queries, `Dashboards on a quiet server, ${v.name} (range queries over ${windowS / 60} min at ${scrapeS} s steps, median of 3)`);
    }
    if (versions.length > 1) {
      const key = (q) => `${q.mode} ${q.dashboard} ${q.panel} ${q.ref}`;
      const before = new Map(versions[0].queries.map((q) => [key(q), q]));
      const changed = versions[1].queries.filter((q) => before.get(key(q))?.expr !== q.expr);
      const cell = (q) => (q ? `${q.seconds.toFixed(2)} s${q.ok ? "" : " (failed)"}, ${q.series} series` : "-");
      console.log(`\nQueries that differ (median of 3):\n\n| Mode | Dashboard | Panel | shipped | ${versions[1].name} |\n|---|---|---|---|---|\n` +
        changed.map((q) => `| ${q.mode} | ${q.dashboard} | ${q.panel} ${q.ref} | ${cell(before.get(key(q)))} | ${cell(q)} |`).join("\n"));
    }
  } finally {
    await quiet.stop({ keep: true });
  }
  if (args.json) writeFileSync(args.json, JSON.stringify({ ...kept, versions }, null, 1));
  process.exit(0);
}

// --- the run -------------------------------------------------------------------------------------
let prometheus;
let server;
try {
  log(`simulated node: starting`);
  const node = await startSimulatedNode({ agent: args.agent, sim: args.sim, plugin: args.plugin, fabric: args.fabric, nvml: args.nvml, duration: "300s" });
  let p0;
  let p1;
  let dt;
  try {
    p0 = await node.settle();
    const a = Date.now();
    await sleep(10000);
    p1 = await node.scrape();
    dt = (Date.now() - a) / 1000;
  } finally {
    await node.stop();
  }
  const tpl = template(parsePage(p0.text), parsePage(p1.text), dt);
  const captured = Date.now() / 1000;
  log(`one node: ${tpl.rows.length} series; building ${NODES} nodes`);
  const keys = [];
  for (let n = 0; n < NODES; n++) keys.push(nodeKeys(tpl, n));

  const port = await freePort();
  server = createServer((req, res) => {
    const m = req.url.match(/^\/node\/(\d+)$/);
    if (!m || Number(m[1]) >= NODES) { res.writeHead(404).end(); return; }
    const n = Number(m[1]);
    const now = Date.now() / 1000;
    const factor = 1 + 0.05 * ((n * 7919) % 100) / 100;
    const nk = keys[n];
    const parts = [];
    for (let i = 0; i < tpl.rows.length; i++) {
      const r = tpl.rows[i];
      const v = r.clock ? r.value + (now - captured) : r.rate > 0 ? (r.value + r.rate * (now - captured)) * factor : r.value;
      parts.push(`${nk[i]} ${v}`);
    }
    res.writeHead(200, { "Content-Type": "text/plain; version=0.0.4" }).end(`${parts.join("\n")}\n`);
  });
  await new Promise((r) => server.listen(port, "127.0.0.1", r));

  // Targets as the ServiceMonitor's relabelling leaves them: instance node-NNNN:9824, node NNNN.
  const targets = [];
  for (let n = 0; n < NODES; n++) {
    const name = `node-${String(n).padStart(4, "0")}`;
    targets.push({ targets: [`127.0.0.1:${port}`], labels: { __metrics_path__: `/node/${n}`, instance: `${name}:9824`, node: name } });
  }
  const ruleDir = join(root, "deploy/prometheus/rules");
  // --rules 0: ingestion alone, to tell its CPU from the rules' (the cores Prometheus used).
  const ruleFiles = args.rules === "0" ? [] : readdirSync(ruleDir).filter((f) => f.endsWith(".yaml")).sort();
  const files = { "targets.json": JSON.stringify(targets) };
  for (const f of ruleFiles) files[f] = readFileSync(join(ruleDir, f), "utf8");
  prometheus = await startPrometheus(args.prometheus, {
    config: `global:\n  scrape_interval: ${SCRAPE}\n  scrape_timeout: ${SCRAPE}\n  evaluation_interval: ${EVALUATION}\n` +
      `rule_files: [${ruleFiles.map((f) => JSON.stringify(f)).join(", ")}]\n` +
      "scrape_configs:\n  - job_name: ncclscope\n    file_sd_configs: [{files: [targets.json]}]\n",
    files,
    // --gogc N / --gomemlimit SIZE: the ingesting server's GOGC (Go's default 100: a collection
    // each time the heap grows by 100 % of what the last one left live) and GOMEMLIMIT.
    // GODEBUG=gctrace=1: one line on stderr per collection cycle, to tell the evaluations that met
    // one from those that did not (gcCycles above).
    env: { ...process.env, GODEBUG: [process.env.GODEBUG, "gctrace=1"].filter(Boolean).join(","),
      ...(args.gogc ? { GOGC: String(args.gogc) } : {}), ...(args.gomemlimit ? { GOMEMLIMIT: String(args.gomemlimit) } : {}) },
  });
  log(`Prometheus ${prometheus.base}: ${NODES} targets every ${SCRAPE}, rules every ${EVALUATION}, ${MINUTES} min`);
  const scalar = async (q) => Number((await prometheus.query(q)).result?.[0]?.value?.[1] ?? NaN);
  // Prometheus's own metrics, from its /metrics (it does not scrape itself here).
  const own = async (name) => {
    const text = await (await fetch(`${prometheus.base}/metrics`)).text();
    const m = text.match(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "m"));
    return m ? Number(m[1]) : NaN;
  };

  const started = Date.now();
  const evaluations = new Map(); // group -> { interval, times: [] }
  const seen = new Map(); // group -> last evaluation timestamp taken
  const ruleTimes = new Map(); // "group / rule" -> { max_s, sum_s, n }
  const end = Date.now() + MINUTES * 60 * 1000;
  let heads = 0;
  let cpu0; // Prometheus's CPU seconds and the clock when the warm-up ended
  while (Date.now() < end) {
    await sleep(5000);
    if (cpu0 === undefined && (Date.now() - started) / 1000 >= WARMUP_S) {
      cpu0 = { cpu: await own("process_cpu_seconds_total"), gcs: await own("go_gc_duration_seconds_count"), at: Date.now(),
        machine: machineCpu(), faults: majorFaults(prometheus.dir) };
    }
    const rules = await (await fetch(`${prometheus.base}/api/v1/rules`)).json();
    for (const g of rules.data.groups) {
      if (!evaluations.has(g.name)) evaluations.set(g.name, { interval: g.interval, times: [] });
      // Only evaluations that started after the warm-up ended (each group's last one before it
      // was taken too until runs 11 and 12 of docs/benchmarks.md: started up to an interval early).
      if (cpu0 === undefined || Date.parse(g.lastEvaluation) < cpu0.at || seen.get(g.name) === g.lastEvaluation) continue;
      seen.set(g.name, g.lastEvaluation);
      evaluations.get(g.name).times.push({ at: Date.parse(g.lastEvaluation) / 1000, seconds: g.evaluationTime });
      for (const r of g.rules) {
        const key = `${g.name} / ${r.name}`;
        const prev = ruleTimes.get(key) ?? { group: g.name, rule: r.name, max_s: 0, sum_s: 0, n: 0, error: r.lastError };
        prev.max_s = Math.max(prev.max_s, r.evaluationTime);
        prev.sum_s += r.evaluationTime;
        prev.n++;
        if (r.lastError) prev.error = r.lastError;
        ruleTimes.set(key, prev);
      }
    }
    if (Date.now() - t0 > heads * 60000) {
      heads++;
      log(`head series ${await own("prometheus_tsdb_head_series")}, up ${await scalar("sum(up)")} of ${NODES}, ` +
        `RSS ${((await own("process_resident_memory_bytes")) / 2 ** 30).toFixed(2)} GiB`);
    }
  }
  const window = (Date.now() - cpu0.at) / 1000; // seconds since the warm-up ended
  const cpuCores = (await own("process_cpu_seconds_total") - cpu0.cpu) / window;
  const gcsPerMinute = (await own("go_gc_duration_seconds_count") - cpu0.gcs) / (window / 60);
  const machine = machineCpu();
  const machineBusy = (machine.busy - cpu0.machine.busy) / (machine.total - cpu0.machine.total);
  const faultsPerSecond = (majorFaults(prometheus.dir) - cpu0.faults) / window;
  const appended0 = await own("prometheus_tsdb_head_samples_appended_total");
  await sleep(2 * seconds(SCRAPE) * 1000);
  const appended1 = await own("prometheus_tsdb_head_samples_appended_total");
  const result = {
    nodes: NODES, minutes: MINUTES, scrape: SCRAPE, evaluation: EVALUATION, series_per_node: tpl.rows.length,
    head_series: await own("prometheus_tsdb_head_series"),
    samples_per_second: (appended1 - appended0) / (2 * seconds(SCRAPE)),
    rss_bytes: await own("process_resident_memory_bytes"),
    // Cores Prometheus used after the warm-up (scraping, ingestion, GC, rules), of the machine's.
    cpu_cores: cpuCores,
    machine_cores: availableParallelism(),
    gc_cycles_per_minute: gcsPerMinute,
    // The whole machine's busy share over the same window (the fleet server and this script too).
    machine_busy: machineBusy,
    // Prometheus's major page faults per second (pages read back from disk: mmapped head chunks and
    // blocks that the kernel had dropped from the page cache).
    major_faults_per_second: faultsPerSecond,
    scrape_seconds_p50: await scalar("quantile(0.5, scrape_duration_seconds)"),
    up: await scalar("sum(up)"),
    groups: [],
    queries: [],
  };
  // Which evaluations ran while a garbage collection cycle did (its pauses or its concurrent mark,
  // during which a query that allocates is made to help mark: Go's GC assists).
  // Every cycle, not only those after the warm-up: an evaluation that started just after it ended
  // may have met a cycle that started before.
  const allCycles = gcCycles(prometheus.log(), processStart(prometheus.dir));
  const cycles = allCycles.filter((c) => c.end * 1000 >= cpu0.at);
  const metGc = (e) => allCycles.some((c) => c.start < e.at + e.seconds && c.end > e.at);
  result.gc = cycles.map((c) => ({ ...c, seconds: c.end - c.start }));
  result.gc_all = allCycles.map((c) => ({ ...c, seconds: c.end - c.start }));
  result.warmup_end = cpu0.at / 1000;
  for (const [name, e] of evaluations) {
    const times = e.times.map((x) => ({ ...x, met_gc: metGc(x) }));
    const t = times.map((x) => x.seconds).sort((a, b) => a - b);
    const clear = times.filter((x) => !x.met_gc).map((x) => x.seconds);
    result.groups.push({ name, interval_s: e.interval, evaluations: t.length, p50_s: t[Math.floor(t.length / 2)] ?? NaN, max_s: t.at(-1) ?? NaN,
      mean_s: t.reduce((a, x) => a + x, 0) / t.length, met_gc: t.length - clear.length, max_without_gc_s: clear.length ? Math.max(...clear) : NaN,
      times });
  }
  // Wall seconds per second the groups spent evaluating, all together (waiting for a core included).
  result.rule_seconds_per_second = result.groups.reduce((a, g) => a + (g.evaluations ? g.mean_s / g.interval_s : 0), 0);

  result.rules = [...ruleTimes.values()].map((r) => ({ ...r, mean_s: r.sum_s / r.n })).sort((a, b) => b.mean_s - a.mean_s);
  // Evaluations Prometheus skipped because the group's previous one was still running.
  result.missed_iterations = (await (await fetch(`${prometheus.base}/metrics`)).text()).split("\n")
    .filter((l) => l.startsWith("prometheus_rule_group_iterations_missed_total{"))
    .reduce((a, l) => a + Number(l.slice(l.lastIndexOf(" ") + 1)), 0);

  console.log(`\n${NODES} nodes x ${result.series_per_node} series: head ${result.head_series} series, ` +
    `${Math.round(result.samples_per_second)} samples/s, RSS ${(result.rss_bytes / 2 ** 30).toFixed(2)} GiB, ${result.up} of ${NODES} up, ` +
    `${result.missed_iterations} rule group evaluations missed, ${result.cpu_cores.toFixed(2)} of ${result.machine_cores} cores used, ` +
    `rule groups evaluating ${result.rule_seconds_per_second.toFixed(2)} s per s, ` +
    `${result.gc_cycles_per_minute.toFixed(1)} GC cycles per minute; the machine ${(100 * result.machine_busy).toFixed(0)} % busy, ` +
    `${result.major_faults_per_second.toFixed(0)} major page faults per second`);
  console.log(`\n${result.gc.length} garbage collection cycles after the warm-up, the longest ` +
    `${Math.max(0, ...result.gc.map((c) => c.seconds)).toFixed(1)} s ` +
    "(pauses and concurrent mark, wall clock)");
  console.log("\n| Rule group | Interval | Evaluations | Median | Max | Max / interval | Met a GC cycle | Max of the others / interval |\n|---|---|---|---|---|---|---|---|");
  for (const g of result.groups) {
    console.log(`| ${g.name} | ${g.interval_s} s | ${g.evaluations} | ${g.p50_s.toFixed(3)} s | ${g.max_s.toFixed(3)} s | ${(100 * g.max_s / g.interval_s).toFixed(1)} % ` +
      `| ${g.met_gc} | ${(100 * g.max_without_gc_s / g.interval_s).toFixed(1)} % |`);
  }
  console.log("\nMost expensive rules (mean per evaluation):");
  for (const r of result.rules.slice(0, 12)) console.log(`  ${r.mean_s.toFixed(3)} s (max ${r.max_s.toFixed(3)} s)  ${r.group} / ${r.rule}${r.error ? ` ERROR ${r.error}` : ""}`);
  if (args.json) writeFileSync(args.json, JSON.stringify(result, null, 1));
  // The dashboards' queries (dashboardQueries above) while Prometheus goes on ingesting and
  // evaluating (--dashboards 0: skipped; default "one").
  if (args.dashboards !== "0") {
    const scrapeS = seconds(SCRAPE);
    const windowS = Math.min(60, MINUTES) * 60;
    const at = Math.floor(Date.now() / 1000);
    const modes = String(args.dashboards ?? "one").split(",");
    for (const q of await dashboardQueries(prometheus, join(root, "deploy/grafana/dashboards"), modes, at, windowS, scrapeS)) {
      const { expr, ...rest } = q;
      result.queries.push({ ...rest, ...(await timeQuery(prometheus, q, at, windowS, scrapeS)) });
    }
    result.dashboards = dashboardTable(result.queries, `Dashboards opened (range queries over ${windowS / 60} min at ${scrapeS} s steps, one query at a time)`);
    result.queries.sort((a, b) => b.seconds - a.seconds);
  }
  const total = result.queries.reduce((a, q) => a + q.seconds, 0);
  console.log(`\n${result.queries.length} dashboard queries, ${total.toFixed(1)} s in all; slowest:`);
  for (const q of result.queries.slice(0, 12)) console.log(`  ${q.seconds.toFixed(3)} s  ${q.mode} ${q.dashboard}: ${q.panel} ${q.ref}${q.ok ? "" : ` (${q.error})`}`);
  const failedQueries = result.queries.filter((q) => !q.ok);
  if (failedQueries.length) console.log(`${failedQueries.length} queries failed`);
  if (args.json) writeFileSync(args.json, JSON.stringify(result, null, 1));
  const over = result.groups.filter((g) => g.max_s > 0.1 * g.interval_s);
  if (args.rules !== "0") console.log(over.length ? `\nOVER 10 % of the interval: ${over.map((g) => g.name).join(", ")}` : "\nevery rule group under 10 % of its interval");

  // The same rules on a quiet server (quietTimings below), and the TSDB kept for more of them
  // (with --quiet 0 too: --quiet-from times them later).
  if (args.quiet !== "0" || args["keep-tsdb"]) {
    const groups = [...(await (await fetch(`${prometheus.base}/api/v1/rules`)).json()).data.groups];
    if (args.compare) groups.push(...(await ruleGroups(args.compare, ` (${args.compare})`)));
    const at = Date.now() / 1000 - 60;
    const dir = prometheus.dir;
    await prometheus.stop({ keep: true });
    prometheus = undefined;
    if (args.quiet !== "0" && args.rules !== "0") result.quiet = await quietTimings(dir, at, groups);
    if (args["keep-tsdb"]) {
      renameSync(dir, args["keep-tsdb"]);
      writeFileSync(join(args["keep-tsdb"], "fleet.json"), JSON.stringify({ at, nodes: NODES, minutes: MINUTES, scrape: SCRAPE, series_per_node: result.series_per_node }));
      log(`TSDB kept in ${args["keep-tsdb"]} (--quiet-from ${args["keep-tsdb"]} times rules on it again)`);
    } else {
      rmSync(dir, { recursive: true, force: true });
    }
    if (args.json) writeFileSync(args.json, JSON.stringify(result, null, 1));
  }
} finally {
  await prometheus?.stop();
  server?.close();
}
