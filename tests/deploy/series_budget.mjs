// The series budget of one 8-GPU node at the agent's defaults (issue "Cost and scale"): the
// simulated node of simulated_node.mjs (the real agent at its defaults, ncclscope-sim playing node
// 0 of a 4-node job through the real plugin, 8 fake InfiniBand rails, a fake NVML of 8 GPUs x 18
// NVLinks), scraped as Prometheus does (Accept-Encoding: gzip). Fails when the node is over budget:
// more than --max-series series, or more than --max-gzip-bytes on the wire. Prints the series per
// source and family (docs/metrics.md's cost table comes from this output); --config-extra JSON
// is merged into the agent's config to price a switch.
// Usage: node series_budget.mjs --agent BIN --sim BIN --plugin SO --fabric BIN --nvml SO
//                               [--max-series 1500] [--max-gzip-bytes 100000] [--gpu blackwell]
//                               [--config-extra JSON] [--json FILE] [--dump FILE]
import { writeFileSync } from "node:fs";
import { GPUS, LINKS, startSimulatedNode } from "./simulated_node.mjs";
import { cliOptions } from "./cli_options.mjs";

const args = cliOptions(["agent", "sim", "plugin", "fabric", "nvml", "max-series", "max-gzip-bytes", "gpu", "config-extra", "json", "dump"],
  ["agent", "sim", "plugin", "fabric", "nvml"]);
// The budget: 1,500 series on this node at the defaults (docs/metrics.md, "Cost").
const MAX_SERIES = Number(args["max-series"] ?? 1500);
const MAX_GZIP = Number(args["max-gzip-bytes"] ?? 100000);
const BLACKWELL = args.gpu === "blackwell";

let failed = 0;
const check = (desc, ok, seen) => {
  if (ok) console.log(`ok   ${desc}`);
  else { failed++; console.error(`FAIL ${desc}: ${seen}`); }
};

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

let node;
try {
  node = await startSimulatedNode({ agent: args.agent, sim: args.sim, plugin: args.plugin, fabric: args.fabric,
    nvml: args.nvml, blackwell: BLACKWELL, extraConfig: args["config-extra"] ? JSON.parse(args["config-extra"]) : {},
    duration: "120s" });
  const page = await node.settle();
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
  await node?.stop();
}
process.exit(failed ? 1 : 0);
