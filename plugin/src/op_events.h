// Coll, P2p and CeColl ops (op_events.cc): what the event dispatch calls beyond runtime.h.
#pragma once

namespace ncclscope::plugin {

// NCCL's stop of an op: "enqueued" (src/misc/profiler.cc:455 at v2.28.9-1), not "done". Completes
// the op if it expects no more kernel channels.
void StopOp(void* handle);

}  // namespace ncclscope::plugin
