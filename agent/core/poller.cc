#include "agent/core/poller.h"

namespace ncclscope {

std::chrono::nanoseconds Poller::Jittered(std::chrono::nanoseconds interval, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> factor(0.9, 1.1);
  return std::chrono::nanoseconds(static_cast<std::chrono::nanoseconds::rep>(
      static_cast<double>(interval.count()) * factor(rng)));
}

void Poller::Start(std::chrono::nanoseconds interval,
                   std::function<std::chrono::nanoseconds()> task) {
  Stop();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = false;
  }
  thread_ = std::thread([this, interval, task = std::move(task)] {
    std::mt19937_64 rng(std::random_device{}());
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
      lock.unlock();
      std::chrono::nanoseconds delay = task();
      lock.lock();
      if (delay <= std::chrono::nanoseconds(0)) delay = Jittered(interval, rng);
      wake_.wait_for(lock, delay, [this] { return stop_; });
    }
  });
}

void Poller::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace ncclscope
