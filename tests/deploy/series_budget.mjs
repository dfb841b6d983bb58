// The series budget of one 8-GPU node at the agent's defaults (issue "Cost and scale"): the real
// agent with its shipped defaults (only paths and the listen address changed, eBPF off: the sim
// does not load libnccl), fed by ncclscope-sim playing node 0 of a 4-node job (8 ranks, the sim's
// default workload: 4 ops an iteration on the world, tp and dp communicators) through the real
// plugin, a fake sysfs of 8 InfiniBand rails (ncclscope-fake-fabric --ib 8) and a fake NVML of 8
// Hopper GPUs x 18 NVLinks (throughput fields and the five error counters, as H100 reports them).
// Scrapes /metrics as Prometheus does (Accept-Encoding: gzip) and fails when the node is over
// budget: more than --max-series series, or more than --max-gzip-bytes on the wire. Prints the
// series per family and per source (docs/metrics.md's cost table comes from this output).
// Usage: node series_budget.mjs --agent BIN --sim BIN --plugin SO --fabric BIN --nvml SO
//                               [--max-series 1500] [--max-gzip-bytes 100000] [--gpu blackwell]
//                               [--config-extra JSON] [--json FILE] [--dump FILE]
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { stringify } from "yaml";
import { freePort, sleep, startProcess } from "./prometheus.mjs";

const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => {
  if (a.startsWith("--")) acc.push([a.slice(2), all[i + 1]?.startsWith("--") || all[i + 1] === undefined ? "1" : all[i + 1]]);
  return acc;
}, []));
for (const need of ["agent", "sim", "plugin", "fabric", "nvml"]) {
  if (!args[need]) { console.error(`missing --${need}`); process.exit(2); }
}
// The budget is 1,500 series; the gate stands where the exposition is today (measured in
// docs/metrics.md, "Cost"), so that nothing grows unnoticed while the rest is cut.
const MAX_SERIES = Number(args["max-series"] ?? 2600);
const MAX_GZIP = Number(args["max-gzip-bytes"] ?? 100000);
const GPUS = 8;
const LINKS = 18;
const BLACKWELL = args.gpu === "blackwell";

const tmp = mkdtempSync(join(tmpdir(), "ncclscope-series-budget-"));
const procs = [];
let fabric;
let failed = 0;
const check = (desc, ok, seen) => {
  if (ok) console.log(`ok   ${desc}`);
  else { failed++; console.error(`FAIL ${desc}: ${seen}`); }
};

// The fake NVML's state (tests/support/fake_nvml/fake_nvml.c): H100s report the per-link
// throughput fields 138..141 and the five NvLinkErrorCounters (0 here: a healthy node); B200s
// (--gpu blackwell) the NVLink5 counter fields 201..222 instead of the error counters.
const NVLINK5_FIELDS = [201, 202, 203, 204, 206, 207, 208, 209, 210, 211, 212, 213, 214, 215, 219, 220, 221, 222];
let tick = 0;
function writeNvmlState(path) {
  tick++;
  const lines = [];
  for (let g = 0; g < GPUS; g++) {
    const bus = `00000000:${(0x18 + 0x11 * g).toString(16).toUpperCase().padStart(2, "0")}:00.0`;
    lines.push(`gpu ${g} GPU-budget${g}000-0000-0000-0000-00000000000${g} ${bus} NVIDIA_${BLACKWELL ? "B200" : "H100_80GB_HBM3"} ${LINKS}${BLACKWELL ? " blackwell" : ""}`);
    // Scope "all" is the GPU's sum over its links (scopeId UINT_MAX).
    for (const f of [138, 139, 140, 141]) lines.push(`field ${g} all ${f} ${LINKS * 1000000 * tick}`);
    for (let l = 0; l < LINKS; l++) {
      for (const f of [138, 139, 140, 141]) lines.push(`field ${g} ${l} ${f} ${1000000 * tick}`);
      if (BLACKWELL) for (const f of NVLINK5_FIELDS) lines.push(`field ${g} ${l} ${f} ${f === 202 || f === 204 ? 1000000 * tick : 0}`);
    }
  }
  writeFileSync(`${path}.tmp`, `${lines.join("\n")}\n`);
  renameSync(`${path}.tmp`, path);
}

// GET /metrics with Accept-Encoding: gzip, as Prometheus scrapes: the bytes on the wire and the text.
function scrape(port) {
  return new Promise((resolveScrape, reject) => {
    const req = request({ host: "127.0.0.1", port, path: "/metrics", headers: { "Accept-Encoding": "gzip" } }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => {
        const wire = Buffer.concat(chunks);
        const gzip = res.headers["content-encoding"] === "gzip";
        resolveScrape({ status: res.statusCode, gzip, wireBytes: wire.length, text: (gzip ? gunzipSync(wire) : wire).toString() });
      });
    });
    req.on("error", reject);
    req.end();
  });
}

// Series per family (histogram _bucket/_sum/_count folded into theirs) and per source.
function breakdown(text) {
  const types = new Map();
  const families = new Map();
  for (const line of text.split("\n")) {
    if (line.startsWith("# TYPE ")) { const [, , name, type] = line.split(" "); types.set(name, type); continue; }
    if (line === "" || line.startsWith("#")) continue;
    let name = line.slice(0, line.search(/[{ ]/));
    for (const suffix of ["_bucket", "_sum", "_count"]) {
      const base = name.slice(0, -suffix.length);
      if (name.endsWith(suffix) && types.get(base) === "histogram") { name = base; break; }
    }
    families.set(name, (families.get(name) ?? 0) + 1);
  }
  const source = (name) => {
    if (name.startsWith("ncclscope_nvlink_")) return "nvlink";
    if (/^ncclscope_(infiniband|rdma|roce|gpu_nic)_/.test(name)) return "rdma";
    if (name.startsWith("ncclscope_ebpf_")) return "ebpf";
    if (name.startsWith("ncclscope_nccl_")) return "plugin + analytics";
    return "agent";
  };
  const sources = new Map();
  for (const [name, n] of families) sources.set(source(name), (sources.get(source(name)) ?? 0) + n);
  return { families, sources };
}

try {
  // The fabric: 8 InfiniBand rails, each a one-port mlx5 HCA with moving counters.
  fabric = spawn(args.fabric, ["--ib", "8", "--roce", "0"], { stdio: ["pipe", "pipe", "inherit"] });
  const sys = await new Promise((res, rej) => {
    let out = "";
    fabric.stdout.on("data", (d) => { out += d; const m = out.match(/^root (.*)$/m); if (m) res(m[1]); });
    fabric.on("exit", () => rej(new Error("ncclscope-fake-fabric exited")));
  });
  const nvmlState = join(tmp, "nvml.state");
  writeNvmlState(nvmlState);
  const nvmlTimer = setInterval(() => writeNvmlState(nvmlState), 1000);
  const ringDir = join(tmp, "rings");
  mkdirSync(ringDir);
  const agentPort = await freePort();
  const config = join(tmp, "agent.yaml");
  const extra = args["config-extra"] ? JSON.parse(args["config-extra"]) : {};
  writeFileSync(config, stringify({
    server: { listen_address: `127.0.0.1:${agentPort}` },
    plugin: { ring_dir: ringDir },
    ebpf: { enabled: false },
    rdma: { sysfs_root: sys, interval: "2s", verbs: false },
    nvlink: { library: args.nvml, interval: "2s" },
    detection: { state_dir: join(tmp, "state") },
    ...extra,
  }));
  const agent = startProcess(args.agent, ["--config", config], { env: { ...process.env, FAKE_NVML_STATE: nvmlState } });
  procs.push(agent);
  for (let i = 0; ; i++) {
    try { if ((await scrape(agentPort)).status === 200) break; } catch { /* starting */ }
    if (agent.exited() || i > 200) throw new Error(`agent did not serve /metrics:\n${agent.log()}`);
    await sleep(100);
  }
  // Node 0 of a 4-node job: 8 ranks, 3 communicators, 4 ops an iteration with network traffic.
  const sim = startProcess(args.sim, ["--plugin", args.plugin, "--nodes", "4", "--gpus", String(GPUS), "--node", "0",
    "--rate", "20", "--duration", "60s", "--quiet"], { env: { ...process.env, NCCLSCOPE_RING_DIR: ringDir } });
  procs.push(sim);
  // Long enough for every communicator, channel and port series to exist (the sim starts its
  // ranks within a second; a 10 s duty cycle opens the proxy window once) and for two polls of
  // the fabric: the page no longer grows.
  let last = 0;
  let stable = 0;
  let page;
  for (let i = 0; i < 60 && stable < 3; i++) {
    await sleep(2000);
    if (sim.exited()) throw new Error(`ncclscope-sim exited early:\n${sim.log()}`);
    page = await scrape(agentPort);
    const n = [...breakdown(page.text).families.values()].reduce((a, b) => a + b, 0);
    stable = i >= 10 && n === last ? stable + 1 : 0;
    last = n;
  }
  clearInterval(nvmlTimer);
  const { families, sources } = breakdown(page.text);
  const series = [...families.values()].reduce((a, b) => a + b, 0);
  const comms = new Set([...page.text.matchAll(/^ncclscope_nccl_comm_info\{[^}]*comm="([^"]+)"/gm)].map((m) => m[1])).size;
  console.log(`node: ${GPUS} GPUs x ${LINKS} NVLinks (${BLACKWELL ? "B200" : "H100"}), 8 IB ports, ${comms} communicators`);
  console.log(`series ${series}, ${page.text.length} bytes uncompressed, ${page.wireBytes} bytes on the wire${page.gzip ? " (gzip)" : " (NOT gzip)"}`);
  console.log("series per source:");
  for (const [s, n] of [...sources].sort((a, b) => b[1] - a[1])) console.log(`  ${String(n).padStart(6)}  ${s}`);
  console.log("series per family (largest first):");
  for (const [f, n] of [...families].sort((a, b) => b[1] - a[1])) console.log(`  ${String(n).padStart(6)}  ${f}`);
  if (args.dump) writeFileSync(args.dump, page.text);
  if (args.json) writeFileSync(args.json, JSON.stringify({ series, bytes: page.text.length, wire_bytes: page.wireBytes, sources: Object.fromEntries(sources), families: Object.fromEntries(families) }, null, 1));
  const rankComms = (page.text.match(/^ncclscope_nccl_comm_info\{/gm) ?? []).length;
  check("the node's 8 ranks are on 3 communicators each (world, tp, and a dp one per GPU)", comms === 10 && rankComms === 24, `${comms} communicators, ${rankComms} ranks on them`);
  check("the page is gzip-compressed for a scraper that accepts it", page.gzip, "no Content-Encoding: gzip");
  check(`at most ${MAX_SERIES} series`, series <= MAX_SERIES, `${series}`);
  check(`at most ${MAX_GZIP} bytes on the wire`, page.wireBytes <= MAX_GZIP, `${page.wireBytes}`);
} catch (e) {
  failed++;
  console.error(`FAIL ${e.stack ?? e}`);
} finally {
  for (const p of procs.reverse()) await p.stop?.();
  if (fabric) { fabric.stdin.end(); await new Promise((r) => { fabric.on("exit", r); setTimeout(r, 3000); }); }
  rmSync(tmp, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
