#pragma once

// A stand-in for NCCL's debug logger under profiler ABI v1-v3 (NCCL 2.23-2.26), whose init passes
// none (init(context, eActivationMask), src/misc/profiler.cc:223 at v2.23.4-1): without it every
// warning of the plugin (no ring, a chain it cannot use, NCCL's mask taken over) would vanish. It
// follows NCCL_DEBUG as NCCL's own logger does: WARN lines from NCCL_DEBUG=WARN up, INFO lines
// from INFO up (with NCCL_DEBUG_SUBSYS ignored), to stderr, prefixed like NCCL's
// ("host:pid:tid NCCL WARN ...").

#include "plugin/abi/nccl_profiler_abi.h"

namespace ncclscope::plugin {

// Reads NCCL_DEBUG (call on an init thread: the environment is read nowhere else) and returns the
// logger to use in place of NCCL's.
abi::DebugLogger StderrLogger();

}  // namespace ncclscope::plugin
