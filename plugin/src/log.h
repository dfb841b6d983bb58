#pragma once

// The plugin's log lines, through the logger NCCL gave init (or, under v1-v3, the stand-in in
// stderr_logger.h): formatted into a fixed buffer (no allocation; longer lines are cut) and passed
// as "ncclscope: <prefix><text>" under NCCL's PROFILE subsystem. Cold paths only (init, finalize,
// the maintenance thread, chaining): never on an event.

#include <cstdarg>
#include <cstdio>

#include "plugin/abi/nccl_profiler_abi.h"

namespace ncclscope::plugin {

inline void LogVia(abi::DebugLogger logger, int level, const char* file, int line,
                   const char* prefix, const char* format, va_list args)
    __attribute__((format(printf, 6, 0)));
inline void LogVia(abi::DebugLogger logger, int level, const char* file, int line,
                   const char* prefix, const char* format, va_list args) {
  if (logger == nullptr) return;
  char text[512];
  std::vsnprintf(text, sizeof(text), format, args);
  logger(level, abi::kLogSubsysProfile, file, line, "ncclscope: %s%s", prefix, text);
}

}  // namespace ncclscope::plugin
