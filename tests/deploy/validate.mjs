// Validates deploy/kubernetes against the Kubernetes and Prometheus Operator OpenAPI schemas
// (kubernetes-models), plus the cross-references schemas cannot see: selectors match pod labels,
// mounts name declared volumes, probes name declared ports, the ConfigMap's config passes the real
// agent's --check-config, and the generated PrometheusRule is valid. deploy/grafana's kustomization
// is built into its dashboard ConfigMaps as kustomize would and those are validated likewise.
// (The dashboards' own content is checked by dashboards.mjs.)
// Usage: node validate.mjs <repo root> <ncclscope-agent binary>
import { readFileSync, readdirSync, writeFileSync, mkdtempSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { basename, join } from "node:path";
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

// deploy/grafana/kustomization.yaml: one ConfigMap per dashboard for the Grafana sidecar. Built
// here as kustomize's configMapGenerator does (name, generatorOptions labels and annotations, one
// data key per file named after it); keys this emulation does not know fail, so it cannot drift.
const grafanaDir = join(root, "deploy/grafana");
const grafanaKustomization = loadDocs(join(grafanaDir, "kustomization.yaml"))[0];
const knownKeys = ["apiVersion", "kind", "generatorOptions", "configMapGenerator"];
for (const key of Object.keys(grafanaKustomization)) {
  if (!knownKeys.includes(key)) fail("deploy/grafana/kustomization.yaml", `key ${key} is not understood by this validator`);
}
const options = grafanaKustomization.generatorOptions ?? {};
if (options.disableNameSuffixHash !== true) fail("deploy/grafana/kustomization.yaml", "needs disableNameSuffixHash: stable names replace the old ConfigMaps");
if (options.labels?.grafana_dashboard !== "1") fail("deploy/grafana/kustomization.yaml", "ConfigMaps need the label grafana_dashboard: \"1\" the sidecar looks for");
else pass();
const shipped = new Set();
for (const gen of grafanaKustomization.configMapGenerator ?? []) {
  const where = `deploy/grafana/kustomization.yaml ${gen.name}`;
  const extra = Object.keys(gen).filter((k) => !["name", "files"].includes(k));
  if (extra.length) fail(where, `keys ${extra} are not understood by this validator`);
  const data = {};
  for (const file of gen.files ?? []) {
    if (file.includes("=")) { fail(where, `key=path entries are not understood by this validator: ${file}`); continue; }
    let text;
    try {
      text = readFileSync(join(grafanaDir, file), "utf8");
      JSON.parse(text);
      pass();
    } catch (e) {
      fail(where, `${file}: ${e.message}`);
      continue;
    }
    data[basename(file)] = text;
    shipped.add(file);
  }
  const configMap = { apiVersion: "v1", kind: "ConfigMap",
    metadata: { name: gen.name, labels: options.labels, annotations: options.annotations }, data };
  await validateObject(where, configMap);
  // ConfigMaps hold at most 1 MiB; `kubectl apply` (client-side) also copies the object into an
  // annotation limited to 256 KiB.
  const size = Buffer.byteLength(JSON.stringify(configMap));
  if (size > 262144) fail(where, `${size} bytes: too large for kubectl apply's last-applied annotation (256 KiB)`);
  else pass();
}
for (const f of readdirSync(join(grafanaDir, "dashboards")).filter((f) => f.endsWith(".json"))) {
  if (!shipped.has(`dashboards/${f}`)) fail("deploy/grafana/kustomization.yaml", `dashboards/${f} is in no configMapGenerator`);
  else pass();
}

// deploy/grafana/provisioning: Grafana's file provider for hosts without Kubernetes.
const provisioning = loadDocs(join(grafanaDir, "provisioning/ncclscope.yaml"))[0];
const provider = provisioning?.providers?.[0];
if (provisioning?.apiVersion !== 1 || provider?.type !== "file" || !provider?.options?.path || !provider?.name) {
  fail("deploy/grafana/provisioning/ncclscope.yaml", "needs apiVersion: 1 and a file provider with a name and options.path");
} else pass();

console.log(`${checks} passed, ${failures} failed`);
process.exit(failures ? 1 : 0);
