// End to end for the dashboards: two simulated jobs (ncclscope-sim driving the real profiler plugin)
// - one with a slow rank and a slow network channel, one that hangs - and a fake NVML with one
// degraded, erroring NVLink feed the real agent; a real Prometheus scrapes it and evaluates
// deploy/prometheus/rules. Then the dashboards' own queries, with their variables resolved as
// Grafana resolves them, must (1) return data on every Job communication panel and (2) name the
// culprits the triage path promises: the slow rank, the slow channel, the rank the hang waits for,
// the bad NVLink. With ../shared/fixtures present the rdma source reads a real sysfs tree too.
// For the At a glance dashboard: a fake dcgm-exporter serves the simulated GPUs' series (its real
// names and labels, as joins_e2e.mjs writes them; the slow rank's GPU throttled, one GPU not
// served), and two more jobs of the same topology (2 ranks, 1 node) run AllReduce with RING and
// with TREE, TREE on links twice as fast: the rank heatmaps' hottest row, the lowest communication
// share and the dcgm-exporter join must name the slow rank, the coverage stat must say
// "no dcgm-exporter" for the GPU not served, the TP layer must be NVLink only, and the algorithm
// table must rank TREE first with a margin.
// Usage: node dashboards_e2e.mjs <repo root> <ncclscope-agent> <ncclscope-sim> <plugin .so>
//                                <fake libnvidia-ml.so.1> <prometheus>
import { createServer } from "node:http";
import { existsSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse, stringify } from "yaml";
import { freePort, sleep, startProcess, startPrometheus } from "./prometheus.mjs";
import { startFakeNodeAgent } from "./lib/fake_node.mjs";
import { resolveVariables } from "./grafana_variables.mjs";

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
const ALGO_SIZE = "4MiB-16MiB"; // the algorithm jobs' 8 MiB AllReduce
const HUNG_RANK = "1";
const NODE = "e2e-node";

// dcgm-exporter for this node's GPUs as ncclscope-sim's CUDA driver names them (sim_cuda.c:
// UUID GPU-51170000-5117-0000-0000-0000000000<node><device>, bus 0x51 + device), series written
// as dcgm-exporter writes them (labels as in joins_e2e.mjs, 4.8.2's `Hostname`). GPU 7 is not
// served (a GPU without dcgm-exporter); the slow rank's GPU is hot and thermally throttled; GPU 5
// reported XID 74.
const DCGM_GPUS = [0, 1, 2, 3, 4, 5, 6].map((i) => ({
  index: i, uuid: `GPU-51170000-5117-0000-0000-00000000000${i}`, nvml: `00000000:${(0x51 + i).toString(16).toUpperCase()}:00.0`,
  smClock: String(i) === SLOW_RANK ? 1305 : 1980, temp: String(i) === SLOW_RANK ? 87 : 45,
  throttle: String(i) === SLOW_RANK ? 0x40 : 0, xid: i === 5 ? 74 : 0,
}));
const DCGM_FIELDS = [
  ["DCGM_FI_PROF_SM_ACTIVE", "Ratio of cycles an SM has at least 1 warp assigned (in %).", (g) => (String(g.index) === SLOW_RANK ? 0.97 : 0.62)],
  ["DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", () => 99],
  ["DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", (g) => g.smClock],
  // Releases before and after the rename: GPU 6's exporter writes the newer name (SW power cap).
  ["DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "Current clock throttle reasons.", (g) => g.throttle, (g) => g.index !== 6],
  ["DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "Current clock event reasons.", () => 0x4, (g) => g.index === 6],
  ["DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", (g) => g.temp],
  ["DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", () => 612.5],
  ["DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", () => 61234],
  ["DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.", (g) => g.xid],
];
const dcgmText = () => `${DCGM_FIELDS.flatMap(([name, help, value, has = () => true]) => [`# HELP ${name} ${help}`, `# TYPE ${name} gauge`,
  ...DCGM_GPUS.filter(has).map((g) => `${name}{gpu="${g.index}",UUID="${g.uuid}",pci_bus_id="${g.nvml}",device="nvidia${g.index}",modelName="NVIDIA H100 80GB HBM3",Hostname="${NODE}",DCGM_FI_DRIVER_VERSION="570.124.06",container="trainer",namespace="ml",pod="e2e-worker-0"} ${value(g)}`)]).join("\n")}\n`;

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

const BUILTINS = { __rate_interval: "10s", __interval: "2s", __range: "1m", __range_s: "60" };

// The dashboard's variables as Grafana resolves them: a chosen value, else "All".
const variables = async (d, prometheus, chosen) =>
  (await resolveVariables(d, prometheus, { chosen, builtins: BUILTINS, start: started })).interpolate;

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
  const world = { job_id: "e2e-slow", comm_name: "SIM world" };
  const algoTopology = { nranks: "2", nnodes: "1", func: "AllReduce" };
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
    // The stat beside the alert reads what NcclscopeNcclSlowNetworkChannel compares: the slow
    // channel (a quarter of its peers' speed) is under the alert's half of the median.
    ["the slowest-channel stat is under the slow-channel alert's threshold", async () => {
      const r = await run("ncclscope-job", "Slowest network channel vs median", slow);
      return r.length === 1 && valueOf(r[0]) < 0.5 ? null : JSON.stringify(r);
    }],
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
    expect("the rank heatmap's hottest row is the slow rank", "ncclscope-glance",
      "Rank heatmap: communicator median over the rank's time inside", world, highest, { rank: SLOW_RANK }),
    expect("the last-arrival heatmap's hottest row is the slow rank", "ncclscope-glance",
      "Rank heatmap: last-arrival share", world, highest, { rank: SLOW_RANK }),
    expect("the lowest communication share is the slow rank", "ncclscope-glance",
      "Communication share of the iteration per rank (lowest 10)", world, lowest, { rank: SLOW_RANK }),
    ["communication shares are fractions, the slow rank's below its peers'", async () => {
      const r = await run("ncclscope-glance", "Ranks: communication share and their GPU (dcgm-exporter)", world, "A");
      const v = Object.fromEntries(r.map((x) => [x.metric.rank, valueOf(x)]));
      const peers = Object.entries(v).filter(([k]) => k !== SLOW_RANK).map(([, x]) => x);
      return r.length === 8 && Object.values(v).every((x) => x > 0 && x < 1) && peers.every((x) => x > v[SLOW_RANK]) ? null : JSON.stringify(v);
    }],
    ["the dcgm-exporter join gives each rank its own GPU's SM clock", async () => {
      const r = await run("ncclscope-glance", "Ranks: communication share and their GPU (dcgm-exporter)", world, "D");
      const bad = r.filter((x) => { const g = DCGM_GPUS.find((d) => d.uuid === x.metric.UUID); return !g || String(g.index) !== x.metric.rank || valueOf(x) !== g.smClock; });
      return r.length === 7 && bad.length === 0 ? null : JSON.stringify(r.map((x) => [x.metric.rank, x.metric.UUID, x.value[1]]));
    }],
    expect("the lowest SM clock is the slow rank's GPU", "ncclscope-glance", "SM clock of the selected ranks' GPUs (lowest 10)", world, lowest, { rank: SLOW_RANK }),
    expect("throttle reasons show the slow rank's GPU", "ncclscope-glance", "Clock throttle reasons of the selected ranks' GPUs (other than idle)", world, highest, { rank: SLOW_RANK }),
    ["throttle reasons read both dcgm-exporter names", async () => {
      const r = await run("ncclscope-glance", "Clock throttle reasons of the selected ranks' GPUs (other than idle)", world);
      const v = Object.fromEntries(r.map((x) => [x.metric.rank, valueOf(x)]));
      return r.length === 2 && v[SLOW_RANK] === 0x40 && v["6"] === 0x4 ? null : JSON.stringify(v);
    }],
    ["dcgm-exporter coverage: 'no dcgm-exporter' (0) for the GPU it does not serve, 1 for one it does", async () => {
      const title = "dcgm-exporter coverage of the selected ranks' GPUs";
      const none = await run("ncclscope-glance", title, { ...world, rank: "7" });
      const one = await run("ncclscope-glance", title, { ...world, rank: SLOW_RANK });
      const mapped = panel("ncclscope-glance", title).fieldConfig.defaults.mappings[0].options["0"]?.text;
      return none.length === 1 && valueOf(none[0]) === 0 && one.length === 1 && valueOf(one[0]) === 1 && mapped === "no dcgm-exporter"
        ? null : `rank 7 ${JSON.stringify(none)} rank ${SLOW_RANK} ${JSON.stringify(one)} mapping ${mapped}`;
    }],
    ["a node's communication share is the sum of its layers' time shares", async () => {
      const node = await run("ncclscope-glance", "Communication share per node", slow);
      const layers = await run("ncclscope-glance", "Time share per parallelism layer (per rank, stacked)", slow);
      const sum = layers.reduce((a, x) => a + valueOf(x), 0);
      return node.length === 1 && layers.length === 3 && sum > 0.05 && Math.abs(valueOf(node[0]) - sum) < 0.15 * sum ? null
        : `node ${JSON.stringify(node.map((x) => x.value[1]))} layers ${JSON.stringify(layers.map((x) => [x.metric.layer, x.value[1]]))}`;
    }],
    ["parallelism layers: TP only on NVLink, DP and world also on the network", async () => {
      const r = await run("ncclscope-glance", "Bytes by transport per parallelism layer (NVLink vs network)", slow);
      const has = (layer, transport) => r.some((x) => x.metric.layer === layer && x.metric.transport === transport && valueOf(x) > 0);
      return has("TP", "nvlink") && !has("TP", "network") && has("DP", "network") && has("world", "network") ? null
        : JSON.stringify(r.map((x) => [x.metric.layer, x.metric.transport, x.value[1]]));
    }],
    ["the algorithm table ranks the faster algorithm (TREE) first, with a margin", async () => {
      const best = await run("ncclscope-glance", "Best measured algorithm and protocol per message size", algoTopology, "A");
      const margin = await run("ncclscope-glance", "Best measured algorithm and protocol per message size", algoTopology, "B");
      const b = best.filter((x) => x.metric.size === ALGO_SIZE);
      const m = margin.find((x) => x.metric.size === ALGO_SIZE);
      return b.length === 1 && b[0].metric.algo === "TREE" && m && valueOf(m) > 0.3 ? null
        : `best ${JSON.stringify(best.map((x) => [x.metric.size, x.metric.algo, x.metric.proto, x.value[1]]))} margin ${JSON.stringify(margin)}`;
    }],
    ["every At a glance query returns data (but the NIC rails)", async () => {
      const empty = [];
      const interpolate = await variables(dashboards["ncclscope-glance"], prometheus, {});
      for (const p of dashboards["ncclscope-glance"].panels) {
        // The NIC behind a channel needs the kernel's QP table (rdma netlink), which this test has not.
        if (p.title === "Network bytes per NIC rail (send)") continue;
        for (const t of p.targets ?? []) {
          const r = await prometheus.query(interpolate(t.expr));
          if (!r.ok) empty.push(`${p.title} ${t.refId}: ${r.error}`);
          else if (r.result.length === 0) empty.push(`${p.title} ${t.refId}`);
        }
      }
      return empty.length ? `empty: ${empty.join("; ")}` : null;
    }],
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
  const { agent, port: agentPort } = await startFakeNodeAgent(agentBin, { tmp, ringDir, nvmlState, config: {
    plugin: { intra_node_channels: true },
    rdma: existsSync(ibFixture) ? { sysfs_root: ibFixture, interval: "1s" } : { enabled: false },
    nvlink: { library: fakeNvml, interval: "1s", expected_links: 4, per_link_metrics: true },
    detection: { hang_timeout: "1s", match_timeout: "1s" },
  } });
  procs.push(agent);

  const sim = (args) => startProcess(simBin, ["--plugin", pluginPath, "--duration", "150s", "--quiet", ...args],
    { env: { ...process.env, NCCLSCOPE_RING_DIR: ringDir } });
  // This node plays node 0 of a 2-node job (network channels to node 1 are simulated), with more
  // ranks than the panels' topk/bottomk keep, so that they must pick the culprit.
  procs.push(sim(["--nodes", "2", "--gpus", "8", "--node", "0", "--rate", "20", "--job-id", "e2e-slow",
    "--slow-rank", SLOW_RANK, "--slow-by", "3ms", "--slow-channel", SLOW_CHANNEL, "--slow-factor", "4"]));
  procs.push(sim(["--nodes", "1", "--gpus", "4", "--rate", "20", "--job-id", "e2e-hang", "--seed", "7",
    "--workload", "AllReduce:world:8MiB", "--hang-rank", HUNG_RANK, "--hang-iteration", "20"]));
  // Two jobs of one topology (2 ranks on 1 node), one AllReduce per iteration: RING, and TREE on
  // links twice as fast, so that TREE measures the higher bus bandwidth.
  for (const [algo, gbps, seed] of [["RING", "100", "11"], ["TREE", "200", "12"]]) {
    procs.push(sim(["--nodes", "1", "--gpus", "2", "--rate", "10", "--job-id", `e2e-algo-${algo.toLowerCase()}`, "--seed", seed,
      "--workload", "AllReduce:world:8MiB", "--algo", algo, "--nvlink-gbps", gbps]));
  }

  const dcgm = createServer((req, res) => {
    res.writeHead(200, { "Content-Type": "text/plain; version=0.0.4" });
    res.end(dcgmText());
  });
  const dcgmPort = await freePort();
  await new Promise((resolve) => dcgm.listen(dcgmPort, "127.0.0.1", resolve));
  procs.push({ exited: () => false, log: () => "", stop: () => new Promise((r) => { dcgm.close(r); dcgm.closeAllConnections(); }) });

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
        static_configs: [{ targets: [`127.0.0.1:${agentPort}`], labels: { node: NODE } }] },
      // As dcgm-exporter's chart scrapes it: honor_labels false (its pod labels become exported_*).
      { job_name: "dcgm-exporter", honor_labels: false, static_configs: [{ targets: [`127.0.0.1:${dcgmPort}`] }] }],
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
