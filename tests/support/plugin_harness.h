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

// Writes agent controls into the only ring's header and waits until the plugin's mask in NCCL's
// int has the `kernel_ch` bit as asked (the plugin applies controls every ~200 ms).
bool SetPluginControls(const ncclscope_controls& controls, bool expect_kernel_ch,
                       std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));

// The controls the plugin starts with in these tests (every event, proxy sampling always on).
ncclscope_controls DefaultControls();

}  // namespace ncclscope::testing
