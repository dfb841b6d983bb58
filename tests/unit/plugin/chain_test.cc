// Plugin chaining (NCCLSCOPE_CHAIN, plugin/src/chain.h): the real libnccl-profiler-ncclscope.so
// driven through each ABI like NCCL does (tools/replay), chaining the test plugin
// libchained-profiler.so (tests/support/chained_profiler.h), which checks every handle it is
// given against the ones it issued.
//
// The reference for "what the chained plugin must see" is the chained plugin loaded by the replay
// directly, as NCCL would load it alone: those runs happen before ncclscope is first initialized
// in this process (a global test environment), since NCCL's mask is one process-global int that
// ncclscope steers once it is up. Scenarios that need another process-wide configuration (another
// NCCLSCOPE_CHAIN, or none) run tests/unit/plugin/chain_scenario in a child process.

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

#include "agent/profiler/ring_file.h"
#include "plugin/abi/nccl_profiler_abi.h"
#include "plugin/ring/ncclscope_ring.h"
#include "tests/support/chained_profiler.h"
#include "tests/support/plugin_environment.h"
#include "tests/support/plugin_harness.h"
#include "tests/support/replay_names.h"
#include "tests/support/ring_records.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait_for.h"
#include "tests/unit/plugin/chain_support.h"
#include "tools/replay/nccl_replay.h"

namespace ncclscope::testing {
namespace {

using replay::ProxyOpSpec;
using std::chrono::milliseconds;

constexpr int kAllEvents = 0x7FFF;

// Runs before main, with no other thread yet: ncclscope reads these at its first init.
const bool kEnvironment = [] {  // NOLINT(cert-err58-cpp)
  SetPluginEnvironment(
      PluginRingDir().path(),
      {{"PROXY_DUTY", "1"}, {"RING_SIZE", "64MiB"}, {"CHAIN", NCCLSCOPE_CHAINED_PROFILER}});
  return true;
}();

ProfilerPlugin& Plugin() {
  static ProfilerPlugin plugin(NCCLSCOPE_PLUGIN_PATH);
  return plugin;
}

ChainedPlugin& Chained() {
  static ChainedPlugin chained(NCCLSCOPE_CHAINED_PROFILER);
  return chained;
}

RingRecords& Records() {
  static RingRecords records(PluginRingDir().path());
  return records;
}

profiler::RingHeaderSnapshot Header() {
  profiler::RingHeaderSnapshot header;
  std::string reason;
  const auto file = profiler::RingFile::Open(OnlyRing(PluginRingDir().path()), &reason);
  if (file != nullptr) file->ReadHeader(&header);
  return header;
}

std::uint64_t ChainErrors() { return Header().counters[NCCLSCOPE_CTR_CHAIN_ERRORS]; }
int NcclMask() { return ReplayProcess::MaskSnapshot(); }

std::uint64_t NextCommId() {
  static std::uint64_t next = 0xC4A1000000000000ull + static_cast<std::uint64_t>(getpid()) * 100000;
  return ++next;
}

bool WaitForOps(std::uint64_t comm_id, std::size_t n, milliseconds timeout = milliseconds(10000)) {
  return Records().PollUntil([&] { return Records().CountOps(comm_id) >= n; }, timeout);
}

// Waits until ncclscope's own mask is `mask` (its maintenance thread writes it while this thread is
// idle), then stays idle past the plugin's idle-write race window so that the next API call is
// known to have read it (tests/support/plugin_harness.h, SetPluginControls).
bool WaitForOwnMask(std::uint32_t mask) {
  if (!WaitFor([&] { return Header().effective_mask == mask; }, milliseconds(5000),
               milliseconds(10)))
    return false;
  std::this_thread::sleep_for(milliseconds(600));
  return true;
}

chained::Config AllEvents() {
  chained::Config config;
  config.mask = kAllEvents;
  return config;
}

// Failures injected in the comparison run. NULL handles are not injected for ProxyOps and
// net-plugin events: NCCL 2.28+ starts steps under a NULL ProxyOp handle (src/plugin/profiler.cc
// :511-524) where tools/replay does not, and NCCL stops and updates a net-plugin event through
// its NULL handle (:702-711) where the chain forwards nothing; both would differ from the reference
// for reasons outside the chain.
chained::Config Failing() {
  chained::Config config = AllEvents();
  config.fail_start_every = 7;
  config.null_handle_every = 5;
  config.null_types = ~static_cast<std::uint64_t>(abi::kProxyOp | abi::kNetPlugin);
  config.fail_stop_every = 11;
  config.fail_record_every = 13;
  return config;
}

// One communicator (rank 1 of 4 over 2 nodes) through `plugin`, driven with every event type.
std::vector<chained::Event> DirectRun(int version, const chained::Config& config, bool threaded,
                                      RoundOps* ops) {
  ProfilerPlugin direct(NCCLSCOPE_CHAINED_PROFILER);
  ReplayProcess process(direct, version);
  Chained().Configure(config);
  Chained().Reset();
  std::unique_ptr<ProxyThread> proxy = threaded ? std::make_unique<ProxyThread>() : nullptr;
  ReplayComm comm(process, 1, "direct", 2, 4, 1, proxy.get());
  comm.Init();
  *ops = DriveEveryEventType(comm, 0);
  comm.Finalize();
  return Chained().Events();
}

// What the chained plugin saw when NCCL loaded it directly (no ncclscope in the process yet).
struct Reference {
  std::multiset<std::string> plain[7];
  std::multiset<std::string> failing[7];
  std::string violations[7];
  RoundOps ops;
};
Reference& TheReference() {
  static Reference reference;
  return reference;
}

class DirectRuns : public ::testing::Environment {
 public:
  void SetUp() override {
    ASSERT_TRUE(Chained().ok());
    for (int version : {4, 5, 6}) {
      Reference& r = TheReference();
      r.plain[version] = CanonicalLog(DirectRun(version, AllEvents(), true, &r.ops));
      r.failing[version] = CanonicalLog(DirectRun(version, Failing(), false, &r.ops));
      r.violations[version] = Chained().Violations();
    }
    Chained().Configure(AllEvents());
    Chained().Reset();
  }
};
const auto* const kDirectRuns =  // NOLINT(cert-err58-cpp)
    ::testing::AddGlobalTestEnvironment(new DirectRuns());

class ChainTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kEnvironment);
    ASSERT_TRUE(Plugin().ok()) << Plugin().error();
    ASSERT_TRUE(Chained().ok());
    Chained().Configure(AllEvents());
    Chained().Reset();
  }
  int version() const { return GetParam(); }
};

INSTANTIATE_TEST_SUITE_P(Abi, ChainTest, ::testing::Values(4, 5, 6), [](const auto& param_info) {
  return "v" + std::to_string(param_info.param);
});

std::string Diff(const std::multiset<std::string>& expected,
                 const std::multiset<std::string>& actual) {
  std::string text;
  std::multiset<std::string> missing;
  std::multiset<std::string> extra;
  std::set_difference(expected.begin(), expected.end(), actual.begin(), actual.end(),
                      std::inserter(missing, missing.begin()));
  std::set_difference(actual.begin(), actual.end(), expected.begin(), expected.end(),
                      std::inserter(extra, extra.begin()));
  for (const std::string& line : missing) text += "missing: " + line + "\n";
  for (const std::string& line : extra) text += "extra:   " + line + "\n";
  return text;
}

// Every event type, every parent link, every record and stop: what the chained plugin sees behind
// ncclscope is what it sees when NCCL loads it alone (parents are its own handles: the canonical
// log names each parent by its own description, and the plugin itself refuses any handle it did
// not issue). ncclscope meanwhile records every op.
TEST_P(ChainTest, TheChainedPluginSeesExactlyWhatNcclWouldShowItAlone) {
  const std::multiset<std::string>& reference = TheReference().plain[version()];
  ASSERT_TRUE(TheReference().violations[version()].empty()) << TheReference().violations[version()];
  ProxyThread proxy;
  ReplayProcess process(Plugin(), version());
  const std::uint64_t id = NextCommId();
  ReplayComm comm(process, id, "chained", 2, 4, 1, &proxy);
  ASSERT_TRUE(comm.Init());
  EXPECT_EQ(NcclMask(), static_cast<int>(Header().effective_mask) | kAllEvents);
  const RoundOps ops = DriveEveryEventType(comm, 0);
  comm.Finalize();

  const std::multiset<std::string> seen = CanonicalLog(Chained().Events());
  EXPECT_EQ(seen, reference) << Diff(reference, seen);
  EXPECT_EQ(Chained().Violations(), "");
  // The reference covers every event type this ABI version has.
  const chained::Counts counts = Chained().Counts();
  for (std::uint64_t type = abi::kGroup; type <= abi::kCeBatch; type <<= 1) {
    const bool exists =
        (type < abi::kGroupApi || version() >= 5) &&
        ((type & (abi::kCeColl | abi::kCeSync | abi::kCeBatch)) == 0 || version() >= 6);
    const std::uint64_t n = counts.starts_by_type[__builtin_ctzll(type)];
    if (exists) {
      EXPECT_GT(n, 0u) << "type " << type;
    } else {
      EXPECT_EQ(n, 0u) << "type " << type;
    }
  }
  EXPECT_EQ(counts.stops, counts.handles);  // every handle it issued, stopped once
  ASSERT_TRUE(WaitForOps(id, ops.Total()));
  EXPECT_EQ(Records().CountOps(id), ops.Total());
  for (const profiler::OpView& op : Records().OpsOf(id)) {
    if (op.op.kind != NCCLSCOPE_KIND_CE && op.op.n_channels > 0 && op.op.peer != 1) {
      EXPECT_NE(op.op.flags & NCCLSCOPE_OP_GPU_TIMING, 0) << op.op.seq;
      EXPECT_EQ(op.op.flags & NCCLSCOPE_OP_GPU_TIMING_PARTIAL, 0) << op.op.seq;
    }
  }
}

// Error returns and NULL handles from the chained plugin: it still sees exactly what NCCL would
// show it (NCCL ignores the errors too and skips what it got NULL for), ncclscope records every op
// as it does alone, and each failure is counted once in chain_error.
TEST_P(ChainTest, ChainedFailuresAreCountedAndChangeNothingElse) {
  const std::multiset<std::string>& reference = TheReference().failing[version()];
  ReplayProcess process(Plugin(), version());
  const std::uint64_t id = NextCommId();
  ReplayComm comm(process, id, "failing", 2, 4, 1, nullptr);
  Chained().Configure(Failing());
  Chained().Reset();
  ASSERT_TRUE(comm.Init());
  const std::uint64_t errors_before = ChainErrors();
  const RoundOps ops = DriveEveryEventType(comm, 0);
  chained::Config failing_finalize = Failing();
  failing_finalize.fail_finalize = true;
  Chained().Configure(failing_finalize);  // keeps its counts
  comm.Finalize();

  EXPECT_EQ(CanonicalLog(Chained().Events()), [&] {
    // The reference's finalize returned 0; here it was told to fail.
    std::multiset<std::string> r = reference;
    const auto at = r.find("finalize v" + std::to_string(version()) + " rc 0");
    if (at != r.end()) {
      r.erase(at);
      r.insert("finalize v" + std::to_string(version()) + " rc 3");
    }
    return r;
  }());
  EXPECT_EQ(Chained().Violations(), "");
  const chained::Counts counts = Chained().Counts();
  const std::uint64_t injected = counts.start_errors + counts.stop_errors + counts.record_errors +
                                 counts.null_in_mask + counts.finalize_errors;
  EXPECT_GT(counts.start_errors, 0u);
  EXPECT_GT(counts.null_in_mask, 0u);
  EXPECT_GT(counts.stop_errors, 0u);
  EXPECT_GT(counts.record_errors, 0u);
  EXPECT_EQ(counts.finalize_errors, 1u);
  EXPECT_TRUE(WaitFor([&] { return ChainErrors() - errors_before == injected; }, milliseconds(5000),
                      milliseconds(10)))
      << ChainErrors() - errors_before << " counted, " << injected << " injected";
  ASSERT_TRUE(WaitForOps(id, ops.Total()));
  EXPECT_EQ(Records().CountOps(id), ops.Total());
  for (const profiler::OpView& op : Records().OpsOf(id)) {
    EXPECT_EQ(op.op.flags & (NCCLSCOPE_OP_FLUSHED | NCCLSCOPE_OP_GPU_TIMING_PARTIAL), 0)
        << op.op.seq;
  }
}

// A chained init that fails (or opts out with a NULL context) leaves that communicator to
// ncclscope alone: the chained plugin gets no event of it and no finalize; other communicators
// stay chained; init never returns an error to NCCL.
TEST_P(ChainTest, AFailingChainedInitLeavesThatCommunicatorToNcclscope) {
  chained::Config config = AllEvents();
  config.fail_init_every = 2;  // the second init below
  Chained().Configure(config);
  ReplayProcess process(Plugin(), version());
  ProxyThread proxy;
  const std::uint64_t chained_id = NextCommId();
  const std::uint64_t alone_id = NextCommId();
  ReplayComm chained(process, chained_id, "chained", 2, 4, 1, &proxy);
  ReplayComm alone(process, alone_id, "alone", 2, 4, 1, &proxy);
  const std::uint64_t errors_before = ChainErrors();
  ASSERT_TRUE(chained.Init());
  ASSERT_TRUE(alone.Init());  // success, with ncclscope's context
  EXPECT_EQ(ChainErrors() - errors_before, 1u);
  Chained().Reset();
  const RoundOps ops_alone = DriveEveryEventType(alone, 1);
  EXPECT_EQ(Chained().Counts().starts, 0u);
  const RoundOps ops_chained = DriveEveryEventType(chained, 2);
  EXPECT_GT(Chained().Counts().starts, 0u);
  alone.Finalize();
  chained.Finalize();
  EXPECT_EQ(Chained().Counts().finalizes, 1u);
  EXPECT_EQ(Chained().Violations(), "");
  ASSERT_TRUE(WaitForOps(alone_id, ops_alone.Total()));
  ASSERT_TRUE(WaitForOps(chained_id, ops_chained.Total()));
  EXPECT_EQ(Records().CountOps(alone_id), ops_alone.Total());

  // Opting out with a NULL context is not a failure, and the communicator is ncclscope's alone.
  config = AllEvents();
  config.null_context_every = 1;
  Chained().Configure(config);
  const std::uint64_t quiet_id = NextCommId();
  ReplayComm quiet(process, quiet_id, "opted out", 2, 4, 1, &proxy);
  const std::uint64_t errors = ChainErrors();
  Chained().Reset();
  ASSERT_TRUE(quiet.Init());
  const RoundOps ops_quiet = DriveEveryEventType(quiet, 3);
  quiet.Finalize();
  EXPECT_EQ(ChainErrors(), errors);
  EXPECT_EQ(Chained().Counts().starts, 0u);
  EXPECT_EQ(Chained().Counts().finalizes, 0u);
  ASSERT_TRUE(WaitForOps(quiet_id, ops_quiet.Total()));
}

// NCCL's mask is ncclscope's | the chained plugin's, at init and whenever either changes it at run
// time (the maintenance pass re-reads both); once the chained plugin profiles no communicator any
// more, its bits go.
TEST_P(ChainTest, NcclsMaskIsTheUnionOfBothPlugins) {
  chained::Config config;
  config.mask = abi::kProxyCtrl | abi::kCollApi;  // nothing ncclscope asks for
  Chained().Configure(config);
  ReplayProcess process(Plugin(), version());
  ReplayComm comm(process, NextCommId(), "mask", 2, 4, 1, nullptr);
  ASSERT_TRUE(comm.Init());
  const int ours = static_cast<int>(Header().effective_mask);
  EXPECT_EQ(ours & (abi::kProxyCtrl | abi::kCollApi), 0);
  EXPECT_EQ(NcclMask(), static_cast<int>(ours | abi::kProxyCtrl | abi::kCollApi));

  Chained().SetMask(abi::kGroupApi | abi::kKernelLaunch);  // changed at run time
  EXPECT_TRUE(WaitFor(
      [&] { return NcclMask() == static_cast<int>(ours | abi::kGroupApi | abi::kKernelLaunch); },
      milliseconds(5000), milliseconds(10)))
      << std::hex << NcclMask();

  // ncclscope's own mask changing at run time (the agent's controls) is followed the same way.
  std::string reason;
  auto ring = profiler::RingFile::Open(OnlyRing(PluginRingDir().path()), &reason);
  ASSERT_NE(ring, nullptr) << reason;
  ncclscope_controls controls{};
  controls.event_mask = abi::kColl | abi::kP2p;
  controls.duty_period_ns = 10'000'000'000ull;
  controls.kernel_duty_pm = 1000;
  controls.proxy_duty_pm = 1000;
  ASSERT_TRUE(ring->WriteControls(controls));
  EXPECT_TRUE(WaitFor(
      [&] {
        return NcclMask() ==
               static_cast<int>(abi::kColl | abi::kP2p | abi::kGroupApi | abi::kKernelLaunch);
      },
      milliseconds(5000), milliseconds(10)))
      << std::hex << NcclMask();
  controls.event_mask = static_cast<std::uint32_t>(ours);
  ASSERT_TRUE(ring->WriteControls(controls));
  EXPECT_TRUE(WaitFor(
      [&] { return NcclMask() == static_cast<int>(ours | abi::kGroupApi | abi::kKernelLaunch); },
      milliseconds(5000), milliseconds(10)));

  comm.Finalize();
  EXPECT_EQ(NcclMask(), ours);
}

// Events only the chained plugin asked for reach NCCL's threads, but ncclscope handles only what
// NCCL would have sent it alone: with ncclscope at coll/p2p and the chained plugin asking for
// kernel channels and network steps, ncclscope's ops complete at their stop without GPU timing,
// it writes no network records and counts no late or stray events, while the chained plugin
// gets all of it.
TEST_P(ChainTest, NcclscopeHandlesOnlyTheEventsItAskedFor) {
  ReplayProcess process(Plugin(), version());
  ProxyThread proxy;
  const std::uint64_t id = NextCommId();
  ReplayComm comm(process, id, "narrow", 2, 4, 1, &proxy);
  ASSERT_TRUE(comm.Init());
  std::string reason;
  auto ring = profiler::RingFile::Open(OnlyRing(PluginRingDir().path()), &reason);
  ASSERT_NE(ring, nullptr) << reason;
  const std::uint32_t ours = Header().effective_mask;
  ncclscope_controls controls{};
  controls.event_mask = abi::kColl | abi::kP2p;
  controls.duty_period_ns = 10'000'000'000ull;
  controls.kernel_duty_pm = 1000;
  controls.proxy_duty_pm = 1000;
  ASSERT_TRUE(ring->WriteControls(controls));
  ASSERT_TRUE(WaitForOwnMask(abi::kColl | abi::kP2p));
  ASSERT_EQ(NcclMask(), kAllEvents);  // the union: the chained plugin asks for everything

  const profiler::RingHeaderSnapshot before = Header();
  Chained().Reset();
  ProxyPlan net;
  net.steps = 3;
  GpuTimes gpu;
  gpu.base = 1'800'000'000'000'000'000ull;
  for (std::uint64_t seq = 0; seq < 20; ++seq) comm.Collective(CollSpec{}, seq, gpu, net);
  comm.P2pGroup({{"Send", 4096, "ncclFloat32", 2, 2}, {"Recv", 4096, "ncclFloat32", 0, 2}}, gpu,
                net);
  proxy.Drain();
  ASSERT_TRUE(WaitForOps(id, 22));
  for (const profiler::OpView& op : Records().OpsOf(id)) {
    EXPECT_EQ(op.op.flags & NCCLSCOPE_OP_GPU_TIMING, 0);
    // 2.27 raises no event at the mask copy: right after ncclscope dropped kernel_ch it cannot
    // tell the copy lacked it, waits, and gives up (plugin/README.md, "When an op is complete").
    EXPECT_NE(op.op.flags & (version() >= 5 ? NCCLSCOPE_OP_KERNEL_NOT_REQUESTED
                                            : NCCLSCOPE_OP_KERNEL_NOT_REQUESTED |
                                                  NCCLSCOPE_OP_KERNEL_NEVER_CAME),
              0);
    EXPECT_EQ(op.op.flags & NCCLSCOPE_OP_PROXY_REQUESTED, 0);
  }
  Records().Poll();
  EXPECT_TRUE(Records().ProxyOpsOf(id).empty());
  const profiler::RingHeaderSnapshot after = Header();
  for (ncclscope_counter c : {NCCLSCOPE_CTR_LATE_EVENT, NCCLSCOPE_CTR_INVALID_HANDLE,
                              NCCLSCOPE_CTR_UNKNOWN_EVENTS, NCCLSCOPE_CTR_CHAIN_ERRORS}) {
    EXPECT_EQ(after.counters[c], before.counters[c]) << c;
  }
  const chained::Counts counts = Chained().Counts();
  EXPECT_EQ(counts.starts_by_type[__builtin_ctzll(abi::kKernelCh)], 20u * 8 + 2 * 2);
  // Collectives: a send and a receive per channel; a Send or Recv task: its own direction only.
  EXPECT_EQ(counts.starts_by_type[__builtin_ctzll(abi::kProxyStep)], (20u * 16 + 2 * 2) * 3);
  EXPECT_EQ(Chained().Violations(), "");

  controls.event_mask = ours;
  ASSERT_TRUE(ring->WriteControls(controls));
  ASSERT_TRUE(WaitForOwnMask(ours));
  comm.Finalize();
}

// The first start event of `type` in `log` satisfying `match`.
template <typename Match>
const chained::Event* FindStart(const std::vector<chained::Event>& log, std::uint64_t type,
                                Match match) {
  for (const chained::Event& e : log) {
    if (e.call == chained::kStart && e.type == type && match(e)) return &e;
  }
  return nullptr;
}

ProxyPlan NoNetwork() {
  ProxyPlan plan;
  plan.enabled = false;
  return plan;
}

chained::Config Quiet() {  // counts and checks, keeps no log (long runs)
  chained::Config config = AllEvents();
  config.log_events = false;
  return config;
}

// NCCL passes parents after their stop: KernelCh after the Coll's stop (seconds later when the
// first kernel is late), the captured CollApi at every replay of a CUDA graph. The chain keeps
// stopped API and task slots resolvable for its retire windows: a late KernelCh after 5000 more
// collectives still names its own Coll in the chained plugin; a graph's CollApi still resolves
// after more than a task window of newer retirements, an uncaptured one no longer does (the
// chained plugin then misses that Coll, counted; ncclscope records it regardless).
TEST_P(ChainTest, StoppedParentsStayResolvableForTheirChildren) {
  ReplayProcess process(Plugin(), version());
  const std::uint64_t id = NextCommId();
  ReplayComm comm(process, id, "late", 2, 4, 1, nullptr);
  ASSERT_TRUE(comm.Init());
  CollSpec late_spec;
  late_spec.channels = 4;
  const replay::CollectiveEnqueue late = comm.BeginCollective(late_spec, 424242);
  comm.EndCollective(late);
  void* graph_api = nullptr;
  void* plain_api = nullptr;
  if (version() >= 5) {
    for (bool graph : {true, false}) {
      abi::EventDescrV6 d{};
      d.type = abi::kGroupApi;
      d.groupApi.graphCaptured = graph;
      d.groupApi.groupDepth = 1;
      void* group_api = nullptr;
      Plugin().Start(version(), comm.context(), &group_api, d);
      d = abi::EventDescrV6{};
      d.type = abi::kCollApi;
      d.parentObj = group_api;
      d.collApi.func = "AllReduce";
      d.collApi.count = graph ? 777 : 888;
      d.collApi.datatype = "ncclFloat32";
      d.collApi.graphCaptured = graph;
      void*& api = graph ? graph_api : plain_api;
      Plugin().Start(version(), comm.context(), &api, d);
      Plugin().Stop(version(), api);
      Plugin().Stop(version(), group_api);
    }
  }
  const std::vector<chained::Event> before = Chained().Events();
  const chained::Event* late_coll = FindStart(
      before, abi::kColl, [](const chained::Event& e) { return e.descr.coll.seqNumber == 424242; });
  ASSERT_NE(late_coll, nullptr);

  Chained().Configure(Quiet());
  CollSpec small;
  small.channels = 1;
  GpuTimes gpu;
  gpu.duration_ns = 1000;
  for (std::uint64_t seq = 0; seq < 5000; ++seq) {
    comm.Collective(small, seq, gpu, NoNetwork());
    if (seq % 1000 == 0) Records().Poll();  // the agent drains as the job runs
  }
  Chained().Configure(AllEvents());
  Chained().Reset();
  GpuTimes late_gpu;
  late_gpu.base = 1'900'000'000'000'000'000ull;
  comm.KernelChannels(late.op, 4, late_gpu);
  std::vector<chained::Event> log = Chained().Events();
  std::size_t kernel_channels = 0;
  for (const chained::Event& e : log) {
    if (e.call != chained::kStart || e.type != abi::kKernelCh) continue;
    ++kernel_channels;
    EXPECT_EQ(e.parent, late_coll->handle);
  }
  EXPECT_EQ(kernel_channels, 4u);
  // (ncclscope records that op once; whether with its GPU time is ncclscope's completion logic,
  // tested without the chain in plugin_replay_test.)
  ASSERT_TRUE(WaitForOps(id, 5001));

  if (version() >= 5) {
    const chained::Event* graph_coll_api =
        FindStart(before, abi::kCollApi,
                  [](const chained::Event& e) { return e.descr.collApi.count == 777; });
    ASSERT_NE(graph_coll_api, nullptr);
    // More than a task window (2^16 retirements; three per collective here) of newer ops.
    Chained().Configure(Quiet());
    for (std::uint64_t seq = 5000; seq < 5000 + 23000; ++seq) {
      comm.Collective(small, seq, gpu, NoNetwork());
      if (seq % 1000 == 0) Records().Poll();
    }
    Chained().Configure(AllEvents());
    Chained().Reset();
    const std::uint64_t errors_before = ChainErrors();
    for (void* api : {graph_api, plain_api}) {
      abi::EventDescrV6 d{};
      d.type = abi::kColl;
      d.parentObj = api;
      d.rank = 1;
      d.coll.seqNumber = api == graph_api ? 777 : 888;
      d.coll.func = "AllReduce";
      d.coll.count = 1;
      d.coll.datatype = "ncclFloat32";
      d.coll.algo = "RING";
      d.coll.proto = "LL";
      void* coll = nullptr;
      Plugin().Start(version(), comm.context(), &coll, d);
      Plugin().Stop(version(), coll);
    }
    log = Chained().Events();
    const chained::Event* replayed = FindStart(
        log, abi::kColl, [](const chained::Event& e) { return e.descr.coll.seqNumber == 777; });
    ASSERT_NE(replayed, nullptr);
    EXPECT_EQ(replayed->parent, graph_coll_api->handle);
    EXPECT_EQ(FindStart(log, abi::kColl,
                        [](const chained::Event& e) { return e.descr.coll.seqNumber == 888; }),
              nullptr);
    EXPECT_TRUE(WaitFor([&] { return ChainErrors() == errors_before + 1; }, milliseconds(5000),
                        milliseconds(10)));
    ASSERT_TRUE(WaitForOps(id, 5001 + 23000));
  }
  EXPECT_EQ(Chained().Violations(), "");
  comm.Finalize();
  // The two hand-made Colls came without a Group (plan) and without KernelCh although the mask
  // had it: nothing proves they ended, so they are flushed with their communicator.
  ASSERT_TRUE(WaitForOps(id, version() >= 5 ? 5001 + 23000 + 2 : 5001));
}

// ProxyOps NCCL never stops (CollNet, SHM, copy-engine transports) hold a chain slot only until
// newer ProxyOps displace them: after three proxy windows of them, every event still reaches the
// chained plugin and nothing is counted. ncclscope does not ask for proxy events here (only the
// chained plugin does), so it never sees them.
TEST_P(ChainTest, NeverStoppedProxyOpsNeverExhaustTheChain) {
  ReplayProcess process(Plugin(), version());
  const std::uint64_t id = NextCommId();
  ReplayComm comm(process, id, "collnet", 2, 4, 1, nullptr);
  ASSERT_TRUE(comm.Init());
  std::string reason;
  auto ring = profiler::RingFile::Open(OnlyRing(PluginRingDir().path()), &reason);
  ASSERT_NE(ring, nullptr) << reason;
  const std::uint32_t ours = Header().effective_mask;
  ncclscope_controls controls{};
  controls.event_mask = abi::kColl | abi::kP2p | abi::kKernelCh;
  controls.duty_period_ns = 10'000'000'000ull;
  controls.kernel_duty_pm = 1000;
  controls.proxy_duty_pm = 1000;
  ASSERT_TRUE(ring->WriteControls(controls));
  ASSERT_TRUE(WaitForOwnMask(controls.event_mask));
  const profiler::RingHeaderSnapshot before = Header();

  Chained().Configure(Quiet());
  Chained().Reset();
  CollSpec spec;
  spec.channels = 2;
  const replay::CollectiveEnqueue e = comm.BeginCollective(spec, 1);
  ProxyOpSpec never;
  never.steps = 0;
  for (int i = 0; i < 3 * 65536 + 7; ++i) {
    never.channel = i % 2;
    comm.ProxyOpStart(e.op, never);
  }
  comm.EndCollective(e);
  comm.KernelChannels(e.op, 2, GpuTimes{});
  const chained::Counts flooded = Chained().Counts();
  ProxyPlan net;
  net.steps = 2;
  comm.Collective(spec, 2, GpuTimes{}, net);
  const chained::Counts counts = Chained().Counts();
  EXPECT_EQ(counts.starts_by_type[__builtin_ctzll(abi::kProxyOp)] -
                flooded.starts_by_type[__builtin_ctzll(abi::kProxyOp)],
            4u);
  EXPECT_EQ(counts.starts_by_type[__builtin_ctzll(abi::kProxyStep)] -
                flooded.starts_by_type[__builtin_ctzll(abi::kProxyStep)],
            8u);
  EXPECT_EQ(counts.starts_by_type[__builtin_ctzll(abi::kKernelCh)] -
                flooded.starts_by_type[__builtin_ctzll(abi::kKernelCh)],
            2u);
  const profiler::RingHeaderSnapshot after = Header();
  EXPECT_EQ(after.counters[NCCLSCOPE_CTR_CHAIN_ERRORS],
            before.counters[NCCLSCOPE_CTR_CHAIN_ERRORS]);
  EXPECT_EQ(after.counters[NCCLSCOPE_CTR_HANDLES_EXHAUSTED],
            before.counters[NCCLSCOPE_CTR_HANDLES_EXHAUSTED]);
  ASSERT_TRUE(WaitForOps(id, 2));
  EXPECT_EQ(Chained().Violations(), "");

  controls.event_mask = ours;
  ASSERT_TRUE(ring->WriteControls(controls));
  ASSERT_TRUE(WaitForOwnMask(ours));
  comm.Finalize();
}

// With every chain slot in use, NCCL gets ncclscope's own handles: ncclscope records the op as
// usual, the chained plugin misses it and its children (each counted); once slots are free again
// the next op reaches the chained plugin in full.
TEST_P(ChainTest, AFullChainTableCostsTheChainedPluginEventsNotNcclscope) {
  ReplayProcess process(Plugin(), version());
  const std::uint64_t id = NextCommId();
  ReplayComm comm(process, id, "full", 2, 4, 1, nullptr);
  ASSERT_TRUE(comm.Init());
  Chained().Configure(Quiet());
  // ProxyCtrl events: ncclscope never asks for them, the chained plugin does, so each one holds a
  // chain slot and nothing else.
  std::vector<void*> held;
  const std::uint64_t errors_before = ChainErrors();
  abi::EventDescrV6 ctrl{};
  ctrl.type = abi::kProxyCtrl;
  while (held.size() < (1u << 19)) {
    void* h = nullptr;
    Plugin().Start(version(), comm.context(), &h, ctrl);
    if (h == nullptr) break;  // full: the chained plugin missed this one
    held.push_back(h);
  }
  ASSERT_LT(held.size(), 1u << 19);
  EXPECT_TRUE(WaitFor([&] { return ChainErrors() == errors_before + 1; }, milliseconds(5000),
                      milliseconds(10)));

  Chained().Reset();
  CollSpec spec;
  GpuTimes gpu;
  gpu.base = 1'950'000'000'000'000'000ull;
  comm.Collective(spec, 77, gpu, NoNetwork());
  EXPECT_EQ(Chained().Counts().starts, 0u);
  const std::uint64_t emitted =
      (version() >= 5 ? 4 : 2) + spec.channels;  // API, Group, Coll, KernelCh
  EXPECT_TRUE(WaitFor([&] { return ChainErrors() == errors_before + 1 + emitted; },
                      milliseconds(5000), milliseconds(10)))
      << ChainErrors() - errors_before;
  ASSERT_TRUE(WaitForOps(id, 1));
  const profiler::OpView op = Records().OpsOf(id).front();
  EXPECT_EQ(op.op.n_timed, spec.channels);
  EXPECT_EQ(op.op.gpu_start_ns, gpu.Start(0));

  for (void* h : held) Plugin().Stop(version(), h);
  Chained().Reset();
  comm.Collective(spec, 78, gpu, NoNetwork());
  EXPECT_EQ(Chained().Counts().starts, emitted);
  EXPECT_EQ(Chained().Counts().stops, emitted);
  EXPECT_EQ(Chained().Violations(), "");
  ASSERT_TRUE(WaitForOps(id, 2));
  comm.Finalize();
}

// Chain handles are integers checked against the table, never followed: forged values, handles
// already stopped and freed, a second stop of a retained one; PXN ProxyOps carry another
// process's context and parent, which both plugins get untouched.
TEST_P(ChainTest, StaleForgedAndForeignHandlesAreNeverFollowed) {
  ReplayProcess process(Plugin(), version());
  const std::uint64_t id = NextCommId();
  ReplayComm comm(process, id, "forged", 2, 4, 1, nullptr);
  ASSERT_TRUE(comm.Init());
  const replay::CollectiveEnqueue e = comm.BeginCollective(CollSpec{}, 5);
  void* channel = comm.KernelChannelStart(e.op, 0, 1000);
  comm.KernelChannelStop(channel, 2000);
  comm.EndCollective(e);
  Chained().Reset();
  const profiler::RingHeaderSnapshot before = Header();
  abi::StateArgsV6 args{};
  const std::uint64_t chain_kind = 14ull << 60;
  const std::uint64_t stopped = reinterpret_cast<std::uintptr_t>(channel);
  const std::uint64_t forgeries[] = {
      chain_kind | std::uint64_t{0xFFFFF} << 40 |
          std::uint64_t{0x7FFFFFFF} << 8,         // beyond the slots
      chain_kind | std::uint64_t{0xABCDE} << 40,  // slot 0, wrong generation
      stopped};                                   // stopped, slot freed
  for (std::uint64_t forged : forgeries) {
    // NOLINTNEXTLINE(performance-no-int-to-ptr)
    void* h = reinterpret_cast<void*>(static_cast<std::uintptr_t>(forged));
    EXPECT_EQ(Plugin().Stop(version(), h), 0);
    EXPECT_EQ(Plugin().Record(version(), h, abi::kKernelChStop, &args), 0);
  }
  Plugin().Stop(version(), e.op.handle);  // the Coll again: retained, so ncclscope judges it
  EXPECT_EQ(Chained().Counts().stops + Chained().Counts().records, 0u);
  const profiler::RingHeaderSnapshot after = Header();
  EXPECT_EQ(
      after.counters[NCCLSCOPE_CTR_INVALID_HANDLE] - before.counters[NCCLSCOPE_CTR_INVALID_HANDLE],
      7u);  // 6 forged calls, and ncclscope's own view of the second stop

  // PXN: our proxy raises a ProxyOp for another process's task.
  ProxyOpSpec pxn;
  pxn.pid = getpid() + 1;
  pxn.steps = 1;
  // Values of another process (here: one that decodes as a chain-only context and a chain handle;
  // the chain must not look them up).
  // NOLINTBEGIN(performance-no-int-to-ptr)
  pxn.foreign_context = reinterpret_cast<void*>(std::uintptr_t{0xF000'0000'0000'0000ull});
  pxn.foreign_parent = reinterpret_cast<void*>(std::uintptr_t{0xE000'0000'0000'0100ull});
  // NOLINTEND(performance-no-int-to-ptr)
  const replay::CollectiveEnqueue carrier = comm.BeginCollective(CollSpec{}, 6);
  void* op = comm.ProxyOpStart(carrier.op, pxn);
  void* step = comm.ProxyStepStart(carrier.op, op, pxn, 0);
  comm.ProxyStepState(step, abi::kProxyStepSendWait, 4096);
  comm.ProxyStepStop(step);
  comm.ProxyOpStop(op);
  comm.EndCollective(carrier);
  comm.KernelChannels(carrier.op, 8, GpuTimes{});
  const std::vector<chained::Event> log = Chained().Events();
  const chained::Event* foreign_op =
      FindStart(log, abi::kProxyOp, [](const chained::Event&) { return true; });
  ASSERT_NE(foreign_op, nullptr);
  EXPECT_EQ(foreign_op->context, pxn.foreign_context);
  EXPECT_EQ(foreign_op->parent, pxn.foreign_parent);
  const chained::Event* foreign_step =
      FindStart(log, abi::kProxyStep, [](const chained::Event&) { return true; });
  ASSERT_NE(foreign_step, nullptr);
  EXPECT_EQ(foreign_step->context, pxn.foreign_context);
  EXPECT_EQ(foreign_step->parent, foreign_op->handle);
  EXPECT_EQ(Chained().Violations(), "");
  Records().PollUntil([&] {
    for (const auto& p : Records().proxy_ops) {
      if (p.origin_pid == pxn.pid) return true;
    }
    return false;
  });
  bool recorded = false;
  for (const auto& p : Records().proxy_ops) {
    if (p.origin_pid != pxn.pid) continue;
    recorded = true;
    EXPECT_EQ(p.origin_context, 0xF000'0000'0000'0000ull);
    EXPECT_EQ(p.origin_parent, 0xE000'0000'0000'0100ull);
    EXPECT_NE(p.flags & NCCLSCOPE_PROXY_FOREIGN, 0);
  }
  EXPECT_TRUE(recorded);
  comm.Finalize();
}

// ---- Process-wide configurations, in a child process (tests/unit/plugin/chain_scenario.cc) ----

struct ChildRun {
  int exit_code = -1;
  std::string out;
  std::string err;
  std::map<std::string, std::uint64_t> values;  // "ops", "nccl_mask", "ours_mask", "chain_errors"
  std::vector<profiler::OpView> ops;
  std::vector<ncclscope_proxy_op_record> proxy_ops;
};

ChildRun RunChild(int version, std::vector<std::string> env, int rounds = 2) {
  TempDir work;
  TempDir ring_dir;
  if (std::none_of(env.begin(), env.end(),
                   [](const std::string& e) { return e.rfind("NCCLSCOPE_RING_DIR=", 0) == 0; })) {
    env.push_back("NCCLSCOPE_RING_DIR=" + ring_dir.path());
  }
  env.emplace_back("NCCLSCOPE_REPLAY_LOG=1");
  Subprocess child({NCCLSCOPE_CHAIN_SCENARIO, "--plugin", NCCLSCOPE_PLUGIN_PATH, "--abi",
                    std::to_string(version), "--rounds", std::to_string(rounds)},
                   work.path(), env);
  ChildRun run;
  run.exit_code = child.Wait(milliseconds(60000)).value_or(-1);
  run.out = child.Stdout();
  run.err = child.Stderr();
  std::istringstream lines(run.out);
  std::string key;
  std::uint64_t value = 0;
  while (lines >> key >> value) run.values[key] = value;
  RingRecords records(ring_dir.path());
  if (run.values["ours_mask"] != 0) {  // 0: ncclscope had no ring
    records.PollUntil([&] { return records.ops.size() >= run.values["ops"]; });
  }
  run.ops = records.ops;
  run.proxy_ops = records.proxy_ops;
  return run;
}

std::size_t Occurrences(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

class ChainProcessTest : public ::testing::TestWithParam<int> {};
INSTANTIATE_TEST_SUITE_P(Abi, ChainProcessTest, ::testing::Values(4, 5, 6),
                         [](const auto& param_info) {
                           return "v" + std::to_string(param_info.param);
                         });

// ncclscope's records do not depend on chaining: the same job with NCCLSCOPE_CHAIN unset and with
// a chained plugin that asks for every event and fails now and then writes the same op and
// network-op records.
TEST_P(ChainProcessTest, NcclscopeRecordsTheSameWithAndWithoutAChainedPlugin) {
  const ChildRun alone = RunChild(GetParam(), {"NCCLSCOPE_CHAIN="});
  const ChildRun chained =
      RunChild(GetParam(), {std::string("NCCLSCOPE_CHAIN=") + NCCLSCOPE_CHAINED_PROFILER,
                            "CHAINED_PROFILER_MASK=0x7fff", "CHAINED_PROFILER_FAIL_EVERY=5"});
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  ASSERT_EQ(chained.exit_code, 0) << chained.err;
  EXPECT_EQ(alone.values.at("ops"), chained.values.at("ops"));
  EXPECT_EQ(alone.ops.size(), alone.values.at("ops"));
  EXPECT_EQ(OpLines(alone.ops), OpLines(chained.ops));
  EXPECT_FALSE(alone.proxy_ops.empty());
  EXPECT_EQ(ProxyOpLines(alone.proxy_ops), ProxyOpLines(chained.proxy_ops));
  EXPECT_EQ(alone.values.at("chain_errors"), 0u);
  EXPECT_GT(chained.values.at("chain_errors"), 0u);
  EXPECT_EQ(static_cast<int>(chained.values.at("nccl_mask")),
            static_cast<int>(chained.values.at("ours_mask")) | kAllEvents);
  EXPECT_EQ(alone.values.at("nccl_mask"), alone.values.at("ours_mask"));
}

// A chain that cannot be used is one clear warning through NCCL's logger and one chain_error;
// ncclscope then runs exactly as without NCCLSCOPE_CHAIN (NCCL's mask is ncclscope's own).
TEST_P(ChainProcessTest, AnUnusableChainIsOneWarningAndNcclscopeRunsAlone) {
  TempDir files;
  const std::string text = files.WriteFile("not-a-library.so", "this is not an ELF file\n");
  struct Case {
    std::string name;
    std::vector<std::string> env;
    std::string says;
  };
  std::vector<Case> cases = {
      {"missing", {"NCCLSCOPE_CHAIN=/nonexistent/libnccl-profiler-nope.so"}, "cannot be loaded"},
      {"not a library", {"NCCLSCOPE_CHAIN=" + text}, "cannot be loaded"},
      {"ncclscope itself",
       {std::string("NCCLSCOPE_CHAIN=") + NCCLSCOPE_PLUGIN_PATH},
       "is ncclscope itself"},
      {"incomplete table",
       {std::string("NCCLSCOPE_CHAIN=") + NCCLSCOPE_CHAINED_PROFILER, "CHAINED_PROFILER_BROKEN=1"},
       "lacks a function"},
  };
  if (GetParam() == 4) {
    // NCCL 2.27 takes v4 from ncclscope; a v5-only plugin (like NCCL's Inspector) has no v4 table.
    cases.push_back({"no table for v4",
                     {std::string("NCCLSCOPE_CHAIN=") + NCCLSCOPE_CHAINED_PROFILER_V5},
                     "exports no ncclProfiler_v4"});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const ChildRun run = RunChild(GetParam(), c.env, 1);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_EQ(Occurrences(run.err, "ncclscope: chain:"), 1u) << run.err;
    EXPECT_EQ(Occurrences(run.err, c.says), 1u) << run.err;
    EXPECT_EQ(Occurrences(run.err, "ncclscope runs alone"), 1u) << run.err;
    EXPECT_EQ(run.values.at("chain_errors"), 1u);
    EXPECT_EQ(run.values.at("nccl_mask"), run.values.at("ours_mask"));
    EXPECT_EQ(run.ops.size(), run.values.at("ops"));
  }
}

// Under the ABIs the chain does not forward (v1-v3: NCCL 2.23-2.26; v7: 2.31+), a chained plugin
// gets nothing: one warning says so, and ncclscope records every op as it would alone.
TEST(ChainProcessOtherAbiTest, OutsideV4ToV6TheChainIsOneWarningAndNcclscopeRunsAlone) {
  for (int version : {1, 3, 7}) {
    SCOPED_TRACE(version);
    // v1-v3 have no NCCL logger: the plugin's warnings go to stderr under NCCL_DEBUG=WARN.
    const ChildRun run =
        RunChild(version, {std::string("NCCLSCOPE_CHAIN=") + NCCLSCOPE_CHAINED_PROFILER,
                           "CHAINED_PROFILER_MASK=0x7fff", "NCCL_DEBUG=WARN"});
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_EQ(Occurrences(run.err, "forwards v4 to v6 only"), 1u) << run.err;
    EXPECT_EQ(Occurrences(run.err, "ncclscope runs alone"), 1u) << run.err;
    EXPECT_EQ(run.values.at("nccl_mask"), run.values.at("ours_mask"));
    EXPECT_GT(run.values.at("ops"), 0u);
    EXPECT_EQ(run.ops.size(), run.values.at("ops"));
  }
}

// NCCL's Inspector exports only ncclProfiler_v5. Behind NCCL 2.29+ (v6) it is chained as NCCL
// would load it there: through NCCL's v5 adapter rules, without copy-engine events and states
// and without CE bits in NCCL's mask from it; every other event reaches it.
TEST(ChainProcessV6Test, AV5OnlyPluginIsChainedBehindV6WithoutCopyEngineEvents) {
  TempDir files;
  const std::string summary = files.path() + "/summary";
  const ChildRun run =
      RunChild(6, {std::string("NCCLSCOPE_CHAIN=") + NCCLSCOPE_CHAINED_PROFILER_V5,
                   "CHAINED_PROFILER_MASK=0x7fff", "CHAINED_PROFILER_SUMMARY=" + summary});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.values.at("chain_errors"), 0u);
  EXPECT_EQ(Occurrences(run.err, "as NCCL's v5 adapter does"), 1u) << run.err;
  const auto nccl = static_cast<std::uint32_t>(run.values.at("nccl_mask"));
  const auto ours = static_cast<std::uint32_t>(run.values.at("ours_mask"));
  EXPECT_EQ(nccl, ours | (0x7FFFu & ~static_cast<std::uint32_t>(abi::kCeColl | abi::kCeSync |
                                                                abi::kCeBatch)));
  const std::string text = ReadFile(summary);
  EXPECT_NE(text.find("violations 0\n"), std::string::npos) << text;
  for (const char* absent : {"start CeColl 0\n", "start CeSync 0\n", "start CeBatch 0\n"}) {
    EXPECT_NE(text.find(absent), std::string::npos) << text;
  }
  for (const char* present :
       {"GroupApi", "CollApi", "P2pApi", "KernelLaunch", "Group", "Coll", "P2p", "ProxyOp",
        "ProxyStep", "ProxyCtrl", "KernelCh", "NetPlugin"}) {
    EXPECT_EQ(text.find(std::string("start ") + present + " 0\n"), std::string::npos)
        << present << "\n"
        << text;
  }
  EXPECT_EQ(run.ops.size(), run.values.at("ops"));
}

// ncclscope without a ring (its directory cannot be created) profiles nothing, but the chained
// plugin keeps working: NCCL gets a context only the chain knows, and NCCL's mask is the chained
// plugin's alone.
TEST(ChainProcessV6Test, WithoutItsRingNcclscopeStillServesTheChainedPlugin) {
  TempDir files;
  const std::string blocker = files.WriteFile("not-a-directory", "");
  const std::string summary = files.path() + "/summary";
  const ChildRun run = RunChild(
      6, {std::string("NCCLSCOPE_CHAIN=") + NCCLSCOPE_CHAINED_PROFILER,
          "CHAINED_PROFILER_MASK=" + std::to_string(kAllEvents),
          "CHAINED_PROFILER_SUMMARY=" + summary, "NCCLSCOPE_RING_DIR=" + blocker + "/rings"});
  ASSERT_EQ(run.exit_code, 0) << run.err;  // init returned a context
  EXPECT_NE(run.err.find("profiling off"), std::string::npos) << run.err;
  EXPECT_EQ(run.values.at("nccl_mask"), static_cast<std::uint64_t>(kAllEvents));
  const std::string text = ReadFile(summary);
  EXPECT_NE(text.find("violations 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("finalizes 1\n"), std::string::npos) << text;
  for (const char* present : {"GroupApi", "CollApi", "Coll", "KernelCh", "ProxyOp", "CeColl"}) {
    EXPECT_EQ(text.find(std::string("start ") + present + " 0\n"), std::string::npos)
        << present << "\n"
        << text;
  }
}

}  // namespace
}  // namespace ncclscope::testing
