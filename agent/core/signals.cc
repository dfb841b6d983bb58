#include "agent/core/signals.h"

#include <csignal>
#include <ctime>

namespace ncclscope {
namespace {

sigset_t HandledSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGHUP);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

}  // namespace

SignalWaiter::SignalWaiter() {
  const sigset_t set = HandledSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  // A peer closing an HTTP connection mid-response must not kill the agent.
  std::signal(SIGPIPE, SIG_IGN);  // NOLINT(cert-err33-c): the previous handler is not needed
}

int SignalWaiter::Wait(std::chrono::milliseconds timeout) {
  const sigset_t set = HandledSignals();
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  ts.tv_nsec = static_cast<long>((timeout.count() % 1000) * 1'000'000);
  const int signal = sigtimedwait(&set, nullptr, &ts);
  return signal > 0 ? signal : 0;
}

}  // namespace ncclscope
