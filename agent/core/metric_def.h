#pragma once

// A metric family declared once: its name, type, base unit and help text. Every family the agent
// exposes is one of these constants, declared in its source folder's `*_metrics.h` (e.g.
// agent/rdma/rdma_metrics.h) and listed there; render sites write through it
// (TextWriter::Header/Sample, FamilySet::Get) so a name cannot be misspelt in one place, and
// agent/app/metric_catalog.h gathers every list for the docs test
// (tests/unit/agent/metric_catalog_test.cc: each family documented in docs/metrics.md with its
// type, each documented family declared), including families only a fault would render.

#include <string_view>

namespace ncclscope::metrics {

enum class MetricType { kCounter, kGauge, kHistogram };

// The text format's spelling of the type ("counter", "gauge", "histogram").
constexpr std::string_view TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kHistogram:
      return "histogram";
    case MetricType::kGauge:
      break;
  }
  return "gauge";
}

struct MetricDef {
  std::string_view name;
  MetricType type;
  // The base unit the name carries (Prometheus naming: `_seconds`, `_bytes`, `_ratio`), empty
  // for counts and info metrics.
  std::string_view unit;
  std::string_view help;
};

constexpr MetricDef Counter(std::string_view name, std::string_view unit, std::string_view help) {
  return {name, MetricType::kCounter, unit, help};
}
constexpr MetricDef Gauge(std::string_view name, std::string_view unit, std::string_view help) {
  return {name, MetricType::kGauge, unit, help};
}
constexpr MetricDef Histogram(std::string_view name, std::string_view unit, std::string_view help) {
  return {name, MetricType::kHistogram, unit, help};
}

}  // namespace ncclscope::metrics
