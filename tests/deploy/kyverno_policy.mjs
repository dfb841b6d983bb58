// deploy/kubernetes/examples/kyverno-ncclscope-profiler.yaml: the Kyverno ClusterPolicy checked
// against the fields of Kyverno's kyverno.io/v1 schema it uses (unknown keys fail, so a typo
// cannot pass), every {{ }} expression compiled by a JMESPath implementation (npm jmespath), and
// applied to sample pods: which pods and containers it mutates, what they end up with (valid Pods
// by the Kubernetes schema, mounts naming declared volumes, the same variables and mounts as
// examples/training-job.yaml), and what it leaves alone.
// What is emulated, because Kyverno itself cannot run here (no cluster, no Kyverno CLI package):
// rule matching (kinds, operations, namespaces, namespaceSelector), preconditions with Kyverno's
// operators, foreach over a JMESPath list, variable substitution, and the add anchor +(key). The
// JMESPath evaluation is the jmespath package's, and the strategic merge patch is kubectl's own
// (`kubectl patch --local --type strategic`), as Kyverno applies patchStrategicMerge.
// Usage: node kyverno_policy.mjs <repo root> <kubectl>
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isDeepStrictEqual } from "node:util";
import jmespath from "jmespath";
import { Pod } from "kubernetes-models/v1";
import { parse, parseAllDocuments } from "yaml";
import { checker } from "./lib/check.mjs";

const [root, kubectl] = process.argv.slice(2);
const policyFile = join(root, "deploy/kubernetes/examples/kyverno-ncclscope-profiler.yaml");
const policy = parse(readFileSync(policyFile, "utf8"));
const tmp = mkdtempSync(join(tmpdir(), "ncclscope-kyverno-"));
const t = checker();
const { check } = t;

// --- structure: the kyverno.io/v1 ClusterPolicy fields this policy may use --------------------
const OPERATORS = ["Equals", "NotEquals", "In", "AnyIn", "AllIn", "NotIn", "AnyNotIn", "AllNotIn",
  "GreaterThanOrEquals", "GreaterThan", "LessThanOrEquals", "LessThan"];
function keysOnly(where, obj, allowed) {
  const extra = Object.keys(obj ?? {}).filter((k) => !allowed.includes(k));
  check(extra.length === 0, where, `unknown fields ${extra} (allowed: ${allowed})`);
}
const expressions = [];
function collectExpressions(value) {
  if (typeof value === "string") for (const m of value.matchAll(/\{\{(.*?)\}\}/g)) expressions.push(m[1].trim());
  else if (value && typeof value === "object") Object.values(value).forEach(collectExpressions);
}
function checkResourceFilter(where, filter) {
  keysOnly(where, filter, ["any", "all"]);
  for (const f of [...(filter.any ?? []), ...(filter.all ?? [])]) {
    keysOnly(where, f, ["resources", "subjects", "roles", "clusterRoles"]);
    keysOnly(`${where}.resources`, f.resources, ["kinds", "names", "namespaces", "operations", "namespaceSelector", "selector", "annotations"]);
    const ops = f.resources.operations ?? [];
    check(ops.every((o) => ["CREATE", "UPDATE", "DELETE", "CONNECT"].includes(o)), where, `operations ${ops}`);
    for (const e of f.resources.namespaceSelector?.matchExpressions ?? []) {
      check(["In", "NotIn", "Exists", "DoesNotExist"].includes(e.operator) && typeof e.key === "string", where, `label selector ${JSON.stringify(e)}`);
    }
  }
}
function checkConditions(where, conditions) {
  keysOnly(where, conditions, ["all", "any"]);
  for (const c of [...(conditions.all ?? []), ...(conditions.any ?? [])]) {
    keysOnly(where, c, ["key", "operator", "value", "message"]);
    check(OPERATORS.includes(c.operator), where, `operator ${c.operator}`);
    collectExpressions(c.key);
  }
}
check(policy.apiVersion === "kyverno.io/v1" && policy.kind === "ClusterPolicy" && /^[a-z0-9-]+$/.test(policy.metadata?.name), policyFile, "not a kyverno.io/v1 ClusterPolicy with a DNS name");
keysOnly("spec", policy.spec, ["background", "rules", "validationFailureAction", "failurePolicy", "admission", "schemaValidation", "mutateExistingOnPolicyUpdate", "webhookTimeoutSeconds"]);
for (const rule of policy.spec.rules) {
  const where = `rule ${rule.name}`;
  keysOnly(where, rule, ["name", "match", "exclude", "preconditions", "mutate", "context"]);
  checkResourceFilter(`${where}.match`, rule.match);
  if (rule.exclude) checkResourceFilter(`${where}.exclude`, rule.exclude);
  if (rule.preconditions) checkConditions(`${where}.preconditions`, rule.preconditions);
  keysOnly(`${where}.mutate`, rule.mutate, ["patchStrategicMerge", "patchesJson6902", "foreach", "targets"]);
  check(["patchStrategicMerge", "patchesJson6902", "foreach"].filter((k) => k in rule.mutate).length === 1, where, "a mutate rule has exactly one of patchStrategicMerge, patchesJson6902, foreach");
  for (const each of rule.mutate.foreach ?? []) {
    keysOnly(`${where}.foreach`, each, ["list", "preconditions", "patchStrategicMerge", "patchesJson6902", "context", "order", "foreach"]);
    expressions.push(each.list);
    if (each.preconditions) checkConditions(`${where}.foreach.preconditions`, each.preconditions);
    collectExpressions(each.patchStrategicMerge);
  }
  collectExpressions(rule.mutate.patchStrategicMerge);
}
for (const e of expressions) {
  try { jmespath.compile(e); t.pass(); } catch (err) { check(false, "JMESPath", `${e}: ${err.message}`); }
}

// --- the emulated engine ---------------------------------------------------------------------
const evaluate = (expr, ctx) => jmespath.search(ctx, expr);
// "{{ x }}" alone keeps the result's type; embedded ones are interpolated as text.
function substitute(value, ctx) {
  if (typeof value === "string") {
    const whole = value.match(/^\{\{(.*)\}\}$/s);
    if (whole && !whole[1].includes("}}")) return evaluate(whole[1].trim(), ctx);
    return value.replace(/\{\{(.*?)\}\}/g, (_, e) => String(evaluate(e.trim(), ctx)));
  }
  if (Array.isArray(value)) return value.map((v) => substitute(v, ctx));
  if (value && typeof value === "object") return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, substitute(v, ctx)]));
  return value;
}
function holds(conditions, ctx) {
  const test = (c) => {
    const key = substitute(c.key, ctx);
    const value = c.value;
    switch (c.operator) {
      case "Equals": return isDeepStrictEqual(key, value) || String(key) === String(value);
      case "NotEquals": return !(isDeepStrictEqual(key, value) || String(key) === String(value));
      case "GreaterThan": return Number(key) > Number(value);
      case "GreaterThanOrEquals": return Number(key) >= Number(value);
      case "LessThan": return Number(key) < Number(value);
      case "LessThanOrEquals": return Number(key) <= Number(value);
      default: throw new Error(`operator ${c.operator} is not emulated`);
    }
  };
  return (conditions?.all ?? []).every(test) && ((conditions?.any ?? []).length === 0 || conditions.any.some(test));
}
function selectorMatches(sel, labels) {
  if (!sel) return true;
  if (!Object.entries(sel.matchLabels ?? {}).every(([k, v]) => labels[k] === v)) return false;
  return (sel.matchExpressions ?? []).every(({ key, operator, values = [] }) => {
    const has = key in labels;
    if (operator === "In") return has && values.includes(labels[key]);
    if (operator === "NotIn") return !has || !values.includes(labels[key]);
    if (operator === "Exists") return has;
    return !has;
  });
}
const filterMatches = (filter, pod, nsLabels) => (filter?.any ?? []).some(({ resources: r }) =>
  (!r.kinds || r.kinds.includes(pod.kind)) && (!r.operations || r.operations.includes("CREATE"))
  && (!r.namespaces || r.namespaces.includes(pod.metadata.namespace)) && selectorMatches(r.namespaceSelector, nsLabels));
// The add anchor +(key): set key only where the resource has none. Lists of objects are matched
// item by item on their merge key (name), as the strategic merge will be.
function resolveAnchors(patch, resource) {
  if (Array.isArray(patch)) {
    return patch.map((item) => {
      const key = item && typeof item === "object" && "name" in item ? "name" : null;
      const twin = key && Array.isArray(resource) ? resource.find((r) => r?.[key] === item[key]) : undefined;
      return resolveAnchors(item, twin);
    });
  }
  if (!patch || typeof patch !== "object") return patch;
  const out = {};
  for (const [k, v] of Object.entries(patch)) {
    const anchor = k.match(/^\+\((.+)\)$/);
    if (anchor) {
      if (resource?.[anchor[1]] === undefined) out[anchor[1]] = v;
    } else {
      out[k] = resolveAnchors(v, resource?.[k]);
    }
  }
  return out;
}
function strategicMerge(resource, patch) {
  const file = join(tmp, "resource.json");
  writeFileSync(file, JSON.stringify(resource));
  const out = execFileSync(kubectl, ["patch", "--local", "-f", file, "--type", "strategic", "-p", JSON.stringify(patch), "-o", "json"], { encoding: "utf8" });
  return JSON.parse(out);
}
function admit(pod, nsLabels) {
  let current = structuredClone(pod);
  for (const rule of policy.spec.rules) {
    if (!filterMatches(rule.match, current, nsLabels) || filterMatches(rule.exclude, current, nsLabels)) continue;
    const ctx = { request: { operation: "CREATE", namespace: current.metadata.namespace, object: current } };
    if (rule.preconditions && !holds(rule.preconditions, ctx)) continue;
    if (rule.mutate.patchStrategicMerge) {
      current = strategicMerge(current, resolveAnchors(substitute(rule.mutate.patchStrategicMerge, ctx), current));
    }
    for (const each of rule.mutate.foreach ?? []) {
      for (const element of evaluate(each.list, ctx) ?? []) {
        const ectx = { ...ctx, element };
        if (each.preconditions && !holds(each.preconditions, ectx)) continue;
        current = strategicMerge(current, resolveAnchors(substitute(each.patchStrategicMerge, ectx), current));
      }
    }
  }
  return current;
}

// --- sample pods -----------------------------------------------------------------------------
const example = parseAllDocuments(readFileSync(join(root, "deploy/kubernetes/examples/training-job.yaml"), "utf8"))[0].toJS();
const exampleContainer = example.spec.containers[0];
const WANT_ENV = Object.fromEntries(exampleContainer.env.map((e) => [e.name, e.value]));
const WANT_MOUNTS = exampleContainer.volumeMounts;
const WANT_VOLUMES = example.spec.volumes;
const container = (name, { gpus, env } = {}) => ({ name, image: "nvcr.io/nvidia/pytorch:25.01-py3",
  ...(env ? { env: Object.entries(env).map(([k, v]) => ({ name: k, value: v })) } : {}),
  ...(gpus ? { resources: { limits: { "nvidia.com/gpu": String(gpus) } } } : {}) });
const pod = (ns, name, containers) => ({ apiVersion: "v1", kind: "Pod", metadata: { name, namespace: ns }, spec: { restartPolicy: "Never", containers } });
const NS = { ml: {}, "ml-baseline": { "pod-security.kubernetes.io/enforce": "baseline" }, "kube-system": {},
  "ml-privileged": { "pod-security.kubernetes.io/enforce": "privileged" } };
const envOf = (c) => Object.fromEntries((c.env ?? []).map((e) => [e.name, e.value]));
const profiled = (c) => isDeepStrictEqual(envOf(c).NCCL_PROFILER_PLUGIN, WANT_ENV.NCCL_PROFILER_PLUGIN)
  && WANT_MOUNTS.every((m) => (c.volumeMounts ?? []).some((x) => isDeepStrictEqual(x, m)));

const samples = [
  // [description, pod, namespace, containers expected profiled, expected ring dir per container]
  ["a GPU container is profiled, its sidecar is not", pod("ml", "trainer", [container("trainer", { gpus: 8, env: { OMP_NUM_THREADS: "8" } }), container("logger")]), "ml", ["trainer"], { trainer: WANT_ENV.NCCLSCOPE_RING_DIR }],
  ["every GPU container of a pod, the volumes once", pod("ml", "two", [container("a", { gpus: 4 }), container("b", { gpus: 4 })]), "ml", ["a", "b"], { a: WANT_ENV.NCCLSCOPE_RING_DIR, b: WANT_ENV.NCCLSCOPE_RING_DIR }],
  ["a ring directory the container set is kept", pod("ml", "own-dir", [container("t", { gpus: 1, env: { NCCLSCOPE_RING_DIR: "/scratch/rings" } })]), "ml", ["t"], { t: "/scratch/rings" }],
  ["a privileged namespace is mutated", pod("ml-privileged", "p", [container("t", { gpus: 2 })]), "ml-privileged", ["t"], { t: WANT_ENV.NCCLSCOPE_RING_DIR }],
  ["a container with its own profiler plugin is left alone", pod("ml", "inspector", [container("t", { gpus: 8, env: { NCCL_PROFILER_PLUGIN: "/opt/nccl/libnccl-profiler-inspector.so" } })]), "ml", [], {}],
  ["a pod without GPUs is left alone", pod("ml", "cpu", [container("t")]), "ml", [], {}],
  ["a namespace that forbids hostPath (baseline) is left alone", pod("ml-baseline", "b", [container("t", { gpus: 8 })]), "ml-baseline", [], {}],
  ["kube-system is left alone", pod("kube-system", "k", [container("t", { gpus: 1 })]), "kube-system", [], {}],
];
for (const [desc, input, ns, wantProfiled, wantRingDir] of samples) {
  let out;
  try {
    out = admit(input, NS[ns]);
  } catch (e) {
    check(false, desc, e.message);
    continue;
  }
  try { new Pod(out).validate(); t.pass(); } catch (e) { check(false, desc, `mutated pod is invalid: ${e.message}`); }
  const got = out.spec.containers.filter(profiled).map((c) => c.name);
  check(isDeepStrictEqual(got, wantProfiled), desc, `profiled containers ${got}, expected ${wantProfiled}`);
  for (const c of out.spec.containers) {
    if (wantRingDir[c.name]) check(envOf(c).NCCLSCOPE_RING_DIR === wantRingDir[c.name], desc, `${c.name}: NCCLSCOPE_RING_DIR ${envOf(c).NCCLSCOPE_RING_DIR}`);
    const before = input.spec.containers.find((x) => x.name === c.name);
    for (const [k, v] of Object.entries(envOf(before))) check(envOf(c)[k] === v, desc, `${c.name}: its own ${k} changed`);
    if (!wantProfiled.includes(c.name)) check(isDeepStrictEqual(c, before), desc, `${c.name} was changed`);
  }
  const volumes = new Set((out.spec.volumes ?? []).map((v) => v.name));
  check(volumes.size === (out.spec.volumes ?? []).length, desc, "duplicate volumes");
  for (const c of out.spec.containers) {
    for (const m of c.volumeMounts ?? []) check(volumes.has(m.name), desc, `${c.name} mounts undeclared volume ${m.name}`);
  }
  if (wantProfiled.length) {
    check(WANT_VOLUMES.every((v) => out.spec.volumes.some((x) => isDeepStrictEqual(x, v))), desc, `volumes ${JSON.stringify(out.spec.volumes)} differ from examples/training-job.yaml's`);
  } else {
    check(isDeepStrictEqual(out, input), desc, "the pod was changed");
  }
}

rmSync(tmp, { recursive: true, force: true });
t.exit(`${samples.length} sample pods, ${t.checks} checks passed, ${t.failures} failed`);
