#pragma once

// The health engine's names for monotonic time; the clock itself, injectable, is platform's
// (platform/clock.h: Clock, SteadyClock, ManualClock).

#include "platform/clock.h"

namespace ncclscope::rdma::health {

using TimePoint = platform::SteadyTime;
using Duration = platform::SteadyTime::duration;

}  // namespace ncclscope::rdma::health
