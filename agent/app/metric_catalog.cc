#include "agent/app/metric_catalog.h"

#include "agent/analytics/analytics_metrics.h"
#include "agent/analytics/detection/detection_metrics.h"
#include "agent/ebpf/ebpf_metrics.h"
#include "agent/exporter/exporter_metrics.h"
#include "agent/nvlink/nvlink_metrics.h"
#include "agent/profiler/profiler_metrics.h"
#include "agent/rdma/rdma_metrics.h"

namespace ncclscope {

std::vector<metrics::MetricDef> MetricCatalog() {
  std::vector<metrics::MetricDef> all;
  const auto add = [&](const auto& list) {
    for (const metrics::MetricDef* def : list) all.push_back(*def);
  };
  add(kExporterMetrics);
  add(profiler::kProfilerMetrics);
  add(analytics::kAnalyticsMetrics);
  add(analytics::detection::kDetectionMetrics);
  add(ebpf::kEbpfMetrics);
  add(rdma::kRdmaMetrics);
  for (const rdma::counters::CounterInfo& info : rdma::counters::Catalogue()) {
    all.push_back(rdma::CounterFamily(info));
  }
  add(nvlink::kNvlinkMetrics);
  all.insert(all.end(), nvlink::kNvlinkErrorCounters.begin(), nvlink::kNvlinkErrorCounters.end());
  for (const nvlink::NvlinkFieldFamily& field : nvlink::kNvlinkFieldFamilies)
    all.push_back(field.def);
  all.insert(all.end(), nvlink::kNvlinkGpuFamilies.begin(), nvlink::kNvlinkGpuFamilies.end());
  return all;
}

}  // namespace ncclscope
