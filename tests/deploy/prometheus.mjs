// A real Prometheus server on a free local port with a TSDB in a temporary directory: empty, to ask
// whether it accepts a query (parse and type errors come back as HTTP 400, "bad_data"), or
// scraping targets and evaluating rules for end-to-end tests.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Starts `binary` with `args`; stop() ends it (SIGTERM) and waits for it. `log()` is its stderr.
export function startProcess(binary, args, options = {}) {
  const proc = spawn(binary, args, { stdio: ["ignore", "ignore", "pipe"], ...options });
  let log = "";
  proc.stderr.on("data", (d) => { log += d; });
  let exited = false;
  const exit = new Promise((resolve) => proc.on("close", () => { exited = true; resolve(); }));
  proc.on("error", (e) => { log += `spawn failed: ${e.message}`; });
  return {
    exited: () => exited,
    log: () => log,
    async stop() {
      if (!exited) proc.kill("SIGTERM");
      await exit;
    },
  };
}

// config: prometheus.yml text; files: { name: text } written next to it (rule files). dir: the
// directory of a server stopped with stop({ keep: true }), to open its TSDB again (it is
// replayed before the server is ready: readyTimeoutMs). env: the server's environment (default
// ours), e.g. the Go runtime's GOGC and GOMEMLIMIT.
export async function startPrometheus(binary, { config = "global:\n  evaluation_interval: 1m\n", files = {}, dir: reuse, readyTimeoutMs = 30000, env } = {}) {
  const dir = reuse ?? mkdtempSync(join(tmpdir(), "ncclscope-prometheus-"));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  writeFileSync(join(dir, "prometheus.yml"), config);
  const port = await freePort();
  const server = startProcess(binary, [`--config.file=${join(dir, "prometheus.yml")}`,
    `--storage.tsdb.path=${join(dir, "data")}`, `--web.listen-address=127.0.0.1:${port}`], { cwd: dir, ...(env ? { env } : {}) });
  const base = `http://127.0.0.1:${port}`;
  // Stops the server and waits for it before deleting its TSDB (kept with { keep: true }).
  const stop = async ({ keep = false } = {}) => {
    await server.stop();
    if (!keep) rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + readyTimeoutMs;
  for (;;) {
    if (server.exited()) { await stop(); throw new Error(`prometheus exited at start-up:\n${server.log()}`); }
    try {
      if ((await fetch(`${base}/-/ready`)).ok) break;
    } catch { /* not listening yet */ }
    if (Date.now() > deadline) { await stop(); throw new Error(`prometheus not ready after ${readyTimeoutMs / 1000} s:\n${server.log()}`); }
    await sleep(100);
  }
  // POSTs a query to the HTTP API (`path`: query or query_range; undefined parameters left out);
  // returns { ok, error, result }.
  const post = async (path, params) => {
    const res = await fetch(`${base}/api/v1/${path}`, {
      method: "POST", headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams(Object.entries(params).filter(([, v]) => v !== undefined).map(([k, v]) => [k, String(v)])),
    });
    const body = await res.json();
    return body.status === "success" ? { ok: true, result: body.data.result }
      : { ok: false, error: `${body.errorType}: ${body.error}` };
  };
  return {
    dir,
    base,
    // Instant query (at `time`, default now; Prometheus gives up after `timeout`, e.g. "30s").
    query: (expr, time, timeout) => post("query", { query: expr, time, timeout }),
    // Range query from `start` to `end` (Unix seconds) every `step` seconds, as a Grafana time
    // series panel sends it.
    queryRange: (expr, start, end, step, timeout) => post("query_range", { query: expr, start, end, step, timeout }),
    // Series matching a selector between `start` and now (what Grafana's label_values() reads).
    async series(match, start) {
      const params = new URLSearchParams({ "match[]": match, start: String(start) });
      const body = await (await fetch(`${base}/api/v1/series?${params}`)).json();
      return body.status === "success" ? body.data : [];
    },
    log: server.log,
    stop,
  };
}

// A real Alertmanager (Debian's prometheus-alertmanager) on a free local port, without clustering,
// its data in a temporary directory. `alerts()` reads its API (every alert with its state and what
// inhibits it); `post(alerts)` sends alerts as Prometheus does.
export async function startAlertmanager(binary, config) {
  const dir = mkdtempSync(join(tmpdir(), "ncclscope-alertmanager-"));
  writeFileSync(join(dir, "alertmanager.yml"), config);
  const port = await freePort();
  const server = startProcess(binary, [`--config.file=${join(dir, "alertmanager.yml")}`,
    `--storage.path=${join(dir, "data")}`, `--web.listen-address=127.0.0.1:${port}`,
    "--cluster.listen-address=", "--log.level=debug"], { cwd: dir });
  const base = `http://127.0.0.1:${port}`;
  const stop = async () => {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 30000;
  for (;;) {
    if (server.exited()) { await stop(); throw new Error(`alertmanager exited at start-up:\n${server.log()}`); }
    try {
      if ((await fetch(`${base}/-/ready`)).ok) break;
    } catch { /* not listening yet */ }
    if (Date.now() > deadline) { await stop(); throw new Error(`alertmanager not ready after 30 s:\n${server.log()}`); }
    await sleep(100);
  }
  return {
    address: `127.0.0.1:${port}`,
    async alerts() {
      return (await fetch(`${base}/api/v2/alerts?active=true&silenced=true&inhibited=true&unprocessed=true`)).json();
    },
    async post(alerts) {
      const res = await fetch(`${base}/api/v2/alerts`, {
        method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(alerts),
      });
      if (!res.ok) throw new Error(`POST /api/v2/alerts: ${res.status} ${await res.text()}`);
    },
    log: server.log,
    stop,
  };
}
