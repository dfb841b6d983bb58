// The node page (GET /) in a real headless Chromium, fed by the real agent: a simulated job with a
// straggler and a hostile job id (ncclscope-sim driving the real profiler plugin), a simulated job
// that hangs, a fake NVML with an erroring NVLink and a fake sysfs tree whose InfiniBand port
// counts link_downed. The page must lead with the culprits (the rank the hang waits for, then the
// straggler, with the agent's verdict as its badge and the time the others wait for it standing
// out), show the port's and the link's findings, keep the straggler's job listed as ended once it
// exits, show the hostile job id as text without it becoming an element or running anything, run
// under its Content-Security-Policy without a violation, and read only documented metrics. A real
// Prometheus scrapes the agent and evaluates alerts; the agent (node_page.prometheus_url) asks it
// for this node's, and the page must list them, badge the rank they name with the alert, and leave
// out another node's.
// Writes node-page.png into <output dir>, and checks in it that the straggler's row is painted
// in the warning colour.
// Usage: node node_page_e2e.mjs <repo root> <ncclscope-agent> <ncclscope-sim> <plugin .so>
//                               <fake libnvidia-ml.so.1> <output dir> <prometheus>
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { stringify } from "yaml";
import { freePort, sleep, startProcess, startPrometheus } from "./prometheus.mjs";
import { fakeNodeDirs, startFakeNodeAgent, sysfsWriter } from "./lib/fake_node.mjs";

const [root, agentBin, simBin, pluginPath, fakeNvml, outDir, prometheusBin] = process.argv.slice(2);
const NODE = "e2e-node";
const CHROMIUM = "/usr/bin/chromium";
const { tmp, sys, ringDir, nvmlState } = fakeNodeDirs("node-page");
// Markup, quotes and a backslash: it must survive the Prometheus text escaping and stay text.
const HOSTILE = "<img src=x onerror=alert(1)>\"\\";
const SLOW_RANK = "2";
const HUNG_RANK = "1";

// --- a sysfs tree with one HCA port (the shape of tests/support/sysfs_tree.h) -----------------
const port = "devices/pci0000:50/0000:50:01.0/0000:53:00.0/infiniband/mlx5_0/ports/1";
const write = sysfsWriter(sys);
function buildSysfs() {
  const fn = "devices/pci0000:50/0000:50:01.0/0000:53:00.0";
  write(`${fn}/vendor`, "0x15b3");
  write(`${fn}/class`, "0x020700");
  write(`${fn}/numa_node`, "0");
  const dev = `${fn}/infiniband/mlx5_0`;
  write(`${dev}/fw_ver`, "28.39.1002");
  write(`${dev}/board_id`, "MT_0000000838");
  write(`${dev}/hca_type`, "MT4129");
  write(`${dev}/node_guid`, "a088:c203:0012:3450");
  mkdirSync(join(sys, "class/infiniband"), { recursive: true });
  mkdirSync(join(sys, "bus/pci/devices"), { recursive: true });
  symlinkSync("../../../0000:53:00.0", join(sys, `${dev}/device`));
  symlinkSync(`../../${dev}`, join(sys, "class/infiniband/mlx5_0"));
  symlinkSync(`../../../${fn}`, join(sys, "bus/pci/devices/0000:53:00.0"));
  write(`${port}/state`, "4: ACTIVE");
  write(`${port}/phys_state`, "5: LinkUp");
  write(`${port}/rate`, "400 Gb/sec (4X NDR)");
  write(`${port}/link_layer`, "InfiniBand");
  write(`${port}/lid`, "0x1a");
  for (const c of ["port_xmit_data", "port_rcv_data", "symbol_error", "link_downed", "port_rcv_errors"]) {
    write(`${port}/counters/${c}`, "0");
  }
}

// --- the fake NVML: 2 GPUs x 4 links; link 2 of GPU 1 counts CRC flit errors ------------------
let tick = 0;
function writeNvmlState() {
  tick++;
  const lines = ["gpu 0 GPU-e2e00000 00000000:18:00.0 NVIDIA_H100 4", "gpu 1 GPU-e2e11111 00000000:2A:00.0 NVIDIA_H100 4"];
  for (const g of [0, 1]) {
    for (const l of [0, 1, 2, 3]) for (const field of [138, 139, 140, 141]) lines.push(`field ${g} ${l} ${field} ${1000000 * tick}`);
  }
  lines.push(`error 1 2 2 ${3 * tick}`); // DL_CRC_FLIT
  writeFileSync(`${nvmlState}.tmp`, `${lines.join("\n")}\n`);
  renameSync(`${nvmlState}.tmp`, nvmlState);
}

// What the page shows, read from its DOM.
function readPage() {
  const rows = (id) => [...document.querySelectorAll(`#${id} tbody tr`)].map((tr) => ({
    className: tr.className, cells: [...tr.children].map((td) => td.textContent),
  }));
  return {
    refreshes: Number(document.body.dataset.refreshes || 0),
    status: document.getElementById("status").textContent,
    ranks: rows("ranks"), ports: rows("ports"), nvlink: rows("nvlink"), sources: rows("sources"),
    alerts: rows("alerts"), alertsText: document.getElementById("alerts").textContent,
    runbooks: [...document.querySelectorAll("#alerts a")].map((a) => a.href),
    images: document.querySelectorAll("img").length,
    handlers: [...document.querySelectorAll("*")].filter((e) => [...e.attributes].some((a) => a.name.startsWith("on"))).length,
    alerted: window.__alerted === true,
  };
}

const procs = [];
let browser;
let failed = 0;
let nvmlTimer;
let prometheus;
const check = (desc, ok, seen) => {
  if (ok) console.log(`ok   ${desc}`);
  else { failed++; console.error(`FAIL ${desc}: ${typeof seen === "string" ? seen : JSON.stringify(seen)}`); }
};
try {
  if (!existsSync(CHROMIUM)) throw new Error(`no ${CHROMIUM}: scripts/install-deps installs Debian's chromium`);
  mkdirSync(outDir, { recursive: true });
  buildSysfs();
  writeNvmlState();
  nvmlTimer = setInterval(writeNvmlState, 500);
  // Prometheus first, scraping the agent's port-to-be every second and giving its series the node
  // label as deploy/prometheus/scrape-configs.yaml does. The rules are stand-ins for the shipped
  // verdict (one node cannot make the cross-node comparison it needs): an alert named as the
  // shipped one, with its labels, on the rank the agent finds, and one about another node.
  const agentPort = await freePort();
  prometheus = await startPrometheus(prometheusBin, {
    config: stringify({
      global: { scrape_interval: "1s", evaluation_interval: "1s" },
      rule_files: ["rules.yaml"],
      scrape_configs: [{ job_name: "ncclscope-agent", static_configs: [{ targets: [`127.0.0.1:${agentPort}`], labels: { node: NODE } }] }],
    }),
    files: { "rules.yaml": stringify({ groups: [{ name: "e2e", interval: "1s", rules: [
      { alert: "NcclscopeNcclSlowRank", expr: 'ncclscope_nccl_rank_finding{finding="straggler"} == 1', labels: { severity: "warning", priority: "P1" } },
      { alert: "NcclscopeNcclSlowRank", expr: "vector(1)", labels: { severity: "warning", node: "other-node", comm: "0xdead", rank: "0" } },
    ] }] }) },
  });
  const { agent } = await startFakeNodeAgent(agentBin, { tmp, ringDir, nvmlState, port: agentPort, config: {
    rdma: { sysfs_root: sys, interval: "1s", verbs: false },
    nvlink: { library: fakeNvml, interval: "1s", expected_links: 4 },
    detection: { hang_timeout: "1s", match_timeout: "1s" },
    node_page: { prometheus_url: prometheus.base, node: NODE, alerts_refresh: "5s" },
  } });
  procs.push(agent);
  const base = `http://127.0.0.1:${agentPort}`;
  const sim = (args, env = {}) => startProcess(simBin, ["--plugin", pluginPath, "--duration", "60s", "--quiet", ...args],
    { env: { ...process.env, NCCLSCOPE_RING_DIR: ringDir, ...env } });
  // The job id comes from the job's environment, as a real job sets it.
  // The straggler computes 10 ms longer before each of ~20 collectives a second: its peers wait
  // for it ~20 % of the time, four times detection.straggler_min_cost. It ends after 30 s.
  const slowJob = sim(["--nodes", "1", "--gpus", "4", "--rate", "20", "--workload", "AllReduce:world:8MiB",
    "--slow-rank", SLOW_RANK, "--slow-by", "10ms", "--duration", "30s", "--linger", "0s"],
  { NCCLSCOPE_JOB_ID: HOSTILE });
  procs.push(slowJob);
  procs.push(sim(["--nodes", "1", "--gpus", "4", "--rate", "20", "--job-id", "e2e-hang", "--seed", "7",
    "--workload", "AllReduce:world:8MiB", "--hang-rank", HUNG_RANK, "--hang-iteration", "20"]));
  // The port goes down and up once: link_downed grows (in place, as sysfs does; the agent keeps
  // the file open), a critical finding.
  setTimeout(() => writeFileSync(join(sys, `${port}/counters/link_downed`), "1\n"), 2500);

  // Every metric the page reads is one docs/metrics.md documents.
  const html = await (await fetch(`${base}/`)).text();
  const docs = readFileSync(join(root, "docs/metrics.md"), "utf8");
  const read = [...new Set(html.match(/"ncclscope_[a-z0-9_]+"/g).map((s) => s.slice(1, -1)))];
  const undocumented = read.filter((m) => !docs.includes(`\`${m.replace(/_(sum|count|bucket)$/, "")}\``));
  check("the page reads only documented metrics", read.length > 10 && undocumented.length === 0, undocumented);

  const userDataDir = mkdtempSync(join(tmp, "chromium-"));
  browser = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM, headless: true, chromiumSandbox: false, viewport: { width: 1400, height: 900 },
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  const page = browser.pages()[0] ?? await browser.newPage();
  const console_ = [];
  page.on("console", (m) => console_.push(`${m.type()}: ${m.text()}`));
  page.on("pageerror", (e) => console_.push(`pageerror: ${e.message}`));
  let dialogs = 0;
  page.on("dialog", (d) => { dialogs++; d.dismiss(); });
  await page.addInitScript(() => { window.alert = () => { window.__alerted = true; }; });
  const response = await page.goto(`${base}/`);
  check("GET / is HTML", response.headers()["content-type"] === "text/html; charset=utf-8", response.headers());

  // The page refreshes itself every 5 s; wait for its second refresh (rates over the interval)
  // that shows everything, at most 40 s.
  const ready = (s) => s.refreshes >= 2
    && s.ranks.some((r) => r.cells[0] === HOSTILE && r.cells[3].startsWith(`${SLOW_RANK}/`) && r.className === "slow"
      && /%$/.test(r.cells[5]) && r.cells.at(-1).includes("NcclscopeNcclSlowRank"))
    && s.ranks.some((r) => r.cells[0] === "e2e-hang" && r.className === "hung")
    && s.ports.some((r) => r.cells.at(-1).includes("link_downed"))
    && s.nvlink.some((r) => r.cells.at(-1).includes("link_errors"));
  let seen;
  for (const deadline = Date.now() + 40000; Date.now() < deadline;) {
    seen = await page.evaluate(readPage);
    if (ready(seen)) break;
    for (const p of procs) if (p !== slowJob && p.exited()) throw new Error(`a process exited early:\n${p.log()}`);
    await sleep(1000);
  }
  const png = await page.screenshot({ path: join(outDir, "node-page.png"), fullPage: true });
  const slowBox = await page.locator("#ranks tbody tr.slow").first().boundingBox();

  const slowRows = seen.ranks.filter((r) => r.cells[0] === HOSTILE);
  check("the slow job's ranks are listed under the hostile job id, as text", slowRows.length === 4, seen.ranks);
  const slowRow = slowRows.find((r) => r.cells[3].startsWith(`${SLOW_RANK}/`));
  check("the straggler is highlighted with the alert's badge and the agent's finding", slowRow
    && slowRow.className === "slow" && slowRow.cells.at(-1).includes("NcclscopeNcclSlowRank (warning)")
    && slowRow.cells.at(-1).includes("straggler on this node (warning)"), slowRow);
  const alertRows = seen.alerts.filter((r) => r.cells[0].startsWith("NcclscopeNcclSlowRank"));
  check("the alerts section lists this node's firing alert about the straggler, and not another node's",
    alertRows.length === 1 && alertRows[0].className === "warning" && alertRows[0].cells[1] === "firing"
    && alertRows[0].cells[2].includes(`rank ${SLOW_RANK}`) && !seen.alertsText.includes("0xdead")
    && seen.alertsText.includes(`node="${NODE}"`), seen.alerts);
  check("the alert links its runbook", seen.runbooks.includes(
    "https://github.com/ncclscope/ncclscope/blob/main/docs/runbooks.md#ncclscopencclslowrank"), seen.runbooks);
  check("no other rank of the slow job is highlighted",
    slowRows.filter((r) => r !== slowRow).every((r) => r.className === "" && r.cells.at(-1) === ""), slowRows);
  const share = (r, i) => Number(r.cells[i].replace("%", ""));
  const others = slowRows.filter((r) => r !== slowRow);
  check("the time the others wait for the straggler stands out, and it waits least",
    slowRow && share(slowRow, 5) >= 10 && others.every((r) => share(r, 5) < share(slowRow, 5) / 3)
    && others.every((r) => share(r, 6) > share(slowRow, 6)), slowRows);
  check("the straggler's time inside and bus bandwidth are shown",
    slowRow && /× median/.test(slowRow.cells[7]) && /B\/s$/.test(slowRow.cells[8]), slowRow);
  const firstOf = (job) => seen.ranks.findIndex((r) => r.cells[0] === job);
  const culprit = (r) => r.className !== "";
  check("culprits lead: the rank the hang waits for first, then the straggler, before any other row",
    seen.ranks[0]?.cells[0] === "e2e-hang" && seen.ranks[0].cells[3].startsWith(`${HUNG_RANK}/`)
    && seen.ranks[1] === slowRow && firstOf(HOSTILE) === 1
    && seen.ranks.slice(0, seen.ranks.findIndex((r) => !culprit(r))).every(culprit), seen.ranks.map((r) => r.cells[3] + " " + r.className));

  // The screenshot itself: the straggler's row is painted in the warning colour (#fff4ce), read
  // back from the PNG in a page of its own (the node page's policy loads no image).
  const pixelPage = await browser.newPage();
  const pixel = await pixelPage.evaluate(async ({ data, x, y }) => {
    const img = new Image();
    img.src = `data:image/png;base64,${data}`;
    await img.decode();
    const canvas = document.createElement("canvas");
    canvas.width = img.width;
    canvas.height = img.height;
    const ctx = canvas.getContext("2d");
    ctx.drawImage(img, 0, 0);
    return [...ctx.getImageData(x, y, 1, 1).data];
  }, { data: png.toString("base64"), x: Math.round(slowBox.x + 4), y: Math.round(slowBox.y + slowBox.height / 2) });
  await pixelPage.close();
  check("the screenshot shows the straggler's row in the warning colour",
    Math.abs(pixel[0] - 0xff) <= 3 && Math.abs(pixel[1] - 0xf4) <= 3 && Math.abs(pixel[2] - 0xce) <= 3, pixel);
  const hung = seen.ranks.filter((r) => r.cells[0] === "e2e-hang");
  check("the hung job's ranks are highlighted", hung.length === 4 && hung.every((r) => r.className === "hung"), hung);
  const behind = hung.find((r) => r.cells[3].startsWith(`${HUNG_RANK}/`));
  check("the rank the hang waits for is named as behind", behind && behind.cells.at(-1).includes("behind by"), behind);
  const portRow = seen.ports.find((r) => r.cells[0] === "mlx5_0");
  check("the port with errors shows its finding, highlighted", portRow && portRow.className === "critical"
    && portRow.cells.at(-1).includes("link_downed (critical)") && portRow.cells[4] === "ACTIVE", seen.ports);
  const gpu1 = seen.nvlink.find((r) => r.cells[0] === "1");
  check("the erroring NVLink shows its finding", gpu1 && gpu1.cells.at(-1).includes("link 2: link_errors"), seen.nvlink);
  const sources = Object.fromEntries(seen.sources.map((r) => [r.cells[0], r.cells[2]]));
  check("the sources' states are shown", sources.profiler === "up" && sources.rdma === "up"
    && sources.nvlink === "up" && sources.ebpf === "–", sources);
  check("the hostile job id created no element and ran nothing",
    seen.images === 0 && seen.handlers === 0 && !seen.alerted && dialogs === 0,
    { images: seen.images, handlers: seen.handlers, alerted: seen.alerted, dialogs });
  // The straggler's job exits: its ranks stay listed, marked ended, instead of vanishing.
  let endedRows = [];
  for (const deadline = Date.now() + 40000; Date.now() < deadline;) {
    const now = await page.evaluate(readPage);
    endedRows = now.ranks.filter((r) => r.cells[0] === HOSTILE);
    if (endedRows.length === 4 && endedRows.every((r) => r.className === "ended")) break;
    await sleep(1000);
  }
  check("the ended job's ranks stay listed, marked ended, without findings",
    endedRows.length === 4 && endedRows.every((r) => r.className === "ended" && /^ended /.test(r.cells.at(-1))), endedRows);
  const errors = console_.filter((m) => /error|Refused|violates/i.test(m));
  check("no script error and no policy violation", errors.length === 0, errors.slice(0, 5));
  if (failed) console.error(`page status: ${seen.status}\n${console_.slice(0, 20).join("\n")}`);
} catch (e) {
  failed++;
  console.error(`FAIL ${e.stack || e.message}`);
} finally {
  clearInterval(nvmlTimer);
  if (browser) await browser.close();
  for (const p of procs.reverse()) await p.stop();
  if (prometheus) await prometheus.stop();
  if (failed) console.error(`agent log:\n${procs.at(-1)?.log().slice(-3000)}`);
  rmSync(tmp, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
