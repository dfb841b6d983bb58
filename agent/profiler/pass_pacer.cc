#include "agent/profiler/pass_pacer.h"

#include <algorithm>

namespace ncclscope::profiler {

void PassPacer::SetBounds(Duration min, Duration max) {
  min_ = min;
  max_ = std::max(min, max);
  wait_ = min_;
}

PassPacer::Duration PassPacer::AfterPass(std::uint32_t fullest_lane_permille) {
  if (fullest_lane_permille >= 500) {
    wait_ = min_;
  } else if (fullest_lane_permille < 250) {
    wait_ = std::min(max_, wait_ * 2);
  }
  return wait_;
}

}  // namespace ncclscope::profiler
