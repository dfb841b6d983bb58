#include "agent/profiler/guarded_memory.h"

#include <setjmp.h>
#include <signal.h>

#include <atomic>
#include <cstring>
#include <mutex>

namespace ncclscope::profiler {
namespace {

thread_local sigjmp_buf* t_recovery = nullptr;
struct sigaction g_previous = {};

void OnSigbus(int signal, siginfo_t* info, void* context) {
  if (sigjmp_buf* recovery = t_recovery) {
    t_recovery = nullptr;
    siglongjmp(*recovery, 1);
  }
  // Not ours: behave as if we were never installed.
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(signal, info, context);
    return;
  }
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN &&
      g_previous.sa_handler != nullptr) {
    g_previous.sa_handler(signal);
    return;
  }
  ::signal(SIGBUS, SIG_DFL);
  ::raise(SIGBUS);
}

void InstallOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action = {};
    action.sa_sigaction = OnSigbus;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    sigaction(SIGBUS, &action, &g_previous);
  });
}

// Runs `access` with SIGBUS recovery. `access` must not own anything with a destructor: a fault
// leaves it by a long jump.
// The signal mask is not saved (sigsetjmp's second argument 0): saving it costs a sigprocmask
// system call per access, and there is nothing to restore, since the handler runs with SA_NODEFER
// and an empty sa_mask and so leaves the mask as it found it.
template <typename Access>
bool Guarded(Access&& access) {
  InstallOnce();
  sigjmp_buf recovery;
  if (sigsetjmp(recovery, 0) != 0) return false;
  t_recovery = &recovery;
  access();
  t_recovery = nullptr;
  return true;
}

}  // namespace

bool GuardedCall(void (*access)(void*), void* arg) {
  return Guarded([=] { access(arg); });
}

bool GuardedCopy(void* dst, const void* src, std::size_t n) {
  return Guarded([=] { std::memcpy(dst, src, n); });
}

bool GuardedLoad(const std::uint64_t* src, std::uint64_t* out) {
  return Guarded([=] { *out = __atomic_load_n(src, __ATOMIC_ACQUIRE); });
}

bool GuardedLoad(const std::uint32_t* src, std::uint32_t* out) {
  return Guarded([=] { *out = __atomic_load_n(src, __ATOMIC_ACQUIRE); });
}

bool GuardedStore(std::uint64_t* dst, std::uint64_t value) {
  return Guarded([=] { __atomic_store_n(dst, value, __ATOMIC_RELEASE); });
}

void OrderLoads() {
#if !defined(__SANITIZE_THREAD__)
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
#endif
}

void OrderStores() {
#if !defined(__SANITIZE_THREAD__)
  __atomic_thread_fence(__ATOMIC_RELEASE);
#endif
}

bool GuardedStore(std::uint32_t* dst, std::uint32_t value) {
  return Guarded([=] { __atomic_store_n(dst, value, __ATOMIC_RELEASE); });
}

}  // namespace ncclscope::profiler
