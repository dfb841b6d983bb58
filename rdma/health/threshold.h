#pragma once

// A counter threshold of a health check, in the health library's own terms: the agent turns its
// config (rdma.thresholds.*, nvlink.errors) into these (agent/rdma/health_config.h,
// agent/nvlink/nvlink_source.h), so that rdma/ builds without the agent.

#include <chrono>
#include <string>

namespace ncclscope::rdma::health {

struct Threshold {
  double increase = 0;  // a finding when the counter grew by more than this ...
  std::chrono::nanoseconds window{std::chrono::minutes(10)};  // ... within this look-back window
  std::string severity = "warning";  // the finding's severity label; "none" turns the check off
};

}  // namespace ncclscope::rdma::health
