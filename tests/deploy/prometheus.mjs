// A real Prometheus server on a free local port with an empty TSDB in a temporary directory, to ask
// whether it accepts a query (parse and type errors come back as HTTP 400, "bad_data").
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function startPrometheus(binary) {
  const dir = mkdtempSync(join(tmpdir(), "ncclscope-prometheus-"));
  const config = join(dir, "prometheus.yml");
  writeFileSync(config, "global:\n  evaluation_interval: 1m\n");
  const port = await freePort();
  const proc = spawn(binary, [`--config.file=${config}`, `--storage.tsdb.path=${join(dir, "data")}`,
    `--web.listen-address=127.0.0.1:${port}`], { stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  proc.stderr.on("data", (d) => { log += d; });
  let exited = false;
  const exit = new Promise((resolve) => proc.on("exit", () => { exited = true; resolve(); }));
  const base = `http://127.0.0.1:${port}`;
  // Stops the server and waits for it before deleting its TSDB.
  const stop = async () => {
    if (!exited) proc.kill("SIGTERM");
    await exit;
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 30000;
  for (;;) {
    if (exited) { await stop(); throw new Error(`prometheus exited at start-up:\n${log}`); }
    try {
      if ((await fetch(`${base}/-/ready`)).ok) break;
    } catch { /* not listening yet */ }
    if (Date.now() > deadline) { await stop(); throw new Error(`prometheus not ready after 30 s:\n${log}`); }
    await sleep(100);
  }
  return {
    // Instant query at a fixed time; returns { ok, error } from the HTTP API.
    async query(expr) {
      const res = await fetch(`${base}/api/v1/query`, {
        method: "POST", headers: { "Content-Type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ query: expr, time: "1700000000" }),
      });
      const body = await res.json();
      return body.status === "success" ? { ok: true } : { ok: false, error: `${body.errorType}: ${body.error}` };
    },
    stop,
  };
}
