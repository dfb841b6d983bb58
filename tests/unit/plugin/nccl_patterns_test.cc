// The plugin under the call patterns real NCCL produces and a naive model of NCCL gets wrong,
// each driven through the real .so by tools/replay (whose claims about NCCL are cited there):
// grouped ops finishing out of order, a communicator's first kernel starting seconds late, self
// send/recv, ProxyOps NCCL never stops, the mask copy taken at the API call (and at capture for
// CUDA graphs), duty-cycle flips, CollNet's nChannels 0, AllGather/Broadcast in bytes, net-plugin
// events; and NCCL 2.31's (v7) kernel phases, user tags, symmetric kernels and RAS mask override.
// Each pattern runs under every profiler ABI whose NCCL has it: every version (v1, NCCL 2.23, to
// v7, 2.31), KernelCh (v3, 2.26+), GPU timing and ProxyOps NCCL never stops (v4, 2.27+), API
// events (v5, 2.28+), and expects what that version carries. Every TEST runs in its own process
// under ctest; they also pass together (the RAS override test, which leaves the process's mask
// NCCL's, comes last).

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/profiler/ring_file.h"
#include "plugin/abi/nccl_profiler_abi.h"
#include "plugin/ring/ncclscope_ring.h"
#include "tests/support/plugin_harness.h"
#include "tools/replay/nccl_replay.h"

namespace ncclscope::testing {
namespace {

using replay::CapturedGraph;
using replay::CollSpec;
using replay::GroupTask;
using replay::P2pSpec;
using replay::PlanLaunch;
using replay::PlanTiming;
using replay::ProxyPlan;
using replay::ProxyThread;
using replay::ReplayComm;
using replay::ReplayProcess;
using std::chrono::milliseconds;

GroupTask Coll(const char* func, std::size_t count, std::uint8_t channels,
               const char* datatype = "ncclFloat32") {
  GroupTask t;
  t.coll.func = func;
  t.coll.count = count;
  t.coll.channels = channels;
  t.coll.datatype = datatype;
  return t;
}

GroupTask SendRecv(const char* func, int peer, std::size_t count = 1 << 16,
                   std::uint8_t channels = 2) {
  GroupTask t;
  t.p2p = true;
  t.send_recv = P2pSpec{func, count, "ncclFloat32", peer, channels};
  return t;
}

ProxyPlan NoNetwork() {
  ProxyPlan p;
  p.enabled = false;
  return p;
}

// A small ProxyOp arena: a plugin that kept ProxyOps NCCL never stops would exhaust it within
// the first few hundred plans of the million-op test. Before main, with no other thread yet.
const bool kSmallProxyArena = [] {               // NOLINT(cert-err58-cpp)
  setenv("NCCLSCOPE_MAX_PROXY_OPS", "4096", 1);  // NOLINT(concurrency-mt-unsafe)
  return true;
}();

class NcclPatternsTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kSmallProxyArena);
    SetUpPluginEnvironment();
    ASSERT_TRUE(PluginUnderTest().ok()) << PluginUnderTest().error();
  }
  void TearDown() override {
    // Leave the process's plugin as the next test expects it.
    if (!OnlyRing(PluginRingDir().path()).empty()) {
      EXPECT_TRUE(SetPluginControls(DefaultControls(), version() >= 3));  // no KernelCh before v3
    }
  }
  int version() const { return GetParam(); }
};

// Patterns of every NCCL version: v1 (2.23) to v7 (2.31).
auto VersionName(const ::testing::TestParamInfo<int>& param_info) {
  return "v" + std::to_string(param_info.param);
}
INSTANTIATE_TEST_SUITE_P(Abi, NcclPatternsTest, ::testing::Values(1, 2, 3, 4, 5, 6, 7),
                         VersionName);

// KernelCh: NCCL 2.26 (v3) on; v3's without GPU timestamps (src/plugin/profiler.cc:454-476 at
// v2.26.6-1).
class KernelChPatternsTest : public NcclPatternsTest {};
INSTANTIATE_TEST_SUITE_P(Abi, KernelChPatternsTest, ::testing::Values(3, 4, 5, 6, 7), VersionName);

// GPU timing (KernelCh with pTimer and KernelChStop, 2.27+), and ProxyOps NCCL starts for every
// transport but stops only for the network (src/proxy.cc:427 at v2.28.9-1; 2.23-2.26 start them
// only in the network transport, src/transport/net.cc:1104 at v2.26.6-1).
class GpuTimingPatternsTest : public NcclPatternsTest {};
INSTANTIATE_TEST_SUITE_P(Abi, GpuTimingPatternsTest, ::testing::Values(4, 5, 6, 7), VersionName);

// API events (GroupApi/CollApi/P2pApi, 2.28+): the mask copy of a CUDA graph's capture.
class ApiEventPatternsTest : public NcclPatternsTest {};
INSTANTIATE_TEST_SUITE_P(Abi, ApiEventPatternsTest, ::testing::Values(5, 6, 7), VersionName);

// FSDP/ZeRO buckets, DDP buckets, pipeline rounds: the ops of one plan run at once on channels of
// their own, and the first (largest) one finishes last. Each op completes when its own channels
// stop and keeps all of its GPU time, however long after the others.
TEST_P(GpuTimingPatternsTest, GroupedOpsFinishOutOfOrderAndKeepTheirWholeGpuTime) {
  ProxyThread proxy;
  ReplayProcess process(PluginUnderTest(), version());
  const std::uint64_t id = NextCommId();
  ReplayComm comm(process, id, "fsdp", 2, 8, 3, &proxy);
  ASSERT_TRUE(comm.Init());
  // Plan order: AllReduce (largest), ReduceScatter, AllGather; they end at 600, 100 and 20 ms.
  const std::vector<GroupTask> buckets = {Coll("AllGather", 1 << 18, 2),
                                          Coll("AllReduce", 1 << 26, 8),
                                          Coll("ReduceScatter", 1 << 24, 4)};
  PlanTiming timing;
  timing.real_time = true;
  timing.duration_ns = {600'000'000, 100'000'000, 20'000'000};
  timing.skew_ns = 1000;
  const PlanLaunch plan = comm.Group(buckets);
  ASSERT_EQ(plan.ops.size(), 3u);
  comm.RunPlan(plan, timing, NoNetwork());
  // Pipeline-parallel rounds: the first, largest send finishes last.
  const std::vector<GroupTask> rounds = {SendRecv("Send", 4), SendRecv("Send", 5),
                                         SendRecv("Send", 6), SendRecv("Recv", 2)};
  PlanTiming round_timing;
  round_timing.real_time = true;
  round_timing.duration_ns = {500'000'000, 300'000'000, 100'000'000, 10'000'000};
  round_timing.skew_ns = 1000;
  comm.RunPlan(comm.Group(rounds), round_timing, NoNetwork());
  proxy.Drain();
  ASSERT_TRUE(WaitForOps(id, 7));
  const std::map<int, std::uint64_t> coll_duration = {{NCCLSCOPE_FUNC_ALL_REDUCE, 600'000'000},
                                                      {NCCLSCOPE_FUNC_REDUCE_SCATTER, 100'000'000},
                                                      {NCCLSCOPE_FUNC_ALL_GATHER, 20'000'000}};
  const std::map<int, std::uint64_t> send_duration = {
      {4, 500'000'000}, {5, 300'000'000}, {6, 100'000'000}, {2, 10'000'000}};
  for (const profiler::OpView& view : PluginRecords().OpsOf(id)) {
    const ncclscope_op_record& op = view.op;
    SCOPED_TRACE(std::string(ncclscope_func_name(op.func)) + " peer " + std::to_string(op.peer));
    ASSERT_NE(op.flags & NCCLSCOPE_OP_GPU_TIMING, 0);
    EXPECT_EQ(op.flags & (NCCLSCOPE_OP_GPU_TIMING_PARTIAL | NCCLSCOPE_OP_FLUSHED |
                          NCCLSCOPE_OP_KERNEL_NEVER_CAME),
              0);
    EXPECT_EQ(op.n_timed, op.n_channels);
    const std::uint64_t duration =
        op.kind == NCCLSCOPE_KIND_COLL ? coll_duration.at(op.func) : send_duration.at(op.peer);
    // Channel k starts k skews late and runs k skews longer (replay::PlanTiming).
    EXPECT_EQ(op.gpu_end_ns - op.gpu_start_ns, duration + 2 * (op.n_channels - 1) * 1000u);
  }
  EXPECT_EQ(PluginRecords().CountOps(id), 7u);
}

// A new sub-communicator's first op queued behind a collective waiting on a straggler: its
// kernel starts seconds after the enqueue. It and every later op keep GPU timing; under v3, whose
// KernelCh carry no time, each completes untimed once its channels ended, none given up on.
TEST_P(KernelChPatternsTest, LateFirstKernelKeepsGpuTimingForItAndEveryLaterOp) {
  ProxyThread proxy;
  ReplayProcess process(PluginUnderTest(), version());
  const std::uint64_t id = NextCommId();
  ReplayComm comm(process, id, "tp", 1, 4, 0, &proxy);
  ASSERT_TRUE(comm.Init());
  PlanTiming late;
  late.first_kernel_delay_ms = 2500;
  comm.RunPlan(comm.Group({Coll("AllReduce", 1 << 20, 4)}), late, NoNetwork());
  for (int i = 0; i < 5; ++i) {
    comm.RunPlan(comm.Group({Coll("AllReduce", 1 << 20, 4)}), {}, NoNetwork());
  }
  proxy.Drain();
  ASSERT_TRUE(WaitForOps(id, 6));
  for (const profiler::OpView& view : PluginRecords().OpsOf(id)) {
    SCOPED_TRACE(view.op.seq);
    EXPECT_EQ(view.op.flags & (NCCLSCOPE_OP_GPU_TIMING_PARTIAL | NCCLSCOPE_OP_KERNEL_NEVER_CAME |
                               NCCLSCOPE_OP_FLUSHED),
              0);
    if (version() >= 4) {
      EXPECT_NE(view.op.flags & NCCLSCOPE_OP_GPU_TIMING, 0);
      EXPECT_EQ(view.op.n_timed, 4);
    } else {
      EXPECT_EQ(view.op.flags & NCCLSCOPE_OP_GPU_TIMING, 0);
      EXPECT_NE(view.op.flags & NCCLSCOPE_OP_KERNEL_UNTIMED, 0);
      EXPECT_EQ(view.op.n_timed, 0);
    }
  }
}

// Self send/recv (peer == rank) get no proxy ops and so no KernelCh: complete at their stop
// (src/enqueue.cc:805 at v2.28.9-1; :1076 at v2.23.4-1, :894 at v2.26.6-1). Before 2.26 (v1, v2)
// there is no KernelCh at all: every op completes at its stop, none timed.
TEST_P(NcclPatternsTest, SelfSendRecvCompleteAtTheirStopAndCountAsComplete) {
  ProxyThread proxy;
  ReplayProcess process(PluginUnderTest(), version());
  const std::uint64_t id = NextCommId();
  ReplayComm comm(process, id, "moe", 1, 4, 1, &proxy);
  ASSERT_TRUE(comm.Init());
  const std::uint64_t incomplete = PluginCounter(NCCLSCOPE_CTR_OPS_INCOMPLETE);
  const std::uint64_t late = PluginCounter(NCCLSCOPE_CTR_LATE_EVENT);
  // The proxy thread is held, so only ops that need nothing from it can complete.
  proxy.Post([] { std::this_thread::sleep_for(milliseconds(1500)); });
  const PlanLaunch plan = comm.Group(
      {SendRecv("Send", 1), SendRecv("Recv", 1), SendRecv("Send", 2), SendRecv("Recv", 0)});
  comm.RunPlan(plan, {}, NoNetwork());
  const bool kernel_ch = version() >= 3;
  ASSERT_TRUE(WaitForOps(id, kernel_ch ? 2 : 4, milliseconds(1000)));
  if (kernel_ch) {
    for (const profiler::OpView& view : PluginRecords().OpsOf(id)) EXPECT_EQ(view.op.peer, 1);
  }
  proxy.Drain();
  ASSERT_TRUE(WaitForOps(id, 4));
  for (const profiler::OpView& view : PluginRecords().OpsOf(id)) {
    const std::uint16_t f = view.op.flags;
    const bool self = view.op.peer == 1;
    EXPECT_EQ((f & NCCLSCOPE_OP_GPU_TIMING) != 0, !self && version() >= 4) << view.op.peer;
    EXPECT_EQ((f & NCCLSCOPE_OP_KERNEL_UNTIMED) != 0, !self && version() == 3) << view.op.peer;
    EXPECT_EQ((f & NCCLSCOPE_OP_KERNEL_NOT_REQUESTED) != 0, !kernel_ch) << view.op.peer;
    EXPECT_EQ(f & (NCCLSCOPE_OP_GPU_TIMING_PARTIAL | NCCLSCOPE_OP_FLUSHED), 0);
  }
  EXPECT_EQ(PluginCounter(NCCLSCOPE_CTR_OPS_INCOMPLETE), incomplete);
  EXPECT_EQ(PluginCounter(NCCLSCOPE_CTR_LATE_EVENT), late);
}

// CollNet, P2P copy-engine and SHM-memcpy ProxyOps are started and never stopped. A million of
// them exhaust nothing, not even a 4096-slot arena: network ProxyOps next to them are recorded in
// full, and they are never taken for network receives (only network sends set isSend at start).
TEST_P(GpuTimingPatternsTest, AMillionProxyOpsNcclNeverStopsExhaustNothing) {
  ProxyThread proxy;
  ReplayProcess process(PluginUnderTest(), version());
  const std::uint64_t id = NextCommId();
  ReplayComm comm(process, id, "shm", 2, 4, 1, &proxy);
  ASSERT_TRUE(comm.Init());
  const std::uint64_t no_network = PluginCounter(NCCLSCOPE_CTR_PROXY_OPS_NO_NETWORK);
  const std::uint64_t exhausted = PluginCounter(NCCLSCOPE_CTR_HANDLES_EXHAUSTED);
  constexpr int kChannels = 8;
  constexpr int kPlans = 62'500;  // x 8 channels x 2 directions = 1,000,000 ProxyOps
  constexpr int kNetworkEvery = 250;
  ProxyPlan net;
  net.steps = 2;
  net.step_bytes = 4096;
  int network_plans = 0;
  for (int i = 0; i < kPlans; ++i) {
    GroupTask never = Coll("AllReduce", 1 << 12, kChannels);
    never.proxy_never_stopped = true;  // SHM memcpy / P2P copy engine
    comm.RunPlan(comm.Group({never}), {}, NoNetwork());
    if (i % kNetworkEvery == 0) {
      comm.RunPlan(comm.Group({Coll("AllReduce", 1 << 12, kChannels)}), {}, net);
      ++network_plans;
    }
    if (i % 2048 == 0) {
      proxy.Drain();           // keep the replay's own queue short
      PluginRecords().Poll();  // and the ring drained, as the agent does
    }
  }
  GroupTask collnet = Coll("AllReduce", 1 << 12, 0);
  collnet.coll.algo = "COLLNET_DIRECT";
  collnet.coll.kernel_channels = kChannels;
  comm.RunPlan(comm.Group({collnet}), {}, net);
  proxy.Drain();
  ASSERT_TRUE(
      WaitForOps(id, static_cast<std::size_t>(kPlans + network_plans + 1), milliseconds(20000)))
      << PluginRecords().CountOps(id) << " of " << kPlans + network_plans + 1;
  const auto proxies = PluginRecords().ProxyOpsOf(id);
  ASSERT_EQ(proxies.size(), static_cast<std::size_t>(network_plans * kChannels * 2));
  int receives = 0;
  for (const ncclscope_proxy_op_record& p : proxies) {
    EXPECT_EQ(p.steps_done, 2);
    EXPECT_EQ(p.bytes, 2u * 4096u);
    EXPECT_EQ(p.flags & NCCLSCOPE_PROXY_FLUSHED, 0);
    receives += p.is_send == 0;
  }
  EXPECT_EQ(receives, network_plans * kChannels);
  EXPECT_EQ(PluginCounter(NCCLSCOPE_CTR_HANDLES_EXHAUSTED), exhausted);
  // Every one of them released, without a record (plus the CollNet op's, refused at start).
  EXPECT_TRUE(PluginRecords().PollUntil(
      [&] {
        return PluginCounter(NCCLSCOPE_CTR_PROXY_OPS_NO_NETWORK) - no_network >=
               static_cast<std::uint64_t>(kPlans) * kChannels * 2 + kChannels * 2;
      },
      milliseconds(5000)))
      << PluginCounter(NCCLSCOPE_CTR_PROXY_OPS_NO_NETWORK) - no_network;
}

// An op whose KernelCh came: timed on all `channels` from v4 on, untimed (KERNEL_UNTIMED) under
// v3, whose KernelCh carry no time.
void ExpectKernelRan(const ncclscope_op_record& op, int channels, int version) {
  EXPECT_EQ(op.flags & (NCCLSCOPE_OP_KERNEL_NEVER_CAME | NCCLSCOPE_OP_GPU_TIMING_PARTIAL), 0);
  EXPECT_EQ((op.flags & NCCLSCOPE_OP_KERNEL_UNTIMED) != 0, version == 3);
  if (version == 3) {
    EXPECT_EQ(op.flags & NCCLSCOPE_OP_GPU_TIMING, 0);
    EXPECT_EQ(op.n_timed, 0);
  } else {
    EXPECT_NE(op.flags & NCCLSCOPE_OP_GPU_TIMING, 0);
    EXPECT_EQ(op.n_timed, channels);
  }
}

// The mask NCCL copied at the API call decides what comes, not the plugin's mask at Coll start:
// the plugin (agent controls, duty cycles) may change it in between. (2.26 copies it at the API
// call too, src/enqueue.cc:2179/:2257 at v2.26.6-1, and like 2.27 raises no event there.)
TEST_P(KernelChPatternsTest, MaskCopiedAtTheApiCallDecidesWhatToWaitFor) {
  ProxyThread proxy;
  ReplayProcess process(PluginUnderTest(), version());
  const std::uint64_t id = NextCommId();
  ReplayComm comm(process, id, "dp", 2, 2, 0, &proxy);
  ASSERT_TRUE(comm.Init());
  ncclscope_controls no_kernel = DefaultControls();
  no_kernel.event_mask &= ~abi::kKernelCh;
  const std::uint64_t late = PluginCounter(NCCLSCOPE_CTR_LATE_EVENT);
  // Copied with KernelCh; KernelCh switched off before the launch: the KernelCh still come.
  auto upload = [&](const PlanLaunch& plan) { comm.RunPlan(plan, {}, NoNetwork()); };
  comm.Group({Coll("AllReduce", 1 << 20, 4)}, nullptr, upload,
             [&] { ASSERT_TRUE(SetPluginControls(no_kernel, false)); });
  proxy.Drain();
  ASSERT_TRUE(WaitForOps(id, 1));
  ExpectKernelRan(PluginRecords().OpsOf(id)[0].op, 4, version());
  EXPECT_EQ(PluginCounter(NCCLSCOPE_CTR_LATE_EVENT), late);

  // Copied without KernelCh; switched on before the launch: nothing comes, nothing to wait for.
  comm.Group({Coll("AllReduce", 1 << 20, 4)}, nullptr, upload,
             [&] { ASSERT_TRUE(SetPluginControls(DefaultControls(), true)); });
  proxy.Drain();
  if (version() >= 5) {
    ASSERT_TRUE(WaitForOps(id, 2, milliseconds(1000)));
    const ncclscope_op_record op = PluginRecords().OpsOf(id)[1].op;
    EXPECT_EQ(op.flags & NCCLSCOPE_OP_GPU_TIMING, 0);
    EXPECT_NE(op.flags & NCCLSCOPE_OP_KERNEL_NOT_REQUESTED, 0);
    EXPECT_EQ(op.flags & (NCCLSCOPE_OP_GPU_TIMING_PARTIAL | NCCLSCOPE_OP_KERNEL_NEVER_CAME), 0);
  } else {
    // 2.27 raises no event where it copies the mask (task append): the plugin cannot tell which
    // value it copied, waits, and learns from the next plan's kernel that none will come.
    comm.RunPlan(comm.Group({Coll("AllReduce", 1 << 20, 4)}), {}, NoNetwork());
    proxy.Drain();
    ASSERT_TRUE(WaitForOps(id, 3, milliseconds(3000)));
    for (const profiler::OpView& view : PluginRecords().OpsOf(id)) {
      if (view.op.seq != 1) continue;
      EXPECT_EQ(view.op.flags & NCCLSCOPE_OP_GPU_TIMING, 0);
      EXPECT_NE(view.op.flags & NCCLSCOPE_OP_KERNEL_NEVER_CAME, 0);
      EXPECT_EQ(view.op.flags & NCCLSCOPE_OP_GPU_TIMING_PARTIAL, 0);
    }
  }
  EXPECT_EQ(PluginCounter(NCCLSCOPE_CTR_LATE_EVENT), late);
}

// Another thread changes the mask while this one is between NCCL's read and the API event: here
// the plugin's maintenance thread, which writes once the process was idle for a pass, and this
// thread resumes right after. The plugin cannot know which side NCCL's read was on, so it waits
// for what comes: the KernelCh of a copy that had them are all timed, and a copy without them ends
// untimed once a later plan is timed. (Writes by other job threads are suspect at any distance;
// the stress test drives those with several threads.)
TEST_P(KernelChPatternsTest, AMaskChangeBetweenNcclsReadAndTheApiEventLosesNothing) {
  ProxyThread proxy;
  ReplayProcess process(PluginUnderTest(), version());
  const std::uint64_t id = NextCommId();
  ReplayComm comm(process, id, "race", 2, 2, 0, &proxy);
  ASSERT_TRUE(comm.Init());
  ncclscope_controls no_kernel = DefaultControls();
  no_kernel.event_mask &= ~abi::kKernelCh;
  const std::uint64_t late = PluginCounter(NCCLSCOPE_CTR_LATE_EVENT);
  const std::uint64_t uncertain = PluginCounter(NCCLSCOPE_CTR_OPS_MASK_UNCERTAIN);
  auto upload = [&](const PlanLaunch& plan) { comm.RunPlan(plan, {}, NoNetwork()); };

  bool switched = false;
  comm.OnMaskRead(
      [&] { switched = SetPluginControls(no_kernel, false, milliseconds(5000), false); });
  comm.Group({Coll("AllReduce", 1 << 20, 4)}, nullptr, upload);  // read with KernelCh
  ASSERT_TRUE(switched);
  comm.OnMaskRead(
      [&] { switched = SetPluginControls(DefaultControls(), true, milliseconds(5000), false); });
  comm.Group({Coll("AllReduce", 1 << 20, 4)}, nullptr, upload);  // read without
  ASSERT_TRUE(switched);
  comm.OnMaskRead({});
  comm.RunPlan(comm.Group({Coll("AllReduce", 1 << 20, 4)}), {}, NoNetwork());
  proxy.Drain();
  ASSERT_TRUE(WaitForOps(id, 3, milliseconds(3000)));
  for (const profiler::OpView& view : PluginRecords().OpsOf(id)) {
    const ncclscope_op_record& op = view.op;
    EXPECT_EQ(op.flags & (NCCLSCOPE_OP_GPU_TIMING_PARTIAL | NCCLSCOPE_OP_FLUSHED), 0);
    if (op.seq == 1) {
      EXPECT_EQ(op.flags & NCCLSCOPE_OP_GPU_TIMING, 0);
      EXPECT_NE(op.flags & NCCLSCOPE_OP_KERNEL_NEVER_CAME, 0);
    } else {
      SCOPED_TRACE(op.seq);
      ExpectKernelRan(op, 4, version());
    }
  }
  EXPECT_EQ(PluginCounter(NCCLSCOPE_CTR_OPS_MASK_UNCERTAIN) - uncertain, 2u);
  EXPECT_EQ(PluginCounter(NCCLSCOPE_CTR_LATE_EVENT), late);
}

// CUDA graphs: the task events come at every launch, from the host-callback thread, with the
// capture-time parents and mask copies. A graph captured with KernelCh gets them at every launch,
// one captured without never does, whatever the mask is at launch.
// (2.27 raises no event at capture: the capture-time mask is unknowable, docs/analytics.md, "What
// NCCL does not tell".)
TEST_P(ApiEventPatternsTest, GraphLaunchesFollowTheMaskOfTheirCapture) {
  ProxyThread proxy;
  ProxyThread host_callback;
  ReplayProcess process(PluginUnderTest(), version());
  const std::uint64_t id = NextCommId();
  ReplayComm comm(process, id, "graph", 1, 2, 1, &proxy);
  ASSERT_TRUE(comm.Init());
  const CapturedGraph with_kernel =
      comm.CaptureGraph({Coll("AllReduce", 1 << 20, 4), Coll("AllGather", 1 << 16, 2)});
  ncclscope_controls no_kernel = DefaultControls();
  no_kernel.event_mask &= ~abi::kKernelCh;
  ASSERT_TRUE(SetPluginControls(no_kernel, false));
  const CapturedGraph without_kernel = comm.CaptureGraph({Coll("Broadcast", 1 << 16, 2)});
  ASSERT_TRUE(SetPluginControls(DefaultControls(), true));
  auto upload = [&](const PlanLaunch& plan) { comm.RunPlan(plan, {}, NoNetwork()); };
  for (int launch = 0; launch < 3; ++launch) {
    comm.LaunchGraph(with_kernel, &host_callback, upload);
    comm.LaunchGraph(without_kernel, &host_callback, upload);
  }
  proxy.Drain();
  ASSERT_TRUE(WaitForOps(id, 9, milliseconds(2000)));
  std::multiset<std::uint64_t> broadcast_seqs;
  std::set<std::uint64_t> all_reduce_seqs;
  for (const profiler::OpView& view : PluginRecords().OpsOf(id)) {
    const ncclscope_op_record& op = view.op;
    EXPECT_EQ(op.flags & (NCCLSCOPE_OP_GPU_TIMING_PARTIAL | NCCLSCOPE_OP_FLUSHED |
                          NCCLSCOPE_OP_KERNEL_NEVER_CAME),
              0);
    if (op.func == NCCLSCOPE_FUNC_BROADCAST) {
      EXPECT_EQ(op.flags & NCCLSCOPE_OP_GPU_TIMING, 0);
      EXPECT_NE(op.flags & NCCLSCOPE_OP_KERNEL_NOT_REQUESTED, 0);
      broadcast_seqs.insert(op.seq);
    } else {
      EXPECT_NE(op.flags & NCCLSCOPE_OP_GPU_TIMING, 0);
      if (op.func == NCCLSCOPE_FUNC_ALL_REDUCE) all_reduce_seqs.insert(op.seq);
    }
  }
  // Graph-captured collectives advance seqNumber only with KernelCh in their mask
  // (src/plugin/profiler.cc:425-427 at v2.28.9-1): every launch of the other graph repeats one.
  EXPECT_EQ(all_reduce_seqs.size(), 3u);
  EXPECT_EQ(broadcast_seqs.size(), 3u);
  EXPECT_EQ(broadcast_seqs.count(*broadcast_seqs.begin()), 3u);
}

// Duty cycles flip KernelCh and the proxy events every few ms while a job runs: no op is lost,
// late or partial, and exactly the ops whose mask copy had KernelCh are timed (v3: got their
// untimed KernelCh, KERNEL_UNTIMED).
TEST_P(KernelChPatternsTest, DutyCycleFlipsLoseNothing) {
  ProxyThread proxy;
  ReplayProcess process(PluginUnderTest(), version());
  const std::uint64_t id = NextCommId();
  ReplayComm comm(process, id, "duty", 2, 4, 2, &proxy);
  ASSERT_TRUE(comm.Init());
  ncclscope_controls duty = DefaultControls();
  duty.duty_period_ns = 40'000'000;
  duty.kernel_duty_pm = 500;
  duty.proxy_duty_pm = 300;
  const std::uint64_t late = PluginCounter(NCCLSCOPE_CTR_LATE_EVENT);
  const std::uint64_t incomplete = PluginCounter(NCCLSCOPE_CTR_OPS_INCOMPLETE);
  const std::uint64_t uncertain = PluginCounter(NCCLSCOPE_CTR_OPS_MASK_UNCERTAIN);
  const std::string ring = OnlyRing(PluginRingDir().path());
  ASSERT_FALSE(ring.empty());
  ASSERT_TRUE(SetPluginControls(duty, false, milliseconds(5000)) ||
              SetPluginControls(duty, true, milliseconds(5000)));
  std::mt19937 random(7);
  std::size_t ops = 0;
  std::size_t timed_expected = 0;
  ProxyPlan net;
  net.steps = 1;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
  while (std::chrono::steady_clock::now() < until) {
    std::vector<GroupTask> tasks;
    const int n = 1 + static_cast<int>(random() % 3);
    tasks.reserve(static_cast<std::size_t>(n));
    for (int k = 0; k < n; ++k) {
      tasks.push_back(Coll(k == 0 ? "AllReduce" : "AllGather", 1024u << (random() % 8), 2));
    }
    const PlanLaunch plan = comm.Group(tasks);
    for (const replay::PlannedOp& op : plan.ops) timed_expected += (op.mask & abi::kKernelCh) != 0;
    ops += plan.ops.size();
    comm.RunPlan(plan, {}, net);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    if (ops % 256 < 3) PluginRecords().Poll();
  }
  proxy.Drain();
  // 2.27's ops whose copy is uncertain complete once a later plan ran: one more, fully timed.
  ASSERT_TRUE(SetPluginControls(DefaultControls(), true));
  comm.RunPlan(comm.Group({Coll("AllReduce", 1024, 2)}), {}, net);
  ++ops;
  ++timed_expected;
  proxy.Drain();
  ASSERT_TRUE(WaitForOps(id, ops, milliseconds(5000)))
      << PluginRecords().CountOps(id) << " of " << ops;
  std::size_t timed = 0;
  std::size_t never_came = 0;
  for (const profiler::OpView& view : PluginRecords().OpsOf(id)) {
    const ncclscope_op_record& op = view.op;
    EXPECT_EQ(op.flags & (NCCLSCOPE_OP_GPU_TIMING_PARTIAL | NCCLSCOPE_OP_FLUSHED), 0);
    timed +=
        (op.flags & (version() >= 4 ? NCCLSCOPE_OP_GPU_TIMING : NCCLSCOPE_OP_KERNEL_UNTIMED)) != 0;
    never_came += (op.flags & NCCLSCOPE_OP_KERNEL_NEVER_CAME) != 0;
  }
  EXPECT_EQ(PluginRecords().CountOps(id), ops);
  EXPECT_EQ(timed, timed_expected);
  // Only an op whose copy the plugin could not know may end without its kernel: with API events
  // none here (one job thread: it applies every change itself, right after NCCL's read), with
  // 2.27 every op around a change.
  EXPECT_LE(never_came, PluginCounter(NCCLSCOPE_CTR_OPS_MASK_UNCERTAIN) - uncertain);
  EXPECT_EQ(PluginCounter(NCCLSCOPE_CTR_LATE_EVENT), late);
  EXPECT_EQ(PluginCounter(NCCLSCOPE_CTR_OPS_INCOMPLETE), incomplete);
}

// plugin.record_one_in: the plugin writes the records of the ops ncclscope_op_recorded() picks
// from (comm, seq) alone, so every rank of a communicator (and a send and its receive) picks the
// same ones, weighs each by the setting, writes the network records of those ops only, and still
// counts every op in the comm table. Under v1/v2 the ops complete at NCCL's stop, before their
// network ops start: those still name their op and carry its weight.
TEST_P(NcclPatternsTest, RecordOneInRecordsTheSameOpsOnEveryRankAndCountsEveryOp) {
  ProxyThread proxy;
  ReplayProcess process(PluginUnderTest(), version());
  const std::uint64_t id = NextCommId();
  // Two ranks of one communicator in this process: what one picks, the other must pick too.
  ReplayComm rank0(process, id, "sampled", 2, 4, 0, &proxy);
  ReplayComm rank1(process, id, "sampled", 2, 4, 1, &proxy);
  ASSERT_TRUE(rank0.Init());
  ASSERT_TRUE(rank1.Init());
  constexpr std::uint32_t kOneIn = 4;
  ncclscope_controls sampled = DefaultControls();
  sampled.record_one_in = kOneIn;
  sampled.flags |= NCCLSCOPE_CONTROLS_HAS_RECORD_ONE_IN;
  ASSERT_TRUE(SetPluginControls(sampled, version() >= 3));
  const std::uint64_t not_recorded = PluginCounter(NCCLSCOPE_CTR_OPS_NOT_RECORDED);
  ProxyPlan net;
  net.steps = 2;
  constexpr std::uint64_t kOps = 400;
  std::set<std::uint64_t> picked;
  for (std::uint64_t seq = 0; seq < kOps; ++seq) {
    const std::uint64_t key =
        ncclscope_op_sample_key(NCCLSCOPE_KIND_COLL, NCCLSCOPE_FUNC_ALL_REDUCE, 0, -1);
    if (ncclscope_op_recorded(id, key, seq, kOneIn) != 0) picked.insert(seq);
    for (ReplayComm* comm : {&rank0, &rank1}) {
      CollSpec spec;
      spec.channels = 2;
      comm->Collective(spec, seq, {}, net);
    }
  }
  proxy.Drain();
  // About one in four, and neither none nor all (the hash is not seq % 4 either: see the header).
  EXPECT_GT(picked.size(), kOps / kOneIn / 2);
  EXPECT_LT(picked.size(), kOps / kOneIn * 2);
  ASSERT_TRUE(WaitForOps(id, 2 * picked.size()));
  std::map<std::int32_t, std::set<std::uint64_t>> recorded;
  for (const profiler::OpView& view : PluginRecords().OpsOf(id)) {
    EXPECT_EQ(view.op.weight, kOneIn) << view.op.seq;
    recorded[view.op.rank].insert(view.op.seq);
  }
  EXPECT_EQ(recorded[0], picked);
  EXPECT_EQ(recorded[1], picked);
  // Network records: only those of the recorded ops, with their weight.
  std::size_t network = 0;
  for (const ncclscope_proxy_op_record& rec : PluginRecords().ProxyOpsOf(id)) {
    ++network;
    EXPECT_EQ(rec.weight, kOneIn);
    ASSERT_NE(rec.flags & NCCLSCOPE_PROXY_PARENT_KNOWN, 0);
    EXPECT_TRUE(picked.contains(rec.seq)) << rec.seq;
  }
  EXPECT_GT(network, 0u);
  // Every op is counted: the comm table has them all, the counter the ones left out.
  EXPECT_EQ(PluginCounter(NCCLSCOPE_CTR_OPS_NOT_RECORDED) - not_recorded,
            2 * (kOps - picked.size()));
  // The comm table (the agent's reader lists no v1-v3 slot: their nranks is unknown, 0).
  if (version() >= 4) {
    std::size_t slots = 0;
    for (const profiler::LiveComm& live : PluginRecords().snapshot().comms) {
      if (live.slot.comm_id != id) continue;
      ++slots;
      EXPECT_EQ(live.slot.ops_enqueued, kOps);
      EXPECT_EQ(live.slot.ops_completed, kOps);
    }
    EXPECT_EQ(slots, 2u);
  }
  // The finalize records and the exact counts (the count table), every version.
  rank0.Finalize();
  rank1.Finalize();
  std::size_t finals = 0;
  EXPECT_TRUE(PluginRecords().PollUntil([&] {
    finals = 0;
    for (const auto& f : PluginRecords().finalizes) finals += f.comm_id == id ? 1 : 0;
    return finals == 2;
  }));
  for (const auto& f : PluginRecords().finalizes) {
    if (f.comm_id != id) continue;
    EXPECT_EQ(f.ops_enqueued, kOps);
    EXPECT_EQ(f.ops_completed, kOps);
    EXPECT_EQ(f.ops_flushed, 0u);
  }
  EXPECT_EQ(PluginRecords().CountedOps(id, 0), kOps);
  EXPECT_EQ(PluginRecords().CountedOps(id, 1), kOps);
}

// CollNet tasks announce nChannels 0 yet get a KernelCh per channel; their ProxyOps are never
// stopped. The op is timed on every channel.
TEST_P(GpuTimingPatternsTest, CollNetOpsAnnounceNoChannelsButAreTimed) {
  ProxyThread proxy;
  ReplayProcess process(PluginUnderTest(), version());
  const std::uint64_t id = NextCommId();
  ReplayComm comm(process, id, "sharp", 4, 8, 5, &proxy);
  ASSERT_TRUE(comm.Init());
  const std::uint64_t no_network = PluginCounter(NCCLSCOPE_CTR_PROXY_OPS_NO_NETWORK);
  GroupTask collnet = Coll("AllReduce", 1 << 22, 0);
  collnet.coll.algo = "COLLNET_DIRECT";
  collnet.coll.kernel_channels = 4;
  comm.RunPlan(comm.Group({collnet}), {}, ProxyPlan{});
  proxy.Drain();
  ASSERT_TRUE(WaitForOps(id, 1, milliseconds(3000)));
  const ncclscope_op_record op = PluginRecords().OpsOf(id)[0].op;
  EXPECT_EQ(op.algo, NCCLSCOPE_ALGO_COLLNET_DIRECT);
  EXPECT_EQ(op.n_channels, 0);
  EXPECT_NE(op.flags & NCCLSCOPE_OP_GPU_TIMING, 0);
  EXPECT_EQ(op.n_timed, 4);
  EXPECT_EQ(op.flags & (NCCLSCOPE_OP_GPU_TIMING_PARTIAL | NCCLSCOPE_OP_KERNEL_NEVER_CAME), 0);
  EXPECT_TRUE(PluginRecords().ProxyOpsOf(id).empty());
  EXPECT_EQ(PluginCounter(NCCLSCOPE_CTR_PROXY_OPS_NO_NETWORK) - no_network, 4u * 2u);
}

// AllGather and Broadcast reach the Coll event in bytes and ncclInt8 (src/enqueue.cc:2476-2480 at
// v2.28.9-1; :2247-2250 at v2.26.6-1); v5+ keep the API's count and type from the CollApi event,
// 2.23-2.27 (no API events) record what the Coll event says.
TEST_P(NcclPatternsTest, AllGatherAndBroadcastKeepTheApiCountAndType) {
  ReplayProcess process(PluginUnderTest(), version());
  const std::uint64_t id = NextCommId();
  ReplayComm comm(process, id, "ag", 1, 2, 0, nullptr);
  ASSERT_TRUE(comm.Init());
  comm.RunPlan(comm.Group({Coll("AllGather", 1000, 2, "ncclBfloat16"),
                           Coll("Broadcast", 500, 2, "ncclFloat32")}),
               {}, NoNetwork());
  ASSERT_TRUE(WaitForOps(id, 2));
  for (const profiler::OpView& view : PluginRecords().OpsOf(id)) {
    const ncclscope_op_record& op = view.op;
    EXPECT_EQ(op.bytes, 2000u);
    if (version() >= 5) {
      EXPECT_NE(op.flags & NCCLSCOPE_OP_API_COUNT, 0);
      EXPECT_EQ(op.count, op.func == NCCLSCOPE_FUNC_ALL_GATHER ? 1000u : 500u);
      EXPECT_EQ(op.datatype, op.func == NCCLSCOPE_FUNC_ALL_GATHER ? NCCLSCOPE_DT_BFLOAT16
                                                                  : NCCLSCOPE_DT_FLOAT32);
    } else {
      EXPECT_EQ(op.flags & NCCLSCOPE_OP_API_COUNT, 0);
      EXPECT_EQ(op.count, 2000u);
      EXPECT_EQ(op.datatype, NCCLSCOPE_DT_INT8);
    }
  }
}

// NCCL's IB transport names, per posted work request, the NIC (index within the net device) and
// the queue pair: every network ProxyOp record carries them. NCCL has net-plugin events from 2.26
// (v3, src/plugin/profiler.cc:548-563 at v2.26.6-1): before, the records name none, and their
// bytes come from the ProxyOp states' transSize (src/misc/profiler.cc:483-494 at v2.23.4-1).
TEST_P(NcclPatternsTest, NetPluginEventsNameTheNicAndQueuePairs) {
  ProxyThread proxy;
  ReplayProcess process(PluginUnderTest(), version());
  const std::uint64_t id = NextCommId();
  ReplayComm comm(process, id, "ib", 2, 4, 1, &proxy);
  ASSERT_TRUE(comm.Init());
  ProxyPlan net;
  net.steps = 3;
  net.ib_device = 1;
  net.qp_base = 4000;
  comm.RunPlan(comm.Group({Coll("AllReduce", 1 << 20, 2)}), {}, net);
  proxy.Drain();
  ASSERT_TRUE(WaitForOps(id, 1));
  ASSERT_TRUE(
      PluginRecords().PollUntil([&] { return PluginRecords().ProxyOpsOf(id).size() == 4; }));
  for (const ncclscope_proxy_op_record& p : PluginRecords().ProxyOpsOf(id)) {
    EXPECT_NE(p.flags & NCCLSCOPE_PROXY_PARENT_KNOWN, 0);
    EXPECT_EQ(p.steps_done, 3);
    EXPECT_EQ(p.bytes, 3u * 65536u);
    if (version() >= 3) {
      EXPECT_EQ(p.net_type, NCCLSCOPE_NET_IB);
      EXPECT_EQ(p.net_dev_index, 1);
      EXPECT_EQ(p.qp_num[0], 4000u + 2u * p.channel + p.is_send);
    } else {
      EXPECT_EQ(p.net_type, NCCLSCOPE_NET_UNKNOWN);
      EXPECT_EQ(p.net_dev_index, -1);
      EXPECT_EQ(p.qp_num[0], 0u);
    }
    EXPECT_EQ(p.qp_num[1], 0u);  // one QP per direction and channel here
  }
}

// ---- NCCL 2.31 (ABI v7) ----

constexpr int kV7 = 7;

class V7PatternsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kSmallProxyArena);
    SetUpPluginEnvironment();
    ASSERT_TRUE(PluginUnderTest().ok()) << PluginUnderTest().error();
  }
};

GroupTask Symmetric(std::size_t count, std::uint8_t blocks) {
  GroupTask t = Coll("AllReduce", count, blocks);
  t.coll.symmetric = true;
  t.coll.kernel_variant = "AllReduce_AGxLL_R";
  return t;
}

const profiler::OpView* OpOfRank(const std::vector<profiler::OpView>& ops, int rank) {
  for (const profiler::OpView& view : ops) {
    if (view.op.rank == rank) return &view;
  }
  return nullptr;
}

// A symmetric AllReduce whose rank 1 arrives late: rank 0's kernel starts 395 us earlier and
// waits at the opening barrier (its initial_sync, src/device/symmetric/all_gather.cuh at 2.31.2),
// rank 1's starts when everyone is there. Both then compute for 100 us. The phases each rank's
// ring gets (v7 KernelPhase: parent the KernelCh, GPU pTimer start and KernelPhaseStop end,
// src/plugin/profiler.cc:898-941 at 2.31.2) tell the straggler: the shortest initial_sync, on
// every block.
TEST_F(V7PatternsTest, PhasesTellTheLateRankOfASymmetricCollective) {
  ProxyThread proxy[2];
  ProxyThread profiler_thread[2];
  ReplayProcess process(PluginUnderTest(), kV7);
  const std::uint64_t id = NextCommId();
  ReplayComm rank0(process, id, "sym", 2, 2, 0, &proxy[0], &profiler_thread[0]);
  ReplayComm rank1(process, id, "sym", 2, 2, 1, &proxy[1], &profiler_thread[1]);
  ASSERT_TRUE(rank0.Init());
  ASSERT_TRUE(rank1.Init());
  ASSERT_NE(ReplayProcess::MaskSnapshot() & abi::kKernelPhase, 0);
  const std::uint64_t base = 1'800'000'000'000'000'000ull;
  PlanTiming early;  // rank 0: on time, then waits for rank 1
  early.base_ns = base;
  early.skew_ns = 0;
  early.duration_ns = {500'000};
  early.initial_sync_ns = {400'000};
  PlanTiming late = early;  // rank 1: 395 us late, barely waits
  late.base_ns = base + 395'000;
  late.duration_ns = {105'000};
  late.initial_sync_ns = {5'000};
  rank0.RunPlan(rank0.Group({Symmetric(1 << 16, 4)}), early, NoNetwork());
  rank1.RunPlan(rank1.Group({Symmetric(1 << 16, 4)}), late, NoNetwork());
  for (int r = 0; r < 2; ++r) {
    proxy[r].Drain();
    profiler_thread[r].Drain();
  }
  ASSERT_TRUE(WaitForOps(id, 2));
  const std::vector<profiler::OpView> ops = PluginRecords().OpsOf(id);
  std::map<int, std::uint32_t> min_initial;
  for (int r = 0; r < 2; ++r) {
    const profiler::OpView* view = OpOfRank(ops, r);
    ASSERT_NE(view, nullptr) << r;
    SCOPED_TRACE("rank " + std::to_string(r));
    const ncclscope_op_record& op = view->op;
    EXPECT_EQ(op.algo, NCCLSCOPE_ALGO_SYMMETRIC);
    EXPECT_EQ(view->kernel_variant, NCCLSCOPE_KV_ALL_REDUCE_AGXLL_R);
    EXPECT_EQ(
        op.flags & (NCCLSCOPE_OP_SYMMETRIC | NCCLSCOPE_OP_GPU_TIMING | NCCLSCOPE_OP_HAS_PHASES |
                    NCCLSCOPE_OP_HAS_DETAIL | NCCLSCOPE_OP_GPU_TIMING_PARTIAL),
        NCCLSCOPE_OP_SYMMETRIC | NCCLSCOPE_OP_GPU_TIMING | NCCLSCOPE_OP_HAS_PHASES |
            NCCLSCOPE_OP_HAS_DETAIL);
    EXPECT_EQ(op.gpu_start_ns, r == 0 ? base : base + 395'000);
    EXPECT_EQ(op.gpu_end_ns, base + 500'000);
    ASSERT_EQ(view->n_phase_channels, 4u);
    min_initial[r] = UINT32_MAX;
    for (std::uint32_t k = 0; k < 4; ++k) {
      const ncclscope_channel_phases& ph = view->phases[k];
      EXPECT_EQ(ph.channel, k);  // the block index (src/plugin/profiler.cc:1280-1292)
      // No final_sync: zero length, so NCCL sends none (:922-923).
      EXPECT_EQ(ph.present, 0b011);
      EXPECT_EQ(ph.ns[abi::kPhaseInitialSync], r == 0 ? 400'000u : 5'000u);
      EXPECT_EQ(ph.ns[abi::kPhaseCompute], 100'000u);
      EXPECT_EQ(ph.ns[abi::kPhaseFinalSync], 0u);
      min_initial[r] = std::min(min_initial[r], ph.ns[abi::kPhaseInitialSync]);
    }
  }
  EXPECT_LT(min_initial[1], min_initial[0]);  // rank 1 is the one the others waited for
}

// ncclCollConfig_t.userProfilerTag reaches Coll and P2p events (src/plugin/profiler.cc:620, :658
// at 2.31.2): a tagged op's record is followed by an OP_DETAIL with the tag, an untagged one's
// by none; values with the top bit (reserved by NCCL) pass through unchanged.
TEST_F(V7PatternsTest, UserTagsFollowTheirOpsOnly) {
  ProxyThread proxy;
  ProxyThread profiler_thread;
  ReplayProcess process(PluginUnderTest(), kV7);
  const std::uint64_t id = NextCommId();
  ReplayComm comm(process, id, "tags", 2, 4, 0, &proxy, &profiler_thread);
  ASSERT_TRUE(comm.Init());
  GroupTask tagged = Coll("AllReduce", 1 << 20, 2);
  tagged.coll.user_tag = 0x1234;
  GroupTask reserved = Coll("ReduceScatter", 1 << 18, 2);
  reserved.coll.user_tag = 0x8000000000000001ull;
  GroupTask send = SendRecv("Send", 1);
  send.send_recv.user_tag = 77;
  const GroupTask untagged = Coll("AllGather", 1 << 16, 2);
  ProxyPlan net;
  net.steps = 1;
  comm.RunPlan(comm.Group({tagged, reserved, untagged, send, SendRecv("Recv", 3)}), {}, net);
  proxy.Drain();
  profiler_thread.Drain();
  ASSERT_TRUE(WaitForOps(id, 5));
  const std::map<int, std::uint64_t> tag_of = {
      {NCCLSCOPE_FUNC_ALL_REDUCE, 0x1234},
      {NCCLSCOPE_FUNC_REDUCE_SCATTER, 0x8000000000000001ull},
      {NCCLSCOPE_FUNC_ALL_GATHER, 0},
      {NCCLSCOPE_FUNC_SEND, 77},
      {NCCLSCOPE_FUNC_RECV, 0}};
  for (const profiler::OpView& view : PluginRecords().OpsOf(id)) {
    SCOPED_TRACE(ncclscope_func_name(view.op.func));
    const std::uint64_t tag = tag_of.at(view.op.func);
    EXPECT_EQ(view.user_tag, tag);
    EXPECT_EQ((view.op.flags & NCCLSCOPE_OP_HAS_DETAIL) != 0, tag != 0);
    EXPECT_EQ(view.kernel_variant, NCCLSCOPE_KV_NONE);
    EXPECT_NE(view.op.flags & NCCLSCOPE_OP_GPU_TIMING, 0);
    EXPECT_EQ(view.op.flags & NCCLSCOPE_OP_GPU_TIMING_PARTIAL, 0);
    // Network records carry no tag of their own (NCCL gives ProxyOps none): they join their op.
  }
  for (const ncclscope_proxy_op_record& p : PluginRecords().ProxyOpsOf(id)) {
    EXPECT_NE(p.flags & NCCLSCOPE_PROXY_PARENT_KNOWN, 0);
  }
}

// A symmetric plan gives KernelCh only to its head task, which announces the plan's blocks; the
// other tasks announce nChannels 0 (src/plugin/profiler.cc:600-604, :1280-1292 at 2.31.2). They
// complete at NCCL's stop, without waiting for a kernel event that never comes for them, while
// the head waits for its blocks.
TEST_F(V7PatternsTest, SymmetricNonHeadTasksCompleteWithoutWaiting) {
  ProxyThread proxy;
  ProxyThread profiler_thread;
  ReplayProcess process(PluginUnderTest(), kV7);
  const std::uint64_t id = NextCommId();
  ReplayComm comm(process, id, "sym-plan", 1, 4, 2, &proxy, &profiler_thread);
  ASSERT_TRUE(comm.Init());
  const std::uint64_t incomplete = PluginCounter(NCCLSCOPE_CTR_OPS_INCOMPLETE);
  const std::uint64_t late = PluginCounter(NCCLSCOPE_CTR_LATE_EVENT);
  // The profiler thread is held: no KernelCh can come for a while.
  profiler_thread.Post([] { std::this_thread::sleep_for(milliseconds(1500)); });
  // One bin, smallest first: the 1 << 12 task heads the plan (replay::ReplayComm::LaunchPlan).
  const PlanLaunch plan =
      comm.Group({Symmetric(1 << 16, 4), Symmetric(1 << 12, 4), Symmetric(1 << 14, 4)});
  ASSERT_EQ(plan.ops.size(), 3u);
  comm.RunPlan(plan, {}, NoNetwork());
  ASSERT_TRUE(WaitForOps(id, 2, milliseconds(1000)));
  for (const profiler::OpView& view : PluginRecords().OpsOf(id)) {
    EXPECT_NE(view.op.count, 1u << 12) << "the head waits for its blocks";
    EXPECT_EQ(view.op.n_channels, 0);
    EXPECT_EQ(view.op.flags & (NCCLSCOPE_OP_GPU_TIMING | NCCLSCOPE_OP_GPU_TIMING_PARTIAL |
                               NCCLSCOPE_OP_KERNEL_NEVER_CAME | NCCLSCOPE_OP_KERNEL_NOT_REQUESTED),
              0);
    EXPECT_NE(view.op.flags & NCCLSCOPE_OP_SYMMETRIC, 0);
  }
  profiler_thread.Drain();
  proxy.Drain();
  ASSERT_TRUE(WaitForOps(id, 3));
  for (const profiler::OpView& view : PluginRecords().OpsOf(id)) {
    if (view.op.count != 1u << 12) continue;
    EXPECT_EQ(view.op.n_channels, 4);
    EXPECT_EQ(view.op.n_timed, 4);
    EXPECT_EQ(view.n_phase_channels, 4u);
    EXPECT_EQ(view.op.flags & NCCLSCOPE_OP_GPU_TIMING_PARTIAL, 0);
  }
  EXPECT_EQ(PluginCounter(NCCLSCOPE_CTR_OPS_INCOMPLETE), incomplete);
  EXPECT_EQ(PluginCounter(NCCLSCOPE_CTR_LATE_EVENT), late);
}

// Captured into a CUDA graph, a symmetric plan runs the uninstrumented kernel: no KernelCh and no
// phases, though its head still announces its blocks (src/plugin/profiler.cc:1271, :1286 at
// 2.31.2). Every launch's op completes at its stop, untimed, not partial, not left to the sweep.
TEST_F(V7PatternsTest, GraphCapturedSymmetricPlanCompletesWithoutKernelCh) {
  ProxyThread proxy;
  ProxyThread profiler_thread;
  ProxyThread host_callback;
  ReplayProcess process(PluginUnderTest(), kV7);
  const std::uint64_t id = NextCommId();
  ReplayComm comm(process, id, "sym-graph", 1, 4, 0, &proxy, &profiler_thread);
  ASSERT_TRUE(comm.Init());
  const std::uint64_t incomplete = PluginCounter(NCCLSCOPE_CTR_OPS_INCOMPLETE);
  const CapturedGraph graph = comm.CaptureGraph({Symmetric(1 << 14, 4)});
  auto upload = [&](const PlanLaunch& plan) { comm.RunPlan(plan, {}, NoNetwork()); };
  for (int launch = 0; launch < 3; ++launch) comm.LaunchGraph(graph, &host_callback, upload);
  // Well before the sweep could give up on them (2 s and more).
  ASSERT_TRUE(WaitForOps(id, 3, milliseconds(1000)));
  proxy.Drain();
  profiler_thread.Drain();
  std::set<std::uint64_t> seqs;
  for (const profiler::OpView& view : PluginRecords().OpsOf(id)) {
    const ncclscope_op_record& op = view.op;
    seqs.insert(op.seq);
    EXPECT_EQ(op.n_channels, 4);
    EXPECT_EQ(op.n_timed, 0);
    EXPECT_EQ(view.n_phase_channels, 0u);
    EXPECT_EQ(op.flags & (NCCLSCOPE_OP_SYMMETRIC | NCCLSCOPE_OP_GPU_TIMING |
                          NCCLSCOPE_OP_GPU_TIMING_PARTIAL | NCCLSCOPE_OP_KERNEL_NEVER_CAME |
                          NCCLSCOPE_OP_FLUSHED),
              NCCLSCOPE_OP_SYMMETRIC);
  }
  EXPECT_EQ(seqs.size(), 3u);  // captured with KernelCh: every launch advances seqNumber
  EXPECT_EQ(PluginCounter(NCCLSCOPE_CTR_OPS_INCOMPLETE), incomplete);
}

// NCCL 2.31's RAS `CONTROL PROFILER_MASK` replaces the mask int under the plugin and writes it
// back after every later communicator's init (src/plugin/profiler.cc:316-328, :349-354 at
// 2.31.2). The plugin must follow it, not fight it: within about a second its ring header says
// NCCL_OVERRIDE with NCCL's mask, nothing of the plugin's (agent controls, its own init) writes
// the int again, and ops are recorded by NCCL's mask. Last in this file: the process's mask stays
// NCCL's (as in NCCL, for the life of the process).
TEST_F(V7PatternsTest, RasOverrideIsFollowedNotWrittenBack) {
  ProxyThread proxy;
  ProxyThread profiler_thread;
  ReplayProcess process(PluginUnderTest(), kV7);
  const std::uint64_t id = NextCommId();
  ReplayComm comm(process, id, "ras", 2, 2, 0, &proxy, &profiler_thread);
  ASSERT_TRUE(comm.Init());
  const std::string ring = OnlyRing(PluginRingDir().path());
  ASSERT_FALSE(ring.empty());
  std::string reason;
  auto file = profiler::RingFile::Open(ring, &reason);
  ASSERT_NE(file, nullptr) << reason;
  const int ras = abi::kColl | abi::kP2p | abi::kKernelCh;  // no proxy events, no phases
  ASSERT_NE(ReplayProcess::MaskSnapshot(), ras);
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(process.SetRasOverride(ras));
  profiler::RingHeaderSnapshot header;
  bool published = false;
  while (!published && std::chrono::steady_clock::now() - start < std::chrono::seconds(5)) {
    std::this_thread::sleep_for(milliseconds(10));
    ASSERT_TRUE(file->ReadHeader(&header));
    published = header.governor.level == NCCLSCOPE_GOVERNOR_NCCL_OVERRIDE;
  }
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(published);
  EXPECT_LT(took, milliseconds(1500))
      << std::chrono::duration<double, std::milli>(took).count() << " ms";
  EXPECT_EQ(header.governor.nccl_mask, static_cast<std::uint32_t>(ras));
  EXPECT_EQ(header.effective_mask, static_cast<std::uint32_t>(ras));
  EXPECT_EQ(ReplayProcess::MaskSnapshot(), ras);

  // Agent controls that would switch KernelCh off: applied, yet NCCL's int stays NCCL's.
  ncclscope_controls no_kernel = DefaultControls();
  no_kernel.kernel_duty_pm = 0;
  ASSERT_TRUE(file->WriteControls(no_kernel));
  ASSERT_TRUE(WaitForControlsApplied(*file, milliseconds(3000)));
  const auto watch = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - watch < milliseconds(600)) {
    ASSERT_EQ(ReplayProcess::MaskSnapshot(), ras);
    std::this_thread::sleep_for(milliseconds(10));
  }
  // A new communicator's init, with NCCL not re-applying the override this time: the plugin's
  // init writes nothing either.
  ReplayProcess::ClearRasOverride();
  ReplayComm second(process, NextCommId(), "ras-2", 2, 2, 1, &proxy, &profiler_thread);
  ASSERT_TRUE(second.Init());
  EXPECT_EQ(ReplayProcess::MaskSnapshot(), ras);

  // Ops by NCCL's mask: timed, no proxy events requested, no phases, no network records.
  ProxyPlan net;
  net.steps = 1;
  comm.RunPlan(comm.Group({Coll("AllReduce", 1 << 20, 2)}), {}, net);
  proxy.Drain();
  profiler_thread.Drain();
  ASSERT_TRUE(WaitForOps(id, 1));
  const ncclscope_op_record op = PluginRecords().OpsOf(id)[0].op;
  EXPECT_NE(op.flags & NCCLSCOPE_OP_GPU_TIMING, 0);
  EXPECT_EQ(op.flags & (NCCLSCOPE_OP_PROXY_REQUESTED | NCCLSCOPE_OP_HAS_PHASES), 0);
  EXPECT_EQ(op.n_timed, 2);
  EXPECT_TRUE(PluginRecords().ProxyOpsOf(id).empty());
  ASSERT_TRUE(file->ReadHeader(&header));
  EXPECT_EQ(header.governor.level, NCCLSCOPE_GOVERNOR_NCCL_OVERRIDE);
  second.Finalize();
  comm.Finalize();
}

}  // namespace
}  // namespace ncclscope::testing
