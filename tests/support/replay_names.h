#pragma once

// The replay's names (tools/replay/nccl_replay.h) that the tests driving the plugin through it all
// use, spelled without `replay::`.

#include "tools/replay/nccl_replay.h"

namespace ncclscope::testing {

using replay::CollSpec;
using replay::GpuTimes;
using replay::ProfilerPlugin;
using replay::ProxyPlan;
using replay::ProxyThread;
using replay::ReplayComm;
using replay::ReplayProcess;

}  // namespace ncclscope::testing
