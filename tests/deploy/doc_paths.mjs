// Docs that cannot drift: every repository path a Markdown file names must exist, and none may
// name a machine's absolute path (a checkout's /work/..., a home directory) where a repository path
// or ../shared/... belongs. Checked in every tracked *.md (git ls-files):
//  - links [text](target): relative targets (not http(s):, mailto:, #anchors) resolved against the
//    file's folder, the #fragment dropped; a link leaving the repository (../shared/..., an
//    absolute path) is an error: it is dead in every other checkout and on the web;
//  - `code` spans starting with a top-level folder of this repository (`agent/...`, `docs/...`),
//    brace and "/.ext" alternatives expanded (`agent/ebpf/coverage.{h,cc}`, `ring_file.h/.cc`);
//    a built program (`bench/plugin_bench`) stands for its source (`bench/plugin_bench.cc`);
//  - in a folder's README, file names in the first cell of a table row: the folder's own files.
// Each is looked up from the repository root and from the file's folder.
// Other spans (NCCL's or the kernel's source files, commands, metric names) are not checked.
// docs/*.md are wrapped at 100 columns (characters), fenced code included, but for table rows,
// which Markdown cannot wrap.
// Every other tracked text file (sources, scripts, manifests) is checked for /work/ paths too, and
// the repository paths named in code comments must exist (below, "Code comments").
// Licensing: LICENSE is the Apache License 2.0; each BPF program (bpf/*.bpf.c) is GPL-2.0-only by
// its SPDX line and declares a GPL-compatible "license" section, which the kernel checks before it
// lets the program call GPL-only helpers; bpf/'s shared header is dual-licensed so that the
// Apache-2.0 agent can include it; NOTICE says so.
// Usage: node doc_paths.mjs <repo root>
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, normalize } from "node:path";

const root = process.argv[2];
const files = execFileSync("git", ["-C", root, "ls-files", "*.md"], { encoding: "utf8" })
  .split("\n").filter((f) => f && !f.includes("node_modules/"));

// Top-level folders of this repository: a code span starting with one of them is a path here.
const TOP = ["agent", "bench", "bpf", "cmake", "config", "deploy", "docs", "plugin", "rdma",
  "scripts", "tests", "tools", ".ci"];
// Absolute paths that only exist on some machine.
const MACHINE_PATH = /(^|[\s(`"'])(\/work\/|\/home\/|\/root\/|\/tmp\/ci-)/;

// `a.{h,cc}` -> a.h, a.cc; `a.h/.cc` -> a.h, a.cc.
function expand(span) {
  const slashExt = span.match(/^(.*)\.([a-z]+)\/\.([a-z]+)$/);
  if (slashExt) return [`${slashExt[1]}.${slashExt[2]}`, `${slashExt[1]}.${slashExt[3]}`];
  const m = span.match(/^(.*)\{([^{}]*,[^{}]*)\}(.*)$/);
  if (!m) return [span];
  return m[2].split(",").flatMap((alt) => expand(m[1] + alt + m[3]));
}

const plain = (span) => !/\s|[<>$*?|=]|:\/\/|^-|^~|\{[^,]*\}/.test(span);
const tracked = execFileSync("git", ["-C", root, "ls-files"], { encoding: "utf8" }).split("\n");
const exists = (p) => existsSync(join(root, p)) || tracked.some((t) => t.startsWith(`${p}.`));

const WIDTH = 100;
const problems = [];
for (const file of files) {
  const dir = dirname(file);
  const text = readFileSync(join(root, file), "utf8");
  const lines = text.split("\n");
  let fenced = false;
  const wrapped = /^docs\/[^/]+\.md$/.test(file);
  lines.forEach((line, i) => {
    const where = `${file}:${i + 1}`;
    if (wrapped && !line.trim().startsWith("|") && [...line].length > WIDTH) {
      problems.push(`${where}: ${[...line].length} columns, wrap at ${WIDTH}`);
    }
    if (/^\s*```/.test(line)) { fenced = !fenced; return; }
    if (MACHINE_PATH.test(line)) problems.push(`${where}: names a machine's absolute path: ${line.trim()}`);
    if (fenced) return;
    for (const m of line.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = m[1].split("#")[0];
      if (!target || /^[a-z]+:/.test(target)) continue;
      if (target.startsWith("/") || normalize(join(dir, target)).startsWith("..")) {
        problems.push(`${where}: links outside the repository: ${m[1]}`);
        continue;
      }
      if (!existsSync(join(root, dir, target))) problems.push(`${where}: link to missing ${target}`);
    }
    const readme = file.endsWith("README.md");
    const firstCell = readme && line.startsWith("|") ? line.split("|")[1] : "";
    for (const m of line.matchAll(/`([^`]+)`/g)) {
      const span = m[1].replace(/[.,;:]$/, "").replace(/:\d+(-\d+)?$/, "").replace(/^\.\//, "");
      if (/^(\.\.\/)+shared\/|^shared\/reference\//.test(span)) {
        problems.push(`${where}: \`${span}\` is outside the repository`);
        continue;
      }
      if (!plain(span) || span.startsWith("/")) continue;
      const top = TOP.includes(span.split("/")[0]) && span.includes("/");
      const own = firstCell.includes(`\`${m[1]}\``) && /\.[a-z]+$|\/$|\}$/.test(span);
      if (!top && !own) continue;
      for (const path of expand(span)) {
        const p = path.replace(/\/$/, "");
        if (exists(p) || exists(join(dir, p))) continue;
        problems.push(`${where}: \`${span}\` does not exist`);
      }
    }
  });
}

// Comments and scripts too: no tracked file may point at a machine's checkout.
for (const file of tracked.filter((f) => f && !f.endsWith(".md") && !f.includes("node_modules/") &&
  f !== "tests/deploy/doc_paths.mjs" && /\.(cc|h|c|cu|sh|mjs|js|yaml|yml|json|cmake|txt|in|service)$|^\.ci\//.test(f))) {
  readFileSync(join(root, file), "utf8").split("\n").forEach((line, i) => {
    if (/(^|[\s(`"'])\/work\//.test(line)) problems.push(`${file}:${i + 1}: names a machine's absolute path: ${line.trim()}`);
  });
}

// Code comments: a repository path named in a comment (C/C++ and JavaScript `//` and `/* */`, `#`
// in CMake, shell, YAML and Python) must exist too. Only what looks like one: a top-level folder
// of this repository, a directory part and a known extension (`agent/profiler/ring_file.cc`),
// looked up from the repository root and from the file's folder. Not ours, so not checked: a path
// inside another (NCCL's `src/plugin/profiler.cc`), a citation of another project's source at a tag
// (`plugin/profiler.cc:478-489 at v2.26.6-1`), a system header (`<rdma/rdma_netlink.h>`), and the
// files of other projects listed here.
const OTHER_PROJECTS = new Map([
  ["docs/web-configuration.md", "prometheus/exporter-toolkit"],
  ["rdma/res-qp.c", "iproute2"],
]);
const CODE_TOP = ["agent", "plugin", "platform", "tools", "tests", "bench", "bpf", "rdma", "deploy",
  "docs", "scripts", "config", "cmake"];
const EXT = "(?:bpf\\.c|cc|h|c|cu|cpp|hpp|md|mjs|js|sh|py|yaml|yml|json|cmake|txt|html|service|conf|in)";
const COMMENT_PATH = new RegExp(`(?<![\\w./{<-])((?:${CODE_TOP.join("|")})\\/[\\w./+-]*\\.${EXT})(?![\\w/{-])`, "g");
const C_LIKE = /\.(c|cc|h|cu|cpp|hpp|mjs|js)$/;
const HASH = /(^|\/)CMakeLists\.txt$|\.(cmake|sh|yaml|yml|py)$|^scripts\/[^/.]+$|^\.ci\//;
// The comments of one file, as [line number, text] pairs.
function comments(file, text) {
  const out = [];
  let block = false;
  text.split("\n").forEach((line, i) => {
    if (HASH.test(file)) {
      const m = line.match(/(?:^|\s)#(?!!)(.*)$/);
      if (m) out.push([i + 1, m[1]]);
      return;
    }
    let rest = line;
    while (rest) {
      if (block) {
        const end = rest.indexOf("*/");
        out.push([i + 1, end < 0 ? rest : rest.slice(0, end)]);
        if (end < 0) return;
        block = false;
        rest = rest.slice(end + 2);
        continue;
      }
      const m = rest.match(/(?:^|[^:"'\w])(\/\/|\/\*)/);
      if (!m) return;
      const at = m.index + m[0].length;
      if (m[1] === "//") { out.push([i + 1, rest.slice(at)]); return; }
      block = true;
      rest = rest.slice(at);
    }
  });
  return out;
}
let commentFiles = 0;
for (const file of tracked.filter((f) => f && !f.includes("node_modules/") && (C_LIKE.test(f) || HASH.test(f)))) {
  if (!existsSync(join(root, file))) continue;
  commentFiles++;
  for (const [n, comment] of comments(file, readFileSync(join(root, file), "utf8"))) {
    for (const m of comment.matchAll(COMMENT_PATH)) {
      const path = m[1].replace(/\.$/, "");
      if (OTHER_PROJECTS.has(path) || /^:\d+(-\d+)? at /.test(comment.slice(m.index + m[1].length))) continue;
      if (exists(path) || exists(join(dirname(file), path))) continue;
      problems.push(`${file}:${n}: comment names \`${path}\`, which does not exist`);
    }
  }
}

// Licensing.
const spdx = (file) => readFileSync(join(root, file), "utf8").match(/SPDX-License-Identifier:\s*([^*\n]+?)\s*(\*\/)?$/m)?.[1];
if (!readFileSync(join(root, "LICENSE"), "utf8").includes("Apache License\n                           Version 2.0, January 2004")) {
  problems.push("LICENSE: not the Apache License, Version 2.0");
}
for (const file of tracked.filter((f) => /^bpf\/.*\.bpf\.c$/.test(f))) {
  const text = readFileSync(join(root, file), "utf8");
  const section = text.match(/SEC\("license"\)\s*=\s*"([^"]*)"/)?.[1];
  // The kernel's license_is_gpl_compatible() (include/linux/license.h).
  const GPL_COMPATIBLE = ["GPL", "GPL v2", "GPL and additional rights", "Dual BSD/GPL", "Dual MIT/GPL", "Dual MPL/GPL"];
  if (!GPL_COMPATIBLE.includes(section)) problems.push(`${file}: license section "${section}" is not GPL-compatible for the kernel`);
  if (spdx(file) !== "GPL-2.0-only") problems.push(`${file}: SPDX-License-Identifier ${spdx(file)}, NOTICE says GPL-2.0-only`);
}
for (const file of tracked.filter((f) => /^bpf\/include\/.*\.h$/.test(f))) {
  if (spdx(file) !== "GPL-2.0-only OR Apache-2.0") problems.push(`${file}: SPDX-License-Identifier ${spdx(file)}, NOTICE says GPL-2.0-only OR Apache-2.0`);
}
const notice = readFileSync(join(root, "NOTICE"), "utf8");
for (const phrase of ["Apache License, Version 2.0", "bpf/*.bpf.c", "GPL-2.0-only", "bpf/LICENSE.GPL-2.0"]) {
  if (!notice.includes(phrase)) problems.push(`NOTICE: does not say ${phrase}`);
}

if (problems.length) {
  problems.splice(0, problems.length, ...new Set(problems));
  console.error(`${problems.length} stale path(s) in the docs:\n${problems.join("\n")}`);
  process.exit(1);
}
console.log(`doc paths: ${files.length} Markdown files and the comments of ${commentFiles} code files, every repository path they name exists`);
