// A randomized run of the real plugin (built with the test's sanitizer: ASan+UBSan or TSan in CI):
// several ranks, each with a user thread and a proxy thread, several communicators, a random mix
// of collectives, p2p groups and AlltoAlls, kernel channels that sometimes go missing, abnormal
// calls sprinkled in, the agent's reader draining concurrently and the controls flipping the
// duty cycle under the job's feet. Invariant: every op NCCL started ends up as exactly one record.

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "agent/profiler/ring_file.h"
#include "plugin/abi/nccl_profiler_abi.h"
#include "tests/support/ring_records.h"
#include "tests/support/temp_dir.h"
#include "tools/replay/nccl_replay.h"

namespace ncclscope::testing {
namespace {

using replay::CollSpec;
using replay::GpuTimes;
using replay::ProfilerPlugin;
using replay::ProxyPlan;
using replay::ProxyThread;
using replay::ReplayComm;
using replay::ReplayProcess;

TempDir& RingDir() {
  static TempDir dir;
  return dir;
}
// Runs before main, with no other thread yet.
const bool kEnvironment = [] {                                // NOLINT(cert-err58-cpp)
  setenv("NCCLSCOPE_RING_DIR", RingDir().path().c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
  setenv("NCCLSCOPE_RING_SIZE", "64MiB", 1);                  // NOLINT(concurrency-mt-unsafe)
  setenv("NCCLSCOPE_RING_LANES", "8", 1);                     // NOLINT(concurrency-mt-unsafe)
  return true;
}();

constexpr int kRanks = 4;
constexpr int kComms = 3;

TEST(PluginStressTest, EveryOpIsRecordedExactlyOnceUnderRandomConcurrency) {
  ASSERT_TRUE(kEnvironment);
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
    const std::uint64_t id = 0xABC0000000000000ull + static_cast<std::uint64_t>(getpid()) * 16 +
                             static_cast<std::uint64_t>(c);
    ids.insert(id);
    for (int r = 0; r < kRanks; ++r) {
      comms[static_cast<std::size_t>(r)].push_back(std::make_unique<ReplayComm>(
          process, id, "stress", 2, kRanks, r, proxies[static_cast<std::size_t>(r)].get()));
      ASSERT_TRUE(comms[static_cast<std::size_t>(r)].back()->Init());
    }
  }

  RingRecords records(RingDir().path());
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done.load()) {
      records.Poll();
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  // The agent changing controls while the job runs: duty cycles on and off.
  std::thread controller([&] {
    std::string ring;
    while (ring.empty() && !done.load()) ring = OnlyRing(RingDir().path());
    std::string reason;
    auto file = profiler::RingFile::Open(ring, &reason);
    ASSERT_NE(file, nullptr) << reason;
    std::mt19937 rng(seed + 1);
    ncclscope_controls controls{};
    controls.event_mask = abi::kColl | abi::kP2p | abi::kKernelCh | abi::kProxyOp | abi::kProxyStep;
    controls.duty_period_ns = 20'000'000;
    while (!done.load()) {
      controls.kernel_duty_pm = std::uniform_int_distribution<std::uint32_t>(0, 1000)(rng);
      controls.proxy_duty_pm = std::uniform_int_distribution<std::uint32_t>(0, 1000)(rng);
      file->WriteControls(controls);
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
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
      for (int i = 0; i < 250; ++i) {
        const int c = pick(kComms);
        ReplayComm& comm = *mine[static_cast<std::size_t>(c)];
        ProxyPlan net;
        net.enabled = pick(3) == 0;
        net.steps = 1 + pick(4);
        GpuTimes gpu;
        gpu.duration_ns = 1000 + static_cast<std::uint64_t>(pick(100000));
        switch (pick(5)) {
          case 0:
          case 1:
          case 2: {
            CollSpec spec;
            spec.channels = static_cast<std::uint8_t>(1 + pick(24));
            spec.count = 1 + static_cast<std::size_t>(pick(1 << 20));
            spec.datatype = pick(4) == 0 ? "Unknown" : "ncclFloat16";
            if (pick(10) == 0) spec.kernel_channels = pick(spec.channels);  // some never report
            comm.Collective(spec, seq[static_cast<std::size_t>(c)]++, gpu, net);
            issued.fetch_add(1);
            break;
          }
          case 3: {
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
        if (pick(20) == 0) {
          // Misbehaving caller: bogus stops and records.
          int local = 0;
          plugin.Stop(6, &local);
          plugin.Record(6, reinterpret_cast<void*>(0x4000'0000'0001'0000ull),
                        abi::kProxyStepRecvWait, nullptr);
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

  // Exactly one record per op: none lost, none duplicated, none dropped.
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
  EXPECT_EQ(records.snapshot().dropped_ring_full, 0u);
  EXPECT_EQ(records.snapshot().plugin_counters[NCCLSCOPE_CTR_DROPPED_CONTENTION], 0u);
  for (std::size_t reason = 1; reason < records.snapshot().corrupt.size(); ++reason) {
    EXPECT_EQ(records.snapshot().corrupt[reason], 0u) << reason;
  }
  std::uint64_t finalized = 0;
  for (const auto& f : records.finalizes) finalized += ids.count(f.comm_id);
  EXPECT_EQ(finalized, static_cast<std::uint64_t>(kRanks * kComms));
}

}  // namespace
}  // namespace ncclscope::testing
