// One simulated 8-GPU node as the cost measurements use it (tests/deploy/series_budget.mjs,
// bench/fleet/fleet_rules_bench.mjs): the real agent with its shipped defaults (only paths, the
// listen address and the fabric poll intervals changed; eBPF off, as the simulated job does not
// load libnccl), fed by ncclscope-sim playing node 0 of a 4-node job (8 ranks, the sim's default
// workload: 4 ops an iteration on the world, tp and dp communicators) through the real plugin, a
// fake sysfs of 8 InfiniBand rails (ncclscope-fake-fabric --ib 8) and a fake NVML of 8 GPUs x 18
// NVLinks (H100: throughput fields and the five error counters; --gpu blackwell: B200's NVLink5
// counter fields instead).
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { freePort, sleep, startProcess } from "./prometheus.mjs";
import { startAgent } from "./agent.mjs";

export const GPUS = 8;
export const LINKS = 18;
const NVLINK5_FIELDS = [201, 202, 203, 204, 206, 207, 208, 209, 210, 211, 212, 213, 214, 215, 219, 220, 221, 222];

// The fake NVML's state (tests/support/fake_nvml/fake_nvml.c): per-link fields and the GPU's sum
// over its links (scope "all", NVML's scopeId UINT_MAX); error counters default to 0.
function nvmlState(tick, blackwell) {
  const lines = [];
  for (let g = 0; g < GPUS; g++) {
    const bus = `00000000:${(0x18 + 0x11 * g).toString(16).toUpperCase().padStart(2, "0")}:00.0`;
    lines.push(`gpu ${g} GPU-budget${g}000-0000-0000-0000-00000000000${g} ${bus} NVIDIA_${blackwell ? "B200" : "H100_80GB_HBM3"} ${LINKS}${blackwell ? " blackwell" : ""}`);
    for (const f of [138, 139, 140, 141]) lines.push(`field ${g} all ${f} ${LINKS * 1000000 * tick}`);
    for (let l = 0; l < LINKS; l++) {
      for (const f of [138, 139, 140, 141]) lines.push(`field ${g} ${l} ${f} ${1000000 * tick}`);
      if (blackwell) for (const f of NVLINK5_FIELDS) lines.push(`field ${g} ${l} ${f} ${f === 202 || f === 204 ? 1000000 * tick : 0}`);
    }
  }
  return `${lines.join("\n")}\n`;
}

// GET /metrics with Accept-Encoding: gzip, as Prometheus scrapes: the bytes on the wire and the text.
export function scrape(port) {
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

// Series lines of an exposition (comments and blank lines left out).
export const seriesCount = (text) => text.split("\n").filter((l) => l !== "" && !l.startsWith("#")).length;

// a with b's keys laid over it, objects merged key by key.
const merge = (a, b) => Object.fromEntries([...new Set([...Object.keys(a), ...Object.keys(b)])].map((k) =>
  [k, a[k] && b[k] && typeof a[k] === "object" && typeof b[k] === "object" && !Array.isArray(b[k]) ? merge(a[k], b[k]) : b[k] ?? a[k]]));

// Starts the node; `extraConfig` is merged into the agent's config (section by section, key by key).
// Resolves once the agent serves /metrics and the job runs; stop() ends everything.
export async function startSimulatedNode({ agent, sim, plugin, fabric, nvml, blackwell = false, extraConfig = {}, duration = "600s" }) {
  const tmp = mkdtempSync(join(tmpdir(), "ncclscope-simulated-node-"));
  const procs = [];
  const fabricProc = spawn(fabric, ["--ib", "8", "--roce", "0"], { stdio: ["pipe", "pipe", "inherit"] });
  let nvmlTimer;
  const stop = async () => {
    clearInterval(nvmlTimer);
    for (const p of procs.reverse()) await p.stop();
    fabricProc.stdin.end();
    await new Promise((r) => { if (fabricProc.exitCode !== null) r(); fabricProc.on("exit", r); setTimeout(r, 3000); });
    rmSync(tmp, { recursive: true, force: true });
  };
  try {
    const sys = await new Promise((res, rej) => {
      let out = "";
      fabricProc.stdout.on("data", (d) => { out += d; const m = out.match(/^root (.*)$/m); if (m) res(m[1]); });
      fabricProc.on("exit", () => rej(new Error("ncclscope-fake-fabric exited")));
    });
    const statePath = join(tmp, "nvml.state");
    let tick = 0;
    const writeNvml = () => {
      writeFileSync(`${statePath}.tmp`, nvmlState(++tick, blackwell));
      renameSync(`${statePath}.tmp`, statePath);
    };
    writeNvml();
    nvmlTimer = setInterval(writeNvml, 1000);
    const ringDir = join(tmp, "rings");
    mkdirSync(ringDir);
    const port = await freePort();
    procs.push(await startAgent(agent, {
      port,
      configPath: join(tmp, "agent.yaml"),
      config: merge({
        plugin: { ring_dir: ringDir },
        ebpf: { enabled: false },
        rdma: { sysfs_root: sys, interval: "2s", verbs: false },
        nvlink: { library: nvml, interval: "2s" },
        detection: { state_dir: join(tmp, "state") },
      }, extraConfig),
      env: { ...process.env, FAKE_NVML_STATE: statePath },
    }));
    const job = startProcess(sim, ["--plugin", plugin, "--nodes", "4", "--gpus", String(GPUS), "--node", "0",
      "--rate", "20", "--duration", duration, "--quiet"], { env: { ...process.env, NCCLSCOPE_RING_DIR: ringDir } });
    procs.push(job);
    return {
      port,
      stop,
      scrape: async () => {
        if (job.exited()) throw new Error(`ncclscope-sim exited early:\n${job.log()}`);
        return scrape(port);
      },
      // Scrapes every 2 s until the series count has not changed for 3 scrapes (after 20 s at
      // least: every communicator, channel and port series exists once the 10 s duty cycle opened
      // the proxy window and the fabric was polled twice).
      settle: async () => {
        let last = 0;
        let stable = 0;
        let page;
        for (let i = 0; i < 60 && stable < 3; i++) {
          await sleep(2000);
          if (job.exited()) throw new Error(`ncclscope-sim exited early:\n${job.log()}`);
          page = await scrape(port);
          const n = seriesCount(page.text);
          stable = i >= 10 && n === last ? stable + 1 : 0;
          last = n;
        }
        return page;
      },
    };
  } catch (e) {
    await stop();
    throw e;
  }
}
