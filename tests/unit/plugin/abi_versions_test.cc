// The real plugin .so through the tables of NCCL's oldest and newest profiler ABIs, called
// directly, one event at a time, with exactly the descriptors and state arguments those NCCL
// versions pass (plugin/abi/profiler_v1_v3.h, profiler_v7.h), and the records read back with the
// agent's reader. What each version lacks must simply be absent from the records (no invented
// numbers); what it has must arrive whole. The replay driver covers whole jobs per version
// (nccl_patterns_test.cc, tests/compat); these pin the translation of each field.

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "plugin/abi/nccl_profiler_abi.h"
#include "plugin/ring/ncclscope_ring.h"
#include "tests/support/plugin_harness.h"

namespace ncclscope::testing {
namespace {

const bool kEnvironment = [] {  // NOLINT(cert-err58-cpp): before main, with no other thread yet
  SetUpPluginEnvironment();
  return true;
}();

template <typename Table>
const Table* TableOf(int version) {
  static void* lib = dlopen(NCCLSCOPE_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
  const std::string symbol = "ncclProfiler_v" + std::to_string(version);
  return lib == nullptr ? nullptr : static_cast<const Table*>(dlsym(lib, symbol.c_str()));
}

// NCCL's process-global mask int (static storage, as in NCCL).
int* NcclMask() {
  static int mask = 0;
  return &mask;
}

const profiler::OpView* OnlyOp(std::uint64_t comm_id) {
  static std::vector<profiler::OpView> ops;
  ops = PluginRecords().OpsOf(comm_id);
  return ops.size() == 1 ? &ops[0] : nullptr;
}

const ncclscope_comm_init_record* InitOf(std::uint64_t comm_id) {
  for (const auto& init : PluginRecords().inits) {
    if (init.comm_id == comm_id) return &init;
  }
  return nullptr;
}

// NCCL 2.23 (v1): init(ctx, mask); the communicator's hash and rank come with the Coll; func,
// datatype, algo and proto are numbers; no KernelCh. A network op reports its progress through
// ProxyOp states 0-7 with {transSize, steps}, and its steps carry no arguments.
TEST(AbiVersionsTest, V1NumbersAndIdentityFromTheFirstOp) {
  ASSERT_TRUE(kEnvironment);
  const auto* v1 = TableOf<abi::ProfilerV1>(1);
  ASSERT_NE(v1, nullptr);
  void* context = nullptr;
  ASSERT_EQ(v1->init(&context, NcclMask()), 0);
  ASSERT_NE(context, nullptr);
  const int mask = *NcclMask();
  EXPECT_NE(mask & abi::kColl, 0);
  EXPECT_EQ(mask & abi::kKernelCh, 0) << "no KernelCh in NCCL 2.23";
  EXPECT_EQ(mask & (abi::kCeColl | abi::kKernelPhase), 0);

  const std::uint64_t hash = NextCommId();
  abi::EventDescrV1 d{};
  d.type = abi::kGroup;
  void* group = nullptr;
  v1->startEvent(context, &group, &d);
  ASSERT_NE(group, nullptr);
  std::memset(&d, 0, sizeof(d));
  d.type = abi::kColl;
  d.parentObj = group;
  d.rank = 3;
  d.coll.commHash = hash;
  d.coll.seqNumber = 0;
  d.coll.func = abi::kFuncV1AllReduce;
  d.coll.count = 1000;
  d.coll.datatype = abi::kDatatypeV1Uint8;  // NCCL 2.24+ cannot even name it ("Unknown")
  d.coll.nMaxChannels = 4;
  d.coll.nWarps = 8;
  d.coll.algo = abi::kAlgoV1Tree;
  d.coll.proto = abi::kProtoV1Ll128;
  void* coll = nullptr;
  v1->startEvent(context, &coll, &d);
  ASSERT_NE(coll, nullptr);

  // The proxy thread's network op for it (src/misc/profiler.cc:348-390 at v2.23.4-1).
  std::memset(&d, 0, sizeof(d));
  d.type = abi::kProxyOp;
  d.parentObj = coll;
  d.rank = 3;
  d.proxyOp.pid = ::getpid();
  d.proxyOp.channelId = 1;
  d.proxyOp.peer = 2;
  d.proxyOp.nSteps = 2;
  d.proxyOp.chunkSize = 500;
  d.proxyOp.isSend = 0;  // a receive: every v1 ProxyOp is a network op all the same
  void* proxy = nullptr;
  v1->startEvent(context, &proxy, &d);
  ASSERT_NE(proxy, nullptr);
  abi::StateArgsV1 op_args{};
  v1->recordEventState(proxy, abi::kProxyOpRecvPosted, &op_args);
  for (int step = 0; step < 2; ++step) {
    std::memset(&d, 0, sizeof(d));
    d.type = abi::kProxyStep;
    d.parentObj = proxy;
    d.proxyStep.step = step;
    void* h = nullptr;
    v1->startEvent(context, &h, &d);
    ASSERT_NE(h, nullptr);
    v1->recordEventState(h, abi::kProxyStepRecvWait, nullptr);  // NULL, as NCCL passes
    v1->recordEventState(h, abi::kProxyStepRecvGpuWait, nullptr);
    op_args.proxyOp.transSize = 500 * (step + 1);
    op_args.proxyOp.steps = step + 1;
    v1->recordEventState(proxy, abi::kProxyOpRecvReceived, &op_args);
    v1->stopEvent(h);
  }
  v1->recordEventState(proxy, abi::kProxyOpRecvDone, &op_args);
  v1->stopEvent(coll);
  v1->stopEvent(group);
  v1->stopEvent(proxy);

  ASSERT_TRUE(WaitForOps(hash, 1));
  const profiler::OpView* op = OnlyOp(hash);
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->op.rank, 3);
  EXPECT_EQ(op->op.func, NCCLSCOPE_FUNC_ALL_REDUCE);
  EXPECT_EQ(op->op.datatype, NCCLSCOPE_DT_UINT8);
  EXPECT_EQ(op->op.bytes, 1000u);
  EXPECT_EQ(op->op.algo, NCCLSCOPE_ALGO_TREE);
  EXPECT_EQ(op->op.proto, NCCLSCOPE_PROTO_LL128);
  EXPECT_EQ(op->op.n_channels, 4);
  EXPECT_EQ(op->op.flags & (NCCLSCOPE_OP_GPU_TIMING | NCCLSCOPE_OP_GPU_TIMING_PARTIAL), 0)
      << "no GPU timing under v1, and none missing either";
  ASSERT_TRUE(PluginRecords().PollUntil([&] { return InitOf(hash) != nullptr; }));
  const ncclscope_comm_init_record* init = InitOf(hash);
  EXPECT_EQ(init->rank, 3);
  EXPECT_EQ(init->nranks, 0) << "unknown under v1, not invented";
  EXPECT_EQ(init->nnodes, 0);
  EXPECT_EQ(init->nccl_abi, 1u);
  ASSERT_TRUE(
      PluginRecords().PollUntil([&] { return PluginRecords().ProxyOpsOf(hash).size() == 1; }));
  const ncclscope_proxy_op_record net = PluginRecords().ProxyOpsOf(hash)[0];
  EXPECT_EQ(net.bytes, 1000u) << "from the ProxyOp states' transSize";
  EXPECT_EQ(net.steps_done, 2);
  EXPECT_EQ(net.is_send, 0);
  EXPECT_NE(net.in_progress_ns, 0u);
  EXPECT_GT(net.state_ns[NCCLSCOPE_STEP_RECV_WAIT], 0u);
  EXPECT_EQ(v1->finalize(context), 0);
  EXPECT_EQ(v1->finalize(nullptr), 0) << "NCCL 2.23-2.27 finalize NULL contexts too";
}

// NCCL 2.24/2.25 (v2): v1 with NCCL's strings.
TEST(AbiVersionsTest, V2Strings) {
  ASSERT_TRUE(kEnvironment);
  const auto* v2 = TableOf<abi::ProfilerV2>(2);
  ASSERT_NE(v2, nullptr);
  void* context = nullptr;
  ASSERT_EQ(v2->init(&context, NcclMask()), 0);
  const std::uint64_t hash = NextCommId();
  abi::EventDescrV2 d{};
  d.type = abi::kColl;
  d.rank = 0;
  d.coll.commHash = hash;
  d.coll.seqNumber = 7;
  d.coll.func = "AllGather";
  d.coll.count = 4096;  // bytes, with ncclInt8 (src/enqueue.cc:2280-2283 at v2.23.4-1)
  d.coll.datatype = "ncclInt8";
  d.coll.trafficBytes = 4096 * 8;
  d.coll.nMaxChannels = 2;
  d.coll.algo = "RING";
  d.coll.proto = "SIMPLE";
  void* coll = nullptr;
  v2->startEvent(context, &coll, &d);
  ASSERT_NE(coll, nullptr);
  v2->stopEvent(coll);
  ASSERT_TRUE(WaitForOps(hash, 1));
  const profiler::OpView* op = OnlyOp(hash);
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->op.func, NCCLSCOPE_FUNC_ALL_GATHER);
  EXPECT_EQ(op->op.seq, 7u);
  EXPECT_EQ(op->op.bytes, 4096u);
  EXPECT_EQ(op->op.algo, NCCLSCOPE_ALGO_RING);
  v2->finalize(context);
}

// NCCL 2.26 (v3): KernelCh without GPU timestamps. The op waits for them (they say the kernel
// ran), and its record has no GPU timing and says why.
TEST(AbiVersionsTest, V3KernelChannelsCompleteWithoutGpuTiming) {
  ASSERT_TRUE(kEnvironment);
  const auto* v3 = TableOf<abi::ProfilerV3>(3);
  ASSERT_NE(v3, nullptr);
  void* context = nullptr;
  ASSERT_EQ(v3->init(&context, NcclMask()), 0);
  EXPECT_NE(*NcclMask() & abi::kKernelCh, 0);
  EXPECT_EQ(*NcclMask() & abi::kKernelPhase, 0);
  const std::uint64_t hash = NextCommId();
  abi::EventDescrV3 d{};
  d.type = abi::kColl;
  d.rank = 1;
  d.coll.commHash = hash;
  d.coll.func = "AllReduce";
  d.coll.count = 256;
  d.coll.datatype = "ncclFloat32";
  d.coll.nMaxChannels = 8;  // an upper bound: two channels run
  d.coll.algo = "RING";
  d.coll.proto = "LL";
  void* coll = nullptr;
  v3->startEvent(context, &coll, &d);
  ASSERT_NE(coll, nullptr);
  v3->stopEvent(coll);  // "enqueued"
  void* channels[2] = {};
  for (int c = 0; c < 2; ++c) {
    std::memset(&d, 0, sizeof(d));
    d.type = abi::kKernelCh;
    d.parentObj = coll;
    d.kernelCh.channelId = static_cast<std::uint8_t>(c);
    v3->startEvent(context, &channels[c], &d);
    ASSERT_NE(channels[c], nullptr);
  }
  for (void* ch : channels) v3->stopEvent(ch);  // no recordEventState before v4
  // Completed once its channels are quiet (the number of channels is not announced).
  ASSERT_TRUE(WaitForOps(hash, 1, std::chrono::milliseconds(5000)));
  const profiler::OpView* op = OnlyOp(hash);
  ASSERT_NE(op, nullptr);
  EXPECT_NE(op->op.flags & NCCLSCOPE_OP_KERNEL_UNTIMED, 0);
  EXPECT_EQ(op->op.flags & (NCCLSCOPE_OP_GPU_TIMING | NCCLSCOPE_OP_GPU_TIMING_PARTIAL), 0);
  EXPECT_EQ(op->op.n_timed, 0);
  EXPECT_GE(op->op.complete_ns, op->op.enqueue_ns);
  v3->finalize(context);
}

// NCCL 2.31 (v7): the call's tag, a symmetric kernel's variant, and each channel's kernel
// phases (start, KernelPhaseStop with the end in kernelCh.pTimer, stop, between the channel's
// start and its stop), carried whole to the agent.
TEST(AbiVersionsTest, V7TagVariantAndPhases) {
  ASSERT_TRUE(kEnvironment);
  const auto* v7 = TableOf<abi::ProfilerV7>(7);
  ASSERT_NE(v7, nullptr);
  const std::uint64_t hash = NextCommId();
  void* context = nullptr;
  ASSERT_EQ(v7->init(&context, hash, NcclMask(), "tp", 1, 2, 0, nullptr), 0);
  ASSERT_NE(*NcclMask() & abi::kKernelPhase, 0);
  ASSERT_NE(*NcclMask() & abi::kKernelCh, 0);
  abi::EventDescrV7 d{};
  d.type = abi::kCollApi;
  d.collApi.func = "AllReduce";
  d.collApi.count = 1024;
  d.collApi.datatype = "ncclBfloat16";
  d.collApi.userTag = 42;
  void* api = nullptr;
  v7->startEvent(context, &api, &d);
  ASSERT_NE(api, nullptr);
  v7->stopEvent(api);
  std::memset(&d, 0, sizeof(d));
  d.type = abi::kColl;
  d.parentObj = api;
  d.coll.func = "AllReduce";
  d.coll.count = 1024;
  d.coll.datatype = "ncclBfloat16";
  d.coll.nChannels = 2;  // the head task of a symmetric plan: its blocks
  d.coll.algo = "AGxLL_R";
  d.coll.proto = "";
  d.coll.kernelVariant = "AllReduce_AGxLL_R";
  d.coll.isSymColl = true;
  d.coll.userTag = 42;
  void* coll = nullptr;
  v7->startEvent(context, &coll, &d);
  ASSERT_NE(coll, nullptr);
  v7->stopEvent(coll);
  const std::uint64_t t = 1'000'000;
  for (int c = 0; c < 2; ++c) {
    std::memset(&d, 0, sizeof(d));
    d.type = abi::kKernelCh;
    d.parentObj = coll;
    d.kernelCh.channelId = static_cast<std::uint8_t>(c);
    d.kernelCh.pTimer = t;
    void* ch = nullptr;
    v7->startEvent(context, &ch, &d);
    ASSERT_NE(ch, nullptr);
    // initial_sync 300 ns on channel 0, 100 ns on channel 1; compute 1000; no final_sync (NCCL
    // skips zero-length phases).
    const std::uint64_t sync = c == 0 ? 300 : 100;
    const std::uint64_t bounds[3] = {t, t + sync, t + sync + 1000};
    for (std::uint8_t phase = 0; phase < 2; ++phase) {
      std::memset(&d, 0, sizeof(d));
      d.type = abi::kKernelPhase;
      d.parentObj = ch;
      d.kernelPhase.channelId = static_cast<std::uint8_t>(c);
      d.kernelPhase.phaseId = phase;
      d.kernelPhase.phaseName = phase == 0 ? "initial_sync" : "compute";
      d.kernelPhase.pTimer = bounds[phase];
      void* p = nullptr;
      v7->startEvent(context, &p, &d);
      ASSERT_NE(p, nullptr);
      abi::StateArgsV7 end{};
      end.kernelCh.pTimer = bounds[phase + 1];
      v7->recordEventState(p, abi::kKernelPhaseStop, &end);
      v7->stopEvent(p);
    }
    abi::StateArgsV7 stop{};
    stop.kernelCh.pTimer = bounds[2];
    v7->recordEventState(ch, abi::kKernelChStop, &stop);
    v7->stopEvent(ch);
  }
  ASSERT_TRUE(WaitForOps(hash, 1));
  const profiler::OpView* op = OnlyOp(hash);
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->op.algo, NCCLSCOPE_ALGO_SYMMETRIC);
  EXPECT_NE(op->op.flags & NCCLSCOPE_OP_SYMMETRIC, 0);
  EXPECT_NE(op->op.flags & NCCLSCOPE_OP_GPU_TIMING, 0);
  EXPECT_EQ(op->op.n_timed, 2);
  EXPECT_EQ(op->user_tag, 42u);
  EXPECT_EQ(op->kernel_variant, NCCLSCOPE_KV_ALL_REDUCE_AGXLL_R);
  ASSERT_EQ(op->n_phase_channels, 2u);
  EXPECT_EQ(op->phases[0].channel, 0);
  EXPECT_EQ(op->phases[0].present, 0b011);
  EXPECT_EQ(op->phases[0].ns[abi::kPhaseInitialSync], 300u);
  EXPECT_EQ(op->phases[0].ns[abi::kPhaseCompute], 1000u);
  EXPECT_EQ(op->phases[0].ns[abi::kPhaseFinalSync], 0u);
  EXPECT_EQ(op->phases[1].ns[abi::kPhaseInitialSync], 100u);
  v7->finalize(context);
}

// A phase or KernelCh that arrives for a channel already stopped, a phase stop without its start,
// and garbage handles: counted, never a crash, never a record of something that did not happen.
TEST(AbiVersionsTest, V7StrayPhasesAreCountedNotRecorded) {
  ASSERT_TRUE(kEnvironment);
  const auto* v7 = TableOf<abi::ProfilerV7>(7);
  ASSERT_NE(v7, nullptr);
  const std::uint64_t hash = NextCommId();
  void* context = nullptr;
  ASSERT_EQ(v7->init(&context, hash, NcclMask(), nullptr, 1, 2, 1, nullptr), 0);
  const std::uint64_t late_before = PluginCounter(NCCLSCOPE_CTR_LATE_EVENT);
  abi::EventDescrV7 d{};
  d.type = abi::kKernelPhase;
  d.parentObj = reinterpret_cast<void*>(0x1234);  // not a KernelCh of this plugin
  void* p = nullptr;
  v7->startEvent(context, &p, &d);
  EXPECT_EQ(p, nullptr);
  abi::StateArgsV7 end{};
  // A phase handle of a slot that was never carved: a value NCCL could never have been given.
  // NOLINTNEXTLINE(performance-no-int-to-ptr)
  void* const never_carved = reinterpret_cast<void*>(0x9ull << 60 | 0xFFFFFull << 8);
  v7->recordEventState(never_carved, abi::kKernelPhaseStop, &end);
  v7->stopEvent(nullptr);
  EXPECT_GT(PluginCounter(NCCLSCOPE_CTR_LATE_EVENT), late_before);
  v7->finalize(context);
}

}  // namespace
}  // namespace ncclscope::testing
