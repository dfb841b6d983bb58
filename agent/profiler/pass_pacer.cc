#include "agent/profiler/pass_pacer.h"

#include <algorithm>

namespace ncclscope::profiler {

void PassPacer::SetBounds(Duration min, Duration max) {
  min_ = min;
  max_ = std::max(min, max);
  wait_ = min_;
}

PassPacer::Duration PassPacer::AfterPass(std::uint32_t fullest_lane_permille) {
  if (fullest_lane_permille >= kBackAt) {
    wait_ = min_;
    return wait_;
  }
  // At a steady rate the fill grows with the wait: the wait that would have found the lane at
  // the target, at most twice the last one (a rate measured over one pass is a noisy guess).
  const Duration doubled = std::min(max_, wait_ * 2);
  if (fullest_lane_permille == 0) {
    wait_ = doubled;
    return wait_;
  }
  const Duration aimed = wait_ * kTarget / fullest_lane_permille;
  wait_ = std::clamp(aimed, min_, doubled);
  return wait_;
}

}  // namespace ncclscope::profiler
