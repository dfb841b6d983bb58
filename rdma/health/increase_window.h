#pragma once

// How much a (never decreasing) total grew within the last `window`: the measure behind every
// counter threshold ("symbol_error > 120 per hour"). Keeps about 32 checkpoints per window, so
// memory is bounded whatever the poll interval, at a resolution of window/32. Until a full window
// of history exists the increase is measured from the first sample.

#include <deque>
#include <utility>

#include "rdma/health/clock.h"

namespace ncclscope::rdma::health {

class IncreaseWindow {
 public:
  explicit IncreaseWindow(Duration window = std::chrono::minutes(10));

  void Add(TimePoint now, double total);
  double Increase() const { return samples_.empty() ? 0 : latest_ - samples_.front().second; }
  bool empty() const { return samples_.empty(); }

 private:
  Duration window_;
  Duration step_;
  std::deque<std::pair<TimePoint, double>> samples_;
  double latest_ = 0;
};

}  // namespace ncclscope::rdma::health
