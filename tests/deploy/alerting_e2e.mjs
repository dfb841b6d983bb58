// End to end from a fault to the on-call phone: simulated jobs (ncclscope-sim driving the real
// profiler plugin) feed the real agent; a real Prometheus scrapes it and evaluates the shipped
// rules; a real Alertmanager (Debian's) routes with the shipped deploy/alertmanager/alertmanager.yml;
// a local HTTP server stands in for WeCom's API (gettoken, message/send, as Alertmanager's native
// wechat_configs calls them) and for the ticket and digest webhooks.
//   job e2e-slow  rank 2 slow on a 2-node job            -> NcclscopeNcclSlowRank, P1, ticket
//   job e2e-hang  rank 2 slow and rank 1 hanging         -> NcclscopeNcclCollectiveHung, P0, WeCom;
//                                                           its slow-rank alerts inhibited
//   job e2e-extra more communicators than plugin.max_comms -> NcclscopeNcclLabelsOverLimit, P2, digest
// Then alerts posted to Alertmanager as Prometheus posts them prove the other inhibitions: an agent
// or node down mutes that node's per-rank alerts, a port down its error-rate alerts.
// What the test changes, and only that: the rules' `for:` (divided by 30) and group intervals
// (1 s); in the Alertmanager configuration the receivers' URLs and the grouping timers (divided by
// 300), checked to be the only differences from the shipped file.
// Usage: node alerting_e2e.mjs <repo root> <ncclscope-agent> <ncclscope-sim> <plugin .so>
//                              <prometheus> <prometheus-alertmanager>
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { parse, stringify } from "yaml";
import { freePort, sleep, startAlertmanager, startProcess, startPrometheus } from "./prometheus.mjs";
import { startAgent } from "./agent.mjs";

const [root, agentBin, simBin, pluginPath, prometheusBin, alertmanagerBin] = process.argv.slice(2);
const tmp = mkdtempSync(join(tmpdir(), "ncclscope-alerting-e2e-"));
const ringDir = join(tmp, "rings");
const RULE_FOR_SCALE = 30;
const AM_TIME_SCALE = 300;
const NODE = "e2e-node";
const started = Date.now();
const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;

// --- durations --------------------------------------------------------------------------------
const UNIT = { ms: 1, s: 1000, m: 60000, h: 3600000, d: 86400000 };
const toMs = (d) => [...d.matchAll(/(\d+)(ms|s|m|h|d)/g)].reduce((t, [, n, u]) => t + Number(n) * UNIT[u], 0);
const scaled = (d, factor, floorMs) => `${Math.max(floorMs, Math.round(toMs(d) / factor))}ms`;

// --- the stand-ins for WeCom and the ticket and digest systems ---------------------------------
// WeCom's API as Alertmanager's wechat notifier uses it (notify/wechat/wechat.go): GET
// <api_url>gettoken?corpid&corpsecret -> access_token; POST <api_url>message/send?access_token
// with the message JSON -> errcode 0. A wrong token gets WeCom's 40014.
async function startReceivers() {
  const deliveries = [];
  const tokenRequests = [];
  const TOKEN = "e2e-access-token";
  const server = createServer(async (req, res) => {
    let body = "";
    for await (const chunk of req) body += chunk;
    const url = new URL(req.url, "http://localhost");
    const json = (obj) => { res.writeHead(200, { "Content-Type": "application/json" }); res.end(JSON.stringify(obj)); };
    if (req.method === "GET" && url.pathname === "/cgi-bin/gettoken") {
      tokenRequests.push(Object.fromEntries(url.searchParams));
      return json({ errcode: 0, errmsg: "ok", access_token: TOKEN, expires_in: 7200 });
    }
    if (req.method === "POST" && url.pathname === "/cgi-bin/message/send") {
      if (url.searchParams.get("access_token") !== TOKEN) return json({ errcode: 40014, errmsg: "invalid access_token" });
      const message = JSON.parse(body);
      const alerts = [...message.text.content.matchAll(/^(Ncclscope\w+): (.*)\nnode=(\S*) comm=(\S*) job=(\S*)\n(\S+)$/gm)]
        .map(([, alertname, summary, node, comm, job, runbook]) => ({ alertname, summary, node, comm, job_id: job, runbook }));
      deliveries.push({ receiver: "wecom", at: elapsed(), atMs: Date.now(), message, alerts });
      return json({ errcode: 0, errmsg: "ok", msgid: `msg-${deliveries.length}` });
    }
    if (req.method === "POST" && ["/ticket", "/digest"].includes(url.pathname)) {
      const payload = JSON.parse(body);
      deliveries.push({ receiver: url.pathname.slice(1), at: elapsed(), atMs: Date.now(), payload,
        alerts: payload.alerts.filter((a) => a.status === "firing").map((a) => ({ ...a.labels, summary: a.annotations.summary })) });
      res.writeHead(200);
      return res.end();
    }
    res.writeHead(404);
    res.end();
  });
  const port = await freePort();
  await new Promise((resolve) => server.listen(port, "127.0.0.1", resolve));
  return { base: `http://127.0.0.1:${port}`, deliveries, tokenRequests, close: () => new Promise((r) => server.close(r)) };
}

// --- the shipped configuration, pointed at the stand-ins, with its timers shortened -------------
function alertmanagerConfig(base) {
  const shipped = parse(readFileSync(join(root, "deploy/alertmanager/alertmanager.yml"), "utf8"));
  const test = structuredClone(shipped);
  test.global.wechat_api_url = `${base}/cgi-bin/`;
  const hooks = { "ncclscope-ticket": `${base}/ticket`, "ncclscope-digest": `${base}/digest` };
  for (const r of test.receivers) for (const w of r.webhook_configs ?? []) w.url = hooks[r.name];
  const TIMERS = ["group_wait", "group_interval", "repeat_interval"];
  const walk = (route) => {
    for (const t of TIMERS) if (route[t]) route[t] = scaled(route[t], AM_TIME_SCALE, 100);
    for (const child of route.routes ?? []) walk(child);
  };
  walk(test.route);
  // Nothing else differs: strip what was changed from both and compare.
  const strip = (c) => {
    const x = structuredClone(c);
    delete x.global.wechat_api_url;
    for (const r of x.receivers) for (const w of r.webhook_configs ?? []) delete w.url;
    const s = (route) => { for (const t of TIMERS) delete route[t]; (route.routes ?? []).forEach(s); };
    s(x.route);
    return x;
  };
  if (!isDeepStrictEqual(strip(test), strip(shipped))) throw new Error("the test's Alertmanager configuration differs from the shipped one beyond URLs and timers");
  return stringify(test);
}

function ruleFiles() {
  const dir = join(root, "deploy/prometheus/rules");
  const files = {};
  for (const f of readdirSync(dir).filter((x) => x.endsWith(".yaml"))) {
    const rules = parse(readFileSync(join(dir, f), "utf8"));
    for (const g of rules.groups) {
      g.interval = "1s";
      for (const r of g.rules) if (r.for) r.for = scaled(r.for, RULE_FOR_SCALE, 1000);
    }
    files[f] = stringify(rules);
  }
  return files;
}

// --- checks --------------------------------------------------------------------------------------
let failed = 0;
const results = [];
const record = (desc, seen) => {
  results.push([desc, seen]);
  if (seen !== null) failed++;
};
async function until(desc, fn, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  let seen;
  for (;;) {
    try { seen = await fn(); } catch (e) { seen = e.message; }
    if (seen === null || Date.now() > deadline) break;
    await sleep(500);
  }
  record(desc, seen);
  return seen === null;
}
const SLOW = new Set(["NcclscopeNcclSlowRank", "NcclscopeNcclSlowNetworkChannel", "NcclscopeNcclBusBandwidthDegraded"]);
const priorityOf = (rules) => {
  const map = new Map();
  for (const text of Object.values(rules)) {
    for (const g of parse(text).groups) for (const r of g.rules) if (r.alert) map.set(r.alert, r.labels.priority);
  }
  return map;
};

const procs = [];
let prometheus;
let alertmanager;
let receivers;
try {
  mkdirSync(ringDir);
  const agentPort = await freePort();
  // Alertmanager and Prometheus first, so that Prometheus sees every job from its start.
  receivers = await startReceivers();
  alertmanager = await startAlertmanager(alertmanagerBin, alertmanagerConfig(receivers.base));
  const rules = ruleFiles();
  const priorities = priorityOf(rules);
  prometheus = await startPrometheus(prometheusBin, {
    files: rules,
    config: stringify({
      global: { scrape_interval: "1s", evaluation_interval: "1s" },
      rule_files: Object.keys(rules),
      alerting: { alertmanagers: [{ static_configs: [{ targets: [alertmanager.address] }] }] },
      scrape_configs: [{ job_name: "ncclscope-agent",
        static_configs: [{ targets: [`127.0.0.1:${agentPort}`], labels: { node: NODE } }] }],
    }),
  });
  procs.push(await startAgent(agentBin, {
    port: agentPort,
    configPath: join(tmp, "agent.yaml"),
    config: {
      // 16 communicators: those of e2e-slow (10 on this node) and e2e-hang (6); e2e-extra's overflow.
      plugin: { ring_dir: ringDir, poll_interval: "50ms", kernel_duty_cycle: 1, proxy_duty_cycle: 1, max_comms: 16 },
      ebpf: { enabled: false },
      rdma: { enabled: false },
      nvlink: { enabled: false },
      detection: { hang_timeout: "1s", match_timeout: "1s" },
    },
  }));
  const sim = (args) => startProcess(simBin, ["--plugin", pluginPath, "--duration", "90s", "--quiet", "--rate", "20", ...args],
    { env: { ...process.env, NCCLSCOPE_RING_DIR: ringDir } });
  // Distinct seeds: the simulator derives its commHashes from them (NCCL's are random). e2e-hang's
  // rank 1 stops at iteration 200 (10 s in): Prometheus has seen its slow rank 2 by then, and its
  // slow-rank alert fires through the hang (its 1-minute rates hold the last increases: 10 ms
  // late, its compute excess over those 10 s is ~3 % of a minute, over the rule's 1 % floor).
  procs.push(sim(["--nodes", "2", "--gpus", "8", "--node", "0", "--job-id", "e2e-slow", "--seed", "11",
    "--slow-rank", "2", "--slow-by", "3ms"]));
  procs.push(sim(["--nodes", "1", "--gpus", "4", "--job-id", "e2e-hang", "--seed", "12",
    "--slow-rank", "2", "--slow-by", "10ms", "--hang-rank", "1", "--hang-iteration", "200"]));

  // The third job only once the first two hold every admitted communicator and Prometheus has
  // seen the overflow counter at 0 (its increase is what the alert reads).
  for (let i = 0; ; i++) {
    const comms = (await prometheus.query("ncclscope_nccl_comms")).result?.[0]?.value[1];
    const over = (await prometheus.query("ncclscope_nccl_comms_over_limit_total")).result?.[0]?.value[1];
    if (Number(comms) >= 16 && over === "0") break;
    if (i > 150) throw new Error(`the first two jobs never registered 16 communicators (${comms}, over limit ${over})`);
    await sleep(200);
  }
  procs.push(sim(["--nodes", "1", "--gpus", "2", "--job-id", "e2e-extra", "--seed", "13"]));

  const of = (receiver) => receivers.deliveries.filter((d) => d.receiver === receiver).flatMap((d) => d.alerts.map((a) => ({ ...a, at: d.atMs })));
  const commsOf = async (job) => new Set((await prometheus.query(`ncclscope_nccl_comm_info{job_id="${job}"}`)).result.map((x) => x.metric.comm));
  await until("P0: the hung communicator of e2e-hang pages through WeCom, naming its job and runbook", async () => {
    const hung = of("wecom").filter((a) => a.alertname === "NcclscopeNcclCollectiveHung");
    const ok = hung.some((a) => a.job_id === "e2e-hang" && a.comm && a.runbook.endsWith("#ncclscopencclcollectivehung"));
    return ok ? null : `WeCom got ${JSON.stringify(of("wecom"))}`;
  }, 45000);
  await until("P1: e2e-slow's slow rank 2 opens a ticket", async () => {
    const slowComms = await commsOf("e2e-slow");
    const slow = of("ticket").filter((a) => a.alertname === "NcclscopeNcclSlowRank" && a.rank === "2" && slowComms.has(a.comm));
    return slow.length && slow.every((a) => a.job_id === "e2e-slow" && a.node === NODE && a.priority === "P1") ? null
      : `tickets: ${JSON.stringify(of("ticket").map((a) => [a.alertname, a.job_id, a.comm, a.rank]))}`;
  }, 45000);
  await until("P2: communicators over plugin.max_comms reach the daily digest", async () => {
    return of("digest").some((a) => a.alertname === "NcclscopeNcclLabelsOverLimit") ? null : `digest: ${JSON.stringify(of("digest"))}`;
  }, 45000);

  // The hung communicators' slow-rank alerts: firing in Alertmanager, muted by the hang. (One that
  // fired before the hang was a slow rank then, and may have opened its ticket.)
  const hungSince = new Map();
  for (const a of of("wecom").filter((x) => x.alertname === "NcclscopeNcclCollectiveHung")) {
    if (!hungSince.has(a.comm)) hungSince.set(a.comm, a.at);
  }
  const hungComms = new Set(hungSince.keys());
  await until("the hang mutes slow-rank alerts of its communicators (firing, inhibited in Alertmanager)", async () => {
    const muted = (await alertmanager.alerts()).filter((a) => SLOW.has(a.labels.alertname) && hungComms.has(a.labels.comm));
    return muted.length && muted.every((a) => a.status.state === "suppressed" && a.status.inhibitedBy.length) ? null
      : `slow-rank alerts of hung communicators: ${JSON.stringify(muted.map((a) => [a.labels.alertname, a.labels.comm, a.status]))}`;
  }, 30000);
  const afterHang = of("ticket").filter((a) => SLOW.has(a.alertname) && hungComms.has(a.comm) && a.at > hungSince.get(a.comm));
  record("no slow-rank notification for a hung communicator reached the ticket system after its page",
    afterHang.length === 0 ? null : JSON.stringify(afterHang));
  for (const [receiver, priority] of [["wecom", "P0"], ["ticket", "P1"], ["digest", "P2"]]) {
    const wrong = of(receiver).filter((a) => priorities.get(a.alertname) !== priority);
    record(`${receiver} received only ${priority} alerts`, wrong.length ? JSON.stringify(wrong.map((a) => a.alertname)) : null);
  }
  record("WeCom's token was requested with the configured corp id and secret",
    receivers.tokenRequests.every((q) => q.corpid === "ww0000000000000000" && q.corpsecret) && receivers.tokenRequests.length ? null
      : JSON.stringify(receivers.tokenRequests));

  // The other inhibitions, with alerts as the rules label them, posted as Prometheus posts them.
  const now = new Date().toISOString();
  const alert = (labels, summary = "e2e") => ({
    labels: { priority: priorities.get(labels.alertname) ?? "", ...labels },
    annotations: { summary, runbook_url: `https://example/#${labels.alertname.toLowerCase()}` }, startsAt: now,
  });
  const perRank = (node) => alert({ alertname: "NcclscopeNcclSlowRank", severity: "warning", node, instance: `${node}:9824`, job: "ncclscope-agent", comm: `0xc0ffee${node}`, rank: "3" });
  const portAlert = (alertname, device) => alert({ alertname, severity: "warning", node: "n6", instance: "n6:9824", job: "ncclscope-agent", device, port: "1" });
  await alertmanager.post([
    alert({ alertname: "NcclscopeAgentDown", severity: "critical", node: "n9", instance: "n9:9824", job: "ncclscope-agent" }),
    alert({ alertname: "KubeNodeNotReady", severity: "warning", node: "n7", condition: "Ready", status: "true" }),
    perRank("n9"), perRank("n7"), perRank("n8"),
    alert({ ...portAlert("NcclscopeIBPortDown", "mlx5_0").labels, severity: "critical", finding: "link_down" }),
    portAlert("NcclscopeIBReceiveErrors", "mlx5_0"), portAlert("NcclscopeIBReceiveErrors", "mlx5_1"),
  ]);
  await until("an agent's or node's per-rank alerts are muted, another node's arrive; a port's error alerts muted, another port's arrive", async () => {
    const t = of("ticket");
    const got = (name, key, value) => t.some((a) => a.alertname === name && a[key] === value);
    const am = await alertmanager.alerts();
    const state = (name, key, value) => am.find((a) => a.labels.alertname === name && a.labels[key] === value)?.status;
    const ok = got("NcclscopeNcclSlowRank", "node", "n8") && got("NcclscopeIBReceiveErrors", "device", "mlx5_1")
      && of("wecom").some((a) => a.alertname === "NcclscopeIBPortDown")
      && ["n9", "n7"].every((n) => state("NcclscopeNcclSlowRank", "node", n)?.inhibitedBy.length)
      && state("NcclscopeIBReceiveErrors", "device", "mlx5_0")?.inhibitedBy.length;
    return ok ? null : `tickets ${JSON.stringify(t.map((a) => [a.alertname, a.node, a.device]))}; alertmanager ${JSON.stringify(am.map((a) => [a.labels.alertname, a.labels.node, a.labels.device, a.status.state]))}`;
  }, 20000);
  await sleep(1500); // a muted alert would have been flushed with its group by now
  const leaked = of("ticket").filter((a) => (a.alertname === "NcclscopeNcclSlowRank" && ["n9", "n7"].includes(a.node))
    || (a.alertname === "NcclscopeIBReceiveErrors" && a.device === "mlx5_0"));
  record("the muted alerts never reached a receiver", leaked.length ? JSON.stringify(leaked) : null);
} catch (e) {
  record("end to end", e.stack ?? e.message);
} finally {
  for (const [desc, seen] of results) {
    if (seen === null) console.log(`ok   ${desc}`);
    else console.error(`FAIL ${desc}: ${seen}`);
  }
  console.log(`after ${elapsed()}: ${results.length - failed} passed, ${failed} failed`);
  if (failed && receivers) console.error(`deliveries: ${JSON.stringify(receivers.deliveries.map((d) => [d.receiver, d.at, d.alerts.map((a) => a.alertname)]))}`);
  for (const p of procs.reverse()) await p.stop();
  if (failed && alertmanager) console.error(`alertmanager log:\n${alertmanager.log().slice(-3000)}`);
  if (failed && prometheus) {
    console.error(`prometheus log:\n${prometheus.log().slice(-2000)}`);
    const firing = await prometheus.query("ALERTS").catch(() => ({ result: [] }));
    console.error(`ALERTS: ${JSON.stringify(firing.result?.map((a) => [a.metric.alertname, a.metric.alertstate, a.metric.comm, a.metric.rank]))}`);
  }
  if (alertmanager) await alertmanager.stop();
  if (prometheus) await prometheus.stop();
  if (receivers) await receivers.close();
  rmSync(tmp, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
