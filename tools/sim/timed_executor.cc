#include "tools/sim/timed_executor.h"

#include <sys/prctl.h>

#include <chrono>

#include "platform/clock.h"
#include "tools/sim/rank_runner.h"

namespace ncclscope::sim {

TimedExecutor::TimedExecutor(std::uint64_t tick_ns)
    : tick_ns_(tick_ns == 0 ? 1 : tick_ns), thread_([this] { Run(); }) {}

TimedExecutor::~TimedExecutor() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void TimedExecutor::Post(std::uint64_t at_ns, bool precise, std::function<void()> work) {
  if (!precise) at_ns = (at_ns + tick_ns_ - 1) / tick_ns_ * tick_ns_;
  bool earliest = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    earliest = queue_.empty() || at_ns < queue_.top().at;
    queue_.push({at_ns, next_order_++, std::move(work)});
  }
  if (earliest) wake_.notify_all();
}

void TimedExecutor::Drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [this] { return queue_.empty() && !running_work_; });
}

void TimedExecutor::Run() {
  // The default 50 us of timer slack would blur step states of a few hundred microseconds.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    if (queue_.empty()) {
      idle_.notify_all();
      if (stop_) return;
      wake_.wait(lock);
      continue;
    }
    const std::uint64_t at = queue_.top().at;
    const std::uint64_t now = platform::RealtimeNs();
    if (at > now) {
      if (stop_) return;  // leave what is not due yet
      wake_.wait_until(lock, std::chrono::system_clock::time_point(
                                 std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                     std::chrono::nanoseconds(at))));
      continue;
    }
    Event event = std::move(const_cast<Event&>(queue_.top()));
    queue_.pop();
    running_work_ = true;
    lock.unlock();
    event.work();
    lock.lock();
    running_work_ = false;
  }
}

}  // namespace ncclscope::sim
