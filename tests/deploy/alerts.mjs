// Alerting conventions of deploy/prometheus/rules, checked on every alert: the Ncclscope name
// prefix, a `priority` (P0/P1/P2) next to a `severity`, summary and description, and a runbook_url
// that points at a section of docs/runbooks.md; every section there says what the alert means, has
// at least three first checks and names dashboard panels that exist in deploy/grafana. Every
// alert name mentioned in the docs, the dashboards, the rules and their tests is a real alert (a
// rename leaves nothing stale), and every runbook section belongs to an alert.
// Usage: node alerts.mjs <repo root>
import { readFileSync, readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { parse } from "yaml";
import { checker } from "./lib/check.mjs";

const [root] = process.argv.slice(2);
const RUNBOOKS = "https://github.com/ncclscope/ncclscope/blob/main/docs/runbooks.md#";
const t = checker();
const { check } = t;

const rulesDir = join(root, "deploy/prometheus/rules");
const alerts = new Map();
for (const file of readdirSync(rulesDir).filter((f) => f.endsWith(".yaml")).sort()) {
  for (const group of parse(readFileSync(join(rulesDir, file), "utf8")).groups) {
    for (const rule of group.rules.filter((r) => r.alert)) {
      check(!alerts.has(rule.alert), rule.alert, `defined twice (${alerts.get(rule.alert)?.file} and ${file})`);
      alerts.set(rule.alert, { ...rule, file });
    }
  }
}
check(alerts.size > 0, "deploy/prometheus/rules", "no alerts");

// GitHub's heading anchors: lower case, spaces to dashes, punctuation dropped.
const slug = (heading) => heading.trim().toLowerCase().replace(/[^\w\- ]/g, "").replace(/ /g, "-");

// docs/runbooks.md: "### <Alert>" sections with **What it means.**, **First checks.** (a numbered
// list) and **Dashboard.** *<dashboard title>* › **<panel title>** (several separated by ";").
const runbooks = readFileSync(join(root, "docs/runbooks.md"), "utf8");
const sections = new Map();
for (const part of runbooks.split(/^### /m).slice(1)) {
  const [heading, ...body] = part.split("\n");
  sections.set(slug(heading), { name: heading.trim(), text: body.join("\n").split(/^## /m)[0] });
}

const dashboards = new Map();
for (const f of readdirSync(join(root, "deploy/grafana/dashboards")).filter((x) => x.endsWith(".json"))) {
  const d = JSON.parse(readFileSync(join(root, "deploy/grafana/dashboards", f), "utf8"));
  dashboards.set(d.title, new Set(d.panels.map((p) => p.title)));
}

for (const [name, rule] of alerts) {
  const where = `${rule.file}: ${name}`;
  check(/^Ncclscope[A-Z]/.test(name), where, "alert names start with Ncclscope");
  check(["P0", "P1", "P2"].includes(rule.labels?.priority), where, `priority ${rule.labels?.priority}, expected P0, P1 or P2`);
  check(["critical", "warning", "info"].includes(rule.labels?.severity), where, `severity ${rule.labels?.severity}`);
  check(rule.annotations?.summary && rule.annotations?.description, where, "needs summary and description");
  const url = rule.annotations?.runbook_url ?? "";
  if (!check(url === RUNBOOKS + slug(name), where, `runbook_url ${url}, expected ${RUNBOOKS + slug(name)}`)) continue;
  const section = sections.get(slug(name));
  if (!check(section !== undefined, where, "docs/runbooks.md has no section for it")) continue;
  const text = section.text;
  check(text.includes(`**${rule.labels.priority}**`) && text.includes(`severity \`${rule.labels.severity}\``), where,
    `runbook states another priority or severity than the rule (${rule.labels.priority}, ${rule.labels.severity})`);
  check(/\*\*What it means\.\*\*\s+\S/.test(text), where, "runbook lacks **What it means.**");
  const checksList = text.split("**First checks.**")[1]?.split("**Dashboard.**")[0] ?? "";
  check((checksList.match(/^\d+\. \S/gm) ?? []).length >= 3, where, "runbook needs at least three numbered first checks");
  // One paragraph, wrapped at docs/'s 100 columns: its lines joined.
  const dashboardLine = text.match(/^\*\*Dashboard\.\*\* (.+(?:\n(?!\n).+)*)/m)?.[1].replace(/\s*\n\s*/g, " ");
  if (!check(dashboardLine !== undefined, where, "runbook names no dashboard panel")) continue;
  for (const ref of dashboardLine.split(";")) {
    const m = ref.trim().match(/^\*(.+?)\* › \*\*(.+)\*\*$/);
    if (!check(m !== null, where, `dashboard reference "${ref.trim()}" is not *<dashboard>* › **<panel>**`)) continue;
    const panels = dashboards.get(m[1]);
    check(panels?.has(m[2]), where, `no panel "${m[2]}" in dashboard "${m[1]}"`);
  }
}
for (const [key, section] of sections) {
  check([...alerts.keys()].some((a) => slug(a) === key), "docs/runbooks.md", `section ${section.name} is for no alert`);
}

// Alert names mentioned anywhere people read them must exist: docs, READMEs, dashboards, rules,
// rule tests and the Alertmanager configuration.
const files = [];
const walk = (dir) => {
  for (const f of readdirSync(dir)) {
    const p = join(dir, f);
    if (["node_modules", ".git", "build"].includes(f)) continue;
    if (statSync(p).isDirectory()) walk(p);
    else if (/\.(md|json|ya?ml)$/.test(f)) files.push(p);
  }
};
for (const d of ["docs", "deploy", "tests/rules", "tests/deploy"]) walk(join(root, d));
files.push(join(root, "README.md"));
for (const f of files) {
  const text = readFileSync(f, "utf8");
  for (const [word] of text.matchAll(/\bNcclscope[A-Z][A-Za-z0-9]*\b/g)) {
    check(alerts.has(word), relative(root, f), `mentions ${word}, which is no alert`);
  }
}

t.exit(`${alerts.size} alerts, ${t.checks} checks passed, ${t.failures} failed`);
