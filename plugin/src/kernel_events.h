// Kernel channels and phases (kernel_events.cc): what the event dispatch calls beyond runtime.h.
#pragma once

#include "plugin/abi/nccl_profiler_abi.h"

namespace ncclscope::plugin {

// v7: a channel's kernel phase ended (its duration comes with this record, not with its stop).
void RecordKernelPhaseStop(void* handle, const abi::StateArgsV4* args);

}  // namespace ncclscope::plugin
