#pragma once

// A background thread that runs a task at once and then every `interval` with +-10% jitter (so
// the agents of a cluster do not hit the fabric in lockstep), until stopped. Scrapes never run
// the task: sources publish what it produced and Collect() serves that.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <random>
#include <thread>

namespace ncclscope {

class Poller {
 public:
  Poller() = default;
  ~Poller() { Stop(); }
  Poller(const Poller&) = delete;
  Poller& operator=(const Poller&) = delete;

  // Starts the thread (stopping a previous one first). `task` returns the delay before the next
  // run, or zero for the normal interval (used to retry sooner or later, e.g. NVML loading).
  void Start(std::chrono::nanoseconds interval, std::function<std::chrono::nanoseconds()> task);
  // Stops and joins; the task is not interrupted mid-run. Idempotent.
  void Stop();
  bool running() const { return thread_.joinable(); }

  // The next delay: interval scaled by a factor in [0.9, 1.1].
  static std::chrono::nanoseconds Jittered(std::chrono::nanoseconds interval, std::mt19937_64& rng);

 private:
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
};

}  // namespace ncclscope
