#pragma once

// Time as the health engine sees it. Findings depend on history (how long a port has been down,
// how many episodes in the last hour), so tests drive a ManualClock through hours of scenarios in
// microseconds; the agent uses the steady clock.

#include <atomic>
#include <chrono>

namespace ncclscope::rdma::health {

using TimePoint = std::chrono::steady_clock::time_point;
using Duration = std::chrono::steady_clock::duration;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimePoint Now() const = 0;
};

class SteadyClock : public Clock {
 public:
  TimePoint Now() const override { return std::chrono::steady_clock::now(); }
};

// A clock that moves only when told to. Thread-safe.
class ManualClock : public Clock {
 public:
  explicit ManualClock(TimePoint start = TimePoint{} + std::chrono::hours(1)) : now_(start) {}
  TimePoint Now() const override { return now_.load(); }
  void Set(TimePoint t) { now_.store(t); }
  void Advance(Duration d) { now_.store(now_.load() + d); }

 private:
  std::atomic<TimePoint> now_;
};

}  // namespace ncclscope::rdma::health
