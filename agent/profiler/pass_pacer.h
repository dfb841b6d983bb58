#pragma once

// How long the reader waits before its next pass over the rings. A pass costs a fixed amount
// whatever it finds (a system call or two per ring, cold ring headers: ~0.34 ms for 8 rings on
// the benchmark VM, docs/benchmarks.md "A pass paced by what it finds"), so passes that find the
// lanes nearly empty are spread out, from plugin.poll_interval up to plugin.poll_interval_max,
// and come back to poll_interval as soon as a lane fills faster.
//
// The measure is the fullest lane a pass read, as a share of its capacity. The next wait is the
// one that would have found that lane 40 % full at the rate the pass saw (at most twice the last
// wait, never below plugin.poll_interval nor above plugin.poll_interval_max); a lane half full or
// more brings it back to plugin.poll_interval at once. At 5,000 records per second into a
// 2,048-record lane the passes settle ~165 ms apart; up to ~1,600 per second, at the maximum. A
// burst that starts during the longest wait has poll_interval_max to fill a lane (and the three
// lanes a writer spills into, ring_writer.cc) before records are dropped and counted: at the
// default 500 ms and 2,048-record lanes, ~4,000 records per second per writer thread into one
// lane, ~16,000 with the spill lanes free. poll_interval_max equal to poll_interval (or below it)
// keeps every wait at poll_interval.

#include <chrono>
#include <cstdint>

namespace ncclscope::profiler {

class PassPacer {
 public:
  using Duration = std::chrono::steady_clock::duration;

  PassPacer() = default;  // every wait 0 until SetBounds()
  PassPacer(Duration min, Duration max) { SetBounds(min, max); }

  // The configured bounds (a maximum below the minimum is taken as the minimum). The wait
  // starts over at the minimum.
  void SetBounds(Duration min, Duration max);

  // After a pass: the fullest lane it read, in thousandths of the lane's capacity (its records
  // before the pass took them). Returns the wait before the next pass.
  Duration AfterPass(std::uint32_t fullest_lane_permille);

  Duration wait() const { return wait_; }

  static constexpr std::uint32_t kTarget = 400;  // thousandths of a lane the next pass aims at
  static constexpr std::uint32_t kBackAt = 500;  // a lane this full: back to the minimum

 private:
  Duration min_{};
  Duration max_{};
  Duration wait_{};
};

}  // namespace ncclscope::profiler
