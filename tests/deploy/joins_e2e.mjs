// docs/joins.md, run: every PromQL recipe there against a real Prometheus that scrapes
//  * the real agent, fed by ncclscope-sim (a 2-GPU job whose rank 1 is slow) through the real
//    plugin, a fake NVML (the same two GPUs, one NVLink with CRC errors) and a fake sysfs tree (two
//    mlx5 ports, the GPUs behind the same PCIe switches, the nvidia driver's devices), scraped the
//    way the rendered ServiceMonitor scrapes it (its honorLabels and relabelings, applied to the
//    target labels the Prometheus Operator gives a pod);
//  * dcgm-exporter for that node (4.8.2's label set, `Hostname`) and for another node (the label
//    set after 4.8.2, `hostname`), scraped as its chart does (honorLabels false: its pod labels
//    become exported_*);
//  * node_exporter for the node, its InfiniBand series computed from the same sysfs files as
//    node_exporter computes them (data counters x 4) and node_uname_info.
// The exporters' series are written as those exporters write them (metric names, label names and
// formats from their sources; checked against node_exporter's own test output where
// ../shared/fixtures has it). Each recipe must return what the doc says; the label traps are
// audited on what Prometheus stored: `node` on every agent series, none of the agent pod's target
// labels, no `hostname`, pci_bus_id in DCGM's form. Then deploy/prometheus/scrape-configs.yaml's
// jobs scrape the agent and give `node` too.
// Usage: node joins_e2e.mjs <repo root> <ncclscope-agent> <ncclscope-sim> <plugin .so>
//                           <fake libnvidia-ml.so.1> <prometheus> <kubectl>
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { dirname, join } from "node:path";
import { parse, parseAllDocuments, stringify } from "yaml";
import { freePort, sleep, startProcess, startPrometheus } from "./prometheus.mjs";
import { fakeNodeDirs, startFakeNodeAgent, sysfsWriter } from "./lib/fake_node.mjs";

const [root, agentBin, simBin, pluginPath, fakeNvml, prometheusBin, kubectl] = process.argv.slice(2);
const { tmp, sys, ringDir, nvmlState } = fakeNodeDirs("joins");
const NODE = "gpu-node-1";
const OTHER_NODE = "gpu-node-2";
const AGENT_POD = "ncclscope-agent-x7k2p";
const fixture = join(root, "../shared/fixtures/sysfs-infiniband/node_exporter/expected-metrics.prom");

// The simulated job's GPUs as ncclscope-sim's CUDA driver names them (tools/sim/sim_cuda.c):
// UUID GPU-51170000-5117-0000-0000-0000000000<node><device>, bus 0x51 + device.
const GPUS = [0, 1].map((i) => ({
  index: i, uuid: `GPU-51170000-5117-0000-0000-00000000000${i}`, linux: `0000:5${i + 1}:00.0`,
  nvml: `00000000:5${i + 1}:00.0`, name: "NVIDIA H100 80GB HBM3",
  smClock: i === 1 ? 1200 : 1980, temp: i === 1 ? 67 : 41, util: i === 1 ? 55 : 97, xid: i === 1 ? 74 : 0,
}));
const HCAS = [
  { name: "mlx5_0", pci: "0000:53:00.0", bridge: "pci0000:50/0000:50:01.0", gpu: 0 },
  { name: "mlx5_1", pci: "0000:54:00.0", bridge: "pci0000:50/0000:50:02.0", gpu: 1 },
];

// --- a sysfs tree with the shape of the real one (tests/support/sysfs_tree.h) -----------------
const write = sysfsWriter(sys);
const link = (target, rel) => { mkdirSync(dirname(join(sys, rel)), { recursive: true }); symlinkSync(target, join(sys, rel)); };
let xmitWords = 1e9;
function writeCounters() {
  xmitWords += 2.5e8; // 1 GB/s of data per 0.5 s tick (words of 4 bytes)
  for (const h of HCAS) {
    const dir = `devices/${h.bridge}/${h.pci}/infiniband/${h.name}/ports/1/counters`;
    // In place, as sysfs changes: the agent keeps its counter files open and re-reads them.
    writeFileSync(join(sys, `${dir}/port_xmit_data`), `${Math.round(xmitWords)}\n`);
  }
}
function buildSysfs() {
  for (const h of HCAS) {
    const fn = `devices/${h.bridge}/${h.pci}`;
    write(`${fn}/vendor`, "0x15b3");
    write(`${fn}/class`, "0x020700");
    write(`${fn}/numa_node`, "0");
    const dev = `${fn}/infiniband/${h.name}`;
    write(`${dev}/fw_ver`, "28.39.1002");
    write(`${dev}/board_id`, "MT_0000000838");
    write(`${dev}/hca_type`, "MT4129");
    write(`${dev}/node_guid`, `a088:c203:0012:345${h.gpu}`);
    link(`../../../${h.pci}`, `${dev}/device`);
    link(`../../${dev}`, `class/infiniband/${h.name}`);
    link(`../../../${fn}`, `bus/pci/devices/${h.pci}`);
    const port = `${dev}/ports/1`;
    write(`${port}/state`, "4: ACTIVE");
    write(`${port}/phys_state`, "5: LinkUp");
    write(`${port}/rate`, "400 Gb/sec (4X NDR)");
    write(`${port}/link_layer`, "InfiniBand");
    write(`${port}/lid`, "0x1a");
    for (const c of ["port_rcv_data", "port_xmit_packets", "port_rcv_packets", "symbol_error", "link_downed", "link_error_recovery", "port_rcv_errors"]) {
      write(`${port}/counters/${c}`, "0");
    }
    // The GPU behind the same switch (PIX).
    const g = GPUS[h.gpu];
    const gfn = `devices/${h.bridge}/${g.linux}`;
    write(`${gfn}/vendor`, "0x10de");
    write(`${gfn}/class`, "0x030200");
    write(`${gfn}/numa_node`, "0");
    link(`../../../${gfn}`, `bus/pci/devices/${g.linux}`);
    link(`../../../../${gfn}`, `bus/pci/drivers/nvidia/${g.linux}`);
  }
  writeCounters();
}

// --- the fake NVML: the same GPUs, 4 links each; link 2 of GPU 1 counts CRC flit errors ---------
let tick = 0;
function writeNvmlState() {
  tick++;
  const lines = GPUS.map((g) => `gpu ${g.index} ${g.uuid} ${g.nvml} ${g.name.replaceAll(" ", "_")} 4`);
  for (const g of GPUS) {
    for (const l of [0, 1, 2, 3]) for (const f of [138, 139, 140, 141]) lines.push(`field ${g.index} ${l} ${f} ${1000000 * tick}`);
    for (const f of [138, 139, 140, 141]) lines.push(`field ${g.index} all ${f} ${4000000 * tick}`);
  }
  lines.push(`error 1 2 2 ${3 * tick}`);
  writeFileSync(`${nvmlState}.tmp`, `${lines.join("\n")}\n`);
  renameSync(`${nvmlState}.tmp`, nvmlState);
}

// --- dcgm-exporter and node_exporter, as they write their series -------------------------------
// dcgm-exporter's GPU series (internal/pkg/rendermetrics/render_metrics.go): gpu, UUID,
// pci_bus_id, device, modelName, then Hostname (4.8.2) or hostname (later), its label fields
// (DCGM_FI_DRIVER_VERSION) and the pod attribution from kubelet's pod-resources API.
const DCGM_FIELDS = [
  ["DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", (g) => g.smClock],
  ["DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", (g) => g.temp],
  ["DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", (g) => g.util],
  ["DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", (g) => g.xid],
];
function dcgmText(node, hostnameLabel, gpus, pods) {
  const out = [];
  for (const [name, type, help, value] of DCGM_FIELDS) {
    out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    for (const g of gpus) {
      out.push(`${name}{gpu="${g.index}",UUID="${g.uuid}",pci_bus_id="${g.nvml}",device="nvidia${g.index}",modelName="${g.name}",${hostnameLabel}="${node}",DCGM_FI_DRIVER_VERSION="570.124.06",container="trainer",namespace="ml",pod="${pods[g.index]}"} ${value(g)}`);
    }
  }
  return `${out.join("\n")}\n`;
}
const otherGpus = [0, 1].map((i) => ({ index: i, uuid: `GPU-0b0e0000-aaaa-bbbb-cccc-00000000000${i}`, nvml: `00000000:1${i + 8}:00.0`, name: "NVIDIA H100 80GB HBM3", smClock: 1980, temp: 40, util: 0, xid: 0 }));
// node_exporter (collector/infiniband_linux.go, uname_linux.go): names, labels and help texts.
const NODE_FAMILIES = [
  ["node_infiniband_info", "gauge", "Non-numeric data from /sys/class/infiniband/<device>, value is always 1.",
    () => HCAS.map((h) => `{board_id="MT_0000000838",device="${h.name}",firmware_version="28.39.1002",hca_type="MT4129"} 1`)],
  ["node_infiniband_port_data_transmitted_bytes_total", "counter", "Number of data octets transmitted on all links",
    () => HCAS.map((h) => `{device="${h.name}",port="1"} ${4 * Number(readFileSync(join(sys, `class/infiniband/${h.name}/ports/1/counters/port_xmit_data`), "utf8"))}`)],
  ["node_infiniband_state_id", "gauge", "State of the InfiniBand port (0: no change, 1: down, 2: init, 3: armed, 4: active, 5: act defer)",
    () => HCAS.map((h) => `{device="${h.name}",port="1"} 4`)],
  ["node_uname_info", "gauge", "Labeled system information as provided by the uname system call.",
    () => [`{domainname="(none)",machine="x86_64",nodename="${NODE}",release="6.1.0-18-amd64",sysname="Linux",version="#1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01)"} 1`]],
];
const nodeExporterText = () => `${NODE_FAMILIES.flatMap(([name, type, help, samples]) =>
  [`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`, ...samples().map((s) => name + s)]).join("\n")}\n`;

async function startExporters() {
  const pods = { 0: "joins-job-worker-0", 1: "joins-job-worker-0" };
  const routes = {
    "/dcgm": () => dcgmText(NODE, "Hostname", GPUS, pods),
    "/dcgm-next": () => dcgmText(OTHER_NODE, "hostname", otherGpus, { 0: "idle-0", 1: "idle-0" }),
    "/node": nodeExporterText,
  };
  const server = createServer((req, res) => {
    const route = routes[new URL(req.url, "http://localhost").pathname];
    if (!route) { res.writeHead(404); return res.end(); }
    res.writeHead(200, { "Content-Type": "text/plain; version=0.0.4" });
    return res.end(route());
  });
  const port = await freePort();
  await new Promise((resolve) => server.listen(port, "127.0.0.1", resolve));
  return { address: `127.0.0.1:${port}`, close: () => new Promise((r) => server.close(r)) };
}

// --- the ServiceMonitor, as the Prometheus Operator turns it into a scrape job -----------------
const snake = { sourceLabels: "source_labels", targetLabel: "target_label", regex: "regex", replacement: "replacement", separator: "separator", action: "action", modulus: "modulus" };
function serviceMonitorJob(agentAddress) {
  const rendered = parseAllDocuments(execFileSync(kubectl, ["kustomize", join(root, "deploy/kubernetes")], { encoding: "utf8" })).map((d) => d.toJS());
  const sm = rendered.find((o) => o.kind === "ServiceMonitor");
  const ep = sm.spec.endpoints[0];
  return {
    job_name: "ncclscope-agent", honor_labels: ep.honorLabels === true, scrape_interval: "1s",
    // The target labels the operator's generated relabelings give an endpoint of a pod.
    static_configs: [{ targets: [agentAddress], labels: { __meta_kubernetes_pod_node_name: NODE, namespace: "ncclscope", pod: AGENT_POD, container: "agent", service: "ncclscope-agent", endpoint: ep.port } }],
    relabel_configs: ep.relabelings.map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [snake[k], k === "action" ? v.toLowerCase() : v]))),
  };
}

const results = [];
let failed = 0;
const record = (desc, seen) => { results.push([desc, seen]); if (seen !== null) failed++; };

// Expectations for every recipe of docs/joins.md: null when the result is what the doc promises.
const byRank = (r) => Object.fromEntries(r.map((s) => [s.metric.rank, Number(s.value[1])]));
function expectations(comm) {
  const g = (i) => GPUS[i];
  return {
    "dcgm-node": (r) => {
      const nodes = r.map((s) => s.metric.node).sort();
      return JSON.stringify(nodes) === JSON.stringify([NODE, NODE, OTHER_NODE, OTHER_NODE]) ? null : `nodes ${nodes}`;
    },
    "rank-gpu-by-uuid": (r) => {
      const v = byRank(r);
      return r.length === 2 && v["0"] === g(0).smClock && v["1"] === g(1).smClock && r.every((s) => s.metric.modelName === g(0).name && s.metric.node === NODE) ? null : JSON.stringify(r);
    },
    "slow-rank-gpu-clock": (r) => (r.length > 0 && r.every((s) => s.metric.rank === "1" && Number(s.value[1]) === g(1).smClock && s.metric.UUID === g(1).uuid) ? null : JSON.stringify(r)),
    "rank-gpu-by-node-and-index": (r) => { const v = byRank(r); return r.length === 2 && v["0"] === g(0).temp && v["1"] === g(1).temp ? null : JSON.stringify(r); },
    "rank-gpu-by-pci-bus-id": (r) => { const v = byRank(r); return r.length === 2 && v["0"] === g(0).util && v["1"] === g(1).util ? null : JSON.stringify(r); },
    "rank-pod-from-dcgm": (r) => (r.length === 2 && r.every((s) => s.metric.exported_pod === "joins-job-worker-0" && s.metric.exported_namespace === "ml" && s.metric.exported_container === "trainer") ? null : JSON.stringify(r)),
    "nvlink-finding-with-dcgm": (r) => (r.length === 1 && r[0].metric.gpu === "1" && r[0].metric.nvlink === "2" && r[0].metric.finding === "link_errors" && r[0].metric.pci_bus_id === g(1).nvml && Number(r[0].value[1]) === 74 ? null : JSON.stringify(r)),
    "gpu-inventory-agrees": (r) => (r.length === 1 && r[0].metric.node === NODE && Number(r[0].value[1]) === 2 ? null : JSON.stringify(r)),
    "node-exporter-node": (r) => (r.length === 2 && r.every((s) => s.metric.node === NODE) ? null : JSON.stringify(r)),
    "ib-port-both-exporters": async (r, prometheus) => {
      const rate = (await prometheus.query("sum by (device) (rate(ncclscope_infiniband_port_data_transmitted_bytes_total[5m]))")).result;
      const ok = r.length === 2 && rate.length === 2 && r.every((s) => Math.abs(Number(s.value[1])) <= 0.1 * Number(rate.find((x) => x.metric.device === s.metric.device).value[1]));
      return ok ? null : `difference ${JSON.stringify(r)} against rates ${JSON.stringify(rate)}`;
    },
    "port-to-gpus": (r) => {
      const ok = r.length === 2 && HCAS.every((h) => r.some((s) => s.metric.device === h.name && s.metric.UUID === g(h.gpu).uuid && Number(s.value[1]) === g(h.gpu).temp && s.metric.relation === "PIX"));
      return ok ? null : JSON.stringify(r);
    },
    comm,
  };
}

const procs = [];
let prometheus;
let exporters;
let nvmlTimer;
try {
  buildSysfs();
  writeNvmlState();
  nvmlTimer = setInterval(() => { writeNvmlState(); writeCounters(); }, 500);
  const { agent, port: agentPort } = await startFakeNodeAgent(agentBin, { tmp, ringDir, nvmlState, config: {
    rdma: { sysfs_root: sys, interval: "1s", verbs: false },
    nvlink: { library: fakeNvml, interval: "1s", expected_links: 4 },
    detection: { hang_timeout: "5s", match_timeout: "1s" },
  } });
  procs.push(agent);
  procs.push(startProcess(simBin, ["--plugin", pluginPath, "--duration", "60s", "--quiet", "--nodes", "1", "--gpus", "2",
    "--rate", "20", "--job-id", "joins-job", "--seed", "21", "--slow-rank", "1", "--slow-by", "3ms"],
  { env: { ...process.env, NCCLSCOPE_RING_DIR: ringDir } }));
  exporters = await startExporters();
  const exporterJob = (name, paths, labels) => ({ job_name: name, honor_labels: false, scrape_interval: "1s",
    static_configs: paths.map((p) => ({ targets: [exporters.address], labels: { __metrics_path__: p, ...labels } })) });
  prometheus = await startPrometheus(prometheusBin, {
    files: { "nccl.yaml": readFileSync(join(root, "deploy/prometheus/rules/ncclscope-nccl.yaml"), "utf8").replace(/interval: (30s|1m)/g, "interval: 1s") },
    config: stringify({
      global: { scrape_interval: "1s", evaluation_interval: "1s" },
      rule_files: ["nccl.yaml"],
      scrape_configs: [
        serviceMonitorJob(`127.0.0.1:${agentPort}`),
        exporterJob("nvidia-dcgm-exporter", ["/dcgm", "/dcgm-next"], { namespace: "gpu-operator", pod: "nvidia-dcgm-exporter-abcde", container: "nvidia-dcgm-exporter", service: "nvidia-dcgm-exporter", endpoint: "gpu-metrics" }),
        exporterJob("node-exporter", ["/node"], { namespace: "monitoring", pod: "kps-prometheus-node-exporter-9fj2w", container: "node-exporter", service: "kps-prometheus-node-exporter", endpoint: "http-metrics" }),
      ],
    }),
  });

  // A communicator of the job with both ranks, once Prometheus holds it.
  let comm;
  for (let i = 0; !comm; i++) {
    const r = (await prometheus.query('count by (comm) (ncclscope_nccl_comm_info{job_id="joins-job"}) == 2')).result ?? [];
    comm = r[0]?.metric.comm;
    if (i > 100) throw new Error("the simulated job never showed a two-rank communicator");
    if (!comm) await sleep(300);
  }
  const recipes = [...readFileSync(join(root, "docs/joins.md"), "utf8").matchAll(/<!-- recipe: (\S+) -->\s*```promql\n([\s\S]*?)```/g)]
    .map(([, name, expr]) => [name, expr.replaceAll("$comm", comm)]);
  const want = expectations(comm);
  record("docs/joins.md has recipes, each with an expectation here", recipes.length >= 10 && recipes.every(([n]) => typeof want[n] === "function") ? null
    : `recipes ${recipes.map(([n]) => n)}`);
  record("every expectation has its recipe in docs/joins.md", Object.keys(want).filter((k) => k !== "comm" && !recipes.some(([n]) => n === k)).join(", ") || null);
  const state = new Map(recipes.map(([n]) => [n, "not run"]));
  const deadline = Date.now() + 60000;
  for (;;) {
    for (const [name, expr] of recipes.filter(([n]) => state.get(n) !== null)) {
      const r = await prometheus.query(expr);
      state.set(name, r.ok ? await want[name](r.result, prometheus) : r.error);
    }
    if ([...state.values()].every((v) => v === null) || Date.now() > deadline) break;
    await sleep(1000);
  }
  for (const [name, seen] of state) record(`recipe ${name}`, seen);

  // The join traps, on what Prometheus stored.
  const empty = async (desc, expr) => {
    const r = await prometheus.query(expr);
    record(desc, r.ok && r.result.length === 0 ? null : JSON.stringify(r.result ?? r.error).slice(0, 600));
  };
  const some = async (desc, expr) => {
    const r = await prometheus.query(expr);
    record(desc, r.ok && r.result.length > 0 ? null : `no result for ${expr}`);
  };
  await some("the agent's series were scraped", 'count({job="ncclscope-agent"})');
  await empty("every agent series carries node", 'count by (__name__) ({job="ncclscope-agent", node!="gpu-node-1"})');
  await empty("no agent series carries the agent pod's own target labels", `count by (__name__) ({job="ncclscope-agent", pod="${AGENT_POD}"}) or count by (__name__) ({job="ncclscope-agent", service!=""}) or count by (__name__) ({job="ncclscope-agent", endpoint!=""}) or count by (__name__) ({job="ncclscope-agent", namespace="ncclscope"})`);
  await empty("no agent series has a hostname label (dcgm-exporter's node name)", 'count by (__name__) ({job="ncclscope-agent", hostname!=""})');
  await empty("pci_bus_id is in DCGM's form wherever the agent writes it", 'count by (__name__, pci_bus_id) ({job="ncclscope-agent", pci_bus_id!="", pci_bus_id!~"[0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\\\\.[0-7]"})');
  await some("dcgm-exporter's pod attribution arrives as exported_*", 'DCGM_FI_DEV_GPU_UTIL{exported_pod="joins-job-worker-0", pod="nvidia-dcgm-exporter-abcde"}');
  await empty("joining on instance across exporters matches nothing (the trap node avoids)", "ncclscope_nvlink_gpu_info * on (instance, UUID) group_left max by (instance, UUID) (DCGM_FI_DEV_GPU_UTIL)");

  // node_exporter's real output (the fixture) has the families and labels synthesized here.
  if (existsSync(fixture)) {
    const text = readFileSync(fixture, "utf8");
    for (const [name] of NODE_FAMILIES.filter(([n]) => n.startsWith("node_infiniband"))) {
      const line = text.split("\n").find((l) => l.startsWith(`${name}{`));
      const ours = nodeExporterText().split("\n").find((l) => l.startsWith(`${name}{`));
      const labels = (l) => [...(l ?? "").matchAll(/(\w+)="/g)].map((m) => m[1]).join(",");
      record(`${name} as node_exporter writes it`, line && labels(line) === labels(ours) && text.includes(`# HELP ${name} ${NODE_FAMILIES.find(([n]) => n === name)[2]}`) ? null : `fixture: ${line}; ours: ${ours}`);
    }
  } else {
    console.log(`(no ${fixture}: node_exporter's names not cross-checked against its own output)`);
  }

  // deploy/prometheus/scrape-configs.yaml: the annotation job (its kubernetes_sd_configs replaced
  // by the pod's discovery labels: Debian's Prometheus is built without Kubernetes discovery) and
  // the file job, against the same agent.
  const jobs = parse(readFileSync(join(root, "deploy/prometheus/scrape-configs.yaml"), "utf8"));
  const podJob = jobs.find((j) => j.kubernetes_sd_configs);
  delete podJob.kubernetes_sd_configs;
  podJob.static_configs = [{ targets: ["127.0.0.1"], labels: {
    __meta_kubernetes_pod_label_app_kubernetes_io_name: "ncclscope-agent", __meta_kubernetes_pod_annotation_prometheus_io_scrape: "true",
    __meta_kubernetes_pod_annotation_prometheus_io_path: "/metrics", __meta_kubernetes_pod_annotation_prometheus_io_port: String(agentPort),
    __meta_kubernetes_pod_node_name: NODE } }, { targets: ["127.0.0.2"], labels: {
    __meta_kubernetes_pod_label_app_kubernetes_io_name: "something-else", __meta_kubernetes_pod_annotation_prometheus_io_scrape: "true",
    __meta_kubernetes_pod_annotation_prometheus_io_port: String(agentPort) } }];
  const fileJob = jobs.find((j) => j.file_sd_configs);
  const sdFile = join(tmp, "sd", "nodes.yaml");
  mkdirSync(dirname(sdFile));
  writeFileSync(sdFile, stringify([{ targets: [`localhost:${agentPort}`] }]));
  fileJob.file_sd_configs = [{ files: [join(tmp, "sd", "*.yaml")] }];
  const second = await startPrometheus(prometheusBin, { config: stringify({ global: { scrape_interval: "1s" }, scrape_configs: [podJob, fileJob] }) });
  try {
    let seen;
    for (let i = 0; i < 40; i++) {
      seen = (await second.query("count by (job, node, instance) (ncclscope_build_info)")).result ?? [];
      if (seen.length >= 2) break;
      await sleep(300);
    }
    const got = seen.map((s) => `${s.metric.job}:${s.metric.node}`).sort().join(" ");
    record("scrape-configs.yaml: the annotation job keeps only the agent's pods and both jobs set node", got === `ncclscope-agent-nodes:localhost ncclscope-agent:${NODE}` ? null : got);
  } finally {
    await second.stop();
  }
} catch (e) {
  record("joins end to end", e.stack ?? e.message);
} finally {
  clearInterval(nvmlTimer);
  for (const [desc, seen] of results) {
    if (seen === null) console.log(`ok   ${desc}`);
    else console.error(`FAIL ${desc}: ${seen}`);
  }
  console.log(`${results.length - failed} passed, ${failed} failed`);
  for (const p of procs.reverse()) await p.stop();
  if (failed && prometheus) console.error(`prometheus log:\n${prometheus.log().slice(-2000)}`);
  if (prometheus) await prometheus.stop();
  if (exporters) await exporters.close();
  rmSync(tmp, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
