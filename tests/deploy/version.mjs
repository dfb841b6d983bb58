// One version everywhere: the project VERSION in CMakeLists.txt is what `ncclscope-agent
// --version` prints, the tag of every image the rendered manifests run, every kustomize `newTag`,
// every `?ref=vX.Y.Z` a remote kustomize base is pinned to and every `ghcr.io/ncclscope/ncclscope:…`
// named in tracked files (README, docs, overlays, the Dockerfile). A release bumps project() and
// this test names each place still on the old one.
// Usage: node version.mjs <repo root> <ncclscope-agent> <kubectl>
import { execFileSync } from "node:child_process";
import { readFileSync, readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { parseAllDocuments } from "yaml";
import { checker } from "./lib/check.mjs";

const [root, agentBin, kubectl] = process.argv.slice(2);
const t = checker();
const { check } = t;

const project = /^project\(ncclscope VERSION ([0-9]+\.[0-9]+\.[0-9]+)\b/m.exec(readFileSync(join(root, "CMakeLists.txt"), "utf8"));
if (!check(project, "CMakeLists.txt", "no `project(ncclscope VERSION X.Y.Z`")) process.exit(1);
const version = project[1];
console.log(`project version ${version}`);

const printed = execFileSync(agentBin, ["--version"], { encoding: "utf8" });
check(printed.startsWith(`ncclscope-agent ${version} `), "ncclscope-agent --version", `prints ${JSON.stringify(printed)}`);

// The images the DaemonSet runs, as kubectl renders them (what a cluster would pull).
for (const dir of ["deploy/kubernetes", "deploy/kubernetes/examples/overlay"]) {
  const docs = parseAllDocuments(execFileSync(kubectl, ["kustomize", join(root, dir)], { encoding: "utf8" })).map((d) => d.toJS());
  const pod = docs.find((d) => d.kind === "DaemonSet")?.spec.template.spec;
  const images = [...(pod?.initContainers ?? []), ...(pod?.containers ?? [])].map((c) => c.image);
  check(images.length >= 2, `${dir}: rendered DaemonSet`, `has ${images.length} containers`);
  for (const image of images) check(image.endsWith(`:${version}`), `${dir}: image ${image}`, `is not tagged ${version}`);
}

// Tracked text files (git's list where there is one; else the tree without build outputs).
function files() {
  try {
    return execFileSync("git", ["-C", root, "ls-files", "-z"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] })
      .split("\0").filter(Boolean);
  } catch {
    const out = [];
    const walk = (dir) => {
      for (const e of readdirSync(join(root, dir), { withFileTypes: true })) {
        const p = dir ? `${dir}/${e.name}` : e.name;
        if (e.isDirectory()) { if (!["build", "node_modules", ".git", ".cache"].includes(e.name)) walk(p); } else out.push(p);
      }
    };
    walk("");
    return out;
  }
}
const patterns = [
  ["image reference", /ghcr\.io\/ncclscope\/ncclscope:([0-9A-Za-z._-]*[0-9A-Za-z])/g, (t) => t === version],
  ["?ref= pin", /ncclscope\/ncclscope\/[^\s"'`)]*\?ref=([0-9A-Za-z._-]*[0-9A-Za-z])/g, (t) => t === `v${version}`],
  ["kustomize newTag", /^\s*newTag:\s*"?([^\s"]+)"?/gm, (t) => t === version],
];
const found = Object.fromEntries(patterns.map(([what]) => [what, []]));
for (const f of files()) {
  if (!/\.(md|ya?ml|sh|mjs|txt|json)$|Dockerfile$|^scripts\//.test(f) || f.startsWith("tests/deploy/package")) continue;
  let text;
  try {
    if (statSync(join(root, f)).size > 2e6) continue;
    text = readFileSync(join(root, f), "utf8");
  } catch { continue; }  // deleted in the work tree
  for (const [what, re, ok] of patterns) {
    for (const m of text.matchAll(re)) {
      const line = text.slice(0, m.index).split("\n").length;
      found[what].push(`${f}:${line}`);
      check(ok(m[1]), `${f}:${line}: ${what} ${m[1]}`, `the project version is ${version}`);
    }
  }
}
// Not vacuous: the places a user copies the version from.
const where = (what, file) => found[what].some((w) => w.startsWith(`${file}:`));
check(where("image reference", "README.md"), "README.md", `names no image ghcr.io/ncclscope/ncclscope:${version}`);
check(where("image reference", "deploy/kubernetes/base/daemonset.yaml"), "daemonset.yaml", "names no image");
check(where("kustomize newTag", "deploy/kubernetes/examples/overlay/kustomization.yaml"), "examples/overlay", "sets no newTag");
check(found["?ref= pin"].length > 0, "?ref=", "no remote base pinned anywhere (the example overlay's comment did)");
for (const [what, list] of Object.entries(found)) console.log(`${what}: ${list.length} (${list.map((w) => relative(".", w)).join(", ")})`);

t.exit(`${t.checks} checks passed, ${t.failures} failed`);
