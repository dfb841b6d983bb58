#pragma once

// Node-side straggler detection: a one-sided CUSUM per (comm, rank) over the cost each rank
// imposes on the node's other ranks of the communicator. For every collective matched across the
// node's ranks (arrival_matcher.h), the last arriver made the others wait at least `delay` = its
// arrival minus the second-last one's. Per one-second window of the agent's clock:
//     cost_w(r) = sum of r's delays in the window / window length      (seconds per second)
//     S(r)      = min(2h, max(0, S(r) + cost_w(r) - k))                 k = min_cost / 2
// and the `straggler` finding is on from S >= h until S < h / 2. Windows in which the
// communicator completed no matched collective (every rank paused, a checkpoint, a hang) leave
// S as it is. When no live ring lists the communicator any more (its job ended), S and the
// finding go back to 0 at once: the ranks of an ending job arrive at its last collectives in any
// order, and its finding would otherwise outlive the job (its series are kept for a while).
//
// Why these numbers (the false-alarm model). With exchangeable healthy ranks the last arriver is
// random and its lead over the second-last is a difference of two jitters: cost_w has a mean
// mu0 = ops/s x E[delay] / local ranks (0.7 % for 1 ms of jitter, 40 matched ops/s, 2 ranks)
// and a standard deviation sigma well under k. The CUSUM's increments then drift by
// mu0 - k < 0, and its in-control run length (Siegmund's approximation,
//     ARL0 ~ (exp(2 |d| b / sigma^2) - 1 - 2 |d| b / sigma^2) / (2 d^2 / sigma^2),
//     d = mu0 - k, b = h + 1.166 sigma)
// is astronomically long for the defaults (k = 0.025, h = 0.25): exp(> 1000) windows. What does
// set the finding off in a healthy job is not noise but a real, short stall of one rank that
// holds the others for more than h (0.25 s) beyond the allowance: the finding then lasts
// about (stall - h) / k + h / (2k) seconds, which the alert's `for:` absorbs. A straggler of
// cost c >= min_cost is found after about h / (c - k) seconds (2 s at c = 15 %), and its finding
// clears at most 1.5 h / k = 15 s after it stops.

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>

#include <cstdint>

#include "agent/analytics/comm_registry.h"
#include "agent/analytics/series_table.h"
#include "agent/core/text_exposition.h"

namespace ncclscope::analytics::detection {

class StragglerDetector {
 public:
  struct RankState {
    double window_delay_s = 0;
    double cusum_s = 0;
    bool finding = false;
    std::uint64_t alarms = 0;
  };

  void SetLimits(double min_cost, double threshold_s);
  // One collective matched across the node's ranks: `last_rank` arrived `delay_ns` after the
  // second-last.
  void OnMatched(const CommRegistry& registry, std::uint32_t comm_label, std::int32_t last_rank,
                 std::uint64_t delay_ns, std::uint32_t weight = 1);
  // Closes the window when a second has passed; clears the communicators not in `live` (labels of
  // those a live ring lists).
  void EndPass(Clock::time_point now, const absl::flat_hash_set<std::uint32_t>& live);

  void DropLabels(const absl::flat_hash_set<std::uint32_t>& labels);
  void Render(metrics::TextWriter& out) const;
  const RankState* Find(std::uint32_t comm_label, std::int32_t rank) const;
  std::size_t series() const { return ranks_.size(); }

  static constexpr Clock::duration kWindow = std::chrono::seconds(1);

 private:
  double allowance_ = 0.025;
  double threshold_s_ = 0.25;
  Clock::time_point window_start_{};
  SeriesTable<RankState> ranks_;
  absl::flat_hash_map<std::uint32_t, std::uint64_t> matched_in_window_;  // by comm label
};

}  // namespace ncclscope::analytics::detection
