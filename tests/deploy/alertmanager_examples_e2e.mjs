// The Slack, PagerDuty and e-mail examples of deploy/alertmanager delivered for real: a real
// Alertmanager (Debian's) runs each file with only its endpoints pointed at local stand-ins (Slack's
// incoming webhook, PagerDuty's Events API v2, an SMTP relay) and its grouping timers divided by
// 300; alerts posted as Prometheus posts them, one per priority, must reach the receiver of their
// priority with the templates rendered: the alert's name, node, rank, job and runbook in the
// message, the paging flavour of each tool (Slack's <!here> and the on-call channel, PagerDuty's
// severity and integration key, the paging address). `amtool check-config` does not execute the
// templates; Alertmanager does, here (alert_routing.mjs checks the routing offline).
// Usage: node alertmanager_examples_e2e.mjs <repo root> <prometheus-alertmanager>
import { readFileSync, readdirSync } from "node:fs";
import { createServer } from "node:http";
import { createServer as createTcpServer } from "node:net";
import { join } from "node:path";
import { parse, stringify } from "yaml";
import { freePort, sleep, startAlertmanager } from "./prometheus.mjs";
import { checker } from "./lib/check.mjs";

const [root, alertmanagerBin] = process.argv.slice(2);
const started = Date.now();
const t = checker({ logPasses: true });
const { check } = t;

// Alert names and priorities as the rules label them.
const priorityOf = new Map();
const rulesDir = join(root, "deploy/prometheus/rules");
for (const f of readdirSync(rulesDir).filter((x) => x.endsWith(".yaml"))) {
  for (const g of parse(readFileSync(join(rulesDir, f), "utf8")).groups) {
    for (const r of g.rules) if (r.alert) priorityOf.set(r.alert, r.labels.priority);
  }
}
const ALERTS = [
  { alertname: "NcclscopeNcclCollectiveHung", severity: "critical", node: "gpu-node-7", comm: "0xc0ffee01", job_id: "e2e-hang" },
  { alertname: "NcclscopeNcclSlowRank", severity: "warning", node: "gpu-node-3", comm: "0xc0ffee02", rank: "11", job_id: "e2e-slow" },
  { alertname: "NcclscopeNcclLabelsOverLimit", severity: "info", node: "gpu-node-5" },
].map((l) => ({ ...l, priority: priorityOf.get(l.alertname), instance: `${l.node}:9824`, job: "ncclscope-agent" }));
const RECEIVER_OF = { P0: "ncclscope-page", P1: "ncclscope-ticket", P2: "ncclscope-digest" };

// --- the stand-ins ----------------------------------------------------------------------------------
async function startHttp() {
  const got = [];
  const server = createServer(async (req, res) => {
    let body = "";
    for await (const chunk of req) body += chunk;
    got.push({ path: new URL(req.url, "http://x").pathname, body: JSON.parse(body || "{}") });
    res.writeHead(req.url.startsWith("/pagerduty") ? 202 : 200, { "Content-Type": "application/json" });
    res.end(req.url.startsWith("/pagerduty") ? JSON.stringify({ status: "success", dedup_key: "x" }) : "ok");
  });
  const port = await freePort();
  await new Promise((r) => server.listen(port, "127.0.0.1", r));
  return { base: `http://127.0.0.1:${port}`, got, close: () => new Promise((r) => server.close(r)) };
}
// An SMTP relay as RFC 5321 has it, as much as Alertmanager's client needs: no TLS, no AUTH
// offered (the example's credentials then go unused), every message kept.
async function startSmtp() {
  const mails = [];
  const server = createTcpServer((sock) => {
    let buf = "";
    let data = null;
    let mail = { to: [] };
    sock.write("220 localhost ESMTP stand-in\r\n");
    sock.on("data", (chunk) => {
      buf += chunk;
      for (let i; (i = buf.indexOf("\r\n")) >= 0;) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 2);
        if (data !== null) {
          if (line === ".") {
            mail.data = data.join("\n");
            mails.push(mail);
            mail = { to: [] };
            data = null;
            sock.write("250 queued\r\n");
          } else data.push(line.startsWith("..") ? line.slice(1) : line);
          continue;
        }
        const cmd = line.slice(0, 4).toUpperCase();
        if (cmd === "EHLO" || cmd === "HELO") sock.write("250 localhost\r\n");
        else if (cmd === "MAIL") { mail.from = line; sock.write("250 ok\r\n"); }
        else if (cmd === "RCPT") { mail.to.push(line.match(/<([^>]*)>/)?.[1]); sock.write("250 ok\r\n"); }
        else if (cmd === "DATA") { data = []; sock.write("354 go on\r\n"); }
        else if (cmd === "QUIT") { sock.end("221 bye\r\n"); }
        else sock.write("250 ok\r\n");
      }
    });
    sock.on("error", () => {});
  });
  const port = await freePort();
  await new Promise((r) => server.listen(port, "127.0.0.1", r));
  return { address: `127.0.0.1:${port}`, mails, close: () => new Promise((r) => server.close(r)) };
}

// --- each example, pointed at the stand-ins --------------------------------------------------------
const UNIT = { ms: 1, s: 1000, m: 60000, h: 3600000, d: 86400000 };
const toMs = (d) => [...d.matchAll(/(\d+)(ms|s|m|h|d)/g)].reduce((t, [, n, u]) => t + Number(n) * UNIT[u], 0);
function configure(file, http, smtp) {
  const c = parse(readFileSync(join(root, "deploy/alertmanager", file), "utf8"));
  const walk = (route) => {
    for (const t of ["group_wait", "group_interval", "repeat_interval"]) {
      if (route[t]) route[t] = `${Math.max(100, Math.round(toMs(route[t]) / 300))}ms`;
    }
    (route.routes ?? []).forEach(walk);
  };
  walk(c.route);
  for (const r of c.receivers) {
    for (const s of r.slack_configs ?? []) s.api_url = `${http.base}/slack/${r.name}`;
    for (const p of r.pagerduty_configs ?? []) p.url = `${http.base}/pagerduty/${r.name}`;
  }
  if (c.global.smtp_smarthost) {
    c.global.smtp_smarthost = smtp.address;
    c.global.smtp_require_tls = false;
  }
  return stringify(c);
}

const EXAMPLES = {
  "alertmanager-slack.yml": (http) => http.got.filter((g) => g.path.startsWith("/slack/")).map((g) => ({
    receiver: g.path.split("/")[2], text: `${g.body.attachments?.[0]?.title} ${g.body.attachments?.[0]?.text}`, raw: g.body,
  })),
  "alertmanager-pagerduty.yml": (http) => http.got.filter((g) => g.path.startsWith("/pagerduty/")).map((g) => ({
    receiver: g.path.split("/")[2], text: `${g.body.payload?.summary} ${JSON.stringify(g.body.payload?.custom_details)} ${JSON.stringify(g.body.links)}`, raw: g.body,
  })),
  // Alertmanager's default e-mail body (HTML and text parts, quoted-printable), decoded.
  "alertmanager-email.yml": (http, smtp) => smtp.mails.map((m) => ({
    receiver: m.to.join(","), raw: m,
    text: m.data.replace(/=\r?\n/g, "").replace(/=([0-9A-F]{2})/g, (_, h) => String.fromCharCode(parseInt(h, 16))),
  })),
};
// What each tool's receiver of a priority must look like.
const FLAVOUR = {
  "alertmanager-slack.yml": {
    P0: (n) => n.receiver === "ncclscope-page" && n.raw.channel === "#ncclscope-oncall" && n.text.includes("<!here>"),
    P1: (n) => n.receiver === "ncclscope-ticket" && n.raw.channel === "#ncclscope-triage" && !n.text.includes("<!here>"),
    P2: (n) => n.receiver === "ncclscope-digest" && n.raw.channel === "#ncclscope-digest",
  },
  "alertmanager-pagerduty.yml": {
    P0: (n) => n.receiver === "ncclscope-page" && n.raw.payload?.severity === "critical" && /HIGH-URGENCY/.test(n.raw.routing_key),
    P1: (n) => n.receiver === "ncclscope-ticket" && n.raw.payload?.severity === "warning" && /LOW-URGENCY/.test(n.raw.routing_key),
    P2: (n) => n.receiver === "ncclscope-digest" && n.raw.payload?.severity === "info" && /LOW-URGENCY/.test(n.raw.routing_key),
  },
  "alertmanager-email.yml": {
    P0: (n) => n.receiver === "ncclscope-oncall@example.com" && /^Subject: \[ncclscope P0 FIRING\]/m.test(n.text),
    P1: (n) => n.receiver === "ncclscope-tickets@example.com" && /^Subject: \[ncclscope P1\]/m.test(n.text),
    P2: (n) => n.receiver === "gpu-infra@example.com" && /^Subject: ncclscope daily digest/m.test(n.text),
  },
};

for (const [file, delivered] of Object.entries(EXAMPLES)) {
  const http = await startHttp();
  const smtp = await startSmtp();
  let am;
  try {
    am = await startAlertmanager(alertmanagerBin, configure(file, http, smtp));
    const now = new Date().toISOString();
    await am.post(ALERTS.map((labels) => ({
      labels, startsAt: now,
      annotations: { summary: `e2e ${labels.alertname} on ${labels.node}`, runbook_url: `https://runbooks.test.invalid/#${labels.alertname.toLowerCase()}` },
    })));
    // P2's digest waits 30 min / 300 = 6 s.
    let notes = [];
    for (let i = 0; i < 60 && new Set(notes.map((n) => n.receiver)).size < 3; i++) {
      await sleep(250);
      notes = delivered(http, smtp);
    }
    for (const a of ALERTS) {
      const mine = notes.filter((n) => n.text.includes(a.alertname));
      const flavour = FLAVOUR[file][a.priority];
      const ok = mine.length > 0 && mine.every(flavour) && mine.every((n) => n.text.includes(`#${a.alertname.toLowerCase()}`)
        && n.text.includes(a.node) && (!a.rank || new RegExp(`rank\\s*=\\s*${a.rank}\\b`).test(n.text)) && (!a.job_id || n.text.includes(a.job_id)));
      check(ok, `${file}: ${a.alertname} (${a.priority}) to ${RECEIVER_OF[a.priority]}, rendered with its node, rank, job and runbook`,
        `${JSON.stringify(mine.map((n) => [n.receiver, n.text.slice(0, 600)]))}\nall: ${JSON.stringify(notes.map((n) => n.receiver))}\n${am.log().slice(-1500)}`);
    }
    // A failed delivery: "Notify attempt failed" (warn), "Notify for alerts failed" (error).
    const errors = am.log().split("\n").filter((l) => /level=(warn|error)/.test(l) && /notify/i.test(l));
    check(errors.length === 0, `${file}: Alertmanager logged no failed notification`, errors.slice(0, 5).join("\n"));
  } catch (e) {
    check(false, file, e.stack);
  } finally {
    if (am) await am.stop();
    await http.close();
    await smtp.close();
  }
}
t.exit(`after ${((Date.now() - started) / 1000).toFixed(1)} s: ${t.failures} failed`);
