#pragma once

// The host's clocks in nanoseconds, one definition for every component. CLOCK_REALTIME is the clock
// every process on a node (and every node with a synchronized clock) shares: ring timestamps, the
// agent's joins and the duty cycle's windows are in it. CLOCK_MONOTONIC is for intervals that must
// not jump with the wall clock. clock_gettime is in glibc's libc itself since 2.17 (librt before),
// the oldest glibc the plugin loads under (platform/README.md). On the hot path the plugin reads
// the TSC instead (plugin/src/clock.h), calibrated against RealtimeNs().

#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdint>

namespace ncclscope::platform {

inline std::uint64_t ClockNs(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

// CLOCK_REALTIME now, in ns since the Unix epoch.
inline std::uint64_t RealtimeNs() { return ClockNs(CLOCK_REALTIME); }

// CLOCK_MONOTONIC now, in ns since an arbitrary start (boot): for durations and deadlines.
inline std::uint64_t MonotonicNs() { return ClockNs(CLOCK_MONOTONIC); }

// CLOCK_REALTIME now, in seconds since the Unix epoch (Prometheus' *_timestamp_seconds).
inline double UnixSeconds() { return static_cast<double>(RealtimeNs()) / 1e9; }

// Monotonic time for code whose results depend on history (how long a port has been down, how
// many episodes in the last hour): it takes a Clock, so tests drive a ManualClock through hours of
// scenarios in microseconds while the agent passes a SteadyClock. std::chrono::steady_clock's time
// points, read through MonotonicNs() (the same CLOCK_MONOTONIC; steady_clock::now() would need
// libstdc++'s run time, which the plugin does not link).
using SteadyTime = std::chrono::steady_clock::time_point;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual SteadyTime Now() const = 0;
};

class SteadyClock : public Clock {
 public:
  SteadyTime Now() const override {
    return SteadyTime(std::chrono::nanoseconds(static_cast<std::int64_t>(MonotonicNs())));
  }
};

// A clock that moves only when told to. Thread-safe.
class ManualClock : public Clock {
 public:
  explicit ManualClock(SteadyTime start = SteadyTime{} + std::chrono::hours(1)) : now_(start) {}
  SteadyTime Now() const override { return now_.load(); }
  void Set(SteadyTime t) { now_.store(t); }
  void Advance(SteadyTime::duration d) { now_.store(now_.load() + d); }

 private:
  std::atomic<SteadyTime> now_;
};

}  // namespace ncclscope::platform
