// A dashboard's template variables resolved as Grafana resolves them, for the tests and benchmarks
// that run the shipped dashboards' queries against a real Prometheus (dashboards_e2e.mjs,
// bench/fleet/fleet_rules_bench.mjs), and the references and panels dashboards.mjs checks.

// As Grafana's Prometheus data source escapes a value for a regex matcher: a backslash before each
// regex metacharacter, itself escaped inside the PromQL string.
export const regexEscape = (s) => s.replace(/[\\^$.*+?()[\]{}|]/g, "\\\\$&");
// A variable reference in Grafana's three syntaxes: $name, ${name} / ${name:format} /
// ${name.field}, [[name]]; the name is the first defined group.
export const VAR_REF = /\$\{([A-Za-z0-9_]+)[^}]*\}|\$([A-Za-z0-9_]+)|\[\[([A-Za-z0-9_]+)[^\]]*\]\]/g;

// Every panel of a dashboard, those inside collapsed rows included (the rows themselves too).
export const panelsOf = (dashboard) => dashboard.panels.flatMap((p) => (p.type === "row" ? [p, ...(p.panels ?? [])] : [p]));

// In `chosen`, this value picks the variable's first option (sorted), as a user would pick one job
// or node from the list.
export const FIRST = Symbol("first option");

// Each query variable's options from its label_values() query (with the variables before it
// interpolated, series since `start`, Unix seconds); the value: `chosen[name]` (FIRST: the first
// option), else "All" (its allValue, or every option as a regex alternation), or with `grafanaDefault`
// what Grafana selects on a dashboard saved without a current value: "All" where the variable
// includes it, else the first option. `builtins`: $__rate_interval and the like. Returns
// { interpolate(expr), values } (values: variable -> the text put in).
export async function resolveVariables(dashboard, prometheus, { chosen = {}, builtins = {}, start, grafanaDefault = false } = {}) {
  const values = { ...builtins };
  const interpolate = (s) => s.replace(VAR_REF, (m, a, b, c) => values[a ?? b ?? c] ?? m);
  for (const v of dashboard.templating.list.filter((x) => x.type === "query")) {
    const [, selector, label] = v.query.query.match(/^label_values\((.*),\s*(\w+)\)$/s);
    const series = await prometheus.series(interpolate(selector), Math.floor(start));
    const options = [...new Set(series.map((s) => s[label]).filter((x) => x !== undefined && x !== ""))].sort();
    const all = v.allValue ?? `(${options.map(regexEscape).join("|")})`;
    const pick = chosen[v.name];
    if (pick === FIRST) values[v.name] = options.length ? regexEscape(options[0]) : all;
    else if (pick !== undefined) values[v.name] = regexEscape(pick);
    else values[v.name] = grafanaDefault && !v.includeAll && options.length ? regexEscape(options[0]) : all;
  }
  return { interpolate, values };
}
