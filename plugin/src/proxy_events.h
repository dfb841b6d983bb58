// Network operations (proxy_events.cc): what the event dispatch calls beyond runtime.h.
#pragma once

#include "plugin/abi/nccl_profiler_abi.h"

namespace ncclscope::plugin {

// NCCL's stop of a ProxyOp (only the network transport stops them): writes its record.
void StopProxyOp(void* handle);
// A step's stop: its bytes, its last state interval and its duration into its op.
void StopProxyStep(void* handle);
// A step's state change (v4+ numbering; v1-v3's step states share it). False for a state the
// plugin does not know (the caller counts it).
bool RecordProxyStepState(void* handle, int state, const abi::StateArgsV4* args);
// v4+: the op's first network action (kProxyOpInProgress).
void RecordProxyOpInProgress(void* handle);

}  // namespace ncclscope::plugin
