// Validates what `kubectl kustomize` renders from deploy/kubernetes - the base, every component on
// its own, all of them together, and examples/overlay - against the Kubernetes and Prometheus
// Operator OpenAPI schemas (kubernetes-models), plus what schemas cannot see and what breaks a
// real install silently: every ServiceMonitor selects a Service and names its port, every Service
// selects the DaemonSet's pods and targets a port they expose, kube-prometheus-stack's `release`
// label on both the ServiceMonitor and the PrometheusRule, RoleBindings reference rendered Roles,
// mounts name declared volumes, probes name declared ports, the prometheus.io/* annotations name
// the metrics port, every container runtime state pattern of the config lies in a directory the
// agent mounts from the host at the same path, the capabilities component's securityContext, the
// rendered ConfigMap's config passes the real agent's --check-config, and the rendered
// PrometheusRule holds exactly deploy/prometheus/rules. With components/runbook-url every alert's
// runbook_url is the given base with its anchor kept; with components/plain-prometheus nothing of
// the Prometheus Operator's group is rendered and the rules ConfigMap holds every rules file as it
// is. The root kustomization's `images:` names the base's image. deploy/grafana renders into its
// dashboard ConfigMaps, validated likewise. (The dashboards' content: dashboards.mjs.)
// Usage: node validate.mjs <repo root> <ncclscope-agent binary> <kubectl>
import { readFileSync, readdirSync, writeFileSync, mkdtempSync, rmSync, existsSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { join, relative } from "node:path";
import { tmpdir } from "node:os";
import { isDeepStrictEqual } from "node:util";
import { parse, parseAllDocuments, stringify } from "yaml";
import { checker } from "./lib/check.mjs";

const [root, agentBin, kubectl] = process.argv.slice(2);
const k8sDir = join(root, "deploy/kubernetes");
if (!existsSync(kubectl)) {
  console.error(`FAIL kubectl (with kustomize v5) is needed to render the manifests; not found: ${kubectl}`);
  process.exit(1);
}
const tmp = mkdtempSync(join(tmpdir(), "ncclscope-deploy-"));
const t = checker();
const { check, fail } = t;

// apiVersion -> module exporting the models of that group/version.
function modulePath(apiVersion) {
  if (apiVersion === "v1") return "kubernetes-models/v1";
  if (apiVersion.startsWith("monitoring.coreos.com/")) {
    return `@kubernetes-models/prometheus-operator/${apiVersion}`;
  }
  return `kubernetes-models/${apiVersion}`;
}

async function validateObject(where, doc) {
  let mod;
  try {
    mod = await import(modulePath(doc.apiVersion));
  } catch {
    return fail(where, `no schema for ${doc.apiVersion}`);
  }
  const Model = mod[doc.kind];
  if (!Model) return fail(where, `unknown kind ${doc.apiVersion}/${doc.kind}`);
  try {
    new Model(doc).validate();
    t.pass();
  } catch (e) {
    fail(where, e.message);
  }
}

function docsOf(text, where) {
  return parseAllDocuments(text).map((d) => {
    if (d.errors.length) fail(where, d.errors.map((e) => e.message).join("; "));
    return d.toJS();
  }).filter(Boolean);
}

function render(dir) {
  try {
    return docsOf(execFileSync(kubectl, ["kustomize", dir], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }), dir);
  } catch (e) {
    fail(`kubectl kustomize ${relative(root, dir)}`, e.stderr?.toString() || e.message);
    return [];
  }
}

// A throw-away overlay of the base with the given components (paths relative to it, as kustomize
// refuses absolute ones). components/runbook-url reads its URL from a ConfigMap the overlay lists.
const TEST_RUNBOOK_BASE = "https://runbooks.test.invalid/ncclscope/runbooks.html";
function overlay(name, components) {
  const dir = join(tmp, name);
  execFileSync("mkdir", ["-p", dir]);
  const extra = [];
  if (components.includes("runbook-url")) {
    writeFileSync(join(dir, "runbook-url.yaml"), stringify({
      apiVersion: "v1", kind: "ConfigMap",
      metadata: { name: "ncclscope-runbook-url", annotations: { "config.kubernetes.io/local-config": "true" } },
      data: { base_url: TEST_RUNBOOK_BASE },
    }));
    extra.push("runbook-url.yaml");
  }
  writeFileSync(join(dir, "kustomization.yaml"), stringify({
    apiVersion: "kustomize.config.k8s.io/v1beta1", kind: "Kustomization",
    resources: [relative(dir, join(k8sDir, "base")), ...extra],
    components: components.map((c) => relative(dir, join(k8sDir, "components", c))),
  }));
  return dir;
}

const matches = (selector, labels) => Object.entries(selector ?? {}).every(([k, v]) => labels?.[k] === v);

function selects(labelSelector, labels) {
  if (!matches(labelSelector.matchLabels, labels)) return false;
  return (labelSelector.matchExpressions ?? []).every(({ key, operator, values = [] }) => {
    const has = labels && key in labels;
    if (operator === "In") return has && values.includes(labels[key]);
    if (operator === "NotIn") return !has || !values.includes(labels[key]);
    if (operator === "Exists") return has;
    if (operator === "DoesNotExist") return !has;
    return false;
  });
}

function checkPodSpec(where, spec) {
  const volumes = new Set((spec.volumes ?? []).map((v) => v.name));
  for (const c of [...(spec.initContainers ?? []), ...(spec.containers ?? [])]) {
    for (const m of c.volumeMounts ?? []) {
      check(volumes.has(m.name), where, `container ${c.name} mounts undeclared volume ${m.name}`);
    }
    const ports = new Set((c.ports ?? []).map((p) => p.name));
    for (const probe of [c.livenessProbe, c.readinessProbe, c.startupProbe].filter(Boolean)) {
      const port = probe.httpGet?.port;
      check(typeof port !== "string" || ports.has(port), where, `container ${c.name}: probe names unknown port ${port}`);
    }
  }
}

const agentContainer = (ds) => ds.spec.template.spec.containers.find((c) => c.name === "agent");
const ruleGroups = readdirSync(join(root, "deploy/prometheus/rules")).filter((f) => f.endsWith(".yaml")).sort()
  .flatMap((f) => parse(readFileSync(join(root, "deploy/prometheus/rules", f), "utf8")).groups);
const checkedConfigs = new Set();

// Every check on one rendered set of objects. `components`: which ones went into it.
async function checkRender(name, objects, components, runbookBase = TEST_RUNBOOK_BASE) {
  const where = (o) => `${name}: ${o.kind}/${o.metadata?.name}`;
  check(objects.length > 0, name, "renders nothing");
  for (const o of objects) await validateObject(where(o), o);
  const of = (kind) => objects.filter((o) => o.kind === kind);
  const nsOf = (o) => o.metadata.namespace ?? "default";

  const daemonSets = of("DaemonSet");
  check(daemonSets.length === 1, name, `${daemonSets.length} DaemonSets`);
  for (const ds of daemonSets) {
    const tpl = ds.spec.template;
    check(matches(ds.spec.selector.matchLabels, tpl.metadata.labels), where(ds), "selector does not match the pod template labels");
    checkPodSpec(where(ds), tpl.spec);
    for (const v of tpl.spec.volumes ?? []) {
      if (v.configMap) check(of("ConfigMap").some((c) => c.metadata.name === v.configMap.name), where(ds), `volume ${v.name} names ConfigMap ${v.configMap.name}, which is not rendered`);
    }
    const sa = tpl.spec.serviceAccountName;
    check(!sa || of("ServiceAccount").some((s) => s.metadata.name === sa), where(ds), `service account ${sa} is not rendered`);

    // A plain Prometheus scrapes by the pod annotations: they must name the metrics port and path.
    const agent = agentContainer(ds);
    const annotations = tpl.metadata.annotations ?? {};
    const metricsPort = agent.ports.find((p) => p.name === "metrics");
    check(annotations["prometheus.io/scrape"] === "true", where(ds), "pod template lacks prometheus.io/scrape: \"true\"");
    check(annotations["prometheus.io/port"] === String(metricsPort?.containerPort), where(ds), `prometheus.io/port ${annotations["prometheus.io/port"]} is not the metrics port ${metricsPort?.containerPort}`);

    // The agent's config: valid for the real agent, and every runtime state pattern mounted.
    const cmName = tpl.spec.volumes.find((v) => v.name === "config")?.configMap?.name;
    const cm = of("ConfigMap").find((c) => c.metadata.name === cmName);
    if (check(cm?.data?.["ncclscope.yaml"] !== undefined, where(ds), "config volume has no ncclscope.yaml")) {
      const text = cm.data["ncclscope.yaml"];
      const config = parse(text);
      if (!checkedConfigs.has(text)) {
        checkedConfigs.add(text);
        const cfg = join(tmp, `config-${checkedConfigs.size}.yaml`);
        writeFileSync(cfg, text);
        try {
          execFileSync(agentBin, ["--check-config", "--config", cfg], { stdio: "pipe" });
          t.pass();
        } catch (e) {
          fail(`${name}: ConfigMap ${cmName}`, `--check-config failed:\n${e.stderr}`);
        }
      }
      check(annotations["prometheus.io/path"] === (config.server?.metrics_path ?? "/metrics"), where(ds), "prometheus.io/path is not server.metrics_path");
      const volumes = new Map(tpl.spec.volumes.map((v) => [v.name, v]));
      const hostMounted = (dir) => (agent.volumeMounts ?? []).some((m) => {
        const v = volumes.get(m.name);
        return m.readOnly && v?.hostPath?.path === m.mountPath && (dir === m.mountPath || dir.startsWith(`${m.mountPath}/`));
      });
      const patterns = config.ebpf?.runtime_state_files ?? [];
      const runtimes = { containerd: "/run/containerd/", crio: "/run/containers/", docker: "/var/lib/docker/" };
      for (const [runtime, prefix] of Object.entries(runtimes)) {
        const pattern = patterns.find((p) => p.startsWith(prefix));
        if (!check(pattern !== undefined, where(ds), `ebpf.runtime_state_files has no ${runtime} pattern`)) continue;
        const dir = pattern.slice(0, pattern.indexOf("{id}")).replace(/\/$/, "");
        const wanted = runtime !== "docker" || components.includes("docker");
        check(hostMounted(dir) === wanted, where(ds), `${runtime} state ${dir} is ${wanted ? "not" : "unexpectedly"} mounted read-only from the same host path`);
      }
    }

    // Security: the init container never needs privileges; the agent is privileged unless the
    // capabilities component replaces that with exactly the capabilities its sources need.
    for (const c of tpl.spec.initContainers ?? []) {
      check(c.securityContext?.privileged !== true && isDeepStrictEqual(c.securityContext?.capabilities?.drop, ["ALL"]), where(ds), `init container ${c.name} keeps privileges`);
    }
    const sc = agent.securityContext ?? {};
    if (components.includes("capabilities")) {
      check(sc.privileged === false && sc.allowPrivilegeEscalation === false, where(ds), "capabilities component leaves the agent privileged");
      check(isDeepStrictEqual([...(sc.capabilities?.add ?? [])].sort(), ["BPF", "DAC_READ_SEARCH", "PERFMON", "SYS_ADMIN", "SYS_PTRACE"]), where(ds), `capabilities add ${sc.capabilities?.add}`);
      check(isDeepStrictEqual(sc.capabilities?.drop, ["ALL"]), where(ds), "capabilities component does not drop ALL");
    } else {
      check(sc.privileged === true, where(ds), "the base agent is expected privileged");
    }
    if (components.includes("nvidia-runtime")) check(tpl.spec.runtimeClassName === "nvidia", where(ds), "runtimeClassName is not nvidia");
    if (components.includes("tolerate-all-taints")) {
      check(isDeepStrictEqual(tpl.spec.tolerations, [{ operator: "Exists" }]), where(ds), "does not tolerate every taint");
    }
  }

  // Service -> pods -> port.
  const pods = daemonSets.map((ds) => ({ ns: nsOf(ds), labels: ds.spec.template.metadata.labels, spec: ds.spec.template.spec }));
  for (const svc of of("Service")) {
    const selected = pods.filter((p) => p.ns === nsOf(svc) && matches(svc.spec.selector, p.labels));
    if (!check(selected.length > 0 && Object.keys(svc.spec.selector ?? {}).length > 0, where(svc), `selector ${JSON.stringify(svc.spec.selector)} selects no DaemonSet pods`)) continue;
    for (const port of svc.spec.ports) {
      const target = port.targetPort ?? port.port;
      for (const p of selected) {
        const ports = p.spec.containers.flatMap((c) => c.ports ?? []);
        const hit = ports.find((cp) => (typeof target === "string" ? cp.name === target : cp.containerPort === target));
        check(hit !== undefined, where(svc), `port ${port.name} targets ${target}, which the pods do not expose`);
        check(!hit || hit.containerPort === port.port, where(svc), `port ${port.name} is ${port.port} but the pods listen on ${hit?.containerPort}`);
      }
    }
  }

  // ServiceMonitor -> Service -> port name; the `node` label; kube-prometheus-stack's release.
  for (const sm of of("ServiceMonitor")) {
    const nsSel = sm.spec.namespaceSelector ?? {};
    const inNs = (svc) => nsSel.any === true || (nsSel.matchNames ? nsSel.matchNames.includes(nsOf(svc)) : nsOf(svc) === nsOf(sm));
    const selected = of("Service").filter((svc) => inNs(svc) && selects(sm.spec.selector, svc.metadata.labels));
    if (!check(selected.length > 0, where(sm), `selector ${JSON.stringify(sm.spec.selector)} selects no rendered Service (labels: ${JSON.stringify(of("Service").map((s) => s.metadata.labels))})`)) continue;
    for (const ep of sm.spec.endpoints) {
      for (const svc of selected) {
        check(svc.spec.ports.some((p) => p.name === ep.port), where(sm), `endpoint port ${ep.port} is not a port of Service ${svc.metadata.name}`);
      }
      check((ep.relabelings ?? []).some((r) => r.targetLabel === "node" && isDeepStrictEqual(r.sourceLabels, ["__meta_kubernetes_pod_node_name"])), where(sm), "no relabeling puts the node name into `node`");
    }
    const release = sm.metadata.labels?.release;
    if (components.includes("kube-prometheus-stack")) check(release !== undefined, where(sm), "no release label for kube-prometheus-stack");
    for (const pr of of("PrometheusRule")) {
      check(pr.metadata.labels?.release === release, where(pr), `release label ${pr.metadata.labels?.release} differs from the ServiceMonitor's ${release}: one of them is not picked up`);
    }
  }
  for (const pr of of("PrometheusRule")) {
    let groups = pr.spec.groups;
    if (components.includes("runbook-url")) {
      // Every alert's URL is the configured base plus the shipped anchor; nothing else changed.
      const shipped = new Map(ruleGroups.flatMap((g) => g.rules).filter((r) => r.alert).map((r) => [r.alert, r.annotations.runbook_url]));
      const alerts = groups.flatMap((g) => g.rules).filter((r) => r.alert);
      const wrong = alerts.filter((r) => r.annotations.runbook_url !== `${runbookBase}#${shipped.get(r.alert)?.split("#")[1]}`);
      check(alerts.length === shipped.size && wrong.length === 0, where(pr),
        `runbook_url not rewritten to ${runbookBase}#<anchor>: ${wrong.slice(0, 3).map((r) => `${r.alert}: ${r.annotations.runbook_url}`).join(", ")}`);
      groups = structuredClone(groups);
      for (const r of groups.flatMap((g) => g.rules).filter((x) => x.alert)) r.annotations.runbook_url = shipped.get(r.alert);
    } else {
      check(!JSON.stringify(pr.spec.groups).includes(TEST_RUNBOOK_BASE), where(pr), "runbook_url rewritten without components/runbook-url");
    }
    check(isDeepStrictEqual(groups, ruleGroups), where(pr), "differs from deploy/prometheus/rules: run scripts/update-docs (make-prometheusrule.sh)");
  }

  // Without the Prometheus Operator: none of its kinds (their CRDs are absent, and `kubectl apply`
  // would fail on them); the rules as files, each exactly as shipped (stale: scripts/update-docs).
  if (components.includes("plain-prometheus")) {
    const operatorKinds = objects.filter((o) => o.apiVersion.startsWith("monitoring.coreos.com/"));
    check(operatorKinds.length === 0, name, `renders Prometheus Operator kinds: ${operatorKinds.map((o) => o.kind).join(", ")}`);
    const rulesCm = of("ConfigMap").find((c) => c.metadata.name === "ncclscope-prometheus-rules");
    const files = readdirSync(join(root, "deploy/prometheus/rules")).filter((f) => f.endsWith(".yaml")).sort();
    if (check(rulesCm !== undefined, name, "no ConfigMap ncclscope-prometheus-rules")) {
      check(isDeepStrictEqual(Object.keys(rulesCm.data).sort(), files), where(rulesCm), `keys ${Object.keys(rulesCm.data)} are not the rules files ${files}`);
      for (const f of files) {
        check(rulesCm.data[f] === readFileSync(join(root, "deploy/prometheus/rules", f), "utf8"), where(rulesCm),
          `${f} differs from deploy/prometheus/rules/${f}: run scripts/update-docs`);
      }
    }
  } else {
    check(of("ServiceMonitor").length === 1 && of("PrometheusRule").length === 1, name, "expected one ServiceMonitor and one PrometheusRule");
  }

  // RBAC references resolve.
  for (const rb of of("RoleBinding")) {
    check(rb.roleRef.kind !== "Role" || of("Role").some((r) => r.metadata.name === rb.roleRef.name && nsOf(r) === nsOf(rb)), where(rb), `roleRef ${rb.roleRef.name} is not a rendered Role`);
  }
  if (components.includes("kube-prometheus")) {
    const rb = of("RoleBinding").find((r) => r.subjects?.some((s) => s.kind === "ServiceAccount" && s.name === "prometheus-k8s" && s.namespace === "monitoring"));
    const role = rb && of("Role").find((r) => r.metadata.name === rb.roleRef.name);
    const grants = (res) => role?.rules.some((r) => r.resources.includes(res) && ["get", "list", "watch"].every((v) => r.verbs.includes(v)));
    check(rb && nsOf(rb) === nsOf(daemonSets[0]) && ["services", "endpoints", "pods"].every(grants), name, "prometheus-k8s cannot discover services, endpoints and pods in the agent's namespace");
  }
}

const components = readdirSync(join(k8sDir, "components")).sort();
// plain-prometheus is the alternative to the operator components, not an addition to them.
const withOperator = components.filter((c) => c !== "plain-prometheus");
const plain = ["capabilities", "nvidia-runtime", "plain-prometheus", "runbook-url", "tolerate-all-taints"];
const variants = [
  ["deploy/kubernetes", k8sDir, []],
  ...components.map((c) => [`base + ${c}`, overlay(c, [c]), [c]]),
  ["base + every operator component", overlay("all", withOperator), withOperator],
  [`base + ${plain.join(", ")}`, overlay("plain", plain), plain],
];
const example = join(k8sDir, "examples/overlay");
const exampleComponents = parse(readFileSync(join(example, "kustomization.yaml"), "utf8")).components.map((c) => c.split("/").pop());
const exampleRunbookBase = parse(readFileSync(join(example, "runbook-url.yaml"), "utf8")).data.base_url;
variants.push(["examples/overlay", example, exampleComponents, exampleRunbookBase]);
for (const [name, dir, used, base] of variants) await checkRender(name, render(dir), used, base);

// The root kustomization's image knob names the image the base runs, or it changes nothing.
const baseImages = new Set(render(join(k8sDir, "base")).filter((o) => o.kind === "DaemonSet")
  .flatMap((ds) => [...ds.spec.template.spec.initContainers, ...ds.spec.template.spec.containers]).map((c) => c.image.replace(/[:@].*$/, "")));
const rootImages = parse(readFileSync(join(k8sDir, "kustomization.yaml"), "utf8")).images ?? [];
check(rootImages.length === baseImages.size && rootImages.every((i) => baseImages.has(i.name)), "deploy/kubernetes/kustomization.yaml",
  `images: ${JSON.stringify(rootImages)} does not name the base's image(s) ${[...baseImages]}`);

// The overlay example really changes what it says it changes.
const ex = render(example);
const exDs = ex.find((o) => o.kind === "DaemonSet");
check(exDs?.spec.template.spec.containers.every((c) => c.image.startsWith("registry.example.com/")), "examples/overlay", "image not replaced");
check(ex.filter((o) => /ServiceMonitor|PrometheusRule/.test(o.kind)).every((o) => o.metadata.labels.release === "monitoring"), "examples/overlay", "release label not overridden");
check(exDs?.spec.template.spec.nodeSelector?.["node.example.com/gpu"] === "true", "examples/overlay", "nodeSelector not replaced");

// Every file under deploy/kubernetes is part of some kustomization, or an example validated here.
const listed = new Set();
const walk = (dir) => {
  const k = parse(readFileSync(join(dir, "kustomization.yaml"), "utf8"));
  for (const r of [...(k.resources ?? []), ...(k.configMapGenerator ?? []).flatMap((g) => g.files ?? [])]) listed.add(join(dir, r));
};
walk(join(k8sDir, "base"));
for (const c of components) walk(join(k8sDir, "components", c));
check(listed.has(join(k8sDir, "components/plain-prometheus/rules-configmap.yaml")), "components/plain-prometheus", "rules-configmap.yaml is in no kustomization");
for (const f of readdirSync(join(k8sDir, "base"))) {
  check(f === "kustomization.yaml" || listed.has(join(k8sDir, "base", f)), `deploy/kubernetes/base/${f}`, "is in no kustomization");
}

// examples/training-job.yaml: what a training pod adds.
for (const doc of docsOf(readFileSync(join(k8sDir, "examples/training-job.yaml"), "utf8"), "training-job.yaml")) {
  await validateObject(`examples/training-job.yaml: ${doc.kind}/${doc.metadata?.name}`, doc);
  checkPodSpec("examples/training-job.yaml", doc.spec);
}

// deploy/grafana: one ConfigMap per dashboard for the Grafana sidecar, rendered by kustomize.
const grafanaDir = join(root, "deploy/grafana");
const dashboards = readdirSync(join(grafanaDir, "dashboards")).filter((f) => f.endsWith(".json"));
const grafana = render(grafanaDir);
const shipped = new Set();
for (const cm of grafana) {
  const where = `deploy/grafana: ${cm.kind}/${cm.metadata.name}`;
  await validateObject(where, cm);
  check(cm.kind === "ConfigMap" && cm.metadata.labels?.grafana_dashboard === "1", where, "needs the label grafana_dashboard: \"1\" the sidecar looks for");
  check(!/-[a-z0-9]{10}$/.test(cm.metadata.name), where, "hash-suffixed name: old ConfigMaps would pile up (disableNameSuffixHash)");
  for (const [key, text] of Object.entries(cm.data ?? {})) {
    try { JSON.parse(text); t.pass(); } catch (e) { fail(where, `${key}: ${e.message}`); }
    shipped.add(key);
  }
  // ConfigMaps hold at most 1 MiB; `kubectl apply` (client-side) also copies the object into an
  // annotation limited to 256 KiB.
  const size = Buffer.byteLength(JSON.stringify(cm));
  check(size <= 262144, where, `${size} bytes: too large for kubectl apply's last-applied annotation (256 KiB)`);
}
for (const f of dashboards) check(shipped.has(f), "deploy/grafana/kustomization.yaml", `dashboards/${f} is in no ConfigMap`);

// deploy/grafana/provisioning: Grafana's file provider for hosts without Kubernetes.
const provisioning = parse(readFileSync(join(grafanaDir, "provisioning/ncclscope.yaml"), "utf8"));
const provider = provisioning?.providers?.[0];
check(provisioning?.apiVersion === 1 && provider?.type === "file" && provider?.options?.path && provider?.name,
  "deploy/grafana/provisioning/ncclscope.yaml", "needs apiVersion: 1 and a file provider with a name and options.path");

rmSync(tmp, { recursive: true, force: true });
t.exit(`${variants.length} renders, ${t.checks} checks passed, ${t.failures} failed`);
