// What NCCL's copy of the event mask was for a task (mask_tracking.cc).
#pragma once

#include <cstdint>

#include "plugin/ring/ncclscope_ring.h"
#include "plugin/src/runtime.h"

namespace ncclscope::plugin {

// The event mask NCCL used for a task: exact from the API handle (v5+, also for CUDA-graph
// replays: NCCL passes the capture-time handle, src/plugin/profiler.cc:403/:438 at v2.28.9-1),
// else (v4) the current mask. When the copy may predate or postdate a write by another thread,
// KernelCh is uncertain: the op waits for KernelCh as if it had it, and completes untimed
// (KERNEL_NEVER_CAME) once the GPU's order shows it had not.
struct TaskMask {
  std::uint32_t mask = 0;
  bool kernel_candidate = false;
  bool uncertain = false;       // KernelCh of the copy unknown: the mask changed around the copy
  bool graph_captured = false;  // the API call was captured into a CUDA graph (v5+)
  std::uint8_t api_datatype = NCCLSCOPE_DT_UNKNOWN;
  // Not read: it makes the struct 12 bytes. At 8, GCC 12 packs the fields above into one 64-bit
  // register at MaskOfTask's return and shifts each back out where StartOp reads it (measured:
  // 7 instructions per Coll/P2p start).
  std::uint32_t keep_unpacked = 0;
};

// `parent`: the op's parent handle (v5+: our kApi handle; v4: the Group); `now`: host time.
TaskMask MaskOfTask(const Runtime& r, const void* parent, std::uint64_t now);

}  // namespace ncclscope::plugin
