// The operator's first hour on one machine, no GPU and no cluster needed (scripts/first-hour runs
// this): two simulated GPU nodes, each with its own real ncclscope-agent, running one 2-node x
// 8-GPU training job (ncclscope-sim driving the real profiler plugin) in which one rank computes
// far longer than its peers before every collective; a real Prometheus scraping both agents with
// the shipped rules (deploy/prometheus/rules, unchanged: their `for:` and intervals as shipped); a
// real Alertmanager with the shipped routing (deploy/alertmanager/alertmanager.yml: its routes,
// grouping, timers and inhibitions unchanged), whose three receivers are pointed at a local
// webhook that prints and records every notification. The same pieces the end-to-end tests start
// (tests/deploy/prometheus.mjs, tests/deploy/agent.mjs; alerting_e2e.mjs, fault_bench.mjs).
//
// Interactive (the default): prints where to look, then every notification as it arrives, until
// Ctrl-C, which stops everything and removes the temporary directory.
// --headless --until-notified: exits once a notification names a rank (0), or after --timeout
// seconds without one (1); the last line of stdout is a JSON summary (tests/deploy/first_hour.mjs).
//
// Usage: node scripts/first-hour.mjs --agent BIN --sim BIN --plugin SO --prometheus BIN
//          --alertmanager BIN [--headless] [--until-notified] [--timeout S] [--slow-rank R]
//          [--slow-by DURATION]
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, appendFileSync } from "node:fs";
import { createServer } from "node:http";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { freePort, sleep, startAlertmanager, startProcess, startPrometheus } from "../tests/deploy/prometheus.mjs";
import { startAgent } from "../tests/deploy/agent.mjs";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
// The YAML parser the deploy tests use (scripts/install-deps installs it).
const { parse, stringify } = createRequire(join(root, "tests/deploy/package.json"))("yaml");

let opts;
try {
  ({ values: opts } = parseArgs({
    options: {
      agent: { type: "string" }, sim: { type: "string" }, plugin: { type: "string" },
      prometheus: { type: "string" }, alertmanager: { type: "string" },
      headless: { type: "boolean", default: false }, "until-notified": { type: "boolean", default: false },
      timeout: { type: "string", default: "0" }, "slow-rank": { type: "string", default: "11" },
      "slow-by": { type: "string", default: "20ms" },
    },
  }));
} catch (e) {
  console.error(e.message);
  process.exit(2);
}
for (const need of ["agent", "sim", "plugin", "prometheus", "alertmanager"]) {
  if (!opts[need]) { console.error(`missing --${need}`); process.exit(2); }
}

const NODES = 2;
const GPUS = 8;
const JOB = "first-hour-demo";
const SLOW_RANK = Number(opts["slow-rank"]);
const CULPRIT_NODE = `gpu-node-${Math.floor(SLOW_RANK / GPUS)}`;
const timeoutS = Number(opts.timeout);
const started = Date.now();
const elapsed = () => `${((Date.now() - started) / 1000).toFixed(0).padStart(4)} s`;
const say = (...m) => console.log(`[${elapsed()}]`, ...m);

const tmp = mkdtempSync(join(tmpdir(), "ncclscope-first-hour-"));
const notificationsFile = join(tmp, "notifications.jsonl");
const procs = [];
let prometheus;
let alertmanager;
let receiver;
let stopping = false;

// The agents listen on the usual port 9824 and the next one where they are free.
async function portNear(preferred) {
  const free = await new Promise((res) => {
    const s = createServer();
    s.once("error", () => res(false));
    s.listen(preferred, "127.0.0.1", () => s.close(() => res(true)));
  });
  return free ? preferred : freePort();
}

// Text wrapped at 100 columns under `indent` (a word longer than a line stays whole).
function wrap(text, indent) {
  const lines = [];
  let line = indent;
  for (const word of text.split(/\s+/)) {
    if (line.trim() && line.length + 1 + word.length > 100) { lines.push(line); line = indent; }
    line += line.trim() ? ` ${word}` : word;
  }
  return [...lines, line].join("\n");
}

// --- the local webhook: Alertmanager's standard webhook JSON, one POST per notified group --------
async function startReceiver() {
  const notifications = [];
  const server = createServer(async (req, res) => {
    let body = "";
    for await (const chunk of req) body += chunk;
    const path = new URL(req.url, "http://localhost").pathname;
    if (req.method !== "POST" || !["/page", "/ticket", "/digest"].includes(path)) {
      res.writeHead(404);
      return res.end();
    }
    res.writeHead(200);
    res.end();
    let payload;
    try { payload = JSON.parse(body); } catch { return; }
    const n = { at: new Date().toISOString(), afterS: Math.round((Date.now() - started) / 1000), receiver: payload.receiver, path, status: payload.status, alerts: payload.alerts.map((a) => ({ status: a.status, labels: a.labels, summary: a.annotations?.summary, runbook_url: a.annotations?.runbook_url })) };
    notifications.push(n);
    appendFileSync(notificationsFile, `${JSON.stringify(n)}\n`);
    say(`NOTIFICATION to ${payload.receiver} (${path.slice(1)}), ${payload.status}, ${n.alerts.length} alert(s):`);
    for (const a of n.alerts.slice(0, 5)) {
      const l = a.labels;
      console.log(`         ${l.alertname} [${l.priority}] node=${l.node ?? "-"} rank=${l.rank ?? "-"} comm=${l.comm ?? "-"}`);
      console.log(wrap(`job ${l.job_id ?? "-"}: ${a.summary}`, "           "));
      console.log(`           runbook: ${a.runbook_url}`);
    }
  });
  const port = await portNear(9826);
  await new Promise((res) => server.listen(port, "127.0.0.1", res));
  return { base: `http://127.0.0.1:${port}`, notifications, close: () => new Promise((r) => server.close(r)) };
}

// The shipped Alertmanager configuration with only its receivers replaced: each becomes a webhook
// to the local receiver (P0's WeCom too). Routes, grouping, timers, inhibitions: as shipped.
function alertmanagerConfig(base) {
  const config = parse(readFileSync(join(root, "deploy/alertmanager/alertmanager.yml"), "utf8"));
  const path = { "ncclscope-wecom": "/page", "ncclscope-ticket": "/ticket", "ncclscope-digest": "/digest" };
  for (const global of ["wechat_api_url", "wechat_api_corp_id", "wechat_api_secret"]) delete config.global[global];
  config.receivers = config.receivers.map((r) => {
    if (!path[r.name]) throw new Error(`alertmanager.yml has an unknown receiver ${r.name}`);
    return { name: r.name, webhook_configs: [{ url: `${base}${path[r.name]}`, send_resolved: true }] };
  });
  return stringify(config);
}

async function cleanup() {
  if (stopping) return;
  stopping = true;
  for (const p of procs.reverse()) await p.stop();
  if (alertmanager) await alertmanager.stop();
  if (prometheus) await prometheus.stop();
  if (receiver) await receiver.close();
  rmSync(tmp, { recursive: true, force: true });
}
const onSignal = async (signal) => {
  if (stopping) return;
  console.log(`\n${signal}: stopping the simulated job, the agents, Prometheus and Alertmanager`);
  await cleanup();
  process.exit(130);
};
process.on("SIGINT", onSignal);
process.on("SIGTERM", onSignal);

// The notification the demo waits for: a firing alert that names a rank.
const culpritAlerts = (notifications) => notifications.flatMap((n) => n.alerts
  .filter((a) => a.status === "firing" && a.labels.rank !== undefined).map((a) => ({ ...a, receiver: n.receiver, afterS: n.afterS })));

let exitCode = 0;
try {
  say(`working directory ${tmp}`);
  receiver = await startReceiver();
  alertmanager = await startAlertmanager(opts.alertmanager, alertmanagerConfig(receiver.base));

  const nodes = [];
  for (let k = 0; k < NODES; k++) {
    const name = `gpu-node-${k}`;
    const dir = join(tmp, name);
    mkdirSync(join(dir, "rings"), { recursive: true });
    mkdirSync(join(dir, "state"));
    nodes.push({ name, dir, rings: join(dir, "rings"), port: await portNear(9824 + k) });
  }
  const rulesDir = join(root, "deploy/prometheus/rules");
  const ruleFiles = readdirSync(rulesDir).filter((f) => f.endsWith(".yaml")).sort().map((f) => join(rulesDir, f));
  prometheus = await startPrometheus(opts.prometheus, {
    config: stringify({
      global: { scrape_interval: "5s", evaluation_interval: "5s" },
      rule_files: ruleFiles,
      alerting: { alertmanagers: [{ static_configs: [{ targets: [alertmanager.address] }] }] },
      // As deploy/prometheus/scrape-configs.yaml does for Slurm nodes: `node` is the node's name.
      scrape_configs: [{ job_name: "ncclscope-agent", honor_labels: true,
        static_configs: nodes.map((n) => ({ targets: [`127.0.0.1:${n.port}`], labels: { node: n.name } })) }],
    }),
  });

  // One agent per simulated node, as on a GPU node: the plugin's rings in its ring directory,
  // eBPF and the fabric off (the simulated job loads no libnccl, this machine has no HCA).
  for (const n of nodes) {
    procs.push(await startAgent(opts.agent, {
      port: n.port,
      configPath: join(n.dir, "agent.yaml"),
      config: {
        plugin: { ring_dir: n.rings },
        ebpf: { enabled: false },
        rdma: { enabled: false },
        nvlink: { enabled: false },
        detection: { state_dir: join(n.dir, "state") },
      },
    }));
  }

  // Prometheus' alerts page: /alerts upstream; Debian's build serves only the classic UI.
  let alertsPage = `${prometheus.base}/alerts`;
  if ((await fetch(alertsPage).catch(() => ({ status: 0 }))).status !== 200) alertsPage = `${prometheus.base}/classic/alerts`;

  // The job: one simulator per node, sharing the start time and seed so that their models agree.
  const startAt = Date.now() + 1500;
  for (const [k, n] of nodes.entries()) {
    procs.push(startProcess(opts.sim, ["--plugin", opts.plugin, "--nodes", String(NODES), "--gpus", String(GPUS),
      "--node", String(k), "--job-id", JOB, "--seed", "40", "--start-at", String(startAt), "--rate", "20",
      "--duration", "2h", "--quiet", "--slow-rank", String(SLOW_RANK), "--slow-by", opts["slow-by"]],
    { env: { ...process.env, NCCLSCOPE_RING_DIR: n.rings } }));
  }

  console.log(`
ncclscope's first hour: job ${JOB}, ${NODES} nodes x ${GPUS} GPUs (simulated), global rank ${SLOW_RANK} on
${CULPRIT_NODE} computing ${opts["slow-by"]} longer than its peers before every collective.

  Node pages (no Grafana needed):  ${nodes.map((n) => `http://127.0.0.1:${n.port}/`).join("  ")}
  Metrics:                         ${nodes.map((n) => `http://127.0.0.1:${n.port}/metrics`).join("  ")}
  Prometheus alerts:               ${alertsPage}
  Alertmanager:                    http://${alertmanager.address}/
  Notifications (webhook) log:     ${notificationsFile}

The shipped rules and routing run unchanged: NcclscopeNcclSlowRank fires after its 15 s of for:,
and a P1 alert waits for its group's 1 minute (group_wait) before the ticket webhook is called,
so the first notification comes after about 90 seconds. ${opts.headless ? "" : "Ctrl-C stops everything."}
`);

  const deadline = timeoutS > 0 ? Date.now() + timeoutS * 1000 : Infinity;
  for (;;) {
    if (stopping) await new Promise(() => {}); // Ctrl-C: the signal handler stops everything and exits
    if (procs.some((p) => p.exited())) {
      const dead = procs.find((p) => p.exited());
      throw new Error(`a process exited early:\n${dead.log().slice(-2000)}`);
    }
    if (opts["until-notified"] && culpritAlerts(receiver.notifications).length) break;
    if (Date.now() > deadline) {
      exitCode = 1;
      say(`no notification naming a rank within ${timeoutS} s`);
      const firing = await prometheus.query("ALERTS").catch(() => ({ result: [] }));
      say(`ALERTS in Prometheus: ${JSON.stringify(firing.result?.map((a) => [a.metric.alertname, a.metric.alertstate, a.metric.node, a.metric.rank]))}`);
      break;
    }
    await sleep(1000);
  }

  // Which global rank each notified (comm, rank) is: the agent's comm_info names it, as an
  // operator would look it up (or read it on the node page).
  const culprits = [];
  for (const a of culpritAlerts(receiver.notifications)) {
    const info = await prometheus.query(`ncclscope_nccl_comm_info{comm="${a.labels.comm}",rank="${a.labels.rank}"}`);
    const m = info.result?.[0]?.metric ?? {};
    culprits.push({ ...a, comm_name: m.comm_name, global_rank: m.global_rank ?? m.process_rank, process_hostname: m.process_hostname });
  }
  for (const c of culprits.slice(0, 3)) {
    say(`culprit named: ${c.labels.alertname} -> node ${c.labels.node}, rank ${c.labels.rank} of ${c.comm_name ?? c.labels.comm} (global rank ${c.global_rank ?? "?"}), ${c.receiver}`);
  }
  console.log(JSON.stringify({ job: JOB, slow_rank: SLOW_RANK, culprit_node: CULPRIT_NODE, after_s: Math.round((Date.now() - started) / 1000), notifications: receiver.notifications, culprits }));
} catch (e) {
  exitCode = 1;
  console.error(`first-hour: ${e.stack ?? e.message}`);
}
await cleanup();
process.exit(exitCode);
