// Validates deploy/kubernetes against the Kubernetes and Prometheus Operator OpenAPI schemas
// (kubernetes-models), plus the cross-references schemas cannot see: selectors match pod labels,
// mounts name declared volumes, probes name declared ports, the ConfigMap's config passes the real
// agent's --check-config, and the generated PrometheusRule is valid.
// Usage: node validate.mjs <repo root> <ncclscope-agent binary>
import { readFileSync, readdirSync, writeFileSync, mkdtempSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { tmpdir } from "node:os";
import { parseAllDocuments } from "yaml";

const [root, agent] = process.argv.slice(2);
const k8sDir = join(root, "deploy/kubernetes");
let failures = 0;
let checks = 0;
const fail = (what, why) => { failures++; console.error(`FAIL ${what}: ${why}`); };
const pass = () => { checks++; };

// apiVersion -> module exporting the models of that group/version.
function modulePath(apiVersion) {
  if (apiVersion === "v1") return "kubernetes-models/v1";
  if (apiVersion.startsWith("monitoring.coreos.com/")) {
    return `@kubernetes-models/prometheus-operator/${apiVersion}`;
  }
  return `kubernetes-models/${apiVersion}`;
}

async function validateObject(where, doc) {
  const mod = await import(modulePath(doc.apiVersion));
  const Model = mod[doc.kind];
  if (!Model) return fail(where, `unknown kind ${doc.apiVersion}/${doc.kind}`);
  try {
    new Model(doc).validate();
    pass();
  } catch (e) {
    fail(where, e.message);
  }
}

function loadDocs(file) {
  return parseAllDocuments(readFileSync(file, "utf8")).map((d) => {
    if (d.errors.length) fail(file, d.errors.map((e) => e.message).join("; "));
    return d.toJS();
  }).filter(Boolean);
}

function checkPodSpec(where, spec, podLabels, selector) {
  for (const [k, v] of Object.entries(selector ?? {})) {
    if (podLabels?.[k] !== v) fail(where, `selector ${k}=${v} does not match the pod template labels`);
    else pass();
  }
  const volumes = new Set((spec.volumes ?? []).map((v) => v.name));
  for (const c of [...(spec.initContainers ?? []), ...(spec.containers ?? [])]) {
    for (const m of c.volumeMounts ?? []) {
      if (!volumes.has(m.name)) fail(where, `container ${c.name} mounts undeclared volume ${m.name}`);
      else pass();
    }
    const ports = new Set((c.ports ?? []).map((p) => p.name));
    for (const probe of [c.livenessProbe, c.readinessProbe].filter(Boolean)) {
      const port = probe.httpGet?.port;
      if (typeof port === "string" && !ports.has(port)) fail(where, `probe names unknown port ${port}`);
      else pass();
    }
  }
}

const files = readdirSync(k8sDir).filter((f) => f.endsWith(".yaml") && f !== "kustomization.yaml");
const kustomization = loadDocs(join(k8sDir, "kustomization.yaml"))[0];
for (const f of files) {
  if (!kustomization.resources.includes(f)) fail("kustomization.yaml", `${f} is not listed in resources`);
  else pass();
}
const objects = [];
for (const f of [...files.map((f) => join(k8sDir, f)), join(k8sDir, "examples/training-job.yaml")]) {
  for (const doc of loadDocs(f)) {
    await validateObject(`${f}: ${doc.kind}/${doc.metadata?.name}`, doc);
    objects.push(doc);
  }
}

const ds = objects.find((o) => o.kind === "DaemonSet");
checkPodSpec("DaemonSet", ds.spec.template.spec, ds.spec.template.metadata.labels, ds.spec.selector.matchLabels);
const svc = objects.find((o) => o.kind === "Service");
checkPodSpec("Service", { containers: [] }, ds.spec.template.metadata.labels, svc.spec.selector);
const pod = objects.find((o) => o.kind === "Pod");
checkPodSpec("examples/training-job.yaml", pod.spec, {}, {});

// The ConfigMap's config is a real, valid agent config.
const cm = objects.find((o) => o.kind === "ConfigMap");
const dir = mkdtempSync(join(tmpdir(), "ncclscope-deploy-"));
const cfg = join(dir, "ncclscope.yaml");
writeFileSync(cfg, cm.data["ncclscope.yaml"]);
try {
  execFileSync(agent, ["--check-config", "--config", cfg], { stdio: "pipe" });
  pass();
} catch (e) {
  fail("configmap.yaml ncclscope.yaml", `--check-config failed:\n${e.stderr}`);
}

// The PrometheusRule built from deploy/prometheus/rules is valid and holds every group.
const rule = execFileSync(join(k8sDir, "make-prometheusrule.sh"), { encoding: "utf8" });
const ruleDoc = loadDocs_fromText(rule);
await validateObject("make-prometheusrule.sh output", ruleDoc);
const ruleFiles = readdirSync(join(root, "deploy/prometheus/rules")).filter((f) => f.endsWith(".yaml"));
const groups = ruleFiles.flatMap((f) => loadDocs(join(root, "deploy/prometheus/rules", f))[0].groups);
if (ruleDoc.spec.groups.length !== groups.length) {
  fail("make-prometheusrule.sh", `${ruleDoc.spec.groups.length} groups, rules files have ${groups.length}`);
} else pass();

function loadDocs_fromText(text) {
  return parseAllDocuments(text)[0].toJS();
}

console.log(`${checks} passed, ${failures} failed`);
process.exit(failures ? 1 : 0);
