// A randomized concurrent run of the real plugin with a chained plugin (NCCLSCOPE_CHAIN), built
// with the test's sanitizer (ASan+UBSan, or TSan in CI's tsan step): several ranks, each with a
// user thread and a proxy thread, several communicators, a random mix of collectives, p2p groups
// and all-to-alls, kernel channels that sometimes go missing, the agent's reader draining and its
// controls flipping ncclscope's duty cycles, while the chained plugin fails now and then and
// changes its own mask at run time from another thread. Invariants: ncclscope records every op
// exactly once; the chained plugin is never handed a handle or context it did not issue, never a
// second stop, nothing after finalize; chain_error counts exactly the failures it injected.

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <thread>

#include "agent/profiler/ring_file.h"
#include "plugin/abi/nccl_profiler_abi.h"
#include "tests/support/chained_profiler.h"
#include "tests/support/plugin_environment.h"
#include "tests/support/plugin_harness.h"
#include "tests/support/replay_names.h"
#include "tests/support/ring_records.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/plugin/chain_support.h"
#include "tools/replay/nccl_replay.h"

namespace ncclscope::testing {
namespace {

// Runs before main, with no other thread yet.
const bool kEnvironment = [] {  // NOLINT(cert-err58-cpp)
  SetPluginEnvironment(
      PluginRingDir().path(),
      {{"RING_SIZE", "64MiB"}, {"RING_LANES", "8"}, {"CHAIN", NCCLSCOPE_CHAINED_PROFILER}});
  return true;
}();

constexpr int kRanks = 4;
constexpr int kComms = 3;
constexpr int kIterations = 400;

TEST(PluginChainStressTest, BothPluginsStayExactUnderRandomConcurrency) {
  ASSERT_TRUE(kEnvironment);
  ChainedPlugin chained(NCCLSCOPE_CHAINED_PROFILER);
  ASSERT_TRUE(chained.ok());
  chained::Config config;
  config.mask = 0x7FFF;
  config.fail_start_every = 17;
  config.null_handle_every = 13;
  config.null_types = abi::kColl | abi::kKernelCh;  // in every mask the flipper below sets
  config.fail_stop_every = 19;
  config.fail_record_every = 23;
  config.log_events = false;
  chained.Configure(config);
  ProfilerPlugin plugin(NCCLSCOPE_PLUGIN_PATH);
  ASSERT_TRUE(plugin.ok()) << plugin.error();
  ReplayProcess process(plugin, 6);
  const unsigned seed = static_cast<unsigned>(std::random_device{}());
  SCOPED_TRACE("seed " + std::to_string(seed));

  std::vector<std::unique_ptr<ProxyThread>> proxies;
  std::vector<std::vector<std::unique_ptr<ReplayComm>>> comms(kRanks);
  std::set<std::uint64_t> ids;
  proxies.reserve(kRanks);
  for (int r = 0; r < kRanks; ++r) proxies.push_back(std::make_unique<ProxyThread>());
  for (int c = 0; c < kComms; ++c) {
    const std::uint64_t id = 0xCA1A000000000000ull + static_cast<std::uint64_t>(getpid()) * 16 +
                             static_cast<std::uint64_t>(c);
    ids.insert(id);
    for (int r = 0; r < kRanks; ++r) {
      comms[static_cast<std::size_t>(r)].push_back(std::make_unique<ReplayComm>(
          process, id, "chain stress", 2, kRanks, r, proxies[static_cast<std::size_t>(r)].get()));
      ASSERT_TRUE(comms[static_cast<std::size_t>(r)].back()->Init());
    }
  }

  RingRecords records(PluginRingDir().path());
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done.load()) {
      records.Poll();
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  // The agent flipping ncclscope's duty cycles; the chained plugin changing its mask.
  std::thread controller([&] {
    std::string reason;
    auto file = OpenOnlyRing(PluginRingDir().path(), done, &reason);
    ASSERT_NE(file, nullptr) << reason;
    std::mt19937 rng(seed + 1);
    ncclscope_controls controls{};
    controls.event_mask = abi::kColl | abi::kP2p | abi::kKernelCh | abi::kProxyOp | abi::kProxyStep;
    controls.duty_period_ns = 20'000'000;
    const int masks[] = {0x7FFF, abi::kColl | abi::kKernelCh,
                         abi::kColl | abi::kP2p | abi::kKernelCh | abi::kProxyOp | abi::kGroupApi,
                         abi::kColl | abi::kKernelCh | abi::kProxyCtrl | abi::kNetPlugin};
    while (!done.load()) {
      controls.kernel_duty_pm = std::uniform_int_distribution<std::uint32_t>(0, 1000)(rng);
      controls.proxy_duty_pm = std::uniform_int_distribution<std::uint32_t>(0, 1000)(rng);
      file->WriteControls(controls);
      chained.SetMask(masks[std::uniform_int_distribution<int>(0, 3)(rng)]);
      std::this_thread::sleep_for(std::chrono::milliseconds(15));
    }
  });

  std::atomic<std::uint64_t> issued{0};
  std::vector<std::thread> users;
  users.reserve(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    users.emplace_back([&, r] {
      std::mt19937 rng(seed + static_cast<unsigned>(r) * 7919);
      auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
      auto& mine = comms[static_cast<std::size_t>(r)];
      std::vector<std::uint64_t> seq(kComms, 0);
      for (int i = 0; i < kIterations; ++i) {
        const int c = pick(kComms);
        ReplayComm& comm = *mine[static_cast<std::size_t>(c)];
        ProxyPlan net;
        net.enabled = pick(3) == 0;
        net.steps = 1 + pick(3);
        GpuTimes gpu;
        gpu.duration_ns = 1000 + static_cast<std::uint64_t>(pick(100000));
        switch (pick(4)) {
          case 0:
          case 1: {
            CollSpec spec;
            spec.channels = static_cast<std::uint8_t>(1 + pick(16));
            if (pick(10) == 0) spec.kernel_channels = pick(spec.channels);  // some never report
            comm.Collective(spec, seq[static_cast<std::size_t>(c)]++, gpu, net);
            issued.fetch_add(1);
            break;
          }
          case 2: {
            const int peer = pick(kRanks);
            comm.P2pGroup(
                {{"Send", 1024, "ncclInt32", peer, 1}, {"Recv", 1024, "ncclInt32", peer, 1}}, gpu,
                net);
            issued.fetch_add(2);
            break;
          }
          default:
            comm.AllToAll(256, "ncclFloat32", gpu, net);
            issued.fetch_add(2 * kRanks);
            break;
        }
      }
      proxies[static_cast<std::size_t>(r)]->Drain();
    });
  }
  for (std::thread& t : users) t.join();
  for (auto& rank : comms) {
    for (auto& comm : rank) comm->Finalize();
  }
  done.store(true);
  reader.join();
  controller.join();
  records.Poll();

  std::map<std::tuple<std::uint64_t, int, std::uint64_t>, int> seen;
  for (const auto& op : records.ops) {
    if (ids.count(op.op.comm_id) == 0) continue;
    ++seen[{op.op.comm_id, op.op.rank, op.op.op_index}];
  }
  std::uint64_t recorded = 0;
  for (const auto& [key, n] : seen) {
    EXPECT_EQ(n, 1) << "op_index " << std::get<2>(key) << " of rank " << std::get<1>(key);
    recorded += static_cast<std::uint64_t>(n);
  }
  EXPECT_EQ(recorded, issued.load());
  EXPECT_EQ(records.snapshot().plugin_counters[NCCLSCOPE_CTR_DROPPED_CONTENTION], 0u);

  EXPECT_EQ(chained.Violations(), "");
  const chained::Counts counts = chained.Counts();
  EXPECT_EQ(counts.inits, static_cast<std::uint64_t>(kRanks * kComms));
  EXPECT_EQ(counts.finalizes, static_cast<std::uint64_t>(kRanks * kComms));
  EXPECT_GT(counts.starts, issued.load());
  EXPECT_EQ(records.snapshot().plugin_counters[NCCLSCOPE_CTR_CHAIN_ERRORS],
            counts.start_errors + counts.stop_errors + counts.record_errors + counts.null_in_mask);
  EXPECT_GT(counts.null_in_mask, 0u);
}

}  // namespace
}  // namespace ncclscope::testing
