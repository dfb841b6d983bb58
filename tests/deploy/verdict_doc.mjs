// The one definition of a slow rank, written once: the thresholds of the verdict
// (rank:ncclscope_nccl_straggler:verdict in deploy/prometheus/rules/ncclscope-nccl.yaml, the
// NcclscopeNcclSlowRank alert's `for:`, and the agent finding's defaults in config/ncclscope.yaml)
// are read from the rules and written into every doc that states them, between
//   <!-- BEGIN GENERATED VERDICT (scripts/update-docs) --> and <!-- END GENERATED VERDICT -->
// (docs/analytics.md, docs/runbooks.md, deploy/grafana/README.md). Checked here: those blocks are
// what the rules say now (`scripts/update-docs` rewrites them: node verdict_doc.mjs <root> --write),
// the rule still has the shape the thresholds are read from, and no doc, README or dashboard
// description states a slow-rank threshold elsewhere that the rules do not use (a paragraph that
// names the slow-rank alert or the verdict may compare with the verdict's own numbers only).
// Usage: node verdict_doc.mjs <repo root> [--write]
import { readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";
import { checker } from "./lib/check.mjs";

const [root, mode] = process.argv.slice(2);
const BEGIN = "<!-- BEGIN GENERATED VERDICT (scripts/update-docs) -->";
const END = "<!-- END GENERATED VERDICT -->";
const DOCS = ["docs/analytics.md", "docs/runbooks.md", "deploy/grafana/README.md"];
const t = checker();
const { check } = t;

// --- the thresholds, from the rules -----------------------------------------------------------
const rules = parse(readFileSync(join(root, "deploy/prometheus/rules/ncclscope-nccl.yaml"), "utf8")).groups.flatMap((g) => g.rules);
const verdict = rules.find((r) => r.record === "rank:ncclscope_nccl_straggler:verdict");
const alert = rules.find((r) => r.alert === "NcclscopeNcclSlowRank");
if (!verdict || !alert) {
  console.error("FAIL ncclscope-nccl.yaml: no rank:ncclscope_nccl_straggler:verdict or NcclscopeNcclSlowRank");
  process.exit(1);
}
const expr = verdict.expr.replace(/\s+/g, " ");
const gpuRate = rules.find((r) => r.record === "rank:ncclscope_nccl_gpu_compute_seconds:rate30s");
const age = Number(gpuRate?.expr.match(/ncclscope_nccl_comm_info offset (\d+)s/)?.[1]);
const all = (re) => [...expr.matchAll(re)].map((m) => m.slice(1).map(Number));
const excess = all(/rank:ncclscope_nccl_gpu_compute_excess:share30s > ([\d.]+) and on \(instance, comm, rank\) rank:ncclscope_nccl_gpu_compute_excess:robust_z > ([\d.]+)/g);
// The GPUs a pause leaves out of the cross-node clause: its fire clause after any pause, its hold
// clause after a first one.
const recent = (what) => all(new RegExp(`unless on \\(instance, comm, rank\\) rank:ncclscope_nccl_gpu_${what}:recent(\\d+)s`, "g"));
const pauseBlock = recent("pause");
const firstPauseBlock = recent("first_pause");
const pauseBlockS = pauseBlock[0]?.[0];
const ranks = all(/comm:ncclscope_nccl_compute_ranks_reporting:count >= (\d+)/g);
const share = all(/< on \(instance, comm, rank\) ([\d.]+) \* rate\(ncclscope_nccl_coll_last_arrival_delay_seconds_total\[1m\]\)/g);
const floor = all(/rank:ncclscope_nccl_compute_excess_local:rate1m < ([\d.]+)/g);
const pauseFire = all(/rank:ncclscope_nccl_gpu_pause_excess:rate5m > ([\d.]+) and on \(instance, comm, rank\) rank:ncclscope_nccl_gpu_pause_excess:rate5m offset (\d+)m > ([\d.]+)/g);
const pauseHold = all(/rank:ncclscope_nccl_gpu_pause_excess:rate5m > ([\d.]+) and on \(instance, comm, rank\) rank:ncclscope_nccl_straggler:verdict/g);
// What the agent counts as a pause (agent/analytics/detection/gpu_timeline.h, kPauseNs).
const pauseNs = Number(readFileSync(join(root, "agent/analytics/detection/gpu_timeline.h"), "utf8")
  .match(/kPauseNs = ([\d']+);/)?.[1].replaceAll("'", ""));
const shape = check(excess.length === 2 && pauseBlock.length === 1 && firstPauseBlock.length === 1
  && pauseBlockS > 0 && pauseBlockS === firstPauseBlock[0][0] && ranks.length === 1 && share.length === 2 && floor.length === 2
  && pauseFire.length === 1 && pauseHold.length === 1 && pauseNs > 0
  && expr.includes('ncclscope_nccl_comm_info{nnodes!="1"}') && expr.includes("and on (instance, comm, rank) rank:ncclscope_nccl_straggler:verdict")
  && expr.includes("unless on (instance, comm, rank) ncclscope_nccl_comm_end_timestamp_seconds") && age > 0,
"rank:ncclscope_nccl_straggler:verdict", "the thresholds are read from its fire and hold clauses (two each, and the pauses' two), the recent-pause exclusions of the first two, its 3-rank minimum, the nnodes filter, its self-reference, the end-of-job gate and the GPU compute's minimum age: update verdict_doc.mjs with the rule");
if (!shape) process.exit(1);
const config = readFileSync(join(root, "config/ncclscope.yaml"), "utf8");
const minCost = Number(config.match(/^\s*straggler_min_cost:\s*([\d.]+)/m)?.[1]);
const cusum = config.match(/^\s*straggler_threshold:\s*(\S+)/m)?.[1];
check(minCost > 0 && cusum, "config/ncclscope.yaml", "no detection.straggler_min_cost / straggler_threshold default");
const T = {
  fire: excess[0][0], fireZ: excess[0][1], hold: excess[1][0], holdZ: excess[1][1], ranks: ranks[0][0],
  localFire: floor[0][0], localHold: floor[1][0], shareFire: share[0][0], shareHold: share[1][0],
  for: alert.for, minCost, cusum,
  pauseFire: pauseFire[0][0], pauseBefore: pauseFire[0][1], pauseBeforeFire: pauseFire[0][2], pauseHold: pauseHold[0][0],
};
const pauseS = pauseNs / 1e9;
const pct = (x) => `${+(x * 100).toFixed(3)} %`;
const fraction = (x) => ({ 0.5: "a half", 0.25: "a quarter", 0.125: "an eighth" }[x] ?? `${x}`);

const block = `${BEGIN}
| The verdict (\`rank:ncclscope_nccl_straggler:verdict\`) | Fires when | Holds until (hysteresis) |
|---|---|---|
| **Across nodes** (communicators over 2 or more nodes, ${T.ranks} or more ranks, from ${age} s after they appear): the share of its GPU's time spent computing before the collectives over 30 s, pauses (gaps of ${pauseS} s or more) left out of the compute, over the communicator's median GPU's (\`rank:ncclscope_nccl_gpu_compute_excess:share30s\`); not for ${pauseBlockS} s after its GPU paused (the pause clause's) | over ${pct(T.fire)} of the time and ${T.fireZ} robust z, no pause in ${pauseBlockS} s | under ${pct(T.hold)} or ${T.holdZ} robust z, or a first pause in ${pauseBlockS} s |
| **Across nodes, pauses** (the same communicators): its GPU's pauses (gaps of ${pauseS} s or more: a stalling data loader, a host) over 5 minutes, over the communicator's median GPU (\`rank:ncclscope_nccl_gpu_pause_excess:rate5m\`) | over ${pct(T.pauseFire)} of the time, and over ${pct(T.pauseBeforeFire)} ${T.pauseBefore} min earlier | under ${pct(T.pauseHold)} |
| **On its node** (one clock): the agent's finding (\`ncclscope_nccl_rank_finding\`, CUSUM over the time the node's other ranks wait for it: allowance half of \`detection.straggler_min_cost\` = ${pct(T.minCost / 2)}, decision \`detection.straggler_threshold\` = ${T.cusum}) and its own compute over its local peers explaining the lead (a victim's does not) | finding on, local compute excess at least ${pct(T.localFire)} of the time and ${fraction(T.shareFire)} of its delay | finding off (under half the decision interval), or excess under ${pct(T.localHold)} or ${fraction(T.shareHold)} of its delay |
| **Either way** | only while the job runs (\`ncclscope_nccl_comm_info\` present, no \`ncclscope_nccl_comm_end_timestamp_seconds\`) | the job's end ends it in the next evaluation |

\`NcclscopeNcclSlowRank\` pages on the verdict after ${T.for.replace(/^(\d+)s$/, "$1 s")} (two evaluations at 5 s); its value
is the share of the time the rank's communicator waits for it.
${END}`;

// --- the generated blocks ------------------------------------------------------------------------
for (const doc of DOCS) {
  const path = join(root, doc);
  const text = readFileSync(path, "utf8");
  const b = text.indexOf(BEGIN);
  const e = text.indexOf(END);
  if (!check(b >= 0 && e > b, doc, `has no ${BEGIN} ... ${END} block`)) continue;
  const now = text.slice(0, b) + block + text.slice(e + END.length);
  if (mode === "--write") writeFileSync(path, now);
  else check(now === text, doc, "its verdict block is not what the rules say: run scripts/update-docs");
}
if (mode === "--write") {
  console.log(`updated the verdict's thresholds in ${DOCS.join(", ")}`);
  process.exit(0);
}

// --- no threshold stated elsewhere ----------------------------------------------------------------
// Numbers a paragraph about the slow-rank verdict may state: the verdict's own.
const allowedPct = new Set([T.fire, T.hold, T.pauseFire, T.pauseBeforeFire, T.pauseHold, T.localFire, T.localHold, T.minCost, T.minCost / 2].map((x) => +(x * 100).toFixed(3)));
const ABOUT = /NcclscopeNcclSlowRank|straggler:verdict|slow-rank alert/;
function scan(where, text) {
  const stripped = text.replace(new RegExp(`${BEGIN.replace(/[()]/g, "\\$&")}[\\s\\S]*?${END}`, "g"), "");
  for (const para of stripped.split(/\n\s*\n/)) {
    if (!ABOUT.test(para)) continue;
    // A threshold is a percentage after a comparison ("over 50 %", "at least 5 %"); a measured
    // value ("reads 30 % of the time") is not one.
    for (const m of para.matchAll(/\b(?:over|above|under|below|at least|at most|more than|less than|exceeds?|beyond)\s+(\d+(?:\.\d+)?)\s?%|[<>]=?\s*(\d+(?:\.\d+)?)\s?%/gi)) {
      check(allowedPct.has(Number(m[1] ?? m[2])), where, `states ${m[0]} beside the slow-rank verdict, a threshold the rules do not use (theirs: ${[...allowedPct].join(", ")} %): "${para.trim().slice(0, 160)}..."`);
    }
    for (const m of para.matchAll(/(?:lag|delay|late) (?:over|above|of) (\d+(?:\.\d+)?)\s?(ms|s)\b/g)) {
      check(false, where, `states "${m[0]}" beside the slow-rank verdict: the rules use no such threshold`);
    }
    for (const m of para.matchAll(/(\d+(?:\.\d+)?) robust z/g)) {
      check([T.fireZ, T.holdZ].includes(Number(m[1])), where, `states ${m[0]} beside the slow-rank verdict (the rules: ${T.fireZ} and ${T.holdZ})`);
    }
  }
}
const markdown = ["README.md", "deploy/grafana/README.md", ...readdirSync(join(root, "docs")).filter((f) => f.endsWith(".md") && f !== "benchmarks.md").map((f) => `docs/${f}`)];
for (const doc of markdown) scan(doc, readFileSync(join(root, doc), "utf8"));
for (const f of readdirSync(join(root, "deploy/grafana/dashboards")).filter((x) => x.endsWith(".json"))) {
  const walk = (o) => {
    if (Array.isArray(o)) o.forEach(walk);
    else if (o && typeof o === "object") {
      if (typeof o.description === "string") scan(`deploy/grafana/dashboards/${f} "${o.title ?? ""}"`, o.description);
      Object.values(o).forEach(walk);
    }
  };
  walk(JSON.parse(readFileSync(join(root, "deploy/grafana/dashboards", f), "utf8")));
}
for (const r of rules.filter((x) => x.alert)) scan(`alert ${r.alert}`, `${r.annotations?.summary ?? ""} ${r.annotations?.description ?? ""}`.replace(/\{\{[^}]*\}\}/g, ""));

t.exit(`${t.checks} checks, ${t.failures} failures`);
