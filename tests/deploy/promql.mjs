// Reads PromQL with the Prometheus project's own grammar (@prometheus-io/lezer-promql, the parser of
// the Prometheus UI) to find what an expression references. Whether Prometheus accepts the
// expression is decided by a real Prometheus (prometheus.mjs), not here.
import { parser } from "@prometheus-io/lezer-promql";

const RATE_FUNCTIONS = new Set(["rate", "irate", "increase", "delta", "idelta", "deriv"]);

function text(expr, node) {
  return expr.slice(node.from, node.to);
}

function labelNames(expr, node) {
  return node ? node.getChildren("LabelName").map((n) => text(expr, n)) : [];
}

// Returns { errors: [position], selectors: [{ metric, labels, from, to }],
//           aggregations: [{ op, by, from, to, addedLabels }], rateWindows: [{ func, window }] }.
export function analyze(expr) {
  const tree = parser.parse(expr);
  const out = { errors: [], selectors: [], aggregations: [], rateWindows: [] };
  const grouping = []; // labels that group_left/group_right or label_replace/label_join add
  tree.iterate({
    enter(ref) {
      const node = ref.node;
      if (node.type.isError) out.errors.push(node.from);
      switch (node.name) {
        case "VectorSelector": {
          const id = node.getChild("Identifier");
          const matchers = node.getChild("LabelMatchers");
          const labels = matchers
            ? [...matchers.getChildren("UnquotedLabelMatcher"), ...matchers.getChildren("QuotedLabelMatcher")]
                .map((m) => text(expr, m.getChild("LabelName") ?? m))
            : [];
          out.selectors.push({ metric: id ? text(expr, id) : null, labels, from: node.from, to: node.to });
          break;
        }
        case "AggregateExpr": {
          const modifier = node.getChild("AggregateModifier");
          const by = modifier?.getChild("By") ? labelNames(expr, modifier.getChild("GroupingLabels")) : null;
          out.aggregations.push({ op: text(expr, node.firstChild), by, from: node.from, to: node.to });
          break;
        }
        case "MatchingModifierClause": {
          if (node.getChild("GroupLeft") || node.getChild("GroupRight")) {
            const lists = node.getChildren("GroupingLabels");
            if (lists.length > 1) grouping.push({ at: node.from, labels: labelNames(expr, lists[1]) });
          }
          break;
        }
        case "FunctionCall": {
          const name = text(expr, node.getChild("FunctionIdentifier"));
          const args = node.getChild("FunctionCallBody");
          if (name === "label_replace" || name === "label_join") {
            const strings = args?.getChildren("StringLiteral") ?? [];
            if (strings[0]) grouping.push({ at: node.from, labels: [JSON.parse(text(expr, strings[0]))] });
          }
          if (RATE_FUNCTIONS.has(name)) {
            const matrix = args?.getChild("MatrixSelector");
            const window = matrix?.lastChild;
            if (window) out.rateWindows.push({ func: name, window: text(expr, window) });
          }
          break;
        }
        default:
      }
    },
  });
  for (const agg of out.aggregations) {
    agg.addedLabels = grouping.filter((g) => g.at >= agg.from && g.at < agg.to).flatMap((g) => g.labels);
    agg.selectors = out.selectors.filter((s) => s.from >= agg.from && s.to <= agg.to);
  }
  return out;
}
