#pragma once

// Polling a condition until it holds, for tests that wait on another thread or process (the
// plugin's maintenance thread, the agent, a simulated job). The condition is checked first, then
// after each `interval`, and once more when `timeout` has passed, so one that became true during
// the last sleep still counts.

#include <chrono>
#include <thread>

namespace ncclscope::testing {

template <typename Predicate>
bool WaitFor(Predicate&& done, std::chrono::milliseconds timeout,
             std::chrono::milliseconds interval = std::chrono::milliseconds(50)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(interval);
  }
  return true;
}

}  // namespace ncclscope::testing
