#pragma once

// Collects samples into metric families by name, creating each family on first use, so a poll can
// walk ports once and emit samples of many families.

#include <prometheus/metric_family.h>

#include <string>
#include <unordered_map>
#include <vector>

#include "agent/core/metric_family.h"

namespace ncclscope::rdma {

class FamilySet {
 public:
  prometheus::MetricFamily& Gauge(const std::string& name, const std::string& help);
  prometheus::MetricFamily& Counter(const std::string& name, const std::string& help);

  void AddGauge(const std::string& name, const std::string& help, metrics::Labels labels,
                double value) {
    metrics::Add(Gauge(name, help), std::move(labels), value);
  }
  void AddCounter(const std::string& name, const std::string& help, metrics::Labels labels,
                  double value) {
    metrics::Add(Counter(name, help), std::move(labels), value);
  }

  // The families in creation order.
  std::vector<prometheus::MetricFamily> Take() { return std::move(families_); }

 private:
  prometheus::MetricFamily& Get(const std::string& name, const std::string& help,
                                prometheus::MetricType type);
  std::vector<prometheus::MetricFamily> families_;
  std::unordered_map<std::string, std::size_t> index_;
};

}  // namespace ncclscope::rdma
