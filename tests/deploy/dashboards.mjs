// Checks the Grafana dashboards in deploy/grafana/dashboards:
//  - structure: unique uids and panel ids, no overlapping panels, every panel has a description and
//    queries, the data source is the ${datasource} variable everywhere, every variable referenced
//    (queries, links) exists and every variable is used, links to other dashboards name a real uid
//    and real variables;
//  - metric names: every metric an expression reads is documented in docs/metrics.md, a recording
//    rule in deploy/prometheus/rules, or a series Prometheus adds to every scrape; label matchers,
//    `by` labels and label_values() labels exist on the metrics they apply to (where docs/metrics.md
//    lists them); rate windows of time series queries are $__rate_interval;
//  - PromQL: every expression, with its variables replaced by sample values, is accepted by a real
//    Prometheus server.
// Usage: node dashboards.mjs <repo root> <prometheus binary>
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { metricCatalog, TARGET_LABELS } from "./metrics_doc.mjs";
import { analyze } from "./promql.mjs";
import { startPrometheus } from "./prometheus.mjs";
import { panelsOf, VAR_REF } from "./grafana_variables.mjs";
import { checker } from "./lib/check.mjs";

const [root, prometheusBinary] = process.argv.slice(2);
const DATASOURCE = { type: "prometheus", uid: "${datasource}" };
// Grafana's global variables (grafana.com/docs, "Global variables") and the data-link ones.
const BUILTINS = new Set(["__rate_interval", "__interval", "__interval_ms", "__range", "__range_s", "__range_ms",
  "__from", "__to", "__dashboard", "__org", "__user", "__name", "__url_time_range", "__all_variables",
  "__timezone", "__data", "__field", "__series", "__value", "__cell", "timeFilter", "__timeFilter"]);
// Values that stand in for Grafana's interpolation when Prometheus checks an expression. The rate
// interval gets a duration no hard-coded window uses, so the window check can tell them apart.
const RATE_INTERVAL = "77s";
const BUILTIN_VALUES = { __rate_interval: RATE_INTERVAL, __interval: "1m", __range: "1h", __range_s: "3600", __range_ms: "3600000" };
const USER_VALUE = "sample-a|sample-b"; // what a multi-value variable interpolates to in a regex

const t = checker();
const { check, fail } = t;

const referencedVars = (s) => [...s.matchAll(VAR_REF)].map((m) => m[1] ?? m[2] ?? m[3]);
const substitute = (s) => s.replace(VAR_REF, (_, a, b, c) => BUILTIN_VALUES[a ?? b ?? c] ?? USER_VALUE);

// Every string under `node` with its path, to find links and variable references anywhere.
function* strings(node, path = "") {
  if (typeof node === "string") yield [path, node];
  else if (node && typeof node === "object") {
    for (const [k, v] of Object.entries(node)) yield* strings(v, `${path}.${k}`);
  }
}

// A variable query: label_values(selector, label) -> { promql: selector, label }; label_values(label),
// label_names() and metrics() read no series; query_result(q) -> { promql: q }.
function variablePromql(query) {
  const lv = query.match(/^\s*label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$/s);
  if (lv) return { promql: lv[1], label: lv[2] };
  const qr = query.match(/^\s*query_result\((.*)\)\s*$/s);
  if (qr) return { promql: qr[1] };
  return { promql: null };
}

// Static checks of one expression: metric names, labels, rate windows. `where` names it in errors.
function checkPromql(where, expr, { rangeQuery, valuesLabel }, catalog) {
  const a = analyze(substitute(expr));
  if (a.errors.length) return fail(where, `PromQL syntax error at ${a.errors[0]} in ${expr}`);
  check(a.selectors.length > 0, where, `reads no metric: ${expr}`);
  for (const s of a.selectors) {
    if (!s.metric) { fail(where, `selector without a metric name in ${expr}`); continue; }
    const { known, labels } = catalog.lookup(s.metric);
    check(known, where, `${s.metric} is neither documented in docs/metrics.md (ours) or docs/joins.md (dcgm-exporter's) nor a recording rule in deploy/prometheus/rules`);
    if (!labels) continue;
    for (const l of s.labels) check(labels.has(l), where, `${s.metric} has no label ${l} (docs/metrics.md: ${[...labels].join(", ")})`);
    if (valuesLabel) check(labels.has(valuesLabel), where, `label_values: ${s.metric} has no label ${valuesLabel}`);
  }
  for (const agg of a.aggregations) {
    if (!agg.by || agg.selectors.length === 0) continue;
    const sets = agg.selectors.map((s) => s.metric && catalog.lookup(s.metric).labels);
    if (sets.some((l) => !l)) continue; // a recording rule inside: its labels are not listed anywhere
    const available = new Set([...sets.flatMap((l) => [...l]), ...agg.addedLabels, ...TARGET_LABELS]);
    for (const l of agg.by) check(available.has(l), where, `${agg.op} by (${l}): no metric inside has label ${l} in ${expr}`);
  }
  if (rangeQuery) {
    for (const w of a.rateWindows) {
      check(w.window === RATE_INTERVAL, where, `${w.func}() over a fixed window [${w.window}] in a time series query; use [$__rate_interval]`);
    }
  }
}

function overlap(a, b) {
  return a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
}

const catalog = metricCatalog(root);
check(catalog.documentedCount > 50, "docs/metrics.md", `only ${catalog.documentedCount} metrics found in its tables`);
const dir = join(root, "deploy/grafana/dashboards");
const files = readdirSync(dir).filter((f) => f.endsWith(".json")).sort();
check(files.length >= 3, dir, `expected the job, fabric and node dashboards, found ${files.join(", ")}`);
const dashboards = files.map((f) => ({ file: f, d: JSON.parse(readFileSync(join(dir, f), "utf8")) }));
const byUid = new Map(dashboards.map(({ d }) => [d.uid, d]));
check(byUid.size === dashboards.length, dir, "dashboard uids are not unique");
check(new Set(dashboards.map(({ d }) => d.title)).size === dashboards.length, dir, "dashboard titles are not unique");

const queries = []; // { where, promql } for the Prometheus check
for (const { file, d } of dashboards) {
  check(typeof d.uid === "string" && /^[a-z0-9-]{1,40}$/.test(d.uid), file, `uid ${d.uid} is not a short stable slug`);
  check(d.id === null, file, "id must be null so imports do not overwrite another dashboard");
  check(d.schemaVersion >= 36, file, `schemaVersion ${d.schemaVersion} predates Grafana 9`);
  check(d.tags?.includes("ncclscope"), file, "the ncclscope tag links the dashboards to each other");
  check(typeof d.description === "string" && d.description.length > 40, file, "no dashboard description");

  const vars = d.templating?.list ?? [];
  const names = vars.map((v) => v.name);
  check(new Set(names).size === names.length, file, `duplicate variables: ${names}`);
  const ds = vars.find((v) => v.name === "datasource");
  check(ds?.type === "datasource" && ds.query === "prometheus", file, "needs a `datasource` variable of type datasource (prometheus)");
  const defined = new Set(names);
  const used = new Set();
  vars.forEach((v, i) => {
    const where = `${file} variable ${v.name}`;
    if (v.type !== "query") return;
    check(isDeepStrictEqual(v.datasource, DATASOURCE), where, `datasource is not \${datasource}: ${JSON.stringify(v.datasource)}`);
    const query = typeof v.query === "string" ? v.query : v.query?.query;
    check(typeof query === "string" && query.length > 0, where, "no query");
    if (!query) return;
    check(v.definition === undefined || v.definition === query, where, "definition differs from the query");
    for (const ref of referencedVars(query)) {
      used.add(ref);
      check(names.slice(0, i).includes(ref), where, `refers to $${ref}, which is not a variable defined before it`);
    }
    const { promql, label } = variablePromql(query);
    if (promql) {
      checkPromql(where, promql, { rangeQuery: false, valuesLabel: label }, catalog);
      queries.push({ where, promql });
    }
  });

  const panels = panelsOf(d);
  const ids = panels.map((p) => p.id);
  check(ids.every(Number.isInteger) && new Set(ids).size === ids.length, file, `panel ids are not unique integers: ${ids}`);
  const placed = d.panels.filter((p) => p.gridPos);
  for (const p of placed) {
    const g = p.gridPos;
    check(g.x >= 0 && g.w > 0 && g.x + g.w <= 24 && g.y >= 0 && g.h > 0, `${file} panel ${p.id}`, `gridPos ${JSON.stringify(g)} outside the 24-column grid`);
    for (const q of placed) if (q.id > p.id && overlap(g, q.gridPos)) fail(`${file} panel ${p.id}`, `overlaps panel ${q.id}`);
  }

  for (const p of panels) {
    const where = `${file} panel ${p.id} "${p.title}"`;
    check(typeof p.title === "string" && p.title.length > 0, where, "no title");
    if (p.type === "row") continue;
    check(typeof p.description === "string" && p.description.length >= 40, where, "needs a description that says how to read it");
    check(isDeepStrictEqual(p.datasource, DATASOURCE), where, `datasource is not \${datasource}: ${JSON.stringify(p.datasource)}`);
    const targets = p.targets ?? [];
    check(targets.length > 0, where, "has no queries");
    const refIds = targets.map((t) => t.refId);
    check(new Set(refIds).size === refIds.length, where, `duplicate refIds ${refIds}`);
    for (const t of targets) {
      const tw = `${where} query ${t.refId}`;
      check(isDeepStrictEqual(t.datasource, DATASOURCE), tw, "datasource is not ${datasource}");
      check(typeof t.expr === "string" && t.expr.trim().length > 0, tw, "no expr");
      if (!t.expr) continue;
      const rangeQuery = t.instant !== true && t.range !== false;
      checkPromql(tw, t.expr, { rangeQuery }, catalog);
      queries.push({ where: tw, promql: t.expr });
    }
  }

  // Variable references anywhere (queries, titles, links) and links to other dashboards.
  for (const [path, s] of strings({ panels: d.panels, templating: d.templating, links: d.links })) {
    for (const ref of referencedVars(s)) {
      used.add(ref);
      check(defined.has(ref) || BUILTINS.has(ref), `${file}${path}`, `refers to $${ref}, which is not a variable`);
    }
    const link = s.match(/^\/d\/([^/?]+)[^?]*(\?.*)?$/);
    if (path.endsWith(".url") && link) {
      const target = byUid.get(link[1]);
      check(Boolean(target), `${file}${path}`, `links to dashboard uid ${link[1]}, which is not in deploy/grafana/dashboards`);
      const targetVars = new Set((target?.templating?.list ?? []).map((v) => v.name));
      for (const [, v] of (link[2] ?? "").matchAll(/[?&]var-([A-Za-z0-9_]+)=/g)) {
        check(targetVars.has(v), `${file}${path}`, `sets var-${v}, which ${link[1]} does not have`);
      }
    }
  }
  for (const name of names) {
    if (name !== "datasource") check(used.has(name), `${file} variable ${name}`, "is never used");
  }
}

// Every expression through a real Prometheus.
const prometheus = await startPrometheus(prometheusBinary);
try {
  for (const { where, promql } of queries) {
    const r = await prometheus.query(substitute(promql));
    check(r.ok, where, `Prometheus rejects the query: ${r.error}\n  ${substitute(promql)}`);
  }
} finally {
  await prometheus.stop();
}

t.exit(`${dashboards.length} dashboards, ${queries.length} queries (${catalog.documentedCount} documented metrics, ` +
  `${catalog.rulesCount} recording rules): ${t.checks} passed, ${t.failures} failed`);
