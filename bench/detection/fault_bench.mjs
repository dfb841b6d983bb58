// The open fault-injection benchmark of ncclscope's detection (docs/benchmarks.md, "Fault
// detection"). N simulated nodes, each with its own real agent (its own port, ring directory,
// state directory and fake sysfs tree of HCAs), one real Prometheus scraping them every 5 s and
// evaluating the shipped rules (deploy/prometheus/rules, unchanged) every 5 s. Simulated jobs
// (ncclscope-sim through the real profiler plugin, one process per node, TP within a node, DP
// with one rank per node, world) run side by side: one healthy job with realistic noise for the
// whole run, and one job per fault trial. Faults, at random ranks, nodes and onsets:
//   straggler   a rank computing longer before every collective (2x: its peers' collectives take
//               twice as long; 15 %: the job's iteration 15 % longer)
//   slowlink    one node's network hop of one channel N x slower (ncclscope-sim --slow-node)
//   hang        a rank that never arrives
//   jobend      a 2x straggler whose job exits while it straggles, once it is named: every alert
//               about the job resolves within one evaluation plus the scrape interval (plus the
//               2 s alert poll), and nothing about it fires in the minute after, once a scrape
//               has seen it end (no ghosts)
//   ib-burst    symbol errors at 200/s on one port      (fake sysfs, ncclscope-fake-fabric)
//   flap        a port going down and up 4 times
//   congestion  transmit wait 20x the fabric's, or RoCE CNPs at 5000/s
// and healthy noise: per-op jitter, every rank pausing together (checkpoints), message sizes
// changing, a job restart and an agent restart. Prometheus's alerts are polled every 2 s; each
// firing alert is attributed to the trial it is about (its job, or its node and port) or counted
// false. Reported per trial: detected, time to alert, culprit right, wrong alerts (naming a healthy
// rank, node or channel), flaps (an alert that resolved and fired again), ghosts (an alert about a
// job that fired after a scrape could have seen the job end), time to resolve after the fault
// ends; precision and recall per fault type and magnitude (docs/benchmarks.md, "Fault detection").
//
// Usage: node fault_bench.mjs --agent BIN --sim BIN --plugin SO --fabric BIN --prometheus BIN
//                             [--matrix full|ci|healthy|operators] [--seed N] [--json FILE]
//   full     21 trials in 4 rounds beside the healthy job (~26 min on 2 cores)
//   ci       5 trials (straggler 2x and 15 %, slow link 4x, IB burst, a job ending while its
//            straggler is named), each fault lasting until its detection names the culprit or
//            its target passes, then until it resolves (~3 min)
//   healthy  the healthy job alone for 30 minutes (its job restart and agent restart included):
//            the zero-false-alerts target in one uninterrupted stretch
//   operators  the operators' rule's trial alone (a straggler 3x for 8 minutes) beside the
//            healthy job (~12 min)
// Exit status: 0 when every target the matrix checks holds, else 1 (CI runs the ci matrix:
// scripts/test detection).
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort, sleep, startProcess, startPrometheus } from "../../tests/deploy/prometheus.mjs";
import { cliOptions } from "../../tests/deploy/cli_options.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "../..");
const args = cliOptions(["agent", "sim", "plugin", "fabric", "prometheus", "matrix", "seed", "json"],
  ["agent", "sim", "plugin", "fabric", "prometheus"]);
const MATRIX = args.matrix ?? "full";
let seed = Number(args.seed ?? 1);
const random = () => { // mulberry32: the same schedule for the same --seed
  seed |= 0; seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};
const pick = (list) => list[Math.floor(random() * list.length)];
const uniform = (lo, hi) => lo + random() * (hi - lo);

// --- the simulated cluster -----------------------------------------------------------------------
const NODES = 4;
const GPUS = 2;                 // per node: TP groups of 2, DP groups of 4 (one rank per node)
const CHANNELS = 4;
const SCRAPE_S = 5;
const SCRAPE = `${SCRAPE_S}s`;
const HANG_TIMEOUT_S = 60;      // detection.hang_timeout, the agent's default
// One iteration: three collectives with compute before each (7 ms + up to 1 ms jitter), back to
// back (the job is compute-bound: --rate is no limit). On 12.5 GB/s per GPU the DP and world
// AllReduces of 32 MiB take ~4-5 ms, the TP one ~30 us over NVLink: ~31 ms per iteration.
const WORKLOAD = "AllReduce:tp:8MiB:7ms,AllReduce:dp:32MiB:7ms,AllReduce:world:32MiB:7ms";
const OPS_PER_ITERATION = 3;
const COLLECTIVE_MS = 4.7;      // the longest collective's transfer time (world AllReduce)
const ITERATION_MS = 3 * 7.5 + 4.0 + 4.7;
const SIM_COMMON = ["--nodes", String(NODES), "--gpus", String(GPUS), "--channels", String(CHANNELS),
  "--workload", WORKLOAD, "--rate", "1000", "--jitter", "1ms", "--network-gbps", "12.5", "--quiet"];

const tmp = mkdtempSync(join(tmpdir(), "ncclscope-fault-bench-"));
const t0 = Date.now();
const at = (ms) => (ms - t0) / 1000; // seconds since the bench started
const log = (...m) => console.log(`[${at(Date.now()).toFixed(1).padStart(6)} s]`, ...m);
const procs = new Set();
const longRunning = [];
let prometheus;

// What a straggler or a slow link really costs, measured in Prometheus: the job's iteration rate
// (its world AllReduces per second) and its other ranks' mean time inside a world AllReduce, over
// 50 s before the onset and 50 s inside the fault.
async function measureCost(t, job) {
  if (!["straggler", "slowlink", "operators"].includes(t.type) || CI) return; // ci: faults end early
  const sel = `ncclscope_nccl_comm_info{job_id="${job.id}",comm_name="SIM world"}`;
  const rate = (m) => `sum(rate(${m}{func="AllReduce"}[50s]) * on (instance, comm, rank) group_left ${sel})`;
  const victims = `rank!="${t.rank ?? -1}"`;
  const inside = (m) => `sum(rate(${m}{func="AllReduce",${victims}}[50s]) * on (instance, comm, rank) group_left ${sel})`;
  const q = async (expr, ms) => Number((await prometheus.query(expr, ms / 1000)).result?.[0]?.value[1] ?? NaN);
  const before = t.onsetMs - 2000;
  const during = Math.min(t.endMs, t.onsetMs + 60000) - 2000;
  await sleep(during + 5000 - Date.now());
  const ops = [await q(rate("ncclscope_nccl_ops_total"), before), await q(rate("ncclscope_nccl_ops_total"), during)];
  const dur = `${inside("ncclscope_nccl_op_gpu_seconds_total")} / ${inside("ncclscope_nccl_ops_timed_total")}`;
  const d = [await q(dur, before), await q(dur, during)];
  t.jobSlowdown = ops[0] / ops[1] - 1;   // iteration time longer by this fraction
  t.peersInsideRatio = d[1] / d[0];      // the others' time inside a world AllReduce, x
}

function startFabric(k) {
  const proc = spawn(args.fabric, [], { stdio: ["pipe", "pipe", "pipe"] });
  let out = "";
  const ready = new Promise((res, rej) => {
    proc.stdout.on("data", (d) => { out += d; const m = out.match(/^root (\S+)$/m); if (m) res(m[1]); });
    proc.on("exit", () => rej(new Error(`fake fabric of node ${k} exited`)));
  });
  return { proc, ready, send: (line) => proc.stdin.write(`${line}\n`), stop: () => { proc.stdin.end(); } };
}

async function startAgent(node) {
  const config = {
    server: { listen_address: `127.0.0.1:${node.port}` },
    plugin: { ring_dir: node.rings },
    ebpf: { enabled: false },
    nvlink: { enabled: false },
    rdma: { sysfs_root: node.sysfs, verbs: false },
    detection: { state_dir: node.state },
  };
  writeFileSync(node.config, JSON.stringify(config));
  const agent = startProcess(args.agent, ["--config", node.config]);
  for (let i = 0; ; i++) {
    try { if ((await fetch(`http://127.0.0.1:${node.port}/metrics`)).ok) break; } catch { /* starting */ }
    if (agent.exited() || i > 300) throw new Error(`agent of ${node.name} did not start:\n${agent.log()}`);
    await sleep(100);
  }
  return agent;
}

// A job: one ncclscope-sim per node, sharing its start time (so that their models agree).
function startJob(job, nodes, extra, lifetimeS) {
  const startAt = Date.now() + 1500;
  job.procs = nodes.map((node, k) => {
    const p = startProcess(args.sim, ["--plugin", args.plugin, ...SIM_COMMON, "--node", String(k),
      "--job-id", job.id, "--seed", String(job.seed), "--start-at", String(startAt),
      "--duration", `${Math.ceil(lifetimeS)}s`, ...extra],
    { env: { ...process.env, NCCLSCOPE_RING_DIR: node.rings } });
    procs.add(p);
    return p;
  });
  job.startedAt = startAt;
  return startAt;
}
async function stopJob(job) {
  await Promise.all((job.procs ?? []).map(async (p) => { await p.stop(); procs.delete(p); }));
  job.procs = [];
}

// --- the fault matrix ------------------------------------------------------------------------------
// Where a global rank sits: node = rank / GPUS; TP rank = rank % GPUS; DP group = rank % GPUS,
// DP rank = node; world rank = rank.
const commsOf = (rank) => [
  { name: "SIM world", rank },
  { name: `SIM TP group ${Math.floor(rank / GPUS)}`, rank: rank % GPUS },
  { name: `SIM DP group ${rank % GPUS}`, rank: Math.floor(rank / GPUS) },
];
const DETECT = {
  straggler: ["NcclscopeNcclSlowRank"],
  jobend: ["NcclscopeNcclSlowRank"],
  slowlink: ["NcclscopeNcclSlowNetworkChannel"],
  hang: ["NcclscopeNcclRankBehindInHungCommunicator"],
  "ib-burst": ["NcclscopeIBSymbolErrorBurst"],
  flap: ["NcclscopeIBLinkDowned", "NcclscopeIBLinkFlapping", "NcclscopeIBPortDown"],
  congestion: ["NcclscopeIBCongestion"],
  operators: ["NcclscopeNcclLatencyAboveBaseline"],
};
// Alerts that are right about a fault without being its detection: consequences that do not
// blame anyone else (checked below).
const CONSEQUENCE = {
  straggler: ["NcclscopeNcclLatencyAboveBaseline"],
  jobend: ["NcclscopeNcclLatencyAboveBaseline"],
  slowlink: ["NcclscopeNcclLatencyAboveBaseline"],
  hang: ["NcclscopeNcclCollectiveHung"],
  "ib-burst": ["NcclscopeIBSymbolErrorBERViolation"],
  flap: ["NcclscopeIBLinkDowned", "NcclscopeIBLinkFlapping", "NcclscopeIBPortDown"],
  congestion: ["NcclscopeIBTransmitWaitHigh"],
  operators: ["NcclscopeNcclSlowRank"],
};
// Targets of issues 15 and 38 (seconds from onset to the first alert naming the culprit).
const TARGET_S = { "straggler/2x": 20, "straggler/15%": 180, "slowlink/4x": 60, "slowlink/2.5x": 60,
  "jobend/2x": 20, "hang/-": HANG_TIMEOUT_S + 30, "ib-burst/200/s": 60, "flap/4x": 60, "congestion/xmit_wait": 60,
  "congestion/cnp": 60, "operators/3x": 600 };
const RESOLVE_TARGET_S = 120;
// CI's gate (the ci matrix) allows one scrape interval over a time-to-alert target: alerts move in
// 5 s steps (scrape, evaluation), the 2x straggler's measured 15-19 s sit that close to issue 38's
// 20 s, and CI's machine is shared. The tables print the measured time against the target itself.
const CI_GATE_SLACK_S = 5;
// A job's end resolves its alerts within one evaluation plus the scrape interval (5 s each here),
// plus the alert poll (2 s) and the agent's ring scan.
const JOBEND_RESOLVE_TARGET_S = 15;
const GHOST_WATCH_S = 60; // how long a jobend trial watches for alerts after the job ended
// Faults whose detection holds past the fault by design, exempt from the resolve target (still
// reported): a flapping link is flagged for rdma.link.flap_window after its last episode
// (gpud's 1 h), because a flaky cable is not repaired by coming up again.
const HELD_BY_DESIGN = { flap: "held by design: link_flapping lasts rdma.link.flap_window (1 h) after the last episode" };

// Trials of one round: job trials (each its own job) and fabric trials (each its own node port).
function roundTrials(kinds, durations) {
  const trials = [];
  const ports = [];
  for (const [type, magnitude] of kinds) {
    const onset = uniform(...durations.onset);
    const t = { id: `${type}-${trials.length}-${Math.floor(random() * 1e6)}`, type, magnitude, onsetS: onset };
    if (type === "straggler" || type === "operators" || type === "jobend") {
      t.rank = Math.floor(random() * NODES * GPUS);
      t.node = Math.floor(t.rank / GPUS);
      t.durationS = type === "operators" ? durations.operators : type === "jobend" ? durations.jobend
        : magnitude === "2x" ? durations.straggler2x : durations.straggler15;
    } else if (type === "slowlink") {
      t.node = Math.floor(random() * NODES);
      t.channel = Math.floor(random() * CHANNELS);
      t.factor = magnitude === "4x" ? 4 : 2.5;
      t.durationS = durations.slowlink;
    } else if (type === "hang") {
      t.rank = Math.floor(random() * NODES * GPUS);
      t.node = Math.floor(t.rank / GPUS);
      t.durationS = durations.hang;
    } else {
      let port;
      do {
        port = { node: Math.floor(random() * NODES), device: magnitude === "cnp" ? "mlx5_2" : pick(["mlx5_0", "mlx5_1"]) };
      } while (ports.some((p) => p.node === port.node && p.device === port.device));
      ports.push(port);
      Object.assign(t, port, { port: "1", durationS: durations[type] });
    }
    trials.push(t);
  }
  return trials;
}

// The ci matrix checks the same targets in ~3 minutes: each fault lasts until its detection has
// named the culprit (on each of the straggler's three communicators) or its target has passed,
// then the trial waits for the detection to resolve (or the resolve target to pass). Its
// durations are those caps.
const CI = MATRIX === "ci";
const HEALTHY_ONLY = MATRIX === "healthy";
const HEALTHY_S = 1800;
if (!["full", "ci", "healthy", "operators"].includes(MATRIX)) throw new Error(`--matrix ${MATRIX}: full, ci, healthy or operators`);
const DURATIONS = CI
  ? { onset: [30, 35], straggler2x: 60, straggler15: 180, jobend: 60, slowlink: 120, "ib-burst": 60, post: RESOLVE_TARGET_S }
  : { onset: [60, 85], straggler2x: 100, straggler15: 200, jobend: 100, slowlink: 150, hang: 130, "ib-burst": 90, flap: 60, congestion: 120, operators: 480, post: 130 };
const ROUNDS = HEALTHY_ONLY ? [[]] : MATRIX === "operators" ? [[["operators", "3x"]]] : CI
  ? [[["straggler", "2x"], ["straggler", "15%"], ["slowlink", "4x"], ["ib-burst", "200/s"], ["jobend", "2x"]]]
  : [
    [["straggler", "2x"], ["straggler", "15%"], ["hang", "-"], ["ib-burst", "200/s"], ["congestion", "xmit_wait"], ["operators", "3x"]],
    [["straggler", "2x"], ["slowlink", "4x"], ["straggler", "15%"], ["flap", "4x"], ["ib-burst", "200/s"]],
    [["straggler", "2x"], ["slowlink", "2.5x"], ["hang", "-"], ["congestion", "cnp"], ["flap", "4x"], ["jobend", "2x"]],
    [["straggler", "15%"], ["slowlink", "4x"], ["slowlink", "2.5x"], ["ib-burst", "200/s"], ["congestion", "xmit_wait"]],
  ];

// --- alert bookkeeping -----------------------------------------------------------------------------
const episodes = new Map(); // key -> { labels, annotations, firstFiring, lastFiring, resolvedAt, open }
async function pollAlerts(base) {
  let body;
  try { body = await (await fetch(`${base}/api/v1/alerts`)).json(); } catch { return; }
  const now = Date.now();
  const firing = new Set();
  for (const a of body.data?.alerts ?? []) {
    if (a.state !== "firing") continue;
    const key = JSON.stringify(Object.entries(a.labels).sort());
    firing.add(key);
    let e = episodes.get(key);
    if (!e || !e.open) {
      // The annotations as the page went out: what an alert says about the culprit is judged
      // when it fires, not after the fault ended (when "the straggler" has become nobody).
      e = { labels: a.labels, annotations: a.annotations, paged: a.annotations, firstFiring: now, lastFiring: now, open: true, prev: e };
      episodes.set(key, e);
    }
    e.lastFiring = now;
    e.annotations = a.annotations;
  }
  for (const [key, e] of episodes) if (e.open && !firing.has(key)) { e.open = false; e.resolvedAt = now; }
}
const allEpisodes = () => {
  const out = [];
  for (const e of episodes.values()) for (let x = e; x; x = x.prev) out.push(x);
  return out;
};

// The ci matrix's live view of a trial: its detection alerts (labels only: the communicator
// names are known at the end), the fault ended once they named it, then until they resolve.
const liveAbout = (e, t) => e.firstFiring >= t.onsetMs - 5000 && DETECT[t.type].includes(e.labels.alertname)
  && (t.job ? e.labels.job_id === t.job : e.labels.node === `node-${t.node}` && e.labels.device === t.device && e.labels.port === t.port);
async function untilDetected(t) {
  // A straggler is named in each of its communicators; a jobend trial ends its job at the first.
  const communicators = t.type === "straggler" ? commsOf(t.rank).length : 1;
  while (Date.now() < t.endMs) {
    if (new Set(allEpisodes().filter((e) => liveAbout(e, t)).map((e) => e.labels.comm)).size >= communicators) return;
    await sleep(1000);
  }
}
async function untilResolved(t) {
  const deadline = t.endMs + RESOLVE_TARGET_S * 1000;
  while (Date.now() < deadline && allEpisodes().some((e) => e.open && liveAbout(e, t))) await sleep(1000);
  await sleep(5000);
}

// --- run ---------------------------------------------------------------------------------------------
const nodes = [];
const jobs = [];
const trialsAll = [];
const restarts = [];
let failed = false;
let commInfo = [];
try {
  for (let k = 0; k < NODES; k++) {
    const node = { name: `node-${k}`, rings: join(tmp, `rings-${k}`), state: join(tmp, `state-${k}`),
      config: join(tmp, `agent-${k}.json`), port: await freePort(), fabric: startFabric(k) };
    mkdirSync(node.rings);
    node.sysfs = await node.fabric.ready;
    node.agent = await startAgent(node);
    nodes.push(node);
  }
  const ruleDir = join(root, "deploy/prometheus/rules");
  const ruleFiles = ["ncclscope-agent.yaml", "ncclscope-ebpf.yaml", "ncclscope-fabric.yaml", "ncclscope-nccl.yaml", "ncclscope-profiler.yaml"]
    .map((f) => join(ruleDir, f));
  prometheus = await startPrometheus(args.prometheus, {
    config: JSON.stringify({
      global: { scrape_interval: SCRAPE, evaluation_interval: SCRAPE },
      rule_files: ruleFiles,
      scrape_configs: [{ job_name: "ncclscope-agent", static_configs: nodes.map((n) => ({ targets: [`127.0.0.1:${n.port}`], labels: { node: n.name } })) }],
    }),
  });
  const alertsBase = prometheus.base;
  const poller = setInterval(() => pollAlerts(alertsBase), 2000);

  // The healthy job, all along: checkpoint-like pauses, message-size changes, a restart.
  // The operators' trial outlives its round (unless it is the round).
  const roundLength = (trials) => {
    if (HEALTHY_ONLY) return HEALTHY_S;
    const others = trials.filter((t) => t.type !== "operators");
    return Math.max(...(others.length ? others : trials).map((t) => t.onsetS + t.durationS)) + DURATIONS.post;
  };
  const plan = ROUNDS.map((kinds) => roundTrials(kinds, DURATIONS));
  const runS = plan.reduce((s, trials) => s + roundLength(trials), 0) + 5;
  const healthy = { id: "bench-healthy", seed: 7 };
  const HEALTHY_NOISE = ["--pause-every", CI ? "70s" : "150s", "--pause-for", "8s", "--resize-every", CI ? "45s" : "100s", "--resize-factor", "4"];
  startJob(healthy, nodes, HEALTHY_NOISE, runS + 30);
  jobs.push(healthy);
  const restartAtS = CI ? 95 : uniform(0.35, 0.55) * runS;
  const agentRestartAtS = CI ? 120 : uniform(0.6, 0.8) * runS;
  log(`matrix ${MATRIX}: ${plan.flat().length} trials in ${plan.length} round(s), ${CI ? "at most " : "~"}${Math.round(runS)} s; healthy job restarts at ${Math.round(restartAtS)} s, node-0's agent at ${Math.round(agentRestartAtS)} s`);
  const noise = (async () => {
    await sleep(restartAtS * 1000);
    log("healthy job restarts (new commHashes, same communicator names)");
    await stopJob(healthy);
    restarts.push({ what: "job", atMs: Date.now() });
    healthy.seed = 8;
    startJob(healthy, nodes, HEALTHY_NOISE, runS - restartAtS + 30);
    await sleep((agentRestartAtS - restartAtS) * 1000);
    log("node-0's agent restarts (baselines from its state dir)");
    await nodes[0].agent.stop();
    nodes[0].earlierLogs = nodes[0].agent.log();
    restarts.push({ what: "agent", atMs: Date.now() });
    nodes[0].agent = await startAgent(nodes[0]);
  })();

  for (const [r, trials] of plan.entries()) {
    const roundStart = Date.now();
    const length = roundLength(trials);
    log(`round ${r + 1}: ${trials.map((t) => `${t.type}/${t.magnitude}`).join(", ")} (${Math.round(length)} s)`);
    const actions = [];
    for (const t of trials) {
      trialsAll.push(t);
      if (["straggler", "slowlink", "hang", "operators", "jobend"].includes(t.type)) {
        const job = { id: `bench-${t.id}`, seed: 100 + trialsAll.length };
        t.job = job.id;
        const extra = [];
        if (t.type === "straggler" || t.type === "operators" || t.type === "jobend") {
          // 2x: the straggler's lateness equals the longest collective's transfer time, so its
          // peers spend twice as long inside it; 15 %: 15 % of an iteration, spread over its ops;
          // 3x: twice the transfer time.
          // (15 %: plus 0.45 ms, what the other ranks' own jitter hides of it on average.)
          const perOp = t.magnitude === "2x" ? COLLECTIVE_MS : t.magnitude === "3x" ? 2 * COLLECTIVE_MS
            : (0.15 * ITERATION_MS) / OPS_PER_ITERATION + 0.45;
          extra.push("--slow-rank", String(t.rank), "--slow-by", `${Math.round(perOp * 1000)}us`);
        } else if (t.type === "slowlink") {
          extra.push("--slow-channel", String(t.channel), "--slow-node", String(t.node), "--slow-factor", String(t.factor));
        }
        if (t.type === "hang") {
          extra.push("--hang-rank", String(t.rank), "--hang-at", `${Math.round(t.onsetS * 1000)}ms`);
        } else {
          extra.push("--fault-start", `${Math.round(t.onsetS * 1000)}ms`, "--fault-end", `${Math.round((t.onsetS + t.durationS) * 1000)}ms`);
          if (CI) extra.push("--fault-end-file", join(tmp, `${t.id}.end`));
        }
        const lifetime = t.type === "operators" ? t.onsetS + t.durationS + DURATIONS.post : length;
        const startAt = startJob(job, nodes, extra, lifetime + 5);
        t.onsetMs = startAt + t.onsetS * 1000;
        t.endMs = t.onsetMs + t.durationS * 1000;
        jobs.push(job);
        // A hang ends when the job is stopped (the operator's restart). The operators' trial
        // outlives its round.
        const queue = t.type === "operators" ? longRunning : actions;
        queue.push((async () => {
          await measureCost(t, job);
          if (t.type === "jobend") {
            // The job exits while its straggler is named (or its target passed): its processes
            // end, the agent sees their rings go. Then a minute of watching for ghosts.
            await sleep(t.onsetMs - Date.now());
            await untilDetected(t);
            await stopJob(job);
            t.endMs = Date.now();
            t.jobStoppedMs = t.endMs;
            await untilResolved(t);
            await sleep(t.endMs + GHOST_WATCH_S * 1000 - Date.now());
          } else if (CI) {
            // End the fault 1.5 s ahead (every node's simulator switches at the same model time).
            await sleep(t.onsetMs - Date.now());
            await untilDetected(t);
            const endAfterStartMs = Math.min(Date.now() + 1500, t.endMs) - startAt;
            writeFileSync(join(tmp, `${t.id}.end.tmp`), `${Math.round(endAfterStartMs)}\n`);
            renameSync(join(tmp, `${t.id}.end.tmp`), join(tmp, `${t.id}.end`));
            t.endMs = startAt + Math.round(endAfterStartMs);
            await untilResolved(t);
            await stopJob(job);
            t.jobStoppedMs = Date.now();
          } else if (t.type === "hang") {
            await sleep(t.endMs - Date.now());
            await stopJob(job);
            t.endMs = Date.now();
            t.jobStoppedMs = t.endMs;
          } else {
            await sleep(startAt + lifetime * 1000 - Date.now());
            await stopJob(job);
            t.jobStoppedMs = Date.now();
          }
        })());
      } else {
        const f = nodes[t.node].fabric;
        t.onsetMs = roundStart + t.onsetS * 1000;
        t.endMs = t.onsetMs + t.durationS * 1000;
        actions.push((async () => {
          await sleep(t.onsetMs - Date.now());
          if (t.type === "ib-burst") {
            f.send(`rate ${t.device} 1 counters symbol_error 200`);
            if (CI) await untilDetected(t);
            else await sleep(t.endMs - Date.now());
            f.send(`rate ${t.device} 1 counters symbol_error 0`);
            if (CI) { t.endMs = Math.min(Date.now(), t.endMs); await untilResolved(t); }
          } else if (t.type === "congestion") {
            if (t.magnitude === "cnp") f.send(`rate ${t.device} 1 hw_counters rp_cnp_handled 5000`);
            else f.send(`rate ${t.device} 1 counters port_xmit_wait 4e6`);
            await sleep(t.endMs - Date.now());
            f.send(`rate ${t.device} 1 hw_counters rp_cnp_handled 0`);
            f.send(`rate ${t.device} 1 counters port_xmit_wait 0`);
          } else if (t.type === "flap") {
            // Down 4 s (the HCA counts a link_downed each time), up 11 s, four times.
            for (let i = 0; i < 4; i++) {
              f.send(`state ${t.device} 1 1: DOWN|2: Polling`);
              f.send(`add ${t.device} 1 counters link_downed 1`);
              await sleep(4000);
              f.send(`state ${t.device} 1 4: ACTIVE|5: LinkUp`);
              if (i < 3) await sleep(11000);
            }
            t.endMs = Date.now();
          }
        })());
      }
    }
    if (!CI) await sleep(roundStart + length * 1000 - Date.now());
    await Promise.all(actions);
  }
  await Promise.all(longRunning);
  await sleep(3000);
  await pollAlerts(alertsBase);
  clearInterval(poller);
  await noise;
  commInfo = await prometheus.series("ncclscope_nccl_comm_info", Math.floor(t0 / 1000));
} catch (e) {
  failed = true;
  console.error(`FAIL ${e.stack ?? e.message}`);
}

// --- scoring -------------------------------------------------------------------------------------------
const commName = new Map(commInfo.map((s) => [s.comm, { name: s.comm_name, job: s.job_id }]));
const key = (t) => `${t.type}/${t.magnitude}`;
function aboutTrial(e, t) {
  const l = e.labels;
  const inWindow = e.firstFiring >= t.onsetMs - 5000 && e.firstFiring <= t.endMs + RESOLVE_TARGET_S * 1000;
  if (!inWindow) return false;
  if (t.job) return l.job_id === t.job || commName.get(l.comm)?.job === t.job;
  return l.node === nodes[t.node]?.name && l.device === t.device && l.port === t.port;
}
// Whether an alert about trial t names its culprit.
function namesCulprit(e, t) {
  const l = e.labels;
  const comm = commName.get(l.comm);
  if (t.type === "straggler" || t.type === "operators" || t.type === "jobend") {
    if (l.alertname === "NcclscopeNcclSlowRank") {
      return commsOf(t.rank).some((c) => c.name === comm?.name && String(c.rank) === l.rank) && l.node === `node-${t.node}`;
    }
    if (l.alertname === "NcclscopeNcclLatencyAboveBaseline") {
      const want = commsOf(t.rank).find((c) => c.name === comm?.name);
      const paged = e.paged.straggler ?? "";
      if (want) return paged.startsWith(`rank ${want.rank} on node-${t.node} `);
      // A communicator of the job without the straggler (the other DP group, whose ranks wait
      // for the straggler's TP peer): the job's straggler, in one of its communicators.
      return paged.startsWith("none in this communicator")
        && commsOf(t.rank).some((c) => paged.includes(`rank ${c.rank} of "${c.name}" on node-${t.node} `));
    }
  }
  if (t.type === "slowlink") {
    if (l.alertname === "NcclscopeNcclSlowNetworkChannel") return l.node === `node-${t.node}` && l.channel === String(t.channel);
    if (l.alertname === "NcclscopeNcclLatencyAboveBaseline") return (e.paged.straggler ?? "").startsWith("none stands out");
  }
  if (t.type === "hang") {
    if (l.alertname === "NcclscopeNcclRankBehindInHungCommunicator") {
      return commsOf(t.rank).some((c) => c.name === comm?.name && String(c.rank) === l.rank);
    }
    if (l.alertname === "NcclscopeNcclCollectiveHung") return true;
  }
  if (!t.job) return [...DETECT[t.type], ...CONSEQUENCE[t.type]].includes(l.alertname);
  return false;
}

const rows = [];
const episodesUsed = new Set();
const eps = allEpisodes();
for (const t of trialsAll) {
  if (t.onsetMs === undefined) continue;
  const mine = eps.filter((e) => aboutTrial(e, t));
  mine.forEach((e) => episodesUsed.add(e));
  const right = mine.filter((e) => namesCulprit(e, t) && [...DETECT[t.type], ...CONSEQUENCE[t.type]].includes(e.labels.alertname));
  const wrong = mine.filter((e) => !right.includes(e));
  const detections = right.filter((e) => DETECT[t.type].includes(e.labels.alertname));
  const first = detections.length ? Math.min(...detections.map((e) => e.firstFiring)) : null;
  // Flaps: an alert (same labels) that resolved and fired again within the trial. Ghosts: an
  // alert about the trial's job that fired once Prometheus could know the job had ended: later
  // than one scrape interval after its processes exited (plus 2 s: the poll). Until the first
  // scrape after the exit, Prometheus evaluates the last scrape taken while the job ran, on
  // which an alert pending since then fires as it would have with the job alive (the full
  // matrix once saw that, 5 s after an exit); nothing in a rule can know better before then.
  const flaps = mine.filter((e) => e.prev && aboutTrial(e.prev, t));
  const ghosts = t.jobStoppedMs === undefined ? []
    : eps.filter((e) => e.firstFiring > t.jobStoppedMs + SCRAPE_S * 1000 + 2000
      && (e.labels.job_id === t.job || commName.get(e.labels.comm)?.job === t.job));
  const ends = right.map((e) => (e.open ? Infinity : e.resolvedAt));
  const detectEnds = detections.map((e) => (e.open ? Infinity : e.resolvedAt));
  const row = {
    id: t.id, type: t.type, magnitude: t.magnitude,
    culprit: t.job ? (t.rank !== undefined ? `rank ${t.rank} (node-${t.node})` : `node-${t.node} channel ${t.channel}`) : `node-${t.node} ${t.device}/${t.port}`,
    onsetS: at(t.onsetMs), durationS: (t.endMs - t.onsetMs) / 1000,
    detected: first !== null, timeToAlertS: first !== null ? (first - t.onsetMs) / 1000 : null,
    culpritRight: right.length, wrongAlerts: wrong.map((e) => e.labels.alertname + (e.labels.rank ? ` rank ${e.labels.rank}` : "") + (e.labels.channel ? ` ch ${e.labels.channel}` : "")
      + (e.labels.comm ? ` of ${commName.get(e.labels.comm)?.name ?? e.labels.comm}` : "") + (e.paged?.straggler ? ` (paged with straggler: ${e.paged.straggler})` : "")
      + ` at ${Math.round((e.firstFiring - t.onsetMs) / 1000)} s for ${Math.round(((e.open ? Date.now() : e.resolvedAt) - e.firstFiring) / 1000)} s`),
    flaps: flaps.map((e) => `${e.labels.alertname}${e.labels.rank ? ` rank ${e.labels.rank}` : ""} again at ${Math.round((e.firstFiring - t.onsetMs) / 1000)} s`),
    ghosts: ghosts.map((e) => `${e.labels.alertname}${e.labels.rank ? ` rank ${e.labels.rank}` : ""} at ${Math.round((e.firstFiring - t.jobStoppedMs) / 1000)} s after the job ended`),
    resolveS: ends.length ? (Math.max(...ends) - t.endMs) / 1000 : null,
    detectResolveS: detectEnds.length ? (Math.max(...detectEnds) - t.endMs) / 1000 : null,
    alerts: [...new Set(right.map((e) => e.labels.alertname))],
    pagedStragglers: [...new Set(mine.map((e) => e.paged?.straggler).filter(Boolean))],
    jobSlowdown: t.jobSlowdown, peersInsideRatio: t.peersInsideRatio,
  };
  if (t.type === "straggler" || t.type === "operators" || t.type === "jobend") {
    row.comms = commsOf(t.rank).map((c) => ({
      comm: c.name.replace(/ group \d+/, "").replace("SIM ", ""),
      named: detections.some((e) => commName.get(e.labels.comm)?.name === c.name) ? (Math.min(...detections.filter((e) => commName.get(e.labels.comm)?.name === c.name).map((e) => e.firstFiring)) - t.onsetMs) / 1000 : null,
    }));
  }
  rows.push(row);
}
const falseAlerts = eps.filter((e) => !episodesUsed.has(e)).map((e) => ({
  alert: e.labels.alertname, labels: e.labels, firingS: at(e.firstFiring), forS: ((e.open ? Date.now() : e.resolvedAt) - e.firstFiring) / 1000,
  healthyJob: e.labels.job_id === "bench-healthy" || commName.get(e.labels.comm)?.job === "bench-healthy",
}));

// --- report ---------------------------------------------------------------------------------------------
const fmt = (x) => (x === null || x === undefined ? "–" : x === Infinity ? "still firing" : typeof x === "number" ? `${Math.round(x)} s` : x);
console.log("\n| trial | culprit | detected | time to alert | culprit right | wrong alerts | flaps | ghosts | resolve (all / detection) | alerts |");
console.log("|---|---|---|---|---|---|---|---|---|---|");
for (const r of rows) {
  const comms = r.comms ? ` [${r.comms.map((c) => `${c.comm} ${fmt(c.named)}`).join(", ")}]` : "";
  const cost = r.jobSlowdown !== undefined ? ` (job +${Math.round(100 * r.jobSlowdown)} %, peers ${r.peersInsideRatio.toFixed(1)}x inside)` : "";
  console.log(`| ${r.type}/${r.magnitude}${cost} | ${r.culprit} | ${r.detected ? "yes" : "**no**"} | ${fmt(r.timeToAlertS)}${comms} | ${r.culpritRight} | ${r.wrongAlerts.length ? r.wrongAlerts.join("; ") : 0} | ${r.flaps.length ? r.flaps.join("; ") : 0} | ${r.ghosts.length ? r.ghosts.join("; ") : 0} | ${fmt(r.resolveS)} / ${fmt(r.detectResolveS)} | ${r.alerts.join(", ")} |`);
}
const byKind = new Map();
for (const r of rows) {
  const k = `${r.type}/${r.magnitude}`;
  const s = byKind.get(k) ?? { trials: 0, detected: 0, right: 0, wrong: 0, flaps: 0, ghosts: 0, inTarget: 0, resolved: 0, times: [] };
  s.trials++;
  if (r.detected) { s.detected++; s.times.push(r.timeToAlertS); }
  if (r.detected && r.timeToAlertS <= TARGET_S[k]) s.inTarget++;
  if (r.resolveS !== null && r.resolveS <= (r.type === "jobend" ? JOBEND_RESOLVE_TARGET_S : RESOLVE_TARGET_S)) s.resolved++;
  s.right += r.culpritRight;
  s.wrong += r.wrongAlerts.length;
  s.flaps += r.flaps.length;
  s.ghosts += r.ghosts.length;
  byKind.set(k, s);
}
console.log("\n| fault / magnitude | trials | recall | precision | time to alert (max) | target | within target | wrong | flaps | ghosts | resolved (≤ 2 min; job end ≤ 15 s) |");
console.log("|---|---|---|---|---|---|---|---|---|---|---|");
for (const [k, s] of byKind) {
  const precision = s.right + s.wrong ? s.right / (s.right + s.wrong) : 1;
  console.log(`| ${k} | ${s.trials} | ${(s.detected / s.trials).toFixed(2)} | ${precision.toFixed(2)} | ${s.times.length ? Math.round(Math.max(...s.times)) : "–"} s | ${TARGET_S[k]} s | ${s.inTarget}/${s.trials} | ${s.wrong} | ${s.flaps} | ${s.ghosts} | ${s.resolved}/${s.trials}${HELD_BY_DESIGN[k.split("/")[0]] ? ` (${HELD_BY_DESIGN[k.split("/")[0]]})` : ""} |`);
}
console.log(`\nfalse alerts (about no fault): ${falseAlerts.length}${falseAlerts.length ? "" : " (healthy job with jitter, pauses, size changes, a job restart and an agent restart included)"}`);
for (const f of falseAlerts) console.log(`  ${f.alert} ${JSON.stringify(f.labels)} at ${Math.round(f.firingS)} s for ${Math.round(f.forS)} s`);
// Each ring's first rejected record of each reason, as the agents logged it (the failed check:
// agent/profiler/ring_file.cc): what a NcclscopeNcclBadRecords alert above was about.
for (const n of nodes) {
  const lines = `${n.earlierLogs ?? ""}${n.agent?.log() ?? ""}`.split("\n");
  for (const l of lines.filter((x) => x.includes("component=profiler") && /\(reason=\w+/.test(x))) console.log(`  ${n.name} agent: ${l}`);
}
console.log(`run: ${Math.round(at(Date.now()))} s wall`);
if (args.json) writeFileSync(args.json, JSON.stringify({ matrix: MATRIX, seed: Number(args.seed ?? 1), rows, falseAlerts, restarts }, null, 1));

// Pass / fail: every trial detected with the culprit within its target, no wrong or false alert,
// and (when the post-fault window is long enough to tell) resolved within 2 minutes.
let ok = !failed && falseAlerts.length === 0;
for (const r of rows) {
  if (r.type === "operators") continue;
  const k = `${r.type}/${r.magnitude}`;
  const gate = TARGET_S[k] + (CI ? CI_GATE_SLACK_S : 0);
  if (r.timeToAlertS > TARGET_S[k] && r.timeToAlertS <= gate) log(`${k}: ${Math.round(r.timeToAlertS)} s, over its ${TARGET_S[k]} s target, within CI's ${CI_GATE_SLACK_S} s slack`);
  if (!r.detected || r.timeToAlertS > gate || r.wrongAlerts.length || r.flaps.length || r.ghosts.length) ok = false;
  if (HELD_BY_DESIGN[r.type]) continue;
  if (r.type === "jobend") {
    if (r.resolveS === null || r.resolveS > JOBEND_RESOLVE_TARGET_S) ok = false;
    continue;
  }
  if (r.detectResolveS === null || r.detectResolveS > Math.min(RESOLVE_TARGET_S, DURATIONS.post)) ok = false;
}

for (const j of jobs) await stopJob(j);
for (const n of nodes) { await n.agent?.stop(); n.fabric.stop(); }
if (prometheus) await prometheus.stop();
for (const p of procs) await p.stop();
rmSync(tmp, { recursive: true, force: true });
console.log(ok ? "PASS" : "FAIL");
process.exit(ok ? 0 : 1);
