#pragma once

// A thread that runs posted work at given host times (CLOCK_REALTIME ns): the simulator's NCCL
// proxy thread. `precise` work runs as close to its time as the OS wakes us (timer slack lowered
// for this thread); other work runs at the first tick boundary at or after its time, so that
// thousands of events a second cost few wake-ups. Work due at the same time runs in posting order.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <queue>
#include <thread>
#include <vector>

namespace ncclscope::sim {

class TimedExecutor {
 public:
  explicit TimedExecutor(std::uint64_t tick_ns);
  ~TimedExecutor();
  TimedExecutor(const TimedExecutor&) = delete;
  TimedExecutor& operator=(const TimedExecutor&) = delete;

  void Post(std::uint64_t at_ns, bool precise, std::function<void()> work);
  // Waits until everything posted so far has run.
  void Drain();

 private:
  struct Event {
    std::uint64_t at;
    std::uint64_t order;
    std::function<void()> work;
    bool operator>(const Event& o) const { return at != o.at ? at > o.at : order > o.order; }
  };
  void Run();

  const std::uint64_t tick_ns_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> queue_;
  std::uint64_t next_order_ = 0;
  bool running_work_ = false;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace ncclscope::sim
