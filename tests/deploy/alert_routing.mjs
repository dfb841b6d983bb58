// deploy/alertmanager, offline with Debian's amtool: alertmanager.yml passes `amtool check-config`,
// and `amtool config routes test` sends every alert of deploy/prometheus/rules (its name and static
// labels) to the receiver of its priority: P0 WeCom, P1 the ticket webhook, P2 the daily digest.
// The AlertmanagerConfig (rendered by kubectl kustomize) validates against the Prometheus
// Operator's schema and holds the same routing: its routes, receivers and inhibit rules, turned
// into Alertmanager's own form field by field, equal alertmanager.yml's, and that form passes
// amtool and routes every alert alike. The Slack, PagerDuty and e-mail examples
// (alertmanager-{slack,pagerduty,email}.yml) pass amtool, route every alert to their receiver of its
// priority, hold alertmanager.yml's routes and inhibit rules (the P0 receiver renamed) and deliver
// through their integration only. (Delivery itself: alerting_e2e.mjs.)
// Usage: node alert_routing.mjs <repo root> <amtool> <kubectl>
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { parse, parseAllDocuments, stringify } from "yaml";
import { checker } from "./lib/check.mjs";

const [root, amtool, kubectl] = process.argv.slice(2);
const amDir = join(root, "deploy/alertmanager");
const shippedFile = join(amDir, "alertmanager.yml");
const tmp = mkdtempSync(join(tmpdir(), "ncclscope-routing-"));
export const RECEIVER_OF = { P0: "ncclscope-wecom", P1: "ncclscope-ticket", P2: "ncclscope-digest" };
const t = checker();
const { check } = t;
const run = (file, args) => {
  try {
    return { ok: true, out: execFileSync(file, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }) };
  } catch (e) {
    return { ok: false, out: `${e.stdout ?? ""}${e.stderr ?? e.message}` };
  }
};

const alerts = [];
const rulesDir = join(root, "deploy/prometheus/rules");
for (const file of readdirSync(rulesDir).filter((f) => f.endsWith(".yaml")).sort()) {
  for (const group of parse(readFileSync(join(rulesDir, file), "utf8")).groups) {
    for (const rule of group.rules.filter((r) => r.alert)) alerts.push(rule);
  }
}

// Every alert, with its static labels (templated ones are filled at evaluation time), reaches the
// receiver of its priority.
function routeEveryAlert(configFile, name, receiverOf = RECEIVER_OF) {
  for (const rule of alerts) {
    const labels = Object.entries({ alertname: rule.alert, ...rule.labels })
      .filter(([, v]) => !String(v).includes("{{")).map(([k, v]) => `${k}=${v}`);
    const want = receiverOf[rule.labels.priority];
    const r = run(amtool, ["config", "routes", "test", `--config.file=${configFile}`, `--verify.receivers=${want}`, ...labels]);
    check(r.ok && r.out.trim() === want, `${name}: ${rule.alert} (${rule.labels.priority})`, `reaches ${r.out.trim()}, expected ${want}`);
  }
  // Something that is not ncclscope's is not paged through WeCom, and an ncclscope alert without
  // a priority (a rule bug) still opens a ticket.
  for (const [labels, want] of [[["alertname=KubePodCrashLooping", "priority=P0"], "ncclscope-ticket"],
    [["alertname=NcclscopeSomethingNew"], "ncclscope-ticket"]]) {
    const r = run(amtool, ["config", "routes", "test", `--config.file=${configFile}`, ...labels]);
    check(r.out.trim() === want, `${name}: ${labels.join(" ")}`, `reaches ${r.out.trim()}, expected ${want}`);
  }
}

const shipped = parse(readFileSync(shippedFile, "utf8"));
const checked = run(amtool, ["check-config", shippedFile]);
check(checked.ok && checked.out.includes("SUCCESS"), "amtool check-config alertmanager.yml", checked.out);
routeEveryAlert(shippedFile, "alertmanager.yml");
check(shipped.receivers.some((r) => r.wechat_configs?.length), "alertmanager.yml", "P0 is not delivered with Alertmanager's native wechat_configs");

// The examples for other on-call tools: the same routing, other receivers.
const EXAMPLES = { "alertmanager-slack.yml": "slack_configs", "alertmanager-pagerduty.yml": "pagerduty_configs", "alertmanager-email.yml": "email_configs" };
const EXAMPLE_RECEIVER_OF = { P0: "ncclscope-page", P1: "ncclscope-ticket", P2: "ncclscope-digest" };
for (const [file, integration] of Object.entries(EXAMPLES)) {
  const path = join(amDir, file);
  const cfg = parse(readFileSync(path, "utf8"));
  const r = run(amtool, ["check-config", path]);
  check(r.ok && r.out.includes("SUCCESS"), `amtool check-config ${file}`, r.out);
  routeEveryAlert(path, file, EXAMPLE_RECEIVER_OF);
  const renamed = JSON.parse(JSON.stringify(shipped.route).replaceAll('"ncclscope-wecom"', '"ncclscope-page"'));
  check(isDeepStrictEqual(cfg.route, renamed), `${file} route`, `differs from alertmanager.yml's (P0 receiver renamed):\n${stringify(cfg.route)}`);
  check(isDeepStrictEqual(cfg.inhibit_rules, shipped.inhibit_rules), `${file} inhibit_rules`, "differ from alertmanager.yml's");
  check(isDeepStrictEqual(cfg.receivers.map((x) => x.name).sort(), Object.values(EXAMPLE_RECEIVER_OF).sort()), `${file} receivers`,
    `are ${cfg.receivers.map((x) => x.name)}`);
  for (const rcv of cfg.receivers) {
    const kinds = Object.keys(rcv).filter((k) => k.endsWith("_configs"));
    check(isDeepStrictEqual(kinds, [integration]) && rcv[integration].length > 0, `${file} receiver ${rcv.name}`, `delivers through ${kinds}, expected ${integration}`);
    // A page or a ticket is closed when the alert resolves; a digest lists what is firing.
    const resolved = rcv.name !== "ncclscope-digest";
    check(rcv[integration].every((c) => c.send_resolved === resolved), `${file} receiver ${rcv.name}`, `send_resolved is not ${resolved}`);
  }
}

// The AlertmanagerConfig, rendered.
const rendered = parseAllDocuments(execFileSync(kubectl, ["kustomize", amDir], { encoding: "utf8" })).map((d) => d.toJS());
const cr = rendered.find((o) => o.kind === "AlertmanagerConfig");
const { AlertmanagerConfig } = await import("@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1alpha1");
try {
  new AlertmanagerConfig(cr).validate();
  t.pass();
} catch (e) {
  check(false, "alertmanagerconfig.yaml", e.message);
}

// The CR in Alertmanager's own form: camelCase fields to snake_case, matcher objects to matcher
// strings, a Secret reference to the placeholder the shipped file has.
const matcher = (m) => `${m.name}${m.matchType ?? "="}${JSON.stringify(m.value)}`;
function route(r) {
  const out = { receiver: r.receiver };
  if (r.matchers) out.matchers = r.matchers.map(matcher);
  if (r.groupBy) out.group_by = r.groupBy;
  for (const [from, to] of [["groupWait", "group_wait"], ["groupInterval", "group_interval"], ["repeatInterval", "repeat_interval"], ["continue", "continue"]]) {
    if (r[from] !== undefined) out[to] = r[from];
  }
  if (r.routes) out.routes = r.routes.map(route);
  return out;
}
function receiver(r) {
  const out = { name: r.name };
  if (r.wechatConfigs) {
    out.wechat_configs = r.wechatConfigs.map((w) => ({
      send_resolved: w.sendResolved, api_url: w.apiURL, corp_id: w.corpID,
      api_secret: shipped.global.wechat_api_secret, agent_id: w.agentID, to_party: w.toParty, message: w.message,
    }));
  }
  if (r.webhookConfigs) {
    out.webhook_configs = r.webhookConfigs.map((w) => {
      const o = { url: w.url, send_resolved: w.sendResolved };
      if (w.maxAlerts !== undefined) o.max_alerts = w.maxAlerts;
      return o;
    });
  }
  return out;
}
const fromCr = {
  route: { receiver: shipped.route.receiver, group_by: shipped.route.group_by, routes: [route(cr.spec.route)] },
  receivers: cr.spec.receivers.map(receiver),
  inhibit_rules: cr.spec.inhibitRules.map((i) => ({
    source_matchers: i.sourceMatch.map(matcher), target_matchers: i.targetMatch.map(matcher), equal: i.equal,
  })),
};
const crFile = join(tmp, "from-alertmanagerconfig.yml");
writeFileSync(crFile, stringify(fromCr));
const crChecked = run(amtool, ["check-config", crFile]);
check(crChecked.ok, "AlertmanagerConfig as Alertmanager configuration", crChecked.out);
routeEveryAlert(crFile, "AlertmanagerConfig");

// Field by field, after both are normalized: matcher strings re-parsed, the shipped receivers'
// globals (WeCom URL and corp id) made explicit.
const norm = (m) => {
  const [, name, op, value] = m.match(/^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"?(.*?)"?\s*$/);
  return `${name}${op}${value}`;
};
const normRoute = (r) => ({ ...r, matchers: r.matchers?.map(norm), routes: r.routes?.map(normRoute) });
const normInhibit = (i) => ({ ...i, source_matchers: i.source_matchers.map(norm), target_matchers: i.target_matchers.map(norm) });
const shippedReceivers = shipped.receivers.map((r) => ({
  ...r,
  wechat_configs: r.wechat_configs?.map((w) => ({ api_url: shipped.global.wechat_api_url, corp_id: shipped.global.wechat_api_corp_id, api_secret: shipped.global.wechat_api_secret, ...w })),
}));
const clean = (x) => JSON.parse(JSON.stringify(x));
check(isDeepStrictEqual(clean(normRoute(fromCr.route.routes[0])), clean(normRoute(shipped.route.routes[0]))), "AlertmanagerConfig route",
  `differs from alertmanager.yml's Ncclscope route:\n${stringify(fromCr.route.routes[0])}\nvs\n${stringify(shipped.route.routes[0])}`);
for (const r of shippedReceivers) {
  const other = fromCr.receivers.find((x) => x.name === r.name);
  check(isDeepStrictEqual(clean(other), clean(r)), `AlertmanagerConfig receiver ${r.name}`, `differs:\n${stringify(other)}\nvs\n${stringify(r)}`);
}
check(fromCr.receivers.length === shipped.receivers.length, "AlertmanagerConfig receivers", "another number of receivers");
check(isDeepStrictEqual(clean(fromCr.inhibit_rules.map(normInhibit)), clean(shipped.inhibit_rules.map(normInhibit))), "AlertmanagerConfig inhibitRules", "differ from alertmanager.yml's inhibit_rules");

rmSync(tmp, { recursive: true, force: true });
t.exit(`${alerts.length} alerts routed, ${t.checks} checks passed, ${t.failures} failed`);
