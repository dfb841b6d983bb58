#include "tests/support/plugin_harness.h"

#include <stdlib.h>
#include <unistd.h>

#include <thread>

#include "agent/profiler/ring_file.h"
#include "plugin/abi/nccl_profiler_abi.h"
#include "tests/support/plugin_environment.h"
#include "tests/support/wait_for.h"

namespace ncclscope::testing {

void SetUpPluginEnvironment() {
  static const bool done = [] {
    // The overhead governor off unless a run sets a budget (its own tests, governor_test.cc, turn
    // it on).
    SetPluginEnvironment(PluginRingDir().path(), {{"PROXY_DUTY", "1"}, {"RING_SIZE", "32MiB"}});
    return true;
  }();
  (void)done;
}

TempDir& PluginRingDir() {
  static TempDir dir;
  return dir;
}

replay::ProfilerPlugin& PluginUnderTest() {
  static replay::ProfilerPlugin plugin(NCCLSCOPE_PLUGIN_PATH);
  return plugin;
}

RingRecords& PluginRecords() {
  static RingRecords records(PluginRingDir().path());
  return records;
}

std::uint64_t PluginCounter(ncclscope_counter counter) {
  PluginRecords().Poll();
  return PluginRecords().snapshot().plugin_counters[counter];
}

std::uint64_t NextCommId() {
  static std::uint64_t next = 0xC0FFEE0000000000ull + static_cast<std::uint64_t>(getpid()) * 100000;
  return ++next;
}

bool WaitForOps(std::uint64_t comm_id, std::size_t n, std::chrono::milliseconds timeout) {
  return PluginRecords().PollUntil([&] { return PluginRecords().CountOps(comm_id) >= n; }, timeout);
}

ncclscope_controls DefaultControls() {
  ncclscope_controls controls{};
  // Every event the plugin asks for by default (KernelPhase only reaches NCCL 2.31, v7).
  controls.event_mask = abi::kColl | abi::kP2p | abi::kKernelCh | abi::kProxyOp | abi::kProxyStep |
                        abi::kNetPlugin | abi::kCeColl | abi::kKernelPhase;
  controls.duty_period_ns = 10'000'000'000ull;
  controls.kernel_duty_pm = 1000;
  controls.proxy_duty_pm = 1000;
  return controls;
}

bool WaitForControlsApplied(profiler::RingFile& file, std::chrono::milliseconds timeout) {
  profiler::RingHeaderSnapshot header;
  const bool settled = WaitFor(
      [&] { return !file.ReadHeader(&header) || header.applied_control_seq == header.control_seq; },
      timeout, std::chrono::milliseconds(2));
  return settled && file.healthy();
}

bool SetPluginControls(const ncclscope_controls& controls, bool expect_kernel_ch,
                       std::chrono::milliseconds timeout, bool then_idle) {
  const std::string ring = OnlyRing(PluginRingDir().path());
  if (ring.empty()) return false;
  std::string reason;
  auto file = profiler::RingFile::Open(ring, &reason);
  if (file == nullptr || !file->WriteControls(controls)) return false;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // Applied first: the int may already have the asked KernelCh bit under the previous controls.
  if (!WaitForControlsApplied(*file, timeout)) return false;
  while (std::chrono::steady_clock::now() < deadline) {
    if (((replay::ReplayProcess::MaskSnapshot() & abi::kKernelCh) != 0) == expect_kernel_ch) {
      if (then_idle) std::this_thread::sleep_for(std::chrono::milliseconds(600));
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(then_idle ? 5 : 1));
  }
  return false;
}

}  // namespace ncclscope::testing
