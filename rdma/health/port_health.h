#pragma once

// Health of one InfiniBand/RoCE port: link state history (link_down, link_flapping), state
// transitions, counter thresholds (errors and congestion) and saturated counters. Fed one
// observation per poll with an explicit time, so scenarios over hours run in tests instantly.

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rdma/counters/counter_state.h"
#include "rdma/health/finding.h"
#include "rdma/health/increase_window.h"
#include "rdma/health/link_history.h"
#include "rdma/health/threshold.h"

namespace ncclscope::rdma::health {

// One configured threshold bound to the counter files it sums.
struct ThresholdSpec {
  std::string name;                       // finding name, the config key
  std::vector<std::string> counter_keys;  // "counters/symbol_error", "hw_counters/out_of_buffer"
  bool only_when_active = false;          // discards are normal while the port is down
  Threshold threshold;
};

// The port's counters by key ("counters/link_downed"), as tracked by counters::CounterState.
using PortCounters = std::unordered_map<std::string, counters::CounterState>;

struct PortObservation {
  bool present = true;  // false: the device vanished (the port counts as down)
  int state_id = -1;    // -1 when unreadable
  int phys_state_id = -1;
};

class PortHealth {
 public:
  PortHealth(const std::vector<ThresholdSpec>* specs, LinkHistoryParams link);
  void Reconfigure(const std::vector<ThresholdSpec>* specs, LinkHistoryParams link);

  void Observe(TimePoint now, const PortObservation& observation, const PortCounters& counters);

  // Findings at `now`: link_down, link_flapping, counter_saturated, then one per threshold whose
  // severity is not "none" and whose counters the port has. `force_down` marks the port down
  // regardless of history (the node has fewer active ports than expected and this one is not
  // active).
  void Findings(TimePoint now, bool force_down, std::vector<Finding>* out) const;

  const LinkHistory& history() const { return history_; }
  // Transitions between state labels seen by polling: {from, to} -> count.
  const std::map<std::pair<std::string, std::string>, std::uint64_t>& transitions() const {
    return transitions_;
  }
  TimePoint last_seen() const { return last_seen_; }

 private:
  const std::vector<ThresholdSpec>* specs_;
  LinkHistory history_;
  std::vector<IncreaseWindow> windows_;  // aligned with *specs_
  std::map<std::pair<std::string, std::string>, std::uint64_t> transitions_;
  int last_state_ = -1;
  double last_link_downed_ = -1;
  bool any_saturated_ = false;
  TimePoint last_seen_{};
};

}  // namespace ncclscope::rdma::health
