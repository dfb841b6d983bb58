#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "agent/core/source_set.h"
#include "agent/exporter/agent_state.h"

namespace ncclscope {

// What the HTTP server's metrics path serves. On each scrape it asks every running source for its
// families (timing each, and turning a throwing source into an error count rather than a failed
// scrape), then appends the agent's self-metrics:
//   ncclscope_build_info, ncclscope_source_{up,enabled}, ncclscope_source_errors_total,
//   ncclscope_source_collection_duration_seconds, ncclscope_config_*, ncclscope_scrape*,
//   process_*.
// RenderText() is the scrape, in the text format (agent/core/text_exposition.h).
class ScrapeCollector {
 public:
  ScrapeCollector(const SourceSet* sources, const ReloadStats* reload);

  std::string RenderText() const;

 private:
  const SourceSet* sources_;
  const ReloadStats* reload_;
  // The previous scrape, for ncclscope_scrape_duration_seconds / ncclscope_scrape_bytes.
  mutable std::atomic<std::uint64_t> scrapes_{0};
  mutable std::atomic<double> last_duration_seconds_{0};
  mutable std::atomic<std::uint64_t> last_bytes_{0};
};

}  // namespace ncclscope
