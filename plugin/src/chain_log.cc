// Plugin chaining's failure reports: counted in NCCLSCOPE_CTR_CHAIN_ERRORS and logged once
// through NCCL's logger, from the maintenance thread when they happen on NCCL's threads (chain.h).

#include <cstdarg>

#include "plugin/src/chain_state.h"
#include "plugin/src/log.h"
#include "plugin/src/runtime.h"

namespace ncclscope::plugin::chain {

void LogWith(abi::DebugLogger logger, int level, const char* format, ...) {
  va_list args;
  va_start(args, format);
  LogVia(logger, level, __FILE__, __LINE__, "chain: ", format, args);
  va_end(args);
}

void CountError(std::uint64_t n) { R().ring.Count(NCCLSCOPE_CTR_CHAIN_ERRORS, n); }

// A failure on NCCL's threads: counted now, logged once by the next maintenance pass.
void Fail(LogKind kind) {
  CountError();
  Chain& g = G();
  if ((g.pending_logs.load(std::memory_order_relaxed) & kind) == 0) {
    g.pending_logs.fetch_or(kind, std::memory_order_relaxed);
  }
}

// Under g.mutex.
void FlushLogs(Chain& g) {
  const std::uint32_t fresh = g.pending_logs.load(std::memory_order_relaxed) & ~g.logged;
  if (fresh == 0) return;
  g.logged |= fresh;
  struct Line {
    LogKind kind;
    const char* text;
  };
  static constexpr Line kLines[] = {
      {kLogStartError, "returned an error from startEvent"},
      {kLogStopError, "returned an error from stopEvent"},
      {kLogRecordError, "returned an error from recordEventState"},
      {kLogNullHandle, "returned a NULL handle for an event type in its own mask"},
      {kLogTableFull,
       "missed events: all chain slots in use (ncclscope recorded them; their children are not "
       "forwarded either)"},
      {kLogParentLost,
       "missed events whose parent was displaced from the chain's retire window or never "
       "reached it"},
      {kLogStale, "missed a stop or record: the event's lease or retire window had run out"},
  };
  for (const Line& line : kLines) {
    if ((fresh & line.kind) == 0) continue;
    LogWith(g.logger, abi::kLogWarn,
            "chained plugin %s %s; counted in chain_error, logged only once", g.path.c_str(),
            line.text);
  }
}

}  // namespace ncclscope::plugin::chain
