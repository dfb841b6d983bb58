#pragma once

#include <prometheus/collectable.h>

#include "agent/core/source_set.h"
#include "agent/exporter/agent_state.h"

namespace ncclscope {

// The one Collectable registered with the HTTP server. On each scrape it asks every running
// source for its families (timing each, and turning a throwing source into an error count rather
// than a failed scrape), then appends the agent's self-metrics:
//   ncclscope_build_info, ncclscope_source_{up,enabled}, ncclscope_source_errors_total,
//   ncclscope_source_collection_duration_seconds, ncclscope_config_*, process_*.
class ScrapeCollector : public prometheus::Collectable {
 public:
  ScrapeCollector(const SourceSet* sources, const ReloadStats* reload);

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const SourceSet* sources_;
  const ReloadStats* reload_;
};

}  // namespace ncclscope
