// End to end for the dashboards: two simulated jobs (ncclscope-sim driving the real profiler plugin)
// - one with a slow rank and a slow network channel, one that hangs - and a fake NVML with one
// degraded, erroring NVLink feed the real agent; a real Prometheus scrapes it and evaluates
// deploy/prometheus/rules. Then the dashboards' own queries, with their variables resolved as
// Grafana resolves them, must (1) return data on every Job communication panel and (2) name the
// culprits the triage path promises: the slow rank, the slow channel, the rank the hang waits for,
// the bad NVLink. With ../shared/fixtures present the rdma source reads a real sysfs tree too.
// Usage: node dashboards_e2e.mjs <repo root> <ncclscope-agent> <ncclscope-sim> <plugin .so>
//                                <fake libnvidia-ml.so.1> <prometheus>
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse, stringify } from "yaml";
import { freePort, sleep, startProcess, startPrometheus } from "./prometheus.mjs";

const [root, agentBin, simBin, pluginPath, fakeNvml, prometheusBin] = process.argv.slice(2);
const dashboards = Object.fromEntries(readdirSync(join(root, "deploy/grafana/dashboards"))
  .filter((f) => f.endsWith(".json"))
  .map((f) => { const d = JSON.parse(readFileSync(join(root, "deploy/grafana/dashboards", f), "utf8")); return [d.uid, d]; }));
const tmp = mkdtempSync(join(tmpdir(), "ncclscope-dashboards-e2e-"));
const ringDir = join(tmp, "rings");
const nvmlState = join(tmp, "nvml.state");
const ibFixture = join(root, "../shared/fixtures/sysfs-infiniband/node_exporter/sys");
const started = Date.now() / 1000;
const SLOW_RANK = "2";
const SLOW_CHANNEL = "3";
const HUNG_RANK = "1";

// The fake NVML: 2 GPUs x 4 links; link 2 of GPU 1 carries a fifth of the others' traffic and
// counts CRC flit errors. Rewritten (atomically) as time goes on so counters grow.
let tick = 0;
function writeNvmlState() {
  tick++;
  const lines = ["gpu 0 GPU-e2e00000 00000000:18:00.0 NVIDIA_H100 4", "gpu 1 GPU-e2e11111 00000000:2A:00.0 NVIDIA_H100 4"];
  for (const g of [0, 1]) {
    for (const l of [0, 1, 2, 3]) {
      const kib = (g === 1 && l === 2 ? 200000 : 1000000) * tick;
      for (const field of [138, 139, 140, 141]) lines.push(`field ${g} ${l} ${field} ${kib}`);
    }
    for (const field of [138, 139, 140, 141]) lines.push(`field ${g} all ${field} ${3200000 * tick}`);
  }
  lines.push(`error 1 2 2 ${3 * tick}`); // DL_CRC_FLIT
  writeFileSync(`${nvmlState}.tmp`, `${lines.join("\n")}\n`);
  renameSync(`${nvmlState}.tmp`, nvmlState);
}

// As Grafana's Prometheus data source escapes a value for a regex matcher: a backslash before each
// regex metacharacter, itself escaped inside the PromQL string.
const regexEscape = (s) => s.replace(/[\\^$.*+?()[\]{}|]/g, "\\\\$&");
const VAR_REF = /\$\{([A-Za-z0-9_]+)[^}]*\}|\$([A-Za-z0-9_]+)|\[\[([A-Za-z0-9_]+)[^\]]*\]\]/g;
const BUILTINS = { __rate_interval: "10s", __interval: "2s", __range: "1m", __range_s: "60" };

// Resolves a dashboard's variables as Grafana does: each query variable's options from its
// label_values() query (with the variables before it interpolated); a chosen value, else "All"
// (its allValue, or every option as a regex alternation). Returns the interpolating function.
async function variables(d, prometheus, chosen) {
  const values = { ...BUILTINS };
  const interpolate = (s) => s.replace(VAR_REF, (m, a, b, c) => values[a ?? b ?? c] ?? m);
  for (const v of d.templating.list.filter((x) => x.type === "query")) {
    const [, selector, label] = v.query.query.match(/^label_values\((.*),\s*(\w+)\)$/s);
    const series = await prometheus.series(interpolate(selector), Math.floor(started));
    const options = [...new Set(series.map((s) => s[label]).filter((x) => x !== undefined && x !== ""))].sort();
    if (chosen[v.name] !== undefined) values[v.name] = regexEscape(chosen[v.name]);
    else values[v.name] = v.allValue ?? `(${options.map(regexEscape).join("|")})`;
  }
  return interpolate;
}

const panel = (uid, title) => {
  const p = dashboards[uid].panels.find((x) => x.title === title);
  if (!p) throw new Error(`no panel "${title}" in ${uid}`);
  return p;
};
const valueOf = (s) => Number(s.value[1]);
const highest = (result) => result.reduce((a, b) => (valueOf(b) > valueOf(a) ? b : a));
const lowest = (result) => result.reduce((a, b) => (valueOf(b) < valueOf(a) ? b : a));

// Each check: [description, async () => null when it holds, else what was seen, final]. Checks are
// retried until they hold; `final` ones (that something is absent) run once, after all the others
// held, so that they cannot pass for want of data.
function checks(prometheus) {
  const run = async (uid, title, chosen, refId = "A") => {
    const p = panel(uid, title);
    const target = p.targets.find((t) => t.refId === refId);
    const r = await prometheus.query((await variables(dashboards[uid], prometheus, chosen))(target.expr));
    if (!r.ok) throw new Error(`${title}: ${r.error}`);
    return r.result;
  };
  const slow = { job_id: "e2e-slow" };
  const hung = { job_id: "e2e-hang" };
  const expect = (desc, uid, title, chosen, pick, want, refId) => [desc, async () => {
    const result = await run(uid, title, chosen, refId);
    if (result.length === 0) return "no data";
    const got = pick(result);
    return Object.entries(want).every(([k, v]) => got.metric[k] === v) ? null : JSON.stringify(got.metric);
  }];
  const list = [
    expect("time inside vs median names the slow rank", "ncclscope-job",
      "Time inside collectives vs communicator median (lowest 10 ranks)", slow, lowest, { rank: SLOW_RANK }),
    expect("last-arrival delay names the slow rank", "ncclscope-job", "Last-arrival delay per rank (highest 10)", slow, highest, { rank: SLOW_RANK }),
    expect("the rank scorecard's lowest time inside is the slow rank", "ncclscope-job", "Rank scorecard", slow, lowest, { rank: SLOW_RANK }),
    expect("slowest network channel is the slow channel", "ncclscope-job",
      "Slowest network channels (lowest 10) and the communicator median", slow, lowest, { channel: SLOW_CHANNEL }),
    expect("network-wait share names the slow channel", "ncclscope-job",
      "Network-wait share of send steps per channel and peer (highest 10)", slow, highest, { channel: SLOW_CHANNEL }),
    expect("channel GPU busy time names the slow channel", "ncclscope-job", "Channel GPU busy time (highest 10)", slow, highest, { channel: SLOW_CHANNEL }),
    expect("ranks behind names the rank the hang waits for", "ncclscope-job", "Ranks behind in hung communicators", hung, highest, { rank: HUNG_RANK }),
    ["hung operations show on the hung job only", async () => {
      const h = await run("ncclscope-job", "Hung operations", hung);
      const s = await run("ncclscope-job", "Hung operations", slow);
      return h.length && valueOf(h[0]) > 0 && s.length && valueOf(s[0]) === 0 ? null : `hung ${JSON.stringify(h)} slow ${JSON.stringify(s)}`;
    }],
    ["ranks behind is empty for a job that does not hang", async () => {
      const r = await run("ncclscope-job", "Ranks behind in hung communicators", slow);
      return r.length === 0 ? null : JSON.stringify(r.map((x) => x.metric));
    }, true],
    expect("NVLink findings name the erroring link", "ncclscope-fabric", "NVLink findings now", {}, highest, { gpu: "1", nvlink: "2", finding: "link_errors" }),
    expect("lowest NVLink bandwidth is the degraded link", "ncclscope-fabric", "NVLink bandwidth per active link (lowest 20)", {}, lowest, { gpu: "1", nvlink: "2" }),
    expect("NVLink errors show the erroring link", "ncclscope-fabric", "NVLink errors per link", {}, highest, { gpu: "1", nvlink: "2" }),
    ["every Job communication query returns data (but the 1-day baseline)", async () => {
      const empty = [];
      const interpolate = await variables(dashboards["ncclscope-job"], prometheus, {});
      for (const p of dashboards["ncclscope-job"].panels) {
        for (const t of p.targets ?? []) {
          if (t.expr.includes("offset 1h")) continue; // compares with the best hour of the day before
          const r = await prometheus.query(interpolate(t.expr));
          if (!r.ok) empty.push(`${p.title} ${t.refId}: ${r.error}`);
          else if (r.result.length === 0) empty.push(`${p.title} ${t.refId}`);
        }
      }
      return empty.length ? `empty: ${empty.join("; ")}` : null;
    }],
  ];
  if (existsSync(ibFixture)) {
    list.push(["the Ports table lists the fixture's ports", async () => {
      const r = await run("ncclscope-fabric", "Ports", {});
      return r.length > 0 ? null : "no ports";
    }]);
  }
  return list;
}

const procs = [];
let prometheus;
let failed = 0;
let nvmlTimer;
try {
  writeNvmlState();
  nvmlTimer = setInterval(writeNvmlState, 500);
  const agentPort = await freePort();
  const config = join(tmp, "agent.yaml");
  writeFileSync(config, stringify({
    server: { listen_address: `127.0.0.1:${agentPort}` },
    plugin: { ring_dir: ringDir, poll_interval: "50ms", kernel_duty_cycle: 1, proxy_duty_cycle: 1 },
    ebpf: { enabled: false },
    rdma: existsSync(ibFixture) ? { sysfs_root: ibFixture, interval: "1s" } : { enabled: false },
    nvlink: { library: fakeNvml, interval: "1s", expected_links: 4 },
    detection: { hang_timeout: "1s", match_timeout: "1s" },
  }));
  mkdirSync(ringDir);
  const agent = startProcess(agentBin, ["--config", config], { env: { ...process.env, FAKE_NVML_STATE: nvmlState } });
  procs.push(agent);
  for (let i = 0; ; i++) {
    try { if ((await fetch(`http://127.0.0.1:${agentPort}/metrics`)).ok) break; } catch { /* starting */ }
    if (agent.exited() || i > 200) throw new Error(`agent did not serve /metrics:\n${agent.log()}`);
    await sleep(100);
  }

  const sim = (args) => startProcess(simBin, ["--plugin", pluginPath, "--duration", "150s", "--quiet", ...args],
    { env: { ...process.env, NCCLSCOPE_RING_DIR: ringDir } });
  // This node plays node 0 of a 2-node job (network channels to node 1 are simulated), with more
  // ranks than the panels' topk/bottomk keep, so that they must pick the culprit.
  procs.push(sim(["--nodes", "2", "--gpus", "8", "--node", "0", "--rate", "20", "--job-id", "e2e-slow",
    "--slow-rank", SLOW_RANK, "--slow-by", "3ms", "--slow-channel", SLOW_CHANNEL, "--slow-factor", "4"]));
  procs.push(sim(["--nodes", "1", "--gpus", "4", "--rate", "20", "--job-id", "e2e-hang", "--seed", "7",
    "--workload", "AllReduce:world:8MiB", "--hang-rank", HUNG_RANK, "--hang-iteration", "20"]));

  // Every rules file, evaluated every second instead of its production interval.
  const rulesDir = join(root, "deploy/prometheus/rules");
  const files = {};
  for (const f of readdirSync(rulesDir).filter((x) => x.endsWith(".yaml"))) {
    const rules = parse(readFileSync(join(rulesDir, f), "utf8"));
    for (const g of rules.groups) g.interval = "1s";
    files[f] = stringify(rules);
  }
  prometheus = await startPrometheus(prometheusBin, {
    files,
    config: stringify({
      global: { scrape_interval: "1s", evaluation_interval: "1s" },
      rule_files: Object.keys(files),
      scrape_configs: [{ job_name: "ncclscope-agent",
        static_configs: [{ targets: [`127.0.0.1:${agentPort}`], labels: { node: "e2e-node" } }] }],
    }),
  });

  const list = checks(prometheus);
  const state = new Map(list.map(([desc]) => [desc, "not run"]));
  const attempt = async ([desc, fn]) => {
    try { state.set(desc, await fn()); } catch (e) { state.set(desc, e.message); }
  };
  const deadline = Date.now() + 90000;
  for (;;) {
    for (const check of list.filter(([desc, , final]) => !final && state.get(desc) !== null)) await attempt(check);
    const pending = list.filter(([desc, , final]) => !final && state.get(desc) !== null).length;
    if (pending === 0 || Date.now() > deadline) break;
    for (const p of procs) if (p.exited()) throw new Error(`a process exited early:\n${p.log()}`);
    await sleep(2000);
  }
  for (const check of list.filter(([, , final]) => final)) await attempt(check);
  for (const [desc, seen] of state) {
    if (seen === null) console.log(`ok   ${desc}`);
    else { failed++; console.error(`FAIL ${desc}: ${seen}`); }
  }
  console.log(`after ${Math.round(Date.now() / 1000 - started)} s: ${state.size - failed} passed, ${failed} failed`);
} catch (e) {
  failed++;
  console.error(`FAIL ${e.message}`);
} finally {
  clearInterval(nvmlTimer);
  for (const p of procs.reverse()) await p.stop();
  if (failed && prometheus) console.error(`prometheus log:\n${prometheus.log().slice(-3000)}`);
  if (prometheus) await prometheus.stop();
  rmSync(tmp, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
