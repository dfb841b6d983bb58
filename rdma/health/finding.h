#pragma once

// A finding: a named condition the agent judged from history and thresholds, exported as a 0/1
// gauge with a `severity` label (critical: something is down; warning: a node anomaly; info: slow
// degradation), the same tiers as the alert rules.

#include <string>

namespace ncclscope::rdma::health {

struct Finding {
  std::string name;      // "link_down", "link_flapping", "symbol_error_ber", ...
  std::string severity;  // "critical", "warning", "info"
  bool active = false;
};

}  // namespace ncclscope::rdma::health
