// ProxyThread: a thread that runs posted work in order, standing in for NCCL's proxy progress
// thread (and, for v7, a communicator's profiler thread or CUDA's host-callback thread).

#include <functional>
#include <mutex>

#include "tools/replay/nccl_replay.h"

namespace ncclscope::replay {

ProxyThread::ProxyThread() : thread_([this] { Run(); }) {}

ProxyThread::~ProxyThread() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void ProxyThread::Post(std::function<void()> work) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(work));
  }
  cv_.notify_all();
}

void ProxyThread::Drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_cv_.wait(lock, [this] { return queue_.empty() && !busy_; });
}

void ProxyThread::Run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty() && stop_) return;
    std::function<void()> work = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    work();
    lock.lock();
    busy_ = false;
    if (queue_.empty()) idle_cv_.notify_all();
  }
}

}  // namespace ncclscope::replay
