// deploy/slurm/taskprolog.sh under a fake Slurm task environment, run by dash (/bin/sh) and bash
// as slurmstepd runs a TaskProlog: a clean environment of SLURM_* variables, its standard output
// read for "export NAME=value" lines. A GPU task gets NCCL_PROFILER_PLUGIN and NCCLSCOPE_RING_DIR;
// a task without GPUs, one that chose its own profiler or opted out, a node without the plugin or
// without a ring directory the job's user can write get nothing. Then the exported variables are
// used as a job would: ncclscope-sim loads the plugin from NCCL_PROFILER_PLUGIN's path and the
// plugin creates its ring in NCCLSCOPE_RING_DIR, where the agent reads.
// Usage: node slurm_taskprolog.mjs <repo root> <plugin .so> <ncclscope-sim>
import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { checker } from "./lib/check.mjs";

const [root, pluginSo, simBin] = process.argv.slice(2);
const script = join(root, "deploy/slurm/taskprolog.sh");
const tmp = mkdtempSync(join(tmpdir(), "ncclscope-taskprolog-"));
chmodSync(tmp, 0o755);
const plugin = join(tmp, "opt/ncclscope/lib/libnccl-profiler-ncclscope.so");
const ringDir = join(tmp, "run/ncclscope");
mkdirSync(join(tmp, "opt/ncclscope/lib"), { recursive: true });
copyFileSync(pluginSo, plugin);
chmodSync(plugin, 0o755);
mkdirSync(ringDir, { recursive: true });
chmodSync(ringDir, 0o1777);
for (const d of ["opt", "opt/ncclscope", "opt/ncclscope/lib", "run"]) chmodSync(join(tmp, d), 0o755);
const isRoot = process.getuid() === 0;
const t = checker();
const { check } = t;

// What slurmstepd takes from a TaskProlog's output: "export NAME=value" (value verbatim to the end
// of the line); other lines are not environment.
const exportsOf = (stdout) => Object.fromEntries(stdout.split("\n").filter((l) => l.startsWith("export "))
  .map((l) => { const kv = l.slice(7); const i = kv.indexOf("="); return [kv.slice(0, i), kv.slice(i + 1)]; }));

function runProlog(shell, env, asNobody = false) {
  const base = { PATH: "/usr/bin:/bin", SLURM_JOB_ID: "4242", SLURM_STEP_ID: "0", SLURM_PROCID: "0",
    SLURM_LOCALID: "0", SLURM_NODEID: "0", SLURMD_NODENAME: "gpu-node-1", SLURM_JOB_USER: "alice",
    NCCLSCOPE_TASKPROLOG_PLUGIN: plugin, NCCLSCOPE_TASKPROLOG_RING_DIR: ringDir };
  const argv = asNobody ? ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", shell, script] : [shell, script];
  const r = spawnSync(argv[0], argv.slice(1), { env: { ...base, ...env }, encoding: "utf8" });
  return { status: r.status, stdout: r.stdout ?? "", stderr: r.stderr ?? r.error?.message ?? "" };
}

const gpuTask = { SLURM_STEP_GPUS: "0,1", CUDA_VISIBLE_DEVICES: "0,1", SLURM_GPUS_ON_NODE: "2" };
const both = { NCCL_PROFILER_PLUGIN: plugin, NCCLSCOPE_RING_DIR: ringDir };
const cases = [
  ["a GPU step gets the plugin and the ring directory", gpuTask, both],
  ["a batch step's GPUs (SLURM_JOB_GPUS) count too", { SLURM_JOB_GPUS: "3" }, both],
  ["a task without GPUs gets nothing", {}, {}],
  ["a step given none of the job's GPUs (NoDevFiles) gets nothing", { CUDA_VISIBLE_DEVICES: "NoDevFiles" }, {}],
  ["a job with its own profiler plugin keeps it", { ...gpuTask, NCCL_PROFILER_PLUGIN: "/opt/nccl/libnccl-profiler-inspector.so" }, {}],
  ["a job can opt out", { ...gpuTask, NCCLSCOPE_TASKPROLOG: "off" }, {}],
  ["a node without the plugin adds nothing", { ...gpuTask, NCCLSCOPE_TASKPROLOG_PLUGIN: join(tmp, "missing.so") }, {}],
  ["a node without the ring directory adds nothing", { ...gpuTask, NCCLSCOPE_TASKPROLOG_RING_DIR: join(tmp, "run/none") }, {}],
  ["a ring directory the job chose is kept", { ...gpuTask, NCCLSCOPE_RING_DIR: ringDir }, { NCCL_PROFILER_PLUGIN: plugin }],
];
const shells = ["/bin/sh", "/bin/bash"].filter(existsSync);
check(shells.length === 2, "shells", `dash and bash expected, found ${shells}`);
for (const shell of shells) {
  for (const [desc, env, want] of cases) {
    const r = runProlog(shell, env);
    const got = exportsOf(r.stdout);
    check(r.status === 0 && r.stderr === "" && isDeepStrictEqual(got, want), `${shell}: ${desc}`,
      `exit ${r.status}, exported ${JSON.stringify(got)}, expected ${JSON.stringify(want)}; stderr ${r.stderr}`);
    check(r.stdout.split("\n").every((l) => l === "" || l.startsWith("export ")), `${shell}: ${desc}`, `stray output ${JSON.stringify(r.stdout)}`);
  }
  // A ring directory the job's user cannot write: as root, run the prolog as nobody against a
  // root-owned 0755 directory; otherwise make the directory read-only.
  const closed = join(tmp, `run/closed-${shell.split("/").pop()}`);
  mkdirSync(closed);
  chmodSync(closed, isRoot ? 0o755 : 0o555);
  const r = runProlog(shell, { ...gpuTask, NCCLSCOPE_TASKPROLOG_RING_DIR: closed }, isRoot);
  check(r.status === 0 && r.stdout === "", `${shell}: a ring directory the job's user cannot write adds nothing`,
    `exit ${r.status}, output ${JSON.stringify(r.stdout)}, stderr ${r.stderr}`);
}

// The exports work as a job uses them: the path is a profiler plugin NCCL can load (it exports
// ncclProfiler_v*), and a job that loads it from there writes its ring into the exported directory.
const env = exportsOf(runProlog("/bin/sh", gpuTask).stdout);
const symbols = execFileSync("readelf", ["--dyn-syms", "--wide", env.NCCL_PROFILER_PLUGIN], { encoding: "utf8" });
check(/\bncclProfiler_v\d\b/.test(symbols), "NCCL_PROFILER_PLUGIN", "the exported path exports no ncclProfiler_v* symbol");
const sim = spawnSync(simBin, ["--plugin", env.NCCL_PROFILER_PLUGIN, "--nodes", "1", "--gpus", "2", "--iterations", "5",
  "--rate", "50", "--linger", "0s", "--quiet", "--job-id", "taskprolog"],
{ env: { PATH: "/usr/bin:/bin", SLURM_JOB_ID: "4242", NCCLSCOPE_RING_DIR: env.NCCLSCOPE_RING_DIR }, encoding: "utf8", timeout: 60000 });
const rings = readdirSync(ringDir).filter((f) => f !== "ncclscope.controls");
check(sim.status === 0 && rings.length > 0, "a job with the exported environment", `sim exit ${sim.status}, rings in ${ringDir}: ${rings}; ${sim.stderr}`);

rmSync(tmp, { recursive: true, force: true });
t.exit(`${t.checks} checks passed, ${t.failures} failed`);
