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
// it) against its interval; then every dashboard expression (variables = all, $__rate_interval =
// 1m, $__range = the run) timed as an instant query, slowest first; then each group's rules on a
// quiet server (the same TSDB reopened without scraping or rules: --quiet 0 skips it), and those
// of --compare's rule files (another version of deploy/prometheus/rules) on the same data.
//
// Usage: node [--max-old-space-size=8192] fleet_rules_bench.mjs --agent BIN --sim BIN --plugin SO
//          --fabric BIN --nvml SO --prometheus BIN [--nodes 1000] [--minutes 12] [--scrape 30s]
//          [--evaluation 30s] [--dashboards 0] [--quiet 0] [--compare RULE_DIR] [--json FILE]
//          [--keep-tsdb DIR] [--rules 0] [--gogc N] [--gomemlimit SIZE]   (--rules 0: no rule files,
//          ingestion alone; --gogc, --gomemlimit: the ingesting Prometheus's GOGC and GOMEMLIMIT)
//        node fleet_rules_bench.mjs --prometheus BIN --quiet-from DIR [--compare RULE_DIR] [--json FILE]
//          (the quiet timings only, of the rule files as they are, on a TSDB kept with --keep-tsdb)
import { readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { availableParallelism, totalmem } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort, sleep, startPrometheus } from "../../tests/deploy/prometheus.mjs";
import { startSimulatedNode } from "../../tests/deploy/simulated_node.mjs";
import { cliOptions } from "../../tests/deploy/cli_options.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "../..");
const args = cliOptions(["agent", "sim", "plugin", "fabric", "nvml", "prometheus", "nodes", "minutes", "scrape", "evaluation", "dashboards", "quiet", "compare", "json", "keep-tsdb", "quiet-from", "rules", "gogc", "gomemlimit"],
  ["prometheus"]);
for (const required of ["agent", "sim", "plugin", "fabric", "nvml"]) {
  if (!args["quiet-from"] && args[required] === undefined) throw new Error(`--${required} is required (all but --prometheus are, without --quiet-from)`);
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

// Major page faults of the Prometheus serving DIR (found by its --storage.tsdb.path), from
// /proc/PID/stat (field 12); NaN if it is not found.
function majorFaults(dir) {
  for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(`--storage.tsdb.path=${join(dir, "data")}`)) continue;
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[9]);
    } catch { /* gone meanwhile */ }
  }
  return NaN;
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
  const restarted = Date.now();
  const env = { ...process.env, GOGC: "off", GOMEMLIMIT: String(Math.floor(0.6 * totalmem())) };
  const quiet = await startPrometheus(args.prometheus, { config: "global:\n  evaluation_interval: 1h\n", dir, readyTimeoutMs: 15 * 60000, env });
  const out = [];
  try {
    log(`quiet server: the TSDB replayed in ${((Date.now() - restarted) / 1000).toFixed(0)} s`);
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
    env: { ...process.env, ...(args.gogc ? { GOGC: String(args.gogc) } : {}), ...(args.gomemlimit ? { GOMEMLIMIT: String(args.gomemlimit) } : {}) },
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
      if ((Date.now() - started) / 1000 < WARMUP_S || seen.get(g.name) === g.lastEvaluation) continue;
      seen.set(g.name, g.lastEvaluation);
      evaluations.get(g.name).times.push(g.evaluationTime);
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
  for (const [name, e] of evaluations) {
    const t = [...e.times].sort((a, b) => a - b);
    result.groups.push({ name, interval_s: e.interval, evaluations: t.length, p50_s: t[Math.floor(t.length / 2)] ?? NaN, max_s: t.at(-1) ?? NaN,
      mean_s: t.reduce((a, x) => a + x, 0) / t.length });
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
  console.log("\n| Rule group | Interval | Evaluations | Median | Max | Max / interval |\n|---|---|---|---|---|---|");
  for (const g of result.groups) {
    console.log(`| ${g.name} | ${g.interval_s} s | ${g.evaluations} | ${g.p50_s.toFixed(3)} s | ${g.max_s.toFixed(3)} s | ${(100 * g.max_s / g.interval_s).toFixed(1)} % |`);
  }
  console.log("\nMost expensive rules (mean per evaluation):");
  for (const r of result.rules.slice(0, 12)) console.log(`  ${r.mean_s.toFixed(3)} s (max ${r.max_s.toFixed(3)} s)  ${r.group} / ${r.rule}${r.error ? ` ERROR ${r.error}` : ""}`);
  if (args.json) writeFileSync(args.json, JSON.stringify(result, null, 1));
  // The dashboards' expressions, every variable = all (--dashboards 0: skipped).
  if (args.dashboards !== "0") {
    const dashDir = join(root, "deploy/grafana/dashboards");
    const values = { __rate_interval: "1m", __interval: "30s", __range: `${MINUTES}m`, __range_s: String(MINUTES * 60), __range_ms: String(MINUTES * 60000) };
    for (const file of readdirSync(dashDir).filter((f) => f.endsWith(".json"))) {
      const d = JSON.parse(readFileSync(join(dashDir, file), "utf8"));
      const panels = d.panels.flatMap((p) => (p.type === "row" ? [p, ...(p.panels ?? [])] : [p]));
      for (const p of panels) {
        for (const t of p.targets ?? []) {
          if (!t.expr) continue;
          const expr = t.expr.replace(/\$\{([A-Za-z0-9_]+)[^}]*\}|\$([A-Za-z0-9_]+)/g, (_, a, b) => values[a ?? b] ?? ".*");
          const a = performance.now();
          // Grafana's default query timeout is 30 s; a query Prometheus gives up on counts as failed.
          const r = await prometheus.query(expr, undefined, "30s");
          result.queries.push({ dashboard: file, panel: p.title, seconds: (performance.now() - a) / 1000, ok: r.ok, error: r.error });
        }
      }
    }
    result.queries.sort((a, b) => b.seconds - a.seconds);
  }
  const total = result.queries.reduce((a, q) => a + q.seconds, 0);
  console.log(`\n${result.queries.length} dashboard queries, ${total.toFixed(1)} s in all; slowest:`);
  for (const q of result.queries.slice(0, 12)) console.log(`  ${q.seconds.toFixed(3)} s  ${q.dashboard}: ${q.panel}${q.ok ? "" : ` (${q.error})`}`);
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
      writeFileSync(join(args["keep-tsdb"], "fleet.json"), JSON.stringify({ at, nodes: NODES, series_per_node: result.series_per_node }));
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
