#pragma once

// Small helpers for building prometheus::MetricFamily values in Collect(), where sources render
// their state at scrape time (prometheus-cpp's Collectable) instead of updating counters per event.

#include <prometheus/metric_family.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ncclscope::metrics {

using Labels = std::vector<prometheus::ClientMetric::Label>;

prometheus::MetricFamily Gauge(std::string name, std::string help);
prometheus::MetricFamily Counter(std::string name, std::string help);
prometheus::MetricFamily Histogram(std::string name, std::string help);

// Appends one sample to a gauge or counter family.
void Add(prometheus::MetricFamily& family, Labels labels, double value);

// Appends one histogram sample set. `bounds` are the finite upper bounds (ascending) and
// `counts[i]` the number of observations in bucket i (not cumulative); counts.size() ==
// bounds.size() + 1, the last being the +Inf bucket.
void AddHistogram(prometheus::MetricFamily& family, Labels labels,
                  const std::vector<double>& bounds, const std::vector<std::uint64_t>& counts,
                  double sum);

}  // namespace ncclscope::metrics
