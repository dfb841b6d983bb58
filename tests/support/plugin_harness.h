#pragma once

// What every test of the real plugin .so needs: a private ring directory set in the environment
// before the plugin's first init (it reads its settings once per process), the plugin loaded as
// NCCL loads it, the rings read back with the agent's own reader, and fresh communicator ids.

#include <chrono>
#include <cstdint>
#include <string>

#include "plugin/ring/ncclscope_ring.h"
#include "tests/support/ring_records.h"
#include "tests/support/temp_dir.h"
#include "tools/replay/nccl_replay.h"

namespace ncclscope::testing {

// Sets NCCLSCOPE_RING_DIR (a fresh temporary directory), proxy sampling pinned on (so proxy
// events are deterministic) and a 32 MiB ring. Call before the first communicator init, with no
// other thread running (a test's SetUp); later calls do nothing.
void SetUpPluginEnvironment();

TempDir& PluginRingDir();
replay::ProfilerPlugin& PluginUnderTest();
RingRecords& PluginRecords();

// The plugin's own counter, after reading the rings once more.
std::uint64_t PluginCounter(ncclscope_counter counter);

// A communicator id no other test in this process uses.
std::uint64_t NextCommId();

// Reads the rings until `n` ops of `comm_id` arrived.
bool WaitForOps(std::uint64_t comm_id, std::size_t n,
                std::chrono::milliseconds timeout = std::chrono::milliseconds(10000));

// Waits until the plugin took the latest controls written into `file`'s header.
bool WaitForControlsApplied(profiler::RingFile& file, std::chrono::milliseconds timeout);

// Writes agent controls into the only ring's header and waits until the plugin's mask in NCCL's
// int has the `kernel_ch` bit as asked (the plugin applies controls every ~200 ms; the calling
// thread is idle meanwhile, so the maintenance thread writes it), then stays idle a little longer
// than the plugin's idle-write race window (kIdleWriteRaceWindowNs, plugin/src/mask_tracking.cc):
// the next API call is then known to have read the new value. A job thread resuming sooner makes
// its next op's copy uncertain (NCCLSCOPE_CTR_OPS_MASK_UNCERTAIN), which nccl_patterns_test covers.
// With `then_idle` false it returns as soon as the int changed (a thread resuming right then).
bool SetPluginControls(const ncclscope_controls& controls, bool expect_kernel_ch,
                       std::chrono::milliseconds timeout = std::chrono::milliseconds(5000),
                       bool then_idle = true);

// The controls the plugin starts with in these tests (every event, proxy sampling always on).
ncclscope_controls DefaultControls();

}  // namespace ncclscope::testing
