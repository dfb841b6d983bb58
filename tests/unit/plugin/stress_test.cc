// A randomized run of the real plugin (built with the test's sanitizer: ASan+UBSan or TSan in CI),
// mixing every call pattern tools/replay reproduces from NCCL's source: grouped collectives that
// finish out of order, pipeline rounds and all-to-alls with self send/recv, CollNet ops, ProxyOps
// NCCL never stops next to network ones, late first kernels, CUDA-graph launches from a
// host-callback thread, and the agent flipping duty cycles under the job's feet — several ranks,
// each with a user thread, a proxy thread and a host-callback thread, the agent's reader draining
// concurrently. Invariant: what the agent's reader sees equals exactly what was driven — every op
// once, its bytes, and GPU timing for exactly the ops whose mask copy had KernelCh.

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "agent/profiler/ring_directory.h"
#include "agent/profiler/ring_file.h"
#include "plugin/abi/nccl_profiler_abi.h"
#include "tests/support/plugin_environment.h"
#include "tests/support/plugin_harness.h"
#include "tests/support/ring_records.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait_for.h"
#include "tools/replay/nccl_replay.h"

namespace ncclscope::testing {
namespace {

using replay::CapturedGraph;
using replay::GroupTask;
using replay::PlanLaunch;
using replay::PlanTiming;
using replay::ProfilerPlugin;
using replay::ProxyPlan;
using replay::ProxyThread;
using replay::ReplayComm;
using replay::ReplayProcess;

// Runs before main, with no other thread yet.
const bool kEnvironment = [] {  // NOLINT(cert-err58-cpp)
  // More lanes than threads that write records (4 ranks x user, proxy and host-callback threads,
  // and the plugin's maintenance thread): with fewer, every lane can be held at once by threads
  // descheduled mid-write (TSan on 2 cores did it), and the plugin then drops the record rather
  // than wait (lane_busy, by design), which this exact count cannot allow. Per-lane room stays
  // as before (8 MiB).
  // Four ranks drive 100-200 k ops/s here, tens of times a real process: room for the ops that
  // legitimately wait a few maintenance passes (2.27's uncertain mask copies, CollNet).
  // The overhead governor off (flat out it would sample less), unless a run sets a budget to
  // stress it too.
  SetPluginEnvironment(PluginRingDir().path(),
                       {{"RING_SIZE", "128MiB"}, {"RING_LANES", "16"}, {"MAX_OPS", "1048576"}});
  return true;
}();

constexpr int kRanks = 4;
constexpr int kComms = 3;

// Per (comm, rank): what was driven, or what the reader saw.
struct Tally {
  std::uint64_t ops = 0;
  std::uint64_t bytes = 0;
  std::uint64_t timed = 0;
  // What the reader saw of ops without GPU timing (for the failure message only).
  std::uint64_t never_came = 0;
  std::uint64_t not_requested = 0;
  bool operator==(const Tally& o) const {
    return ops == o.ops && bytes == o.bytes && timed == o.timed;
  }
};
using Key = std::pair<std::uint64_t, int>;

// The agent's reader with a counting sink (a million ops do not fit a record list).
class CountingSink : public profiler::RecordSink {
 public:
  void OnCommInit(const profiler::RingOrigin&, const ncclscope_comm_init_record&) override {}
  void OnCommFinalize(const profiler::RingOrigin&, const ncclscope_comm_finalize_record&) override {
    ++finalized;
  }
  void OnOp(const profiler::RingOrigin&, const profiler::OpView& view) override {
    const ncclscope_op_record& op = view.op;
    Tally& t = seen[{op.comm_id, op.rank}];
    ++t.ops;
    t.bytes += op.bytes;
    t.timed += (op.flags & NCCLSCOPE_OP_GPU_TIMING) != 0;
    t.never_came += (op.flags & NCCLSCOPE_OP_KERNEL_NEVER_CAME) != 0;
    t.not_requested += (op.flags & NCCLSCOPE_OP_KERNEL_NOT_REQUESTED) != 0;
    std::vector<bool>& indices = indices_[{op.comm_id, op.rank}];
    if (indices.size() <= op.op_index) indices.resize(op.op_index + 1024);
    if (indices[op.op_index]) ++duplicates;
    indices[op.op_index] = true;
    if ((op.flags & (NCCLSCOPE_OP_GPU_TIMING_PARTIAL | NCCLSCOPE_OP_FLUSHED)) != 0) ++partial;
  }
  void OnProxyOp(const profiler::RingOrigin&, const ncclscope_proxy_op_record& p) override {
    ++proxy_ops;
    if (p.steps_done != p.n_steps) {
      // What the first one looked like, for a failure to say which path wrote it (a flush at
      // finalize, a lost step stop, a receive released and reused).
      if (short_proxy_ops++ == 0) {
        first_short_proxy_op = "steps " + std::to_string(p.steps_done) + "/" +
                               std::to_string(p.n_steps) + ", flags " + std::to_string(p.flags) +
                               ", send " + std::to_string(p.is_send) + ", channel " +
                               std::to_string(p.channel) + ", seq " + std::to_string(p.seq) +
                               ", op_index " + std::to_string(p.op_index);
      }
    }
  }

  std::map<Key, Tally> seen;
  std::uint64_t duplicates = 0;
  std::uint64_t partial = 0;
  std::uint64_t proxy_ops = 0;
  std::uint64_t short_proxy_ops = 0;
  std::string first_short_proxy_op;
  std::uint64_t finalized = 0;

 private:
  std::map<Key, std::vector<bool>> indices_;
};

// What one rank drives: counts what NCCL would have reported for each op of each launch.
class RankDriver {
 public:
  RankDriver(int rank, unsigned seed, int version, std::vector<std::unique_ptr<ReplayComm>>& comms,
             ProxyThread& host_callback)
      : rank_(rank), version_(version), rng_(seed), comms_(comms), host_callback_(host_callback) {}

  void Run(std::uint64_t target_ops) {
    for (std::uint64_t step = 1; ops_ < target_ops; ++step) {
      Step();
      // Keep the replay's proxy queue short (NCCL's proxy keeps up with its user thread).
      if (step % 64 == 0) comms_.front()->proxy()->Drain();
    }
    comms_.front()->proxy()->Drain();
  }
  const std::map<Key, Tally>& driven() const { return driven_; }
  std::uint64_t network_ops() const { return network_ops_; }

 private:
  int Pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }

  void Count(const ReplayComm& comm, const PlanLaunch& plan) {
    for (const replay::PlannedOp& op : plan.ops) {
      if (op.handle == nullptr) continue;
      Tally& t = driven_[{comm.comm_id(), rank_}];
      ++t.ops;
      t.bytes += op.bytes;
      const bool kernel = (op.mask & abi::kKernelCh) != 0 && !op.self && !op.channel_ids.empty();
      t.timed += kernel;
      ++ops_;
    }
  }

  GroupTask Collective() {
    GroupTask t;
    static const char* const kFuncs[] = {"AllReduce", "AllGather", "ReduceScatter", "Broadcast"};
    t.coll.func = kFuncs[Pick(4)];
    t.coll.count = 1 + static_cast<std::size_t>(Pick(1 << 20));
    t.coll.datatype = Pick(4) == 0 ? "Unknown" : "ncclFloat16";
    t.coll.channels = static_cast<std::uint8_t>(1 + Pick(16));
    if (Pick(12) == 0) {  // CollNet: nChannels 0, KernelCh on its channels, ProxyOps never stopped
      t.coll.algo = "COLLNET_DIRECT";
      t.coll.kernel_channels = t.coll.channels;
      t.coll.channels = 0;
    }
    t.proxy_never_stopped = Pick(6) == 0;  // SHM memcpy / P2P copy engine
    return t;
  }

  void Step() {
    ReplayComm& comm = *comms_[static_cast<std::size_t>(Pick(kComms))];
    ProxyPlan net;
    net.enabled = Pick(3) == 0;
    net.steps = 1 + Pick(4);
    net.qp_base = Pick(2) == 0 ? 100 : 0;
    PlanTiming timing;
    timing.skew_ns = 10;
    if (Pick(4000) == 0) timing.first_kernel_delay_ms = 20 + static_cast<std::uint64_t>(Pick(30));
    std::vector<GroupTask> tasks;
    switch (Pick(6)) {
      case 0:
      case 1: {  // FSDP/DDP buckets: several collectives in one plan, out of order
        const int n = 1 + Pick(4);
        for (int i = 0; i < n; ++i) tasks.push_back(Collective());
        break;
      }
      case 2: {  // pipeline rounds, sometimes with self
        const int n = 1 + Pick(4);
        for (int i = 0; i < n; ++i) {
          GroupTask t;
          t.p2p = true;
          t.send_recv = {Pick(2) == 0 ? "Send" : "Recv",
                         1024 + static_cast<std::size_t>(Pick(4096)), "ncclInt32", Pick(kRanks),
                         static_cast<std::uint8_t>(1 + Pick(2))};
          tasks.push_back(t);
        }
        break;
      }
      case 3: {  // ncclAlltoAll: a Send and a Recv per peer, self included
        for (int peer = 0; peer < kRanks; ++peer) {
          for (const char* f : {"Send", "Recv"}) {
            GroupTask t;
            t.p2p = true;
            t.send_recv = {f, 256, "ncclFloat32", peer, 1};
            tasks.push_back(t);
          }
        }
        break;
      }
      case 4: {  // a CUDA graph, captured now, launched a few times from the callback thread
        if (version_ >= 5) {
          const CapturedGraph graph = comm.CaptureGraph({Collective(), Collective()});
          const int launches = 1 + Pick(3);
          for (int i = 0; i < launches; ++i) {
            Count(comm, comm.LaunchGraph(graph, &host_callback_, [&](const PlanLaunch& plan) {
              comm.RunPlan(plan, timing, net);
            }));
          }
          return;
        }
        tasks.push_back(Collective());
        break;
      }
      default:
        tasks.push_back(Collective());
        break;
    }
    const PlanLaunch plan =
        comm.Group(tasks, Pick(10) == 0 ? &host_callback_ : nullptr,
                   [&](const PlanLaunch& launched) { comm.RunPlan(launched, timing, net); });
    Count(comm, plan);
    if (net.enabled) network_ops_ += plan.ops.size();
  }

  int rank_;
  int version_;
  std::mt19937 rng_;
  std::vector<std::unique_ptr<ReplayComm>>& comms_;
  ProxyThread& host_callback_;
  std::map<Key, Tally> driven_;
  std::uint64_t ops_ = 0;
  std::uint64_t network_ops_ = 0;
};

class PluginStressTest : public ::testing::TestWithParam<int> {};

INSTANTIATE_TEST_SUITE_P(Abi, PluginStressTest, ::testing::Values(4, 5, 6),
                         [](const auto& param_info) {
                           return "v" + std::to_string(param_info.param);
                         });

TEST_P(PluginStressTest, WhatTheAgentReadsEqualsWhatWasDriven) {
  ASSERT_TRUE(kEnvironment);
  const int version = GetParam();
  ProfilerPlugin plugin(NCCLSCOPE_PLUGIN_PATH);
  ASSERT_TRUE(plugin.ok()) << plugin.error();
  ReplayProcess process(plugin, version);
  // NCCLSCOPE_STRESS_SEED replays a failing run's choices (thread timing still varies).
  unsigned seed = static_cast<unsigned>(std::random_device{}());
  if (const char* s = std::getenv("NCCLSCOPE_STRESS_SEED")) {  // NOLINT(concurrency-mt-unsafe)
    seed = static_cast<unsigned>(std::strtoul(s, nullptr, 10));
  }
  SCOPED_TRACE("seed " + std::to_string(seed));
  // A million ops for the newest ABI, a quarter million each for the older two
  // (NCCLSCOPE_STRESS_OPS overrides: quick local runs, and CI's TSan step, scripts/test).
  std::uint64_t total_ops = version == 6 ? 1'000'000u : 250'000u;
  if (const char* ops = std::getenv("NCCLSCOPE_STRESS_OPS")) {  // NOLINT(concurrency-mt-unsafe)
    total_ops = std::strtoull(ops, nullptr, 10);
  }
  const std::uint64_t per_rank = total_ops / kRanks;

  std::vector<std::unique_ptr<ProxyThread>> proxies;
  std::vector<std::unique_ptr<ProxyThread>> callbacks;
  std::vector<std::vector<std::unique_ptr<ReplayComm>>> comms(kRanks);
  std::set<std::uint64_t> ids;
  for (int r = 0; r < kRanks; ++r) {
    proxies.push_back(std::make_unique<ProxyThread>());
    callbacks.push_back(std::make_unique<ProxyThread>());
  }
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

  // The plugin's counters are per process, and the three ABI versions may share one.
  std::array<std::uint64_t, NCCLSCOPE_COUNTER_MAX> counters_before{};
  {
    profiler::RingDirectory before(PluginRingDir().path());
    CountingSink ignored;
    while (before.Poll(ignored)) {
    }
    counters_before = before.snapshot().plugin_counters;
  }
  profiler::RingDirectory directory(PluginRingDir().path());
  CountingSink sink;
  std::atomic<bool> done{false};
  std::atomic<bool> reading{true};
  std::thread reader([&] {
    while (reading.load()) {
      while (directory.Poll(sink)) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  // The agent changing controls while the job runs: duty cycles on and off.
  std::thread controller([&] {
    std::string reason;
    auto file = OpenOnlyRing(PluginRingDir().path(), done, &reason);
    ASSERT_NE(file, nullptr) << reason;
    std::mt19937 rng(seed + 1);
    ncclscope_controls controls{};
    controls.event_mask =
        abi::kColl | abi::kP2p | abi::kKernelCh | abi::kProxyOp | abi::kProxyStep | abi::kNetPlugin;
    controls.duty_period_ns = 20'000'000;
    while (!done.load()) {
      controls.kernel_duty_pm = std::uniform_int_distribution<std::uint32_t>(0, 1000)(rng);
      controls.proxy_duty_pm = std::uniform_int_distribution<std::uint32_t>(0, 1000)(rng);
      file->WriteControls(controls);
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
    }
  });

  std::vector<std::unique_ptr<RankDriver>> drivers;
  std::vector<std::thread> users;
  drivers.reserve(kRanks);
  users.reserve(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    drivers.push_back(std::make_unique<RankDriver>(r, seed + static_cast<unsigned>(r) * 7919,
                                                   version, comms[static_cast<std::size_t>(r)],
                                                   *callbacks[static_cast<std::size_t>(r)]));
  }
  for (int r = 0; r < kRanks; ++r) {
    users.emplace_back([&, r] {
      drivers[static_cast<std::size_t>(r)]->Run(per_rank);
      // Misbehaving caller: bogus stops and records.
      int local = 0;
      plugin.Stop(version, &local);
      plugin.Record(version, reinterpret_cast<void*>(0x4000'0000'0001'0000ull),
                    abi::kProxyStepRecvWait, nullptr);
    });
  }
  for (std::thread& t : users) t.join();
  // One last fully timed op per communicator and rank: what 2.27's uncertain ops wait for.
  ncclscope_controls controls{};
  {
    const std::string ring = OnlyRing(PluginRingDir().path());
    std::string reason;
    auto file = profiler::RingFile::Open(ring, &reason);
    ASSERT_NE(file, nullptr) << reason;
    done.store(true);
    controller.join();
    controls.event_mask = abi::kColl | abi::kP2p | abi::kKernelCh;
    controls.duty_period_ns = 10'000'000'000ull;
    controls.kernel_duty_pm = 1000;
    ASSERT_TRUE(file->WriteControls(controls));
    // Taken by the plugin first: the int may have KernelCh under the controller's duty cycle too.
    profiler::RingHeaderSnapshot header;
    WaitFor(
        [&] {
          return !file->ReadHeader(&header) || header.applied_control_seq == header.control_seq;
        },
        std::chrono::seconds(10), std::chrono::milliseconds(2));
    ASSERT_EQ(header.applied_control_seq, header.control_seq);
  }
  WaitFor([] { return (ReplayProcess::MaskSnapshot() & abi::kKernelCh) != 0; },
          std::chrono::seconds(5), std::chrono::milliseconds(5));
  std::map<Key, Tally> driven;
  for (const auto& d : drivers) {
    for (const auto& [key, t] : d->driven()) {
      driven[key].ops += t.ops;
      driven[key].bytes += t.bytes;
      driven[key].timed += t.timed;
    }
  }
  for (int r = 0; r < kRanks; ++r) {
    for (auto& comm : comms[static_cast<std::size_t>(r)]) {
      GroupTask last;
      last.coll.count = 1024;
      const PlanLaunch plan = comm->Group({last});
      EXPECT_NE(plan.ops[0].mask & abi::kKernelCh, 0) << std::hex << plan.ops[0].mask;
      comm->RunPlan(plan);
      Tally& t = driven[{comm->comm_id(), r}];
      ++t.ops;
      t.bytes += plan.ops[0].bytes;
      ++t.timed;
    }
  }
  for (auto& p : proxies) p->Drain();
  reading.store(false);
  reader.join();
  WaitFor(
      [&] {
        while (directory.Poll(sink)) {
        }
        return sink.seen == driven;
      },
      std::chrono::seconds(20), std::chrono::milliseconds(20));
  for (auto& rank : comms) {
    for (auto& comm : rank) comm->Finalize();
  }
  while (directory.Poll(sink)) {
  }

  std::uint64_t total = 0;
  for (const auto& [key, t] : driven) {
    const Tally& s = sink.seen[key];
    EXPECT_EQ(s.ops, t.ops) << "comm " << key.first << " rank " << key.second;
    EXPECT_EQ(s.bytes, t.bytes) << "comm " << key.first << " rank " << key.second;
    EXPECT_EQ(s.timed, t.timed) << "comm " << key.first << " rank " << key.second
                                << ": untimed, KERNEL_NEVER_CAME " << s.never_came
                                << ", KERNEL_NOT_REQUESTED " << s.not_requested;
    total += t.ops;
  }
  EXPECT_GE(total, per_rank * kRanks);
  EXPECT_EQ(sink.duplicates, 0u);
  EXPECT_EQ(sink.partial, 0u);
  EXPECT_EQ(sink.short_proxy_ops, 0u) << "the first: " << sink.first_short_proxy_op;
  EXPECT_EQ(sink.finalized, static_cast<std::uint64_t>(kRanks * kComms));
  const profiler::DirectorySnapshot& snapshot = directory.snapshot();
  auto counter = [&](ncclscope_counter c) {
    return snapshot.plugin_counters[c] - counters_before[c];
  };
  EXPECT_EQ(snapshot.dropped_ring_full, 0u);
  EXPECT_EQ(counter(NCCLSCOPE_CTR_DROPPED_CONTENTION), 0u);
  EXPECT_EQ(counter(NCCLSCOPE_CTR_HANDLES_EXHAUSTED), 0u)
      << "released without network: " << counter(NCCLSCOPE_CTR_PROXY_OPS_NO_NETWORK)
      << ", network ProxyOp records: " << sink.proxy_ops;
  EXPECT_EQ(counter(NCCLSCOPE_CTR_LATE_EVENT), 0u)
      << "ops with an uncertain mask copy: " << counter(NCCLSCOPE_CTR_OPS_MASK_UNCERTAIN);
  EXPECT_EQ(counter(NCCLSCOPE_CTR_OPS_INCOMPLETE), 0u);
  for (std::size_t reason = 1; reason < snapshot.corrupt.size(); ++reason) {
    EXPECT_EQ(snapshot.corrupt[reason], 0u) << reason;
  }
}

}  // namespace
}  // namespace ncclscope::testing
