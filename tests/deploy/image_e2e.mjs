// The image, run the way the DaemonSet runs it (scripts/test image, after scripts/build-image):
// the pod spec is read from what `kubectl kustomize deploy/kubernetes` renders, not restated here.
//   * the image is the one the manifests name, and `ncclscope-agent --version` in it prints that
//     tag; it holds no compiler, build tool or -dev package, and every library the agent links
//     resolves in it
//   * the init container's command, with its mounts, user, capabilities and read-only root,
//     publishes the plugin in a temporary host directory: the .so arrives whole, by rename (a
//     second run leaves the first copy, as a running job has it mapped, untouched), is the
//     portable one (no glibc symbol version newer than 2.18: tests/compat/plugin_symbols.sh
//     against NCCL's own library where one is installed), and the ring directory gets mode 1777
//   * the agent container, with the DaemonSet's securityContext (privileged, root, read-only root
//     filesystem), hostPID, hostNetwork, env, args and every volume (hostPaths of type Directory
//     from this machine, /sys and /sys/fs/cgroup, read-only as mounted there; DirectoryOrCreate
//     ones in the temporary host directory; the rendered ConfigMap), answers the probes' /healthz
//     and serves /metrics over HTTP; a job on the "host" (ncclscope-sim) loads the plugin the
//     init container published, and its collectives appear in the containerized agent's metrics
// The one change to the pod: the agent listens on a free port (--web.listen-address), as this
// machine may run other agents on 9824 with hostNetwork.
// Usage: node image_e2e.mjs <repo root> <kubectl> <ncclscope-sim> [podman]
import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, openSync, closeSync, readFileSync, readdirSync, rmSync,
  statSync, writeFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { freePort, sleep } from "./prometheus.mjs";
import { checker } from "./lib/check.mjs";

const [root, kubectl, simBin, podman = "podman"] = process.argv.slice(2);
const t = checker({ logPasses: true });
const { check } = t;
const run = (cmd, args, opts = {}) => spawnSync(cmd, args, { encoding: "utf8", timeout: 120000, ...opts });
const out = (r) => `${r.stdout ?? ""}${r.stderr ?? ""}${r.error?.message ?? ""}`;
if (process.getuid() !== 0) { console.log("SKIPPED: needs root (podman running privileged containers)"); process.exit(77); }
if (run(podman, ["--version"]).status !== 0) { console.log(`SKIPPED: no ${podman} (scripts/build-image installs it)`); process.exit(77); }

const version = /project\(ncclscope VERSION ([0-9.]+)/.exec(readFileSync(join(root, "CMakeLists.txt"), "utf8"))[1];
const docs = parseAllDocuments(execFileSync(kubectl, ["kustomize", join(root, "deploy/kubernetes")], { encoding: "utf8" }))
  .map((d) => d.toJS());
const ds = docs.find((d) => d.kind === "DaemonSet");
const pod = ds.spec.template.spec;
const [init] = pod.initContainers;
const agent = pod.containers.find((c) => c.name === "agent");
const image = agent.image;
check(init.image === image, "init container and agent run one image", `${init.image} vs ${image}`);
check(image.endsWith(`:${version}`), `the manifests' image is tagged with the project version ${version}`, image);
if (!check(run(podman, ["image", "exists", image]).status === 0, `image ${image} exists`, "run scripts/build-image first")) process.exit(1);
const size = Number(run(podman, ["image", "inspect", "--format", "{{.Size}}", image]).stdout);
console.log(`image ${image}: ${(size / 1e6).toFixed(0)} MB`);

// What the image holds.
const inImage = (script) => run(podman, ["run", "--rm", "--network=none", "--entrypoint", "/bin/sh", image, "-c", script]);
const v = run(podman, ["run", "--rm", "--network=none", image, "--version"]);
check(v.status === 0 && v.stdout.startsWith(`ncclscope-agent ${version} `), `--version in the image prints ${version}`, out(v));
const packages = inImage("dpkg-query -W -f '${Package}\\n'").stdout.split("\n").filter(Boolean);
const buildTools = packages.filter((p) => /-dev$|^(gcc|g\+\+|cpp|clang|llvm)(-[0-9.]+)?$|^(cmake|ninja-build|make|binutils|bpftool|pkg-config|pkgconf|python3|gdb|libgtest.*|prometheus.*)$/.test(p));
check(packages.length > 50 && buildTools.length === 0, "no compiler, build tool, test tool or -dev package in the image",
  `${packages.length} packages, of which ${buildTools.join(" ")}`);
const ldd = inImage("ldd /usr/bin/ncclscope-agent");
check(ldd.status === 0 && !/not found/.test(ldd.stdout), "every library the agent links is in the image", out(ldd));
const cfg = inImage("/usr/bin/ncclscope-agent --check-config --config /etc/ncclscope/ncclscope.yaml");
check(cfg.status === 0, "the image's default config passes --check-config", out(cfg));

// The pod's volumes on this machine. hostPaths of type Directory are the host's own (they must
// exist); DirectoryOrCreate ones are made in a temporary host directory, as kubelet would make
// them on the node; the ConfigMap is the rendered one.
const host = mkdtempSync(join(tmpdir(), "ncclscope-image-"));
chmodSync(host, 0o755);
const containers = [];
const cleanup = () => {
  for (const c of containers) run(podman, ["rm", "-f", "-t", "0", c]);
  rmSync(host, { recursive: true, force: true });
};
process.on("exit", cleanup);
const volumePath = {};
for (const vol of pod.volumes) {
  if (vol.hostPath) {
    if (vol.hostPath.type === "Directory") volumePath[vol.name] = vol.hostPath.path;
    else { volumePath[vol.name] = join(host, vol.hostPath.path); mkdirSync(volumePath[vol.name], { recursive: true }); }
  } else if (vol.configMap) {
    const cm = docs.find((d) => d.kind === "ConfigMap" && d.metadata.name === vol.configMap.name);
    volumePath[vol.name] = join(host, "configmap", vol.name);
    mkdirSync(volumePath[vol.name], { recursive: true });
    for (const [file, text] of Object.entries(cm.data)) writeFileSync(join(volumePath[vol.name], file), text);
  } else throw new Error(`volume ${vol.name}: a kind this test does not map`);
}
// podman run's arguments for a container of the pod: mounts, user, security context, env.
function podmanArgs(c) {
  const args = [];
  if (pod.hostPID) args.push("--pid=host");
  if (pod.hostNetwork) args.push("--network=host");
  for (const m of c.volumeMounts ?? []) args.push("-v", `${volumePath[m.name]}:${m.mountPath}${m.readOnly ? ":ro" : ""}`);
  const sc = c.securityContext ?? {};
  if (sc.privileged) args.push("--privileged");
  if (sc.runAsUser !== undefined) args.push("--user", String(sc.runAsUser));
  if (sc.readOnlyRootFilesystem) args.push("--read-only");
  if (sc.allowPrivilegeEscalation === false) args.push("--security-opt", "no-new-privileges");
  for (const cap of sc.capabilities?.drop ?? []) args.push("--cap-drop", cap);
  for (const cap of sc.capabilities?.add ?? []) args.push("--cap-add", cap);
  for (const e of c.env ?? []) args.push("-e", `${e.name}=${e.value ?? (e.valueFrom?.fieldRef?.fieldPath === "spec.nodeName" ? "image-e2e-node" : "")}`);
  return args;
}
const initArgs = () => ["run", "--rm", ...podmanArgs(init), "--entrypoint", init.command[0], image, ...init.command.slice(1)];
const mountOf = (c, path) => volumePath[c.volumeMounts.find((m) => m.mountPath === path).name];

// The init container, twice: the second run must replace the file by rename.
const pluginDir = mountOf(init, "/opt/ncclscope/lib");
const ringDir = mountOf(init, "/run/ncclscope");
const published = join(pluginDir, "libnccl-profiler-ncclscope.so");
let r = run(podman, initArgs());
check(r.status === 0, "the init container's command runs", out(r));
const inImageSha = createHash("sha256").update(run(podman, ["run", "--rm", "--network=none", "--entrypoint", "cat", image,
  "/usr/lib/ncclscope/libnccl-profiler-ncclscope.so"], { encoding: "buffer" }).stdout).digest("hex");
const sha = (f) => createHash("sha256").update(readFileSync(f)).digest("hex");
if (check(existsSync(published), "the plugin arrives in the host's plugin directory", `${readdirSync(pluginDir)}`)) {
  check(sha(published) === inImageSha, "it is the image's plugin, whole", "sha256 differs");
  check(readdirSync(pluginDir).length === 1, "no temporary file left behind", `${readdirSync(pluginDir)}`);
  check((statSync(ringDir).mode & 0o7777) === 0o1777, "the ring directory is world-writable with the sticky bit",
    (statSync(ringDir).mode & 0o7777).toString(8));
  const first = statSync(published).ino;
  const fd = openSync(published, "r");  // a running job's mapping of the first copy
  r = run(podman, initArgs());
  const second = statSync(published).ino;
  check(r.status === 0 && second !== first, "a second run replaces the plugin by rename, not in place",
    `exit ${r.status}, inode ${first} -> ${second}; ${out(r)}`);
  closeSync(fd);

  // The portable plugin: nothing newer than glibc 2.18, no C++ run time.
  const dyn = execFileSync("objdump", ["-T", "-p", published], { encoding: "utf8" });
  const glibc = [...dyn.matchAll(/GLIBC_([0-9.]+)/g)].map((m) => m[1])
    .sort((a, b) => a.localeCompare(b, undefined, { numeric: true })).pop();
  check(glibc && glibc.localeCompare("2.18", undefined, { numeric: true }) <= 0,
    "the published plugin needs no glibc newer than 2.18 (the portable build)", `needs GLIBC_${glibc}`);
  check(!/GLIBCXX_|CXXABI_|libstdc\+\+/.test(dyn), "the published plugin needs no C++ run time", "it does");
  const nccl = "/usr/local/cuda/lib64/libnccl.so.2";
  if (existsSync(nccl)) {
    r = run("bash", [join(root, "tests/compat/plugin_symbols.sh"), published, nccl]);
    check(r.status === 0, `tests/compat/plugin_symbols.sh: it asks for nothing ${nccl} does not`, out(r));
  } else console.log(`(no ${nccl}: plugin_symbols.sh not run)`);
}

// The agent container.
const port = await freePort();
const probe = agent.livenessProbe.httpGet;
check(agent.readinessProbe.httpGet.path === probe.path && agent.ports.some((p) => p.name === probe.port),
  "both probes ask the metrics port", JSON.stringify(agent.readinessProbe));
const name = `ncclscope-image-e2e-${process.pid}`;
r = run(podman, ["run", "-d", "--name", name, ...podmanArgs(agent), image, ...agent.args, `--web.listen-address=127.0.0.1:${port}`]);
containers.push(name);
if (!check(r.status === 0, "the agent container starts", out(r))) process.exit(1);
const get = async (path) => {
  const res = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: res.status, text: await res.text() };
};
let health;
for (let i = 0; i < 150 && !health; i++) {
  try { health = await get(probe.path); } catch { await sleep(200); }
}
const logs = () => out(run(podman, ["logs", name]));
if (!check(health?.status === 200, `GET ${probe.path} (the probes) answers 200`, `${health?.status} ${health?.text}\n${logs()}`)) process.exit(1);
console.log(`${probe.path}: ${health.text.trim().split("\n").join(" | ")}`);

// A job on the node, loading the plugin the init container published, its ring where the
// DaemonSet's rings volume is.
const sim = run(simBin, ["--plugin", published, "--nodes", "1", "--gpus", "2", "--iterations", "50", "--rate", "100",
  "--linger", "3s", "--quiet", "--job-id", "image-e2e"],
{ env: { PATH: "/usr/bin:/bin", NCCLSCOPE_RING_DIR: ringDir }, timeout: 60000 });
check(sim.status === 0, "a job loads the published plugin (ncclscope-sim)", out(sim));
let metrics = "";
const ops = (text) => [...text.matchAll(/^ncclscope_nccl_ops_total\{[^}]*\} ([0-9.e+]+)$/gm)].reduce((s, m) => s + Number(m[1]), 0);
for (let i = 0; i < 50; i++) {
  metrics = (await get("/metrics")).text;
  if (ops(metrics) > 0 && /job_id="image-e2e"/.test(metrics)) break;
  await sleep(200);
}
const family = (name) => new RegExp(`^# TYPE ${name} `, "m").test(metrics);
check(new RegExp(`^ncclscope_build_info\\{[^}]*version="${version.replace(/\./g, "\\.")}"[^}]*\\} 1$`, "m").test(metrics),
  `/metrics: ncclscope_build_info{version="${version}"}`, metrics.slice(0, 400));
check(/^ncclscope_source_up\{source="profiler"\} 1$/m.test(metrics), "/metrics: the profiler (plugin rings) source is up",
  metrics.match(/^ncclscope_source_up.*$/gm)?.join(" "));
check(/^ncclscope_source_up\{source="ebpf"\} 1$/m.test(metrics), "/metrics: the eBPF source is up (privileged, hostPID)",
  `${metrics.match(/^ncclscope_source_up.*$/gm)?.join(" ")}\n${logs()}`);
check(ops(metrics) > 0 && /^ncclscope_nccl_comm_info\{[^}]*job_id="image-e2e"/m.test(metrics),
  "/metrics: the job's collectives, read from its ring by the agent in the container",
  `ops ${ops(metrics)}\n${logs()}`);
for (const f of ["ncclscope_source_up", "ncclscope_nccl_ops_total", "ncclscope_nccl_comm_info", "ncclscope_scrape_duration_seconds"]) {
  check(family(f), `/metrics: family ${f}`, "missing");
}
console.log(`sources: ${metrics.match(/^ncclscope_source_up.*$/gm)?.join(", ")}`);
const promtool = run("sh", ["-c", "command -v promtool"]).stdout.trim();
if (promtool) {
  r = run(promtool, ["check", "metrics"], { input: metrics });
  check(r.status === 0, "promtool check metrics", out(r));
}
const inspect = JSON.parse(run(podman, ["inspect", name]).stdout)[0];
check(inspect.State.Running && inspect.HostConfig.ReadonlyRootfs && inspect.HostConfig.Privileged,
  "the agent still runs, privileged, on a read-only root filesystem", JSON.stringify(inspect.State));

t.exit(`${t.checks} checks passed, ${t.failures} failed`);
