#include "plugin/src/stderr_logger.h"

#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>

namespace ncclscope::plugin {
namespace {

// The most verbose level printed: 0 none, abi::kLogWarn, abi::kLogInfo (NCCL's numbering).
std::atomic<int> g_level{0};

// The signature is NCCL's logger's; the format is the plugin's own (a literal at every call site).
__attribute__((format(printf, 5, 6))) void Print(int level, unsigned long /*flags*/,
                                                 const char* /*file*/, int /*line*/,
                                                 const char* format, ...) {
  if (level > g_level.load(std::memory_order_relaxed) || level <= 0) return;
  char host[64] = "";
  ::gethostname(host, sizeof(host) - 1);
  char text[600];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof(text), format, args);
  va_end(args);
  std::fprintf(stderr, "%s:%d:%ld NCCL %s %s\n", host, static_cast<int>(::getpid()),
               static_cast<long>(::syscall(SYS_gettid)), level == abi::kLogWarn ? "WARN" : "INFO",
               text);
}

}  // namespace

abi::DebugLogger StderrLogger() {
  // NOLINTNEXTLINE(concurrency-mt-unsafe): init thread, as NCCL's own reads of NCCL_DEBUG
  const char* debug = std::getenv("NCCL_DEBUG");
  int level = 0;
  if (debug != nullptr) {
    if (strcasecmp(debug, "WARN") == 0) level = abi::kLogWarn;
    if (strcasecmp(debug, "INFO") == 0 || strcasecmp(debug, "TRACE") == 0) level = abi::kLogInfo;
  }
  g_level.store(level, std::memory_order_relaxed);
  return &Print;
}

}  // namespace ncclscope::plugin
