// What PromQL in deploy/ may reference: the metric families docs/metrics.md documents (with their
// labels where the table has a Labels column), the other exporters' series docs/joins.md lists in
// its tables (dcgm-exporter's fields the dashboards read), the recording rules of
// deploy/prometheus/rules, and the series Prometheus itself adds to every scrape.
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";

// Labels every series of ours gets from the scrape: Prometheus' job/instance and the `node` the
// ServiceMonitor adds (deploy/kubernetes/base/servicemonitor.yaml).
export const TARGET_LABELS = ["instance", "job", "node"];

// Series Prometheus generates for each scrape (prometheus.io/docs, "Jobs and instances").
const SCRAPE_SERIES = ["up", "scrape_duration_seconds", "scrape_samples_scraped",
  "scrape_samples_post_metric_relabeling", "scrape_series_added"];

// Splits a Markdown table row into trimmed cells; a `|` inside `code` does not split.
function cells(line) {
  const out = [];
  let cur = "";
  let code = false;
  for (const ch of line.trim().replace(/^\||\|$/g, "")) {
    if (ch === "`") code = !code;
    if (ch === "|" && !code) { out.push(cur.trim()); cur = ""; } else cur += ch;
  }
  out.push(cur.trim());
  return out;
}

const ticked = (text) => [...text.matchAll(/`([A-Za-z_][A-Za-z0-9_]*)`/g)].map((m) => m[1]);

// Metric name -> { type, labels: Set | null (the table gives none) } from every "| Metric |" table.
export function documentedMetrics(markdown) {
  const metrics = new Map();
  const lines = markdown.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const header = cells(lines[i]);
    if (!lines[i].trim().startsWith("|") || header[0] !== "Metric") continue;
    const typeCol = header.indexOf("Type");
    const labelsCol = header.indexOf("Labels");
    let previous = new Set();
    for (i += 2; i < lines.length && lines[i].trim().startsWith("|"); i++) {
      const row = cells(lines[i]);
      const [name] = ticked(row[0]);
      if (!name) continue;
      let labels = null;
      if (labelsCol >= 0) {
        // "`comm`, `rank`, `direction` (`send`, `recv`)": values in parentheses are not labels;
        // "same" and "same + `state`" extend the row above.
        const text = row[labelsCol].replace(/\([^)]*\)/g, "");
        labels = new Set([...(text.startsWith("same") ? previous : []), ...ticked(text)]);
        previous = labels;
      }
      const type = typeCol >= 0 ? row[typeCol] : (name.endsWith("_total") ? "counter" : "gauge");
      metrics.set(name, { type, labels });
    }
  }
  return metrics;
}

// Recording rule name -> file, from every rules file in deploy/prometheus/rules.
export function recordingRules(root) {
  const dir = join(root, "deploy/prometheus/rules");
  const rules = new Map();
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".yaml")).sort()) {
    for (const group of parse(readFileSync(join(dir, file), "utf8")).groups ?? []) {
      for (const rule of group.rules ?? []) if (rule.record) rules.set(rule.record, file);
    }
  }
  return rules;
}

// Resolves the metric names PromQL may use: a documented family, a histogram's or summary's
// _bucket/_sum/_count series, a recording rule, or a scrape series. Returns
// { known, labels: Set | null } (labels null where nothing says which labels the series carries).
export function metricCatalog(root) {
  const documented = documentedMetrics(readFileSync(join(root, "docs/metrics.md"), "utf8"));
  const external = documentedMetrics(readFileSync(join(root, "docs/joins.md"), "utf8"));
  for (const [name, doc] of external) if (!documented.has(name)) documented.set(name, doc);
  const rules = recordingRules(root);
  return {
    documentedCount: documented.size,
    rulesCount: rules.size,
    lookup(name) {
      const doc = documented.get(name);
      if (doc) return { known: true, labels: doc.labels && new Set([...doc.labels, ...TARGET_LABELS]) };
      const base = name.replace(/_(bucket|sum|count)$/, "");
      const family = documented.get(base);
      if (base !== name && family && /histogram|summary/.test(family.type)) {
        const extra = name.endsWith("_bucket") ? ["le"] : [];
        return { known: true, labels: family.labels && new Set([...family.labels, ...TARGET_LABELS, ...extra]) };
      }
      if (rules.has(name)) return { known: true, labels: null };
      if (SCRAPE_SERIES.includes(name)) return { known: true, labels: new Set(TARGET_LABELS) };
      return { known: false, labels: null };
    },
  };
}
