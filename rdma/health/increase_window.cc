#include "rdma/health/increase_window.h"

namespace ncclscope::rdma::health {

IncreaseWindow::IncreaseWindow(Duration window) : window_(window), step_(window / 32) {}

void IncreaseWindow::Add(TimePoint now, double total) {
  latest_ = total;
  if (samples_.empty() || now - samples_.back().first >= step_) samples_.emplace_back(now, total);
  // Keep one checkpoint at or before the window start as the baseline.
  const TimePoint start = now - window_;
  while (samples_.size() >= 2 && samples_[1].first <= start) samples_.pop_front();
}

}  // namespace ncclscope::rdma::health
