// The real libnccl-profiler-ncclscope.so, driven through each exported ABI (v1, NCCL 2.23, to v7,
// 2.31) exactly as NCCL calls it (tools/replay/nccl_replay.h), and the records it writes read back
// with the agent's reader: what needs GPU timing under v4+ (2.27+), what every version has under
// all seven, and what v1-v3 do differently (identity from the first op, network bytes from ProxyOp
// states, v3's untimed KernelCh) under those. Every TEST runs in its own process under ctest; they
// also pass together.

#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <thread>

#include "agent/profiler/ring_file.h"
#include "platform/clock.h"
#include "plugin/abi/nccl_profiler_abi.h"
#include "plugin/ring/ncclscope_ring.h"
#include "tests/support/plugin_harness.h"
#include "tests/support/replay_names.h"
#include "tests/support/ring_records.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait_for.h"
#include "tools/replay/nccl_replay.h"

namespace ncclscope::testing {
namespace {

using platform::RealtimeNs;
using replay::EnqueuedOp;

using std::chrono::milliseconds;

TempDir& RingDir() { return PluginRingDir(); }
ProfilerPlugin& Plugin() { return PluginUnderTest(); }
RingRecords& Records() { return PluginRecords(); }
std::uint64_t Counter(ncclscope_counter counter) { return PluginCounter(counter); }

// A finalized communicator's comm slot is handed out again only NCCLSCOPE_COMM_SLOT_REUSE_NS after
// (the agent reads its last counts first). A test that counts slots first waits until those the
// earlier tests of this process finalized are free again; under ctest, where every TEST_P has a
// process of its own, there are none and it does not wait.
void WaitUntilFinalizedSlotsAreFree() {
  Records().Poll();
  std::uint64_t newest = 0;
  for (const auto& f : Records().finalizes) newest = std::max(newest, f.finalize_ns);
  if (newest == 0) return;
  constexpr std::uint64_t kMargin = 50'000'000;  // the plugin's clock against RealtimeNs()
  const std::uint64_t until = newest + NCCLSCOPE_COMM_SLOT_REUSE_NS + kMargin;
  const std::uint64_t now = RealtimeNs();
  if (now < until) std::this_thread::sleep_for(std::chrono::nanoseconds(until - now));
}
const bool kEnvironment = [] {  // NOLINT(cert-err58-cpp): before main, with no other thread yet
  SetUpPluginEnvironment();
  return true;
}();

class ReplayTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kEnvironment);
    ASSERT_TRUE(Plugin().ok()) << Plugin().error();
    ASSERT_TRUE(Plugin().Has(GetParam()));
  }
  int version() const { return GetParam(); }
};

auto VersionName(const ::testing::TestParamInfo<int>& param_info) {
  return "v" + std::to_string(param_info.param);
}
// GPU timing: KernelCh with GPU timestamps (NCCL 2.27+).
INSTANTIATE_TEST_SUITE_P(Abi, ReplayTest, ::testing::Values(4, 5, 6, 7), VersionName);
// What every version has.
class AllVersionsReplayTest : public ReplayTest {};
INSTANTIATE_TEST_SUITE_P(Abi, AllVersionsReplayTest, ::testing::Values(1, 2, 3, 4, 5, 6, 7),
                         VersionName);
// NCCL 2.23-2.26 (v1-v3): init(context, mask) alone, ProxyOp states 0-7, v3's untimed KernelCh.
class LegacyReplayTest : public ReplayTest {
 protected:
  void TearDown() override {  // leave the controls as the next test expects them
    if (!OnlyRing(RingDir().path()).empty()) {
      EXPECT_TRUE(SetPluginControls(DefaultControls(), version() >= 3));
    }
  }
};
INSTANTIATE_TEST_SUITE_P(Abi, LegacyReplayTest, ::testing::Values(1, 2, 3), VersionName);

// Every profiler ABI NCCL has shipped (v1, NCCL 2.23, to v7, 2.31), each table named ncclscope
// (the vtable's first member, which NCCL logs), and nothing else of the plugin visible.
TEST(ExportsTest, EveryVersionOneToSevenNamedNcclscope) {
  void* lib = dlopen(NCCLSCOPE_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  for (int v = 1; v <= 7; ++v) {
    const std::string symbol = "ncclProfiler_v" + std::to_string(v);
    const auto* name = static_cast<const char* const*>(dlsym(lib, symbol.c_str()));
    ASSERT_NE(name, nullptr) << symbol;
    EXPECT_STREQ(*name, "ncclscope") << symbol;
  }
  for (const char* absent : {"ncclProfiler_v8", "_ZN9ncclscope6plugin1REv"}) {
    EXPECT_EQ(dlsym(lib, absent), nullptr) << absent;
  }
  dlclose(lib);
}

TEST_P(ReplayTest, CollectivesRecordEverythingNcclReported) {
  ProxyThread proxy;
  ReplayProcess process(Plugin(), version());
  const std::uint64_t id = NextCommId();
  ReplayComm comm(process, id, "dp group 0", 2, 4, 1, &proxy);
  ASSERT_TRUE(comm.Init());
  const int mask = *ReplayProcess::mask();
  EXPECT_NE(mask & abi::kColl, 0);
  EXPECT_NE(mask & abi::kKernelCh, 0);
  EXPECT_EQ((mask & abi::kCeColl) != 0, version() >= 6);

  const std::uint64_t before = RealtimeNs();
  GpuTimes gpu;
  gpu.base = 1'700'000'000'000'000'000ull;
  gpu.duration_ns = 30'000;
  gpu.skew_ns = 250;
  ProxyPlan net;
  net.steps = 3;
  net.step_bytes = 1 << 16;
  for (std::uint64_t seq = 0; seq < 10; ++seq) {
    CollSpec spec;
    spec.count = 1 << 20;
    comm.Collective(spec, 100 + seq, gpu, net);
  }
  proxy.Drain();
  ASSERT_TRUE(WaitForOps(id, 10));
  const std::vector<profiler::OpView> ops = Records().OpsOf(id);
  ASSERT_EQ(ops.size(), 10u);
  std::set<std::uint64_t> seqs;
  std::set<std::uint64_t> indices;
  for (const profiler::OpView& view : ops) {
    const ncclscope_op_record& op = view.op;
    seqs.insert(op.seq);
    indices.insert(op.op_index);
    EXPECT_EQ(op.kind, NCCLSCOPE_KIND_COLL);
    EXPECT_EQ(op.func, NCCLSCOPE_FUNC_ALL_REDUCE);
    EXPECT_EQ(op.datatype, NCCLSCOPE_DT_FLOAT32);
    EXPECT_EQ(op.algo, NCCLSCOPE_ALGO_RING);
    EXPECT_EQ(op.proto, NCCLSCOPE_PROTO_SIMPLE);
    EXPECT_EQ(op.count, 1u << 20);
    EXPECT_EQ(op.bytes, 4u << 20);
    EXPECT_EQ(op.rank, 1);
    EXPECT_EQ(op.peer, 0);  // root
    EXPECT_EQ(op.n_channels, 8);
    EXPECT_EQ(op.n_warps, 16);
    EXPECT_EQ(op.n_timed, 8);
    EXPECT_EQ(op.channel_mask, 0xFFu);
    EXPECT_EQ(op.flags & (NCCLSCOPE_OP_GPU_TIMING | NCCLSCOPE_OP_GPU_TIMING_PARTIAL |
                          NCCLSCOPE_OP_FLUSHED | NCCLSCOPE_OP_NO_ENQUEUE_STOP),
              NCCLSCOPE_OP_GPU_TIMING);
    EXPECT_EQ(op.gpu_start_ns, gpu.Start(0));
    EXPECT_EQ(op.gpu_end_ns, gpu.Stop(7));
    ASSERT_EQ(view.n_channels, 8u);
    for (std::uint32_t c = 0; c < 8; ++c) {
      EXPECT_EQ(view.channel_ids[c], c);
      EXPECT_EQ(view.channels[c].start_off_ns, gpu.Start(static_cast<int>(c)) - gpu.base);
      EXPECT_EQ(view.channels[c].end_off_ns, gpu.Stop(static_cast<int>(c)) - gpu.base);
    }
    EXPECT_GE(op.enqueue_ns, before - 1'000'000);  // TSC-mapped clock: allow 1 ms of anchor error
    EXPECT_LE(op.enqueue_ns, RealtimeNs() + 1'000'000);
    EXPECT_GE(op.complete_ns + 1000, op.enqueue_ns);
  }
  EXPECT_EQ(seqs.size(), 10u);
  EXPECT_EQ(*seqs.begin(), 100u);
  EXPECT_EQ(*indices.rbegin(), 9u);

  // Network: per op, per channel, one send and one receive ProxyOp with every step accounted.
  ASSERT_TRUE(Records().PollUntil([&] { return Records().ProxyOpsOf(id).size() >= 160; }));
  const auto net_ops = Records().ProxyOpsOf(id);
  ASSERT_EQ(net_ops.size(), 160u);
  int sends = 0;
  for (const auto& p : net_ops) {
    EXPECT_NE(p.flags & NCCLSCOPE_PROXY_PARENT_KNOWN, 0);
    EXPECT_EQ(p.flags & NCCLSCOPE_PROXY_FOREIGN, 0);
    EXPECT_TRUE(seqs.count(p.seq) == 1) << p.seq;
    EXPECT_EQ(p.func, NCCLSCOPE_FUNC_ALL_REDUCE);
    EXPECT_EQ(p.rank, 1);
    EXPECT_LT(p.channel, 8);
    EXPECT_EQ(p.n_steps, 3);
    EXPECT_EQ(p.steps_done, 3);
    EXPECT_EQ(p.bytes, 3u << 16);
    EXPECT_EQ(p.origin_pid, getpid());
    EXPECT_GE(p.end_ns, p.start_ns);
    EXPECT_NE(p.in_progress_ns, 0u);
    sends += p.is_send;
    EXPECT_EQ(p.peer, p.is_send != 0 ? 2 : 0);
    for (std::uint32_t s = 0; s < NCCLSCOPE_STEP_STATE_COUNT; ++s) {
      const bool send_state = s <= NCCLSCOPE_STEP_SEND_WAIT;
      if (send_state != (p.is_send != 0)) {
        EXPECT_EQ(p.state_ns[s], 0u) << s;
      }
    }
  }
  EXPECT_EQ(sends, 80);

  comm.Finalize();
  ASSERT_TRUE(Records().PollUntil([&] {
    for (const auto& f : Records().finalizes) {
      if (f.comm_id == id) return true;
    }
    return false;
  }));
  for (const auto& init : Records().inits) {
    if (init.comm_id != id) continue;
    EXPECT_STREQ(init.name, "dp group 0");
    EXPECT_EQ(init.rank, 1);
    EXPECT_EQ(init.nranks, 4);
    EXPECT_EQ(init.nnodes, 2);
  }
  for (const auto& f : Records().finalizes) {
    if (f.comm_id != id) continue;
    EXPECT_EQ(f.ops_enqueued, 10u);
    EXPECT_EQ(f.ops_completed, 10u);
    EXPECT_EQ(f.ops_flushed, 0u);
  }
}

TEST_P(ReplayTest, SixtyFourChannelsSpillIntoContinuationRecords) {
  ProxyThread proxy;
  ReplayProcess process(Plugin(), version());
  const std::uint64_t id = NextCommId();
  ReplayComm comm(process, id, "", 1, 2, 0, &proxy);
  ASSERT_TRUE(comm.Init());
  GpuTimes gpu;
  gpu.base = 5'000'000;
  for (int channels : {17, 40, 64}) {
    CollSpec spec;
    spec.channels = static_cast<std::uint8_t>(channels);
    ProxyPlan none;
    none.enabled = false;
    comm.Collective(spec, static_cast<std::uint64_t>(channels), gpu, none);
  }
  ASSERT_TRUE(WaitForOps(id, 3));
  for (const profiler::OpView& view : Records().OpsOf(id)) {
    const auto channels = static_cast<std::uint32_t>(view.op.seq);
    EXPECT_EQ(view.n_channels, channels);
    EXPECT_EQ(view.op.n_timed, channels);
    // v7: each channel's kernel phases follow too (a compute phase by default), 12 channels to an
    // OP_PHASES record.
    const std::uint32_t phase_records =
        version() >= 7 ? (channels + NCCLSCOPE_OP_PHASE_CHANNELS - 1) / NCCLSCOPE_OP_PHASE_CHANNELS
                       : 0;
    EXPECT_EQ(view.op.n_continuations,
              (channels > 42 ? 2 : (channels > 16 ? 1 : 0)) + phase_records);
    EXPECT_EQ(view.n_phase_channels, version() >= 7 ? channels : 0);
    for (std::uint32_t c = 0; c < channels; ++c) {
      EXPECT_EQ(view.channel_ids[c], c);
      EXPECT_EQ(view.channels[c].end_off_ns, gpu.Stop(static_cast<int>(c)) - gpu.base);
      if (version() >= 7) {
        EXPECT_EQ(view.phases[c].channel, c);
        EXPECT_EQ(view.phases[c].ns[abi::kPhaseCompute],
                  gpu.Stop(static_cast<int>(c)) - gpu.Start(static_cast<int>(c)));
      }
    }
  }
  EXPECT_EQ(Records().snapshot().corrupt[static_cast<int>(profiler::CorruptReason::kContinuation)],
            0u);
}

// A channel time more than 2^32 ns (4.3 s) after the op's first start saturates at UINT32_MAX
// and flags the op, in the op record and in its continuations; a shorter op is exact.
TEST_P(ReplayTest, ChannelTimesBeyondFourSecondsSaturateAndFlagTheOp) {
  ProxyThread proxy;
  ReplayProcess process(Plugin(), version());
  const std::uint64_t id = NextCommId();
  ReplayComm comm(process, id, "", 1, 2, 0, &proxy);
  ASSERT_TRUE(comm.Init());
  ProxyPlan none;
  none.enabled = false;
  GpuTimes slow;
  slow.base = 5'000'000;
  slow.duration_ns = 5'000'000'000;
  GpuTimes fast = slow;
  fast.duration_ns = 4'000'000'000;  // every offset under 2^32
  for (int channels : {2, 20}) {
    CollSpec spec;
    spec.channels = static_cast<std::uint8_t>(channels);
    comm.Collective(spec, static_cast<std::uint64_t>(channels), slow, none);
    comm.Collective(spec, static_cast<std::uint64_t>(channels) + 100, fast, none);
  }
  ASSERT_TRUE(WaitForOps(id, 4));
  for (const profiler::OpView& view : Records().OpsOf(id)) {
    const bool is_slow = view.op.seq < 100;
    const GpuTimes& gpu = is_slow ? slow : fast;
    const auto channels = static_cast<std::uint32_t>(view.op.seq % 100);
    ASSERT_EQ(view.n_channels, channels);
    EXPECT_EQ((view.op.flags & NCCLSCOPE_OP_TIME_SATURATED) != 0, is_slow) << view.op.seq;
    for (std::uint32_t c = 0; c < channels; ++c) {
      EXPECT_EQ(view.channels[c].start_off_ns, gpu.Start(static_cast<int>(c)) - gpu.base);
      EXPECT_EQ(view.channels[c].end_off_ns,
                is_slow ? UINT32_MAX : gpu.Stop(static_cast<int>(c)) - gpu.base)
          << "op " << view.op.seq << " channel " << c;
    }
  }
}

TEST_P(ReplayTest, AllToAllArrivesAsPerPeerSendRecvAndUint8AsUnknown) {
  ProxyThread proxy;
  ReplayProcess process(Plugin(), version());
  const std::uint64_t id = NextCommId();
  ReplayComm comm(process, id, "a2a", 1, 4, 2, &proxy);
  ASSERT_TRUE(comm.Init());
  comm.AllToAll(1000, "ncclBfloat16");
  comm.AllToAll(1000, "ncclBfloat16");
  CollSpec uint8;
  uint8.datatype = "Unknown";  // what NCCL 2.28-2.30 send for ncclUint8
  uint8.count = 12345;
  comm.Collective(uint8, 0);
  proxy.Drain();
  ASSERT_TRUE(WaitForOps(id, 17));
  int sends = 0;
  int unknown = 0;
  std::map<std::pair<int, int>, std::set<std::uint64_t>> seq_by_peer;
  for (const profiler::OpView& view : Records().OpsOf(id)) {
    const ncclscope_op_record& op = view.op;
    if (op.kind == NCCLSCOPE_KIND_P2P) {
      EXPECT_TRUE(op.func == NCCLSCOPE_FUNC_SEND || op.func == NCCLSCOPE_FUNC_RECV);
      EXPECT_EQ(op.bytes, 2000u);
      EXPECT_EQ(op.algo, NCCLSCOPE_ALGO_NONE);
      EXPECT_EQ(op.proto, NCCLSCOPE_PROTO_NONE);
      EXPECT_NE(op.flags & NCCLSCOPE_OP_P2P_SEQ_PER_PEER, 0);
      // Self send/recv (peer == rank 2) get no KernelCh from NCCL (no proxy ops for self,
      // src/enqueue.cc:805 at v2.28.9-1): complete, without GPU timing, not incomplete.
      EXPECT_EQ((op.flags & NCCLSCOPE_OP_GPU_TIMING) != 0, op.peer != 2) << op.peer;
      EXPECT_EQ(op.flags & NCCLSCOPE_OP_GPU_TIMING_PARTIAL, 0);
      sends += op.func == NCCLSCOPE_FUNC_SEND;
      seq_by_peer[{op.func, op.peer}].insert(op.seq);
    } else {
      ++unknown;
      EXPECT_EQ(op.datatype, NCCLSCOPE_DT_UNKNOWN);
      EXPECT_EQ(op.bytes, 12345u);
      EXPECT_NE(op.flags & NCCLSCOPE_OP_DATATYPE_ASSUMED, 0);
    }
  }
  EXPECT_EQ(sends, 8);
  EXPECT_EQ(unknown, 1);
  EXPECT_EQ(seq_by_peer.size(), 8u);  // Send and Recv to each of 4 peers
  for (const auto& [key, seqs] : seq_by_peer) {
    EXPECT_EQ(seqs, (std::set<std::uint64_t>{0, 1})) << key.first << "/" << key.second;
  }
  EXPECT_EQ(Counter(NCCLSCOPE_CTR_OPS_INCOMPLETE), 0u);
}

TEST_P(AllVersionsReplayTest, CopyEngineCollectivesOnlyFromV6) {
  ReplayProcess process(Plugin(), version());
  const std::uint64_t id = NextCommId();
  ReplayComm comm(process, id, "ce", 1, 8, 0, nullptr);
  ASSERT_TRUE(comm.Init());
  comm.CeCollective("AlltoAll", 4096, "ncclFloat32", 7);
  CollSpec marker;
  comm.Collective(marker, 1);
  ASSERT_TRUE(WaitForOps(id, version() >= 6 ? 2 : 1));
  std::size_t ce = 0;
  for (const profiler::OpView& view : Records().OpsOf(id)) {
    if (view.op.kind != NCCLSCOPE_KIND_CE) continue;
    ++ce;
    EXPECT_EQ(view.op.func, NCCLSCOPE_FUNC_ALL_TO_ALL);
    EXPECT_EQ(view.op.seq, 7u);
    EXPECT_EQ(view.op.bytes, 4096u * 4);
    EXPECT_EQ(view.op.flags & NCCLSCOPE_OP_GPU_TIMING, 0);
  }
  EXPECT_EQ(ce, version() >= 6 ? 1u : 0u);
}

// A kernel that started some channels and never stopped them is what a hang looks like: the op
// stays in flight (the agent sees its age grow) until its communicator ends, then is flushed.
TEST_P(ReplayTest, ChannelsThatStartedAndNeverStoppedStayInFlight) {
  ProxyThread proxy;
  ReplayProcess process(Plugin(), version());
  const std::uint64_t id = NextCommId();
  ReplayComm comm(process, id, "", 1, 2, 0, &proxy);
  ASSERT_TRUE(comm.Init());
  const replay::EnqueuedOp op = comm.StartColl(CollSpec{}, 0);
  comm.StopTask(op);
  std::vector<void*> channels;
  channels.reserve(8);
  for (int c = 0; c < 8; ++c) channels.push_back(comm.KernelChannelStart(op, c, 1000 + c));
  for (int c = 0; c < 6; ++c) comm.KernelChannelStop(channels[static_cast<std::size_t>(c)], 5000);
  // Later plans complete: they prove nothing about channels that did start.
  CollSpec normal;
  ProxyPlan none;
  none.enabled = false;
  comm.Collective(normal, 1, {}, none);
  proxy.Drain();
  ASSERT_TRUE(WaitForOps(id, 1));
  std::this_thread::sleep_for(milliseconds(700));  // three maintenance passes
  Records().Poll();
  EXPECT_EQ(Records().CountOps(id), 1u);
  comm.Finalize();
  ASSERT_TRUE(WaitForOps(id, 2));
  for (const profiler::OpView& view : Records().OpsOf(id)) {
    if (view.op.seq != 0) continue;
    EXPECT_NE(view.op.flags & NCCLSCOPE_OP_FLUSHED, 0);
    EXPECT_EQ(view.op.n_timed, 6);
    EXPECT_NE(view.op.flags & NCCLSCOPE_OP_GPU_TIMING_PARTIAL, 0);
  }
}

TEST_P(AllVersionsReplayTest, PxnProxyOpsFromAnotherProcessAreNeverDereferenced) {
  ReplayProcess process(Plugin(), version());
  const std::uint64_t id = NextCommId();
  ReplayComm comm(process, id, "", 2, 4, 3, nullptr);
  ReplayComm other(process, NextCommId(), "", 2, 4, 0, nullptr);
  ASSERT_TRUE(comm.Init());
  ASSERT_TRUE(other.Init());
  const std::uint64_t foreign_before = Counter(NCCLSCOPE_CTR_FOREIGN_PROXY_OPS);
  ProxyPlan pxn;
  pxn.pid = getpid() + 4242;  // raised on behalf of a rank in another process
  // Values from the other process: one looks exactly like one of our own handles.
  pxn.foreign_context = other.context();
  pxn.foreign_parent =
      reinterpret_cast<void*>(0x7f00deadbeef);  // NOLINT(performance-no-int-to-ptr)
  pxn.steps = 2;
  CollSpec spec;
  spec.channels = 2;
  comm.Collective(spec, 0, {}, pxn);
  const auto context_value = reinterpret_cast<std::uintptr_t>(other.context());
  auto ours = [&](const ncclscope_proxy_op_record& p) {
    return p.origin_pid == getpid() + 4242 && p.origin_context == context_value;
  };
  ASSERT_TRUE(Records().PollUntil([&] {
    std::size_t n = 0;
    for (const auto& p : Records().proxy_ops) n += ours(p) ? 1 : 0;
    return n == 4;
  }));
  for (const auto& p : Records().proxy_ops) {
    if (!ours(p)) continue;
    EXPECT_EQ(p.origin_parent, 0x7f00deadbeefu);
    EXPECT_NE(p.flags & NCCLSCOPE_PROXY_FOREIGN, 0);
    EXPECT_EQ(p.flags & NCCLSCOPE_PROXY_PARENT_KNOWN, 0);
    EXPECT_EQ(p.comm_id, 0u);
    EXPECT_EQ(p.steps_done, 2);
    EXPECT_EQ(p.bytes, 2u * 65536);
  }
  EXPECT_EQ(Counter(NCCLSCOPE_CTR_FOREIGN_PROXY_OPS), foreign_before + 4);
}

TEST_P(ReplayTest, AbnormalSequencesAreSurvived) {
  ProxyThread proxy;
  ReplayProcess process(Plugin(), version());
  const std::uint64_t id = NextCommId();
  ReplayComm comm(process, id, "", 1, 2, 0, &proxy);
  ASSERT_TRUE(comm.Init());
  const ProfilerPlugin& p = Plugin();
  const int v = version();
  const std::uint64_t invalid_before = Counter(NCCLSCOPE_CTR_INVALID_HANDLE);
  abi::StateArgsV6 args{};
  args.kernelCh.pTimer = 123;

  // Stop and record without start: NULL, garbage, a stack address, a stale-looking handle.
  int local = 0;
  // NOLINTBEGIN(performance-no-int-to-ptr): values NCCL could never have been given
  for (void* bogus :
       {static_cast<void*>(nullptr), reinterpret_cast<void*>(0x1), static_cast<void*>(&local),
        reinterpret_cast<void*>(~0ull), reinterpret_cast<void*>(0x1000'0FFF'FFFF'FF00ull),
        reinterpret_cast<void*>(0x2000'0000'0000'4000ull)}) {
    // NOLINTEND(performance-no-int-to-ptr)
    EXPECT_EQ(p.Stop(v, bogus), 0);
    EXPECT_EQ(p.Record(v, bogus, abi::kKernelChStop, &args), 0);
    EXPECT_EQ(p.Record(v, bogus, abi::kProxyStepSendWait, nullptr), 0);
  }
  // Children with NULL or bogus parents.
  abi::EventDescrV6 d{};
  d.type = abi::kKernelCh;
  d.parentObj = nullptr;
  void* h = reinterpret_cast<void*>(0x5);
  EXPECT_EQ(p.Start(v, comm.context(), &h, d), 0);
  EXPECT_EQ(h, nullptr);
  d.parentObj = &local;
  EXPECT_EQ(p.Start(v, comm.context(), &h, d), 0);
  EXPECT_EQ(h, nullptr);
  d = {};
  d.type = abi::kProxyStep;
  EXPECT_EQ(p.Start(v, comm.context(), &h, d), 0);
  EXPECT_EQ(h, nullptr);
  d = {};
  d.type = abi::kProxyOp;
  d.proxyOp.pid = getpid();
  d.proxyOp.nSteps = 1;
  EXPECT_EQ(p.Start(v, comm.context(), &h, d), 0);  // no parent: tracked, parent unknown
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(p.Stop(v, h), 0);
  EXPECT_EQ(p.Stop(v, h), 0);  // stopped twice
  // Events with a NULL or bogus context.
  d = {};
  d.type = abi::kColl;
  d.coll.func = "AllReduce";
  EXPECT_EQ(p.Start(v, nullptr, &h, d), 0);
  EXPECT_EQ(h, nullptr);
  EXPECT_EQ(p.Start(v, &local, &h, d), 0);
  EXPECT_EQ(h, nullptr);
  // Unknown event types and states.
  d = {};
  d.type = 1u << 20;
  EXPECT_EQ(p.Start(v, comm.context(), &h, d), 0);
  EXPECT_EQ(p.Stop(v, h), 0);

  // Record after stop, double stop, and handles carried across threads.
  CollSpec spec;
  spec.channels = 2;
  EnqueuedOp op = comm.StartColl(spec, 0);
  ASSERT_NE(op.handle, nullptr);
  void* kernel = nullptr;
  std::thread([&] {
    abi::EventDescrV6 k{};
    k.type = abi::kKernelCh;
    k.parentObj = op.handle;
    k.kernelCh.channelId = 0;
    k.kernelCh.pTimer = 1000;
    p.Start(v, comm.context(), &kernel, k);
  }).join();
  ASSERT_NE(kernel, nullptr);
  std::thread([&] {
    args.kernelCh.pTimer = 5000;
    p.Record(v, kernel, abi::kKernelChStop, &args);
    p.Stop(v, kernel);
    p.Record(v, kernel, abi::kKernelChStop, &args);  // after stop
    p.Stop(v, kernel);                               // again
  }).join();
  std::thread([&] {
    comm.StopTask(op);
    comm.StopTask(op);  // Coll stopped twice
  }).join();
  abi::EventDescrV6 k1{};
  k1.type = abi::kKernelCh;
  k1.parentObj = op.handle;
  k1.kernelCh.channelId = 1;
  k1.kernelCh.pTimer = 1200;
  void* kernel1 = nullptr;
  p.Start(v, comm.context(), &kernel1, k1);
  ASSERT_NE(kernel1, nullptr);
  args.kernelCh.pTimer = 4000;
  p.Record(v, kernel1, abi::kKernelChStop, &args);
  p.Stop(v, kernel1);
  ASSERT_TRUE(WaitForOps(id, 1));
  const auto ops = Records().OpsOf(id);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].op.gpu_start_ns, 1000u);
  EXPECT_EQ(ops[0].op.gpu_end_ns, 5000u);
  EXPECT_EQ(ops[0].n_channels, 2u);

  // The completed op's handles are stale now: late children and stops are refused.
  p.Stop(v, op.handle);
  p.Stop(v, kernel);
  abi::EventDescrV6 late{};
  late.type = abi::kKernelCh;
  late.parentObj = op.handle;
  p.Start(v, comm.context(), &h, late);
  EXPECT_EQ(h, nullptr);
  EXPECT_GT(Counter(NCCLSCOPE_CTR_INVALID_HANDLE), invalid_before);

  // The communicator still records normally afterwards.
  comm.Collective(spec, 1);
  proxy.Drain();
  ASSERT_TRUE(WaitForOps(id, 2));
  // Finalize twice, and with a bogus context: no effect, no crash.
  void* context = comm.context();
  comm.Finalize();
  EXPECT_EQ(p.Finalize(v, context), 0);
  EXPECT_EQ(p.Finalize(v, &local), 0);
  // Events on the finalized context are refused.
  d = {};
  d.type = abi::kColl;
  d.coll.func = "AllReduce";
  EXPECT_EQ(p.Start(v, context, &h, d), 0);
  EXPECT_EQ(h, nullptr);
}

TEST_P(ReplayTest, DestroyingACommWithEventsInFlightFlushesThemFast) {
  ProxyThread proxy;
  ReplayProcess process(Plugin(), version());
  const std::uint64_t id = NextCommId();
  auto comm = std::make_unique<ReplayComm>(process, id, "", 2, 2, 0, &proxy);
  ASSERT_TRUE(comm->Init());
  const ProfilerPlugin& p = Plugin();
  const int v = version();
  // One op with a started kernel channel and a running network op, then 2000 ops enqueued
  // behind it whose kernels never report back.
  CollSpec spec;
  EnqueuedOp running = comm->StartColl(spec, 2000);
  abi::EventDescrV6 d{};
  d.type = abi::kKernelCh;
  d.parentObj = running.handle;
  d.kernelCh.pTimer = 77;
  void* kernel = nullptr;
  p.Start(v, comm->context(), &kernel, d);
  d = {};
  d.type = abi::kProxyOp;
  d.parentObj = running.handle;
  d.proxyOp.pid = getpid();
  d.proxyOp.isSend = 1;
  void* net = nullptr;
  p.Start(v, comm->context(), &net, d);
  ASSERT_NE(kernel, nullptr);
  ASSERT_NE(net, nullptr);
  for (std::uint64_t seq = 0; seq < 2000; ++seq) comm->StopTask(comm->StartColl(spec, seq));

  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(p.Finalize(v, comm->context()), 0);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_LT(elapsed, milliseconds(50))
      << "finalize took " << std::chrono::duration<double, std::milli>(elapsed).count() << " ms";
  // NCCL's threads still holding handles call on: survived, refused.
  abi::StateArgsV6 args{};
  args.kernelCh.pTimer = 99;
  EXPECT_EQ(p.Record(v, kernel, abi::kKernelChStop, &args), 0);
  EXPECT_EQ(p.Stop(v, kernel), 0);
  EXPECT_EQ(p.Stop(v, net), 0);
  EXPECT_EQ(p.Stop(v, running.handle), 0);

  ASSERT_TRUE(WaitForOps(id, 2001));
  std::size_t flushed = 0;
  for (const profiler::OpView& view : Records().OpsOf(id)) {
    flushed += (view.op.flags & NCCLSCOPE_OP_FLUSHED) != 0 ? 1 : 0;
  }
  EXPECT_EQ(flushed, 2001u);
  ASSERT_TRUE(Records().PollUntil([&] {
    for (const auto& f : Records().finalizes) {
      if (f.comm_id == id) return f.ops_flushed == 2001;
    }
    return false;
  }));
  bool net_flushed = false;
  for (const auto& rec : Records().ProxyOpsOf(id)) {
    net_flushed = net_flushed || (rec.flags & NCCLSCOPE_PROXY_FLUSHED) != 0;
  }
  EXPECT_TRUE(net_flushed);
}

TEST_P(AllVersionsReplayTest, ThousandsOfCommunicators) {
  WaitUntilFinalizedSlotsAreFree();
  ReplayProcess process(Plugin(), version());
  const std::uint64_t without_slot = Counter(NCCLSCOPE_CTR_COMMS_WITHOUT_SLOT);
  std::vector<std::unique_ptr<ReplayComm>> comms;
  std::vector<std::uint64_t> ids;
  for (int i = 0; i < 3000; ++i) {
    ids.push_back(NextCommId());
    comms.push_back(std::make_unique<ReplayComm>(process, ids.back(), "c" + std::to_string(i), 1, 8,
                                                 i % 8, nullptr));
    ASSERT_TRUE(comms.back()->Init()) << i;
  }
  CollSpec spec;
  spec.channels = 1;
  for (auto& comm : comms) comm->Collective(spec, 0);
  for (auto& comm : comms) comm->Finalize();
  ASSERT_TRUE(Records().PollUntil([&] {
    std::size_t n = 0;
    const std::set<std::uint64_t> wanted(ids.begin(), ids.end());
    for (const auto& op : Records().ops) n += wanted.count(op.op.comm_id);
    return n == 3000;
  }));
  // The comm table has 256 slots by default; the rest are still recorded, and counted.
  const std::uint64_t slotless = Counter(NCCLSCOPE_CTR_COMMS_WITHOUT_SLOT) - without_slot;
  EXPECT_GE(slotless, 3000u - 256);
  // Those with a slot count their ops in the count table (OP_COUNTED: the agent takes ops and
  // bytes from there); the others' records carry the count.
  std::uint64_t counted = 0;
  const std::set<std::uint64_t> wanted(ids.begin(), ids.end());
  for (const auto& op : Records().ops) {
    if (wanted.count(op.op.comm_id) != 0) counted += (op.op.flags & NCCLSCOPE_OP_COUNTED) != 0;
  }
  EXPECT_EQ(counted + slotless, 3000u);
  // A finalized slot is not handed out again for NCCLSCOPE_COMM_SLOT_REUSE_NS (the agent reads
  // its last counts first): a communicator right after goes without one.
  const std::uint64_t before = Counter(NCCLSCOPE_CTR_COMMS_WITHOUT_SLOT);
  ReplayComm late(process, NextCommId(), "late", 1, 8, 0, nullptr);
  ASSERT_TRUE(late.Init());
  EXPECT_EQ(Counter(NCCLSCOPE_CTR_COMMS_WITHOUT_SLOT), before + 1);
  late.Finalize();
}

// NCCL 2.23-2.26 call init(context, mask) before the communicator has its hash
// (src/init.cc:341 vs :1452 at v2.23.4-1) and never give it a name, rank or size: the
// communicator's identity (commHash, rank) comes with its first Coll/P2p. Only then does the
// plugin write its COMM_INIT: no name, nranks and nnodes 0 (unknown), never made up. (Its comm
// table slot says the same, but the agent's reader, RingFile::ReadCommTable, skips slots with
// nranks 0: not checked here.)
TEST_P(LegacyReplayTest, IdentityComesWithTheFirstOp) {
  WaitUntilFinalizedSlotsAreFree();  // it reads its count table slot
  ProxyThread proxy;
  ReplayProcess process(Plugin(), version());
  const std::uint64_t id = NextCommId();
  ReplayComm comm(process, id, "not passed before 2.27", 2, 4, 3, &proxy);
  ASSERT_TRUE(comm.Init());
  const auto context = reinterpret_cast<std::uintptr_t>(comm.context());
  Records().Poll();
  for (const auto& init : Records().inits) EXPECT_NE(init.context, context);

  CollSpec spec;
  spec.channels = 2;
  ProxyPlan none;
  none.enabled = false;
  comm.Collective(spec, 0, {}, none);
  proxy.Drain();
  ASSERT_TRUE(WaitForOps(id, 1));
  std::size_t inits = 0;
  for (const auto& init : Records().inits) {
    if (init.context != context) continue;
    ++inits;
    EXPECT_EQ(init.comm_id, id);
    EXPECT_EQ(init.rank, 3);
    EXPECT_EQ(init.nranks, 0);
    EXPECT_EQ(init.nnodes, 0);
    EXPECT_STREQ(init.name, "");
    EXPECT_EQ(init.nccl_abi, static_cast<std::uint32_t>(version()));
  }
  EXPECT_EQ(inits, 1u);
  const profiler::OpView op = Records().OpsOf(id).at(0);
  EXPECT_EQ(op.op.rank, 3);
  EXPECT_EQ(op.op.op_index, 0u);
  // A second op names no communicator again.
  comm.Collective(spec, 1, {}, none);
  proxy.Drain();
  ASSERT_TRUE(WaitForOps(id, 2));
  comm.Finalize();
  ASSERT_TRUE(Records().PollUntil([&] {
    for (const auto& f : Records().finalizes) {
      if (f.context == context) return true;
    }
    return false;
  }));
  inits = 0;
  for (const auto& init : Records().inits) inits += init.context == context ? 1 : 0;
  EXPECT_EQ(inits, 1u);
  for (const auto& f : Records().finalizes) {
    if (f.context != context) continue;
    EXPECT_EQ(f.comm_id, id);
    EXPECT_EQ(f.ops_enqueued, 2u);
    EXPECT_EQ(f.ops_completed, 2u);
    EXPECT_EQ(f.ops_flushed, 0u);
  }
  EXPECT_EQ(Records().CountedOps(id, 3), 2u);  // the count table
}

// NCCL 2.23-2.26 finalize every communicator (src/misc/profiler.cc:235-237 at v2.23.4-1), also
// one that never ran an op and so never had an identity (it comes with the first Coll/P2p): the
// plugin writes no COMM_FINALIZE for it (there was no COMM_INIT to close), where it wrote one with
// rank -1 that the agent counted corrupt.
TEST_P(LegacyReplayTest, ACommFinalizedBeforeItsFirstOpWritesNoRecord) {
  ReplayProcess process(Plugin(), version());
  const auto corrupt_before = Records().snapshot().corrupt;
  ReplayComm idle(process, NextCommId(), "never ran an op", 2, 4, 1, nullptr);
  ASSERT_TRUE(idle.Init());
  const auto idle_context = reinterpret_cast<std::uintptr_t>(idle.context());
  idle.Finalize();
  // A communicator with an op after it, on the same thread (so in the same lane, read in order).
  const std::uint64_t id = NextCommId();
  ReplayComm busy(process, id, "", 2, 4, 1, nullptr);
  ASSERT_TRUE(busy.Init());
  CollSpec spec;
  spec.channels = 1;
  ProxyPlan none;
  none.enabled = false;
  busy.Collective(spec, 0, {}, none);
  ASSERT_TRUE(WaitForOps(id, 1));
  for (const auto& f : Records().finalizes) EXPECT_NE(f.context, idle_context);
  for (const auto& init : Records().inits) EXPECT_NE(init.context, idle_context);
  EXPECT_EQ(Records().snapshot().corrupt, corrupt_before);
  busy.Finalize();
}

// 2.23-2.26 report a network op's progress in ProxyOp states 0-7 with its cumulative bytes
// (transSize, src/misc/profiler.cc:483-494 at v2.23.4-1, :594-603 at v2.24.3-1;
// src/plugin/profiler.cc:478-489 at v2.26.6-1); their ProxyStep states carry no arguments (NULL,
// :502 at v2.23.4-1). The bytes come from the op states, with or without steps; SendPosted and
// RecvPosted mark the op in progress. Under v1/v2 the op completed at NCCL's stop, before these
// started: its network ops still name it.
TEST_P(LegacyReplayTest, NetworkBytesComeFromProxyOpStates) {
  ProxyThread proxy;
  ReplayProcess process(Plugin(), version());
  const std::uint64_t id = NextCommId();
  ReplayComm comm(process, id, "", 2, 4, 1, &proxy);
  ASSERT_TRUE(comm.Init());
  ProxyPlan net;
  net.steps = 3;
  net.step_bytes = 1 << 16;
  CollSpec spec;
  spec.channels = 2;
  comm.Collective(spec, 0, {}, net);
  proxy.Drain();
  ASSERT_TRUE(Records().PollUntil([&] { return Records().ProxyOpsOf(id).size() == 4; }));
  for (const ncclscope_proxy_op_record& p : Records().ProxyOpsOf(id)) {
    EXPECT_NE(p.flags & NCCLSCOPE_PROXY_PARENT_KNOWN, 0);
    EXPECT_EQ(p.seq, 0u);
    EXPECT_EQ(p.func, NCCLSCOPE_FUNC_ALL_REDUCE);
    EXPECT_EQ(p.n_steps, 3);
    EXPECT_EQ(p.steps_done, 3);
    EXPECT_EQ(p.bytes, 3u << 16);
    EXPECT_NE(p.in_progress_ns, 0u);
    EXPECT_EQ(p.peer, p.is_send != 0 ? 2 : 0);
  }
  // Without ProxyStep events, the op states alone.
  // (2.26 starts ProxySteps for NetPlugin too, src/plugin/profiler.cc:381 at v2.26.6-1.)
  ncclscope_controls no_steps = DefaultControls();
  no_steps.event_mask &= ~(abi::kProxyStep | abi::kNetPlugin);
  ASSERT_TRUE(SetPluginControls(no_steps, version() >= 3));
  ASSERT_EQ(ReplayProcess::MaskSnapshot() & abi::kProxyStep, 0);
  comm.Collective(spec, 1, {}, net);
  proxy.Drain();
  ASSERT_TRUE(Records().PollUntil([&] { return Records().ProxyOpsOf(id).size() == 8; }));
  for (const ncclscope_proxy_op_record& p : Records().ProxyOpsOf(id)) {
    if (p.seq != 1) continue;
    EXPECT_NE(p.flags & NCCLSCOPE_PROXY_PARENT_KNOWN, 0);
    EXPECT_EQ(p.steps_done, 0);
    EXPECT_EQ(p.bytes, 3u << 16);
    EXPECT_NE(p.in_progress_ns, 0u);
  }
}

// NCCL 2.26's KernelCh carry no GPU time: the proxy thread starts and stops them when it sees the
// channel's work counters move (src/transport/profiler.cc:20-48 at v2.26.6-1), without saying
// how many come (nMaxChannels is only a bound). A v3 op completes untimed (KERNEL_UNTIMED) once
// its channels have been quiet for 0.5 s, as of its last KernelCh; at its communicator's end
// (NCCL has then joined the proxy thread) at once, unless a channel never stopped: that one is
// flushed. v1/v2 (no KernelCh) complete every op at NCCL's stop.
TEST_P(LegacyReplayTest, OpsCompleteAsTheirVersionAllows) {
  ReplayProcess process(Plugin(), version());
  const std::uint64_t id = NextCommId();
  ReplayComm comm(process, id, "", 2, 4, 0, nullptr);
  ASSERT_TRUE(comm.Init());
  CollSpec spec;
  spec.channels = 4;
  const EnqueuedOp a = comm.StartColl(spec, 0);
  comm.StopTask(a);
  if (version() <= 2) {
    ASSERT_TRUE(WaitForOps(id, 1, milliseconds(1000)));
    const ncclscope_op_record op = Records().OpsOf(id).at(0).op;
    EXPECT_EQ(op.flags & (NCCLSCOPE_OP_GPU_TIMING | NCCLSCOPE_OP_KERNEL_UNTIMED |
                          NCCLSCOPE_OP_KERNEL_NOT_REQUESTED | NCCLSCOPE_OP_GPU_TIMING_PARTIAL),
              NCCLSCOPE_OP_KERNEL_NOT_REQUESTED);
    EXPECT_EQ(comm.KernelChannelStart(a, 0, 0), nullptr);  // no KernelCh before 2.26
    return;
  }
  std::vector<void*> channels;
  channels.reserve(4);
  for (int c = 0; c < 4; ++c) channels.push_back(comm.KernelChannelStart(a, c, 0));
  for (void* h : channels) ASSERT_NE(h, nullptr);
  for (void* h : channels) comm.KernelChannelStop(h, 0);
  const std::uint64_t ended = RealtimeNs();
  std::this_thread::sleep_for(milliseconds(300));
  Records().Poll();
  EXPECT_EQ(Records().CountOps(id), 0u) << "complete before its channels were quiet";
  ASSERT_TRUE(WaitForOps(id, 1, milliseconds(3000)));
  const ncclscope_op_record op = Records().OpsOf(id).at(0).op;
  EXPECT_EQ(op.flags & (NCCLSCOPE_OP_GPU_TIMING | NCCLSCOPE_OP_KERNEL_UNTIMED |
                        NCCLSCOPE_OP_GPU_TIMING_PARTIAL | NCCLSCOPE_OP_KERNEL_NEVER_CAME |
                        NCCLSCOPE_OP_FLUSHED),
            NCCLSCOPE_OP_KERNEL_UNTIMED);
  EXPECT_EQ(op.n_timed, 0);
  EXPECT_EQ(op.n_channels, 4);  // nMaxChannels, as NCCL announced it
  EXPECT_LT(op.complete_ns > ended ? op.complete_ns - ended : ended - op.complete_ns, 20'000'000u)
      << "completed as of its last KernelCh";

  // The communicator ends: an op whose channels all stopped is complete, one with a channel still
  // running is in flight (flushed).
  const EnqueuedOp b = comm.StartColl(spec, 1);
  comm.StopTask(b);
  for (int c = 0; c < 2; ++c) comm.KernelChannelStop(comm.KernelChannelStart(b, c, 0), 0);
  const EnqueuedOp hung = comm.StartColl(spec, 2);
  comm.StopTask(hung);
  comm.KernelChannelStop(comm.KernelChannelStart(hung, 0, 0), 0);
  ASSERT_NE(comm.KernelChannelStart(hung, 1, 0), nullptr);  // never stops
  comm.Finalize();
  ASSERT_TRUE(WaitForOps(id, 3));
  for (const profiler::OpView& view : Records().OpsOf(id)) {
    if (view.op.seq == 0) continue;
    SCOPED_TRACE(view.op.seq);
    EXPECT_NE(view.op.flags & NCCLSCOPE_OP_KERNEL_UNTIMED, 0);
    EXPECT_EQ((view.op.flags & NCCLSCOPE_OP_FLUSHED) != 0, view.op.seq == 2);
  }
  ASSERT_TRUE(Records().PollUntil([&] {
    for (const auto& f : Records().finalizes) {
      if (f.comm_id == id) return true;
    }
    return false;
  }));
  for (const auto& f : Records().finalizes) {
    if (f.comm_id != id) continue;
    EXPECT_EQ(f.ops_completed, 3u);
    EXPECT_EQ(f.ops_flushed, 1u);
  }
}

// The plugin publishes how many comm slots it handed out (the agent reads only those): every
// communicator it initialized has its slot below the count.
TEST(CommTableTest, ThePluginPublishesTheSlotsItTook) {
  ASSERT_TRUE(kEnvironment);
  ReplayProcess process(Plugin(), 6);
  std::vector<std::unique_ptr<ReplayComm>> comms;
  std::set<std::uint64_t> ids;
  for (int i = 0; i < 3; ++i) {
    const std::uint64_t id = NextCommId();
    ids.insert(id);
    comms.push_back(
        std::make_unique<ReplayComm>(process, id, "t" + std::to_string(i), 1, 2, 0, nullptr));
    ASSERT_TRUE(comms.back()->Init()) << i;
  }
  const std::string ring = OnlyRing(RingDir().path());
  ASSERT_FALSE(ring.empty());
  ncclscope_ring_header header{};
  const int fd = ::open(ring.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pread(fd, &header, sizeof(header), 0), static_cast<ssize_t>(sizeof(header)));
  ::close(fd);
  EXPECT_GE(header.comm_slots_used, 3u);
  EXPECT_LE(header.comm_slots_used, header.comm_slot_count);
  std::string reason;
  auto file = profiler::RingFile::Open(ring, &reason);
  ASSERT_NE(file, nullptr) << reason;
  std::set<std::uint64_t> found;
  for (const auto& slot : file->ReadCommTable()) {
    if (ids.count(slot.comm_id) != 0) {
      found.insert(slot.comm_id);
      EXPECT_LT(slot.index, header.comm_slots_used);
    }
  }
  EXPECT_EQ(found, ids);
  for (auto& comm : comms) comm->Finalize();
}

TEST(ControlsTest, AgentControlsChangeTheNcclMaskAndFilter) {
  ASSERT_TRUE(kEnvironment);
  ReplayProcess process(Plugin(), 6);
  const std::uint64_t id = NextCommId();
  ReplayComm comm(process, id, "", 1, 2, 0, nullptr);
  ASSERT_TRUE(comm.Init());
  ASSERT_NE(*ReplayProcess::mask() & abi::kKernelCh, 0);
  const std::string ring = OnlyRing(RingDir().path());
  ASSERT_FALSE(ring.empty());
  std::string reason;
  auto file = profiler::RingFile::Open(ring, &reason);
  ASSERT_NE(file, nullptr) << reason;

  ncclscope_controls controls{};
  controls.event_mask = abi::kColl | abi::kP2p;
  controls.min_bytes = 1000;
  controls.duty_period_ns = 10'000'000'000ull;
  controls.kernel_duty_pm = 1000;
  controls.proxy_duty_pm = 1000;
  ASSERT_TRUE(file->WriteControls(controls));
  WaitFor([] { return (ReplayProcess::MaskSnapshot() & abi::kKernelCh) == 0; },
          std::chrono::seconds(3), milliseconds(10));
  EXPECT_EQ(ReplayProcess::MaskSnapshot() & (abi::kKernelCh | abi::kProxyOp), 0);
  profiler::RingHeaderSnapshot header;
  ASSERT_TRUE(file->ReadHeader(&header));
  EXPECT_NE(header.applied_control_seq, 0u);
  // The job pinned proxy duty through its environment.
  EXPECT_NE(header.pinned_controls & NCCLSCOPE_CONTROL_PROXY_DUTY, 0u);

  const std::uint64_t filtered = Counter(NCCLSCOPE_CTR_OPS_FILTERED);
  CollSpec small;
  small.count = 10;  // 40 bytes < 1000
  comm.Collective(small, 0);
  CollSpec big;
  comm.Collective(big, 1);
  ASSERT_TRUE(WaitForOps(id, 1));
  EXPECT_EQ(Counter(NCCLSCOPE_CTR_OPS_FILTERED), filtered + 1);
  const auto ops = Records().OpsOf(id);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].op.seq, 1u);
  EXPECT_NE(ops[0].op.flags & NCCLSCOPE_OP_KERNEL_NOT_REQUESTED, 0);

  // A duty cycle: KernelCh on for half of every 200 ms.
  controls.event_mask = abi::kColl | abi::kP2p | abi::kKernelCh;
  controls.min_bytes = 0;
  controls.duty_period_ns = 200'000'000;
  controls.kernel_duty_pm = 500;
  ASSERT_TRUE(file->WriteControls(controls));
  bool seen_on = false;
  bool seen_off = false;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (!(seen_on && seen_off) && std::chrono::steady_clock::now() < until) {
    ((ReplayProcess::MaskSnapshot() & abi::kKernelCh) != 0 ? seen_on : seen_off) = true;
    std::this_thread::sleep_for(milliseconds(5));
  }
  EXPECT_TRUE(seen_on);
  EXPECT_TRUE(seen_off);

  // Back to the defaults for whatever runs next in this process (v7's KernelPhase included: a
  // mask without it left the next v7 test's ops without kernel phases).
  ASSERT_TRUE(file->WriteControls(DefaultControls()));
  const int restored = abi::kKernelCh | abi::kProxyOp | abi::kProxyStep;
  const auto back = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while ((ReplayProcess::MaskSnapshot() & restored) != restored &&
         std::chrono::steady_clock::now() < back) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_EQ(ReplayProcess::MaskSnapshot() & restored, restored);
}

TEST(GpuIdentityTest, TakenFromAnAlreadyLoadedCudaDriver) {
  ASSERT_TRUE(kEnvironment);
  // What a CUDA program has loaded before NCCL initializes a communicator.
  void* cuda = dlopen(NCCLSCOPE_FAKE_LIBCUDA, RTLD_NOW | RTLD_GLOBAL);
  ASSERT_NE(cuda, nullptr) << dlerror();
  ReplayProcess process(Plugin(), 5);
  const std::uint64_t id = NextCommId();
  ReplayComm comm(process, id, "gpu", 1, 2, 0, nullptr);
  ASSERT_TRUE(comm.Init());
  ASSERT_TRUE(Records().PollUntil([&] {
    for (const auto& init : Records().inits) {
      if (init.comm_id == id) return true;
    }
    return false;
  }));
  for (const auto& init : Records().inits) {
    if (init.comm_id != id) continue;
    EXPECT_EQ(init.cuda_device, 3);
    EXPECT_STREQ(init.gpu_uuid, "GPU-03132333-4353-6373-8393-a3b3c3d3e3f3");
    EXPECT_STREQ(init.pci_bus_id, "0000:19:00.0");
  }
  bool in_table = false;
  for (const profiler::LiveComm& live : Records().snapshot().comms) {
    if (live.slot.comm_id != id) continue;
    in_table = true;
    EXPECT_EQ(live.slot.gpu_uuid, "GPU-03132333-4353-6373-8393-a3b3c3d3e3f3");
    EXPECT_EQ(live.slot.name, "gpu");
    EXPECT_EQ(live.origin->pid, getpid());
  }
  EXPECT_TRUE(in_table);
}

}  // namespace
}  // namespace ncclscope::testing
