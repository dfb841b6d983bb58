#pragma once

#include <chrono>

namespace ncclscope {

// Receives SIGHUP, SIGINT and SIGTERM synchronously. Construct it in main() before any thread
// starts: it blocks those signals, and threads inherit the mask, so only Wait() ever sees them.
class SignalWaiter {
 public:
  SignalWaiter();
  SignalWaiter(const SignalWaiter&) = delete;
  SignalWaiter& operator=(const SignalWaiter&) = delete;

  // The signal number received, or 0 when `timeout` passed first.
  int Wait(std::chrono::milliseconds timeout);
};

}  // namespace ncclscope
