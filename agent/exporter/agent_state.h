#pragma once

#include <atomic>
#include <cstdint>

namespace ncclscope {

// Agent-wide facts the self-metrics report, updated by the reload path and read at scrape time.
struct ReloadStats {
  std::atomic<bool> last_successful{true};
  std::atomic<double> last_success_time_seconds{0};
  std::atomic<std::uint64_t> successes{0};
  std::atomic<std::uint64_t> failures{0};

  // The load at start-up: not a reload, but it sets the success timestamp.
  void RecordInitialLoad(double now_seconds) {
    last_successful = true;
    last_success_time_seconds = now_seconds;
  }
  void RecordSuccess(double now_seconds) {
    last_successful = true;
    last_success_time_seconds = now_seconds;
    ++successes;
  }
  void RecordFailure() {
    last_successful = false;
    ++failures;
  }
};

}  // namespace ncclscope
