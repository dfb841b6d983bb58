// scripts/first-hour, the operator's first hour in one command, run as an operator runs it:
//  1. interactive: it prints where to look; the node pages, Prometheus' alerts page and
//     Alertmanager answer at the printed URLs; Ctrl-C (SIGINT) stops every process it started and
//     removes its working directory;
//  2. --headless --until-notified: the shipped rules and routing, unchanged, deliver a notification
//     to the local webhook that names the culprit, global rank 11 on gpu-node-1, and no other rank:
//     NcclscopeNcclSlowRank, P1, routed to the ticket receiver, with the job
//     and its runbook. Its `for:` and Alertmanager's 1-minute group_wait make this ~2 minutes.
// Usage: node first_hour.mjs <repo root> <build dir> <prometheus> <alertmanager>
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { checker } from "./lib/check.mjs";

const [root, buildDir, prometheusBin, alertmanagerBin] = process.argv.slice(2);
const script = join(root, "scripts/first-hour");
const env = { ...process.env, BUILD_DIR: buildDir, PROMETHEUS: prometheusBin, ALERTMANAGER: alertmanagerBin };
const started = Date.now();
const t = checker({ logPasses: true });
const { check } = t;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function run(args) {
  const proc = spawn(script, args, { env, stdio: ["ignore", "pipe", "pipe"] });
  const run = { proc, out: "", err: "" };
  proc.stdout.on("data", (d) => { run.out += d; });
  proc.stderr.on("data", (d) => { run.err += d; });
  run.exit = new Promise((res) => proc.on("close", (code, signal) => res({ code, signal })));
  return run;
}
const urls = (text, label) => [...(text.match(new RegExp(`${label}:\\s+(.+)`))?.[1] ?? "").matchAll(/http:\/\/\S+/g)].map((m) => m[0]);

// 1. Interactive, then Ctrl-C.
{
  const r = run([]);
  for (let i = 0; i < 600 && !r.out.includes("Notifications (webhook) log:"); i++) await sleep(100);
  const workDir = r.out.match(/working directory (\S+)/)?.[1];
  const pages = urls(r.out, "Node pages \\(no Grafana needed\\)");
  const alertsUrl = urls(r.out, "Prometheus alerts")[0];
  const amUrl = urls(r.out, "Alertmanager")[0];
  check(pages.length === 2 && alertsUrl && amUrl && workDir, "interactive: prints the node pages, Prometheus' alerts and Alertmanager",
    `stdout:\n${r.out}\nstderr:\n${r.err}`);
  for (const url of [...pages, alertsUrl, amUrl].filter(Boolean)) {
    let status;
    try { status = (await fetch(url)).status; } catch (e) { status = e.message; }
    check(status === 200, `interactive: ${url} answers`, `HTTP ${status}`);
  }
  r.proc.kill("SIGINT");
  const timer = setTimeout(() => r.proc.kill("SIGKILL"), 30000);
  const { code } = await r.exit;
  clearTimeout(timer);
  check(code === 130, "interactive: Ctrl-C ends it (exit 130)", `exit ${code}\n${r.err}`);
  check(workDir && !existsSync(workDir), "interactive: Ctrl-C removes its working directory", `${workDir} is still there`);
  let stillUp = [];
  for (const url of pages) {
    try { await fetch(url); stillUp.push(url); } catch { /* refused: stopped */ }
  }
  check(stillUp.length === 0, "interactive: Ctrl-C stops the agents", `still answering: ${stillUp}`);
}

// 2. Headless, until the notification.
{
  const t0 = Date.now();
  const r = run(["--headless", "--until-notified", "--timeout", "210"]);
  const timer = setTimeout(() => r.proc.kill("SIGKILL"), 240000);
  const { code } = await r.exit;
  clearTimeout(timer);
  const seconds = Math.round((Date.now() - t0) / 1000);
  console.log(r.out.split("\n").filter((l) => !l.startsWith("{")).join("\n"));
  check(code === 0, `headless: a notification naming a rank within the timeout (${seconds} s)`, `exit ${code}\n${r.err}`);
  let summary;
  try { summary = JSON.parse(r.out.trim().split("\n").pop()); } catch (e) { summary = null; }
  if (check(summary !== null, "headless: the last line is its JSON summary", r.out.slice(-500))) {
    const culprits = summary.culprits;
    const SLOW = ["NcclscopeNcclSlowRank"];
    check(culprits.length > 0, "headless: a firing alert with a rank reached a receiver", JSON.stringify(summary.notifications));
    const wrong = culprits.filter((c) => !(SLOW.includes(c.labels.alertname) && c.labels.node === summary.culprit_node
      && Number(c.global_rank) === summary.slow_rank));
    check(culprits.length > 0 && wrong.length === 0, `headless: every rank notified is the culprit, global rank ${summary.slow_rank} on ${summary.culprit_node}`,
      JSON.stringify(wrong.map((c) => [c.labels.alertname, c.labels.node, c.labels.comm, c.labels.rank, c.global_rank])));
    check(culprits.every((c) => c.receiver === "ncclscope-ticket" && c.labels.priority === "P1"), "headless: routed by priority, P1 to the ticket receiver",
      JSON.stringify(culprits.map((c) => [c.labels.alertname, c.labels.priority, c.receiver])));
    check(culprits.every((c) => c.labels.job_id === summary.job && /\/docs\/runbooks\.md#ncclscopencclslowrank/.test(c.runbook_url ?? "")),
      "headless: the notification names the job and links its runbook", JSON.stringify(culprits.map((c) => [c.labels.job_id, c.runbook_url])));
    const other = summary.notifications.flatMap((n) => n.alerts).filter((a) => a.status === "firing" && !SLOW.includes(a.labels.alertname));
    check(other.length === 0, "headless: no other alert was notified (no false alert from a healthy rank, node or agent)",
      JSON.stringify(other.map((a) => [a.labels.alertname, a.labels.node, a.labels.rank])));
    console.log(`first notification naming the culprit after ${Math.min(...culprits.map((c) => c.afterS))} s`);
  }
}
t.exit(`after ${Math.round((Date.now() - started) / 1000)} s: ${t.failures} failed`);
