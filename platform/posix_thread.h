#pragma once

// Mutex, condition variable and thread over pthreads, for code that may not throw or use the
// standard library's run-time part (platform/README.md): std::thread reports a failed start by
// throwing, std::condition_variable::wait_for may use pthread_cond_clockwait (glibc 2.30). Errors
// are return values here; waits use CLOCK_MONOTONIC, so a wall-clock step neither shortens nor
// stretches them.

#include <pthread.h>
#include <time.h>

#include <cstdint>

namespace ncclscope::platform {

class Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;
  ~Mutex() { pthread_mutex_destroy(&mutex_); }

  void Lock() { pthread_mutex_lock(&mutex_); }
  void Unlock() { pthread_mutex_unlock(&mutex_); }
  // In a forked child, where the parent's holder does not exist: a fresh, unlocked mutex (the
  // old state is abandoned, not destroyed).
  void ResetAfterFork() { mutex_ = PTHREAD_MUTEX_INITIALIZER; }
  pthread_mutex_t* native() { return &mutex_; }

 private:
  pthread_mutex_t mutex_ = PTHREAD_MUTEX_INITIALIZER;
};

class MutexLock {
 public:
  explicit MutexLock(Mutex& mutex) : mutex_(mutex) { mutex_.Lock(); }
  ~MutexLock() {
    if (held_) mutex_.Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;
  void Unlock() {
    mutex_.Unlock();
    held_ = false;
  }
  void Lock() {
    mutex_.Lock();
    held_ = true;
  }
  Mutex& mutex() { return mutex_; }

 private:
  Mutex& mutex_;
  bool held_ = true;
};

class CondVar {
 public:
  CondVar() { Init(); }
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;
  ~CondVar() { pthread_cond_destroy(&cond_); }

  // Waits until signalled or `ns` nanoseconds passed (spurious wake-ups possible, as always).
  // `lock` must hold its mutex.
  void WaitFor(MutexLock& lock, std::uint64_t ns) {
    timespec deadline{};
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    const std::uint64_t total = static_cast<std::uint64_t>(deadline.tv_nsec) + ns % 1'000'000'000;
    deadline.tv_sec += static_cast<time_t>(ns / 1'000'000'000 + total / 1'000'000'000);
    deadline.tv_nsec = static_cast<long>(total % 1'000'000'000);
    pthread_cond_timedwait(&cond_, lock.mutex().native(), &deadline);
  }
  void Signal() { pthread_cond_signal(&cond_); }
  void Broadcast() { pthread_cond_broadcast(&cond_); }
  // In a forked child: a fresh condition variable (no waiter of the parent exists here).
  void ResetAfterFork() { Init(); }

 private:
  void Init() {
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&cond_, &attr);
    pthread_condattr_destroy(&attr);
  }
  pthread_cond_t cond_{};
};

class Thread {
 public:
  Thread() = default;
  Thread(const Thread&) = delete;
  Thread& operator=(const Thread&) = delete;

  // Starts `body(arg)` on a new thread; returns the pthread_create error (0: started).
  int Start(void (*body)(void*), void* arg) {
    body_ = body;
    arg_ = arg;
    const int rc = pthread_create(&thread_, nullptr, &Trampoline, this);
    started_ = rc == 0;
    return rc;
  }
  bool joinable() const { return started_; }
  void Join() {
    if (!started_) return;
    pthread_join(thread_, nullptr);
    started_ = false;
  }
  // In a forked child: the parent's thread does not exist here; forget it without joining.
  void ForgetAfterFork() { started_ = false; }

 private:
  static void* Trampoline(void* self) {
    auto* t = static_cast<Thread*>(self);
    t->body_(t->arg_);
    return nullptr;
  }
  pthread_t thread_{};
  void (*body_)(void*) = nullptr;
  void* arg_ = nullptr;
  bool started_ = false;
};

}  // namespace ncclscope::platform
