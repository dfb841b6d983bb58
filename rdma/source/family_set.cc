#include "rdma/source/family_set.h"

namespace ncclscope::rdma {

prometheus::MetricFamily& FamilySet::Get(const std::string& name, const std::string& help,
                                         prometheus::MetricType type) {
  auto it = index_.find(name);
  if (it != index_.end()) return families_[it->second];
  index_.emplace(name, families_.size());
  families_.push_back(type == prometheus::MetricType::Counter ? metrics::Counter(name, help)
                                                              : metrics::Gauge(name, help));
  return families_.back();
}

prometheus::MetricFamily& FamilySet::Gauge(const std::string& name, const std::string& help) {
  return Get(name, help, prometheus::MetricType::Gauge);
}

prometheus::MetricFamily& FamilySet::Counter(const std::string& name, const std::string& help) {
  return Get(name, help, prometheus::MetricType::Counter);
}

}  // namespace ncclscope::rdma
