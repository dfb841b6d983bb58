#include "agent/core/metric_family.h"

#include <limits>

namespace ncclscope::metrics {
namespace {

prometheus::MetricFamily Make(std::string name, std::string help, prometheus::MetricType type) {
  prometheus::MetricFamily family;
  family.name = std::move(name);
  family.help = std::move(help);
  family.type = type;
  return family;
}

}  // namespace

prometheus::MetricFamily Gauge(std::string name, std::string help) {
  return Make(std::move(name), std::move(help), prometheus::MetricType::Gauge);
}

prometheus::MetricFamily Counter(std::string name, std::string help) {
  return Make(std::move(name), std::move(help), prometheus::MetricType::Counter);
}

prometheus::MetricFamily Histogram(std::string name, std::string help) {
  return Make(std::move(name), std::move(help), prometheus::MetricType::Histogram);
}

void Add(prometheus::MetricFamily& family, Labels labels, double value) {
  prometheus::ClientMetric& metric = family.metric.emplace_back();
  metric.label = std::move(labels);
  if (family.type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
}

void AddHistogram(prometheus::MetricFamily& family, Labels labels,
                  const std::vector<double>& bounds, const std::vector<std::uint64_t>& counts,
                  double sum) {
  prometheus::ClientMetric& metric = family.metric.emplace_back();
  metric.label = std::move(labels);
  std::uint64_t cumulative = 0;
  metric.histogram.bucket.reserve(bounds.size() + 1);
  for (std::size_t i = 0; i <= bounds.size(); ++i) {
    cumulative += i < counts.size() ? counts[i] : 0;
    prometheus::ClientMetric::Bucket& bucket = metric.histogram.bucket.emplace_back();
    bucket.cumulative_count = cumulative;
    bucket.upper_bound = i < bounds.size() ? bounds[i] : std::numeric_limits<double>::infinity();
  }
  metric.histogram.sample_count = cumulative;
  metric.histogram.sample_sum = sum;
}

}  // namespace ncclscope::metrics
