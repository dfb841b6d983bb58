#pragma once

// A stand-in for NCCL that drives a profiler plugin .so (the real libnccl-profiler-ncclscope.so, or
// a test plugin) through its exported ABI the way each NCCL release calls a plugin of its own ABI
// version: `ReplayProcess(plugin, version)` with version 1 = NCCL 2.23, 2 = 2.24/2.25, 3 = 2.26,
// 4 = 2.27, 5 = 2.28, 6 = 2.29/2.30, 7 = 2.31. What it claims about NCCL is read from NCCL's
// source and cited as file:line at a tag (v2.28.9-1 unless marked; see also
// shared/reference/nccl-call-order.md, research/nccl-v1-v3.md and research/nccl-v7.md). 2.31.2 is
// not a tag of the mirror: "at 2.31.2" means NVIDIA/nccl commit 8898068. Where the replay
// simplifies, it says so.
//
// NCCL 2.27-2.30 (v4-v6):
//  * Loading: dlopen(RTLD_NOW | RTLD_LOCAL), dlsym("ncclProfiler_vN"), init per communicator with
//    the address of the process-global event-mask int (src/plugin/profiler.cc:185-192).
//  * API calls (Group()): every ncclAllReduce/ncclSend/... copies the mask into its task
//    (src/plugin/profiler.cc:218, src/enqueue.cc:2403/2486; 2.27: src/enqueue.cc:2292/2370 at
//    v2.27.7-1, with no event) and raises GroupApi (outermost call of a group only), CollApi or
//    P2pApi (v5+). That copy alone decides every child event of the task.
//  * Plan launch (ncclGroupEnd): Group start, then Coll/P2p start for every task of the plan in
//    NCCL's plan order, the proxy upload, Coll/P2p stop ("enqueued", not "done"), Group stop
//    (hostStreamPlanTask, src/enqueue.cc:1307-1315), on the user thread or, on the host-callback
//    path (CUDA graphs, a busy host stream), on a CUDA callback thread (src/enqueue.cc:1520-1532).
//  * Proxy thread (RunPlan()): a ProxyOp for every non-profiler proxy op of every transport
//    (src/proxy.cc:427), `isSend` only for network sends (src/plugin/profiler.cc:492); only network
//    ops are progressed (InProgress, steps, net-plugin events) and stopped
//    (src/transport/net.cc:1228-1364, 1409-1635); CollNet, P2P copy-engine and SHM-memcpy proxy ops
//    are started and never stopped. KernelCh: one per channel of each task whose mask copy had
//    KernelCh (src/transport/profiler.cc:21-49), except self send/recv, which get no proxy ops at
//    all (src/enqueue.cc:805). The ops of one plan run concurrently on channels of their own and
//    finish in the order their GPU work ends, not the order they were enqueued.
//  * CUDA graphs (CaptureGraph()/LaunchGraph()): API events at capture; at every launch the plan's
//    Group/Coll/P2p events again, from the callback thread, with the capture-time parents and mask.
//  * finalize only for a non-NULL context from 2.28 (src/plugin/profiler.cc:203); 2.27 calls it for
//    any context (:182-184 at v2.27.7-1).
//
// NCCL 2.23 (v1) and 2.24/2.25 (v2), src/misc/profiler.cc at v2.23.4-1 / v2.24.3-1:
//  * init(ctx, mask) only (:223 / :335); finalize even for a NULL context (:235-237 / :347-349).
//    No API events.
//  * The mask is read once per kernel plan, when its Group event starts (eActivationMaskGroup,
//    :247 / :359): the live value at launch time, at every CUDA-graph launch too. Group only if
//    that snapshot has Coll|P2p|ProxyOp|ProxyStep (:249 / :361: the Group bit alone emits nothing).
//    Coll and P2p starts need the Group handle and Coll|ProxyOp|ProxyStep (:271-272 / :383-384: the
//    P2p bit is never tested); their stops are not checked for NULL (:334,339 / :443,448). A task
//    gets the snapshot as its mask only when its event was started (:299,318 / :408,427): the proxy
//    side of an unprofiled plan is silent.
//  * Coll: parentObj = Group, name NULL (comm->commName is never set before 2.27), commHash,
//    seqNumber = comm->seqNumber[func]++ inside the profiler (:281 / :393: it advances only when a
//    Coll event is emitted), trafficBytes = count x element size x (2 AllReduce, nRanks
//    AllGather/ReduceScatter, 1 otherwise) (src/enqueue.cc:58-65,2284 at v2.23.4-1), nMaxChannels;
//    v1 names func/datatype/algo/proto by 2.23's numbers (plugin/abi/profiler_v1_v3.h), names 2.23
//    does not have mapped as 2.24's v1 adapter maps unknown strings (src/misc/profiler.cc:22-61 at
//    v2.24.3-1). P2p: name NULL, commHash, no seqNumber, no channel count (:304-315 at v2.23.4-1).
//  * Proxy side: ProxyOps only from the network transport, and all of them stopped
//    (src/transport/net.cc:1047-1193 send, :1236-1461 recv at v2.23.4-1); ProxyOp gated by
//    ProxyOp|ProxyStep (:352), ProxyStep by ProxyStep (:407). Per transfer, send: step start,
//    SendPosted(0), step SendGPUWait(8), SendRemFifoWait(1), SendTransmitted(2), step SendWait(9),
//    step stop, SendDone(3); recv: step start, RecvPosted(4), step RecvWait(10), RecvReceived(5),
//    step RecvFlushWait(11), RecvTransmitted(6), step RecvGPUWait(12), step stop, RecvDone(7)
//    (src/transport/net.cc:1104-1241, 1285-1514 at v2.26.6-1). ProxyOp states carry {transSize
//    (cumulative bytes), steps} in the 16-byte v1 args (:483-494 at v2.23.4-1, :594-603 at
//    v2.24.3-1); ProxyStep states pass NULL args (:502 / :613). No InProgress, no SendPeerWait, no
//    KernelCh, no NetPlugin.
//  * Simplified: sliceSteps = 1, so 2.23's raw step numbers and 2.24's DIVUP(step, sliceSteps)
//    are the same numbers; 2.23 counts a send transfer's bytes into transSize after the
//    SendTransmitted record (src/transport/net.cc:1136-1138 at v2.23.4-1), 2.24+ before it
//    (:1199-1202 at v2.26.6-1), and the replay does the same.
//
// NCCL 2.26 (v3), src/plugin/profiler.cc at v2.26.6-1:
//  * init(ctx, mask) (:165), finalize for any context (:177-179). No API events, but each API call
//    snapshots the mask into its task (src/enqueue.cc:2179/2257 at v2.26.6-1); graphs keep the
//    capture-time copy.
//  * Group by the first non-zero task mask & Group|Coll|P2p|ProxyOp|ProxyStep|KernelCh|NetPlugin
//    (:187-215); Coll needs the Group handle and Coll|ProxyOp|ProxyStep|KernelCh|NetPlugin
//    (:235-237), P2p the Group handle and P2p|ProxyOp|ProxyStep|KernelCh (:274); stops checked
//    (:303,308). seqNumber: the counter's current value (:244), advanced for every eager collective
//    and for graph plans only with the Group handle and KernelCh in the task's mask (:259-267).
//    Coll/P2p as v2 without trafficBytes (:238-255, :276-287).
//  * Proxy side as v1/v2, gated ProxyOp|ProxyStep|NetPlugin (:326) and ProxyStep|NetPlugin;
//    NetPlugin events from the net plugin's callback under the current step (:548-563). KernelCh:
//    started and stopped by the proxy thread when it sees the channel's work counters move, with
//    no timestamp and no recordEventState (:454-476, src/transport/profiler.cc:20-48); parent the
//    task, rank 0; none for self send/recv.
//
// NCCL 2.31.2 (v7), src/plugin/profiler.cc at 8898068 (research/nccl-v7.md):
//  * v6 plus userTag on CollApi (:463), P2pApi (:430), Coll (:620), P2p (:658) and CeColl (:1422).
//  * Symmetric collectives get Coll events with isSymColl, kernelVariant, algo = the variant after
//    its first '_', proto "" (:606-614); nChannels = the plan's channel count on the head task of
//    the plan when its mask has KernelCh, else its own (0 for sym tasks) (:600-604). Their KernelCh
//    go to the head task only, on blocks 0..n-1 (:1280-1292), and none under CUDA-graph capture
//    (the clean kernel runs: :1271, :1286), though the head still announces n channels.
//  * KernelCh and KernelPhase come from a per-communicator profiler thread (:1053-1099), not the
//    proxy thread: KernelCh start when the channel starts (:966-969); when it completes, each phase
//    (0 initial_sync, 1 compute, 2 final_sync) as startEvent(parent = the KernelCh handle,
//    channelId, phaseId, phaseName, pTimer = start) -> recordEventState(KernelPhaseStop 31,
//    kernelCh.pTimer = end) -> stopEvent, zero-length phases skipped, only with KernelPhase in the
//    task's mask copy (:898-941); then KernelChStop + stop (:972-977). The replay gives p2p
//    KernelCh phases too: whether 2.31.2's p2p kernels stamp the middle boundaries is unverified
//    (research/nccl-v7.md section 3); if they do not, NCCL emits no p2p phases.
//  * KernelPhase implies KernelCh in a mask NCCL sets: after each plugin init and in the RAS
//    override (ncclProfilerEnforceMaskDeps, :304-314, :343-344, :318), never in the plugin's own
//    runtime writes. The RAS override (SetRasOverride()) replaces the mask and is re-applied after
//    every later communicator's plugin init (:318-323, :349-354).
//
// Every version: events a version does not know are not delivered (the handle stays NULL): API
// events before v5, CE before v6, KernelCh and NetPlugin before v3, KernelPhase before v7; nor are
// states it does not know (19-22 before v4, 23/24 before v5, 31 before v7), as NCCL's adapters
// drop them. Before 2.27, CUDA-graph launches of a plan without proxy ops raise no Group/Coll/P2p
// events at all (src/enqueue.cc:1580-1597 at v2.23.4-1, :1442-1456 at v2.26.6-1); the replay takes
// a communicator with nnodes > 1, or (v3) KernelCh in a capture-time mask, as "has proxy ops".
//
// Not modeled: a plugin of an older ABI under a newer NCCL (NCCL's adapters, e.g. a v3 table
// under 2.28: version N always plays the NCCL whose newest table is vN, calling that table
// directly); ProxyCtrl events; several transfers of one ProxyOp in flight at once, and the
// ProxyOps of one proxy args being stopped together when the last is done
// (src/transport/net.cc:1239-1242 at v2.26.6-1: the replay stops each as it ends); 2.23's
// silencing of eager plans without proxy ops while a graph lives on the communicator, and
// CUDA_LAUNCH_BLOCKING; v3's KernelCh batching and lag (work-batch granularity, a start seen
// after the channel already finished).
//
// GPU timestamps are synthetic but deterministic so tests can check durations. The proxy-side
// pieces are also callable one by one (KernelChannelStart/Stop, ProxyOpStart, ProxyStep*) for
// callers that decide when each event happens: the workload simulator (tools/sim) emits them at
// the times its job model says, so the plugin's own clock measures the modeled step states.
//
// Used by the plugin's tests, its benchmark, tests/support/nccl-replay, ncclscope-sim and the
// replay's own conformance test (tests/unit/replay, against a recording plugin).

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "plugin/abi/nccl_profiler_abi.h"

namespace ncclscope::replay {

// What the v1-v3 Coll/P2p descriptors carry that the v4+ layout has no member for (ignored for
// v4+, and for other event types).
struct LegacyFields {
  std::uint64_t comm_hash = 0;    // coll/p2p.commHash (comm->commHash)
  std::size_t traffic_bytes = 0;  // coll.trafficBytes (v1, v2)
  std::uint32_t op = 0;           // coll.op (v1): the user's ncclRedOp_t (0 = ncclSum)
  int nnodes = 1;  // v1 isCollnet: also NVLS across nodes (src/enqueue.cc:603-614 at v2.23.4-1)
};

// The plugin library and the vtable NCCL would use for one ABI version (1..7).
class ProfilerPlugin {
 public:
  explicit ProfilerPlugin(const std::string& path);
  ~ProfilerPlugin();
  ProfilerPlugin(const ProfilerPlugin&) = delete;
  ProfilerPlugin& operator=(const ProfilerPlugin&) = delete;

  bool ok() const { return lib_ != nullptr; }
  const std::string& error() const { return error_; }
  // Whether dlsym finds ncclProfiler_v<version>.
  bool Has(int version) const;
  const char* Name(int version) const;

  // Calls in the version's own argument order and descriptor layout. v1-v3 init takes only
  // (context, mask): the other arguments are dropped, as NCCL 2.23-2.26 have none to give.
  int Init(int version, void** context, std::uint64_t comm_id, int* mask, const char* name,
           int nnodes, int nranks, int rank) const;
  // `d` is given in the v7 layout (a superset) and translated the way NCCL fills the version's own
  // descriptor (v1-v3: see LegacyFields) or its adapters copy it. Events the version does not know
  // are not delivered: *handle stays NULL and 0 is returned.
  int Start(int version, void* context, void** handle, const abi::EventDescrV7& d,
            const LegacyFields& legacy = {}) const;
  // The same from the v6 layout (v7's first 112 bytes; the v7-only members zero).
  int Start(int version, void* context, void** handle, const abi::EventDescrV6& d,
            const LegacyFields& legacy = {}) const;
  int Stop(int version, void* handle) const;
  // States the version does not know are dropped. v1-v3: ProxyStep states (8-12) get NULL args as
  // NCCL 2.23-2.26 pass them; ProxyCtrl states get the 16-byte args with appendedProxyOps;
  // ProxyOp states 0-7 get {transSize, steps = 0} (use RecordV1 for the real steps).
  int Record(int version, void* handle, int state, abi::StateArgsV6* args) const;
  // A v1-v3 record with the 16-byte v1 arguments (ProxyOp states 0-7); nothing for v4+, which
  // NCCL 2.27+ never sends those states.
  int RecordV1(int version, void* handle, int state, abi::StateArgsV1* args) const;
  int Finalize(int version, void* context) const;

 private:
  void* lib_ = nullptr;
  std::string error_;
  const abi::ProfilerV1* v1_ = nullptr;
  const abi::ProfilerV2* v2_ = nullptr;
  const abi::ProfilerV3* v3_ = nullptr;
  const abi::ProfilerV4* v4_ = nullptr;
  const abi::ProfilerV5* v5_ = nullptr;
  const abi::ProfilerV6* v6_ = nullptr;
  const abi::ProfilerV7* v7_ = nullptr;
};

// NCCL's proxy progress thread: runs posted work in order. Drain() waits until it is idle.
class ProxyThread {
 public:
  ProxyThread();
  ~ProxyThread();
  void Post(std::function<void()> work);
  void Drain();

 private:
  void Run();
  std::mutex mutex_;
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  std::deque<std::function<void()>> queue_;
  bool busy_ = false;
  bool stop_ = false;
  std::thread thread_;
};

// One process's NCCL: the plugin and the ABI version NCCL chose. The event mask is NCCL's
// process-global int (static storage, like ncclProfilerEventMask): every init gets its address.
class ReplayProcess {
 public:
  ReplayProcess(const ProfilerPlugin& plugin, int version) : plugin_(plugin), version_(version) {}
  const ProfilerPlugin& plugin() const { return plugin_; }
  int version() const { return version_; }
  static int* mask();
  // NCCL reads the mask atomically (relaxed) at each API call.
  static int MaskSnapshot() { return __atomic_load_n(mask(), __ATOMIC_RELAXED); }
  // NCCL 2.31 (v7) only: RAS's `CONTROL PROFILER_MASK` (ncclProfilerSetRasOverride,
  // src/plugin/profiler.cc:318-323 at 2.31.2). The mask, with KernelPhase implying KernelCh,
  // replaces NCCL's int now and again after every later communicator's plugin init
  // (:349-354). Older versions have no override: returns false and changes nothing.
  bool SetRasOverride(int mask);
  // For tests: forget the override (NCCL keeps it for the life of the process).
  static void ClearRasOverride();
  // The override NCCL re-applies after a plugin init, if any (v7).
  static bool RasOverride(int* mask);

 private:
  const ProfilerPlugin& plugin_;
  int version_;
};

// Synthetic GPU times for one op: channel c starts at base + c * skew and runs duration + c * skew.
struct GpuTimes {
  std::uint64_t base = 0;  // 0: use the host clock now
  std::uint64_t duration_ns = 50'000;
  std::uint64_t skew_ns = 100;
  // v7 KernelPhase spans of every channel: initial_sync from its start, final_sync up to its end,
  // compute in between (zero-length phases are not emitted: by default only "compute").
  std::uint64_t initial_sync_ns = 0;
  std::uint64_t final_sync_ns = 0;
  std::uint64_t Start(int c) const { return base + static_cast<std::uint64_t>(c) * skew_ns; }
  std::uint64_t Stop(int c) const {
    return Start(c) + duration_ns + static_cast<std::uint64_t>(c) * skew_ns;
  }
};

// Network work of one op per channel (when the mask asks for ProxyOp/ProxyStep).
struct ProxyPlan {
  bool enabled = true;  // only when nnodes > 1 in real NCCL; the tests choose
  int steps = 4;        // steps per ProxyOp
  std::size_t step_bytes = 65536;
  pid_t pid = 0;                   // proxyOp.pid: 0 = this process (getpid)
  void* foreign_parent = nullptr;  // PXN: parent and context values of another process
  void* foreign_context = nullptr;
  int ib_device = 0;  // net-plugin events: NIC index within the net device
  int qp_base = 0;    // first QP number (channel c, direction d: qp_base + 2c + d); 0 = none
};

// Names (func, datatype, algo, proto) must point to static storage, as NCCL's do: the plugin
// caches its lookups by pointer.
struct CollSpec {
  const char* func = "AllReduce";
  std::size_t count = 1 << 20;
  const char* datatype = "ncclFloat32";
  const char* algo = "RING";
  const char* proto = "SIMPLE";
  int root = 0;
  std::uint8_t channels = 8;
  std::uint8_t warps = 16;
  // Emit KernelCh when the mask says so (false: a CUDA graph replay that gets none).
  bool kernel_events = true;
  // KernelCh actually emitted; -1 = channels. CollNet tasks announce nChannels 0 (task->nChannels
  // is set only on the ring/tree/NVLS path, src/enqueue.cc:638) and get one KernelCh per channel
  // of 0..nMaxChannels-1 (src/enqueue.cc:569-597): channels = 0, kernel_channels = N.
  int kernel_channels = -1;
  // For AllGather and Broadcast NCCL hands the Coll event count in bytes and ncclInt8
  // (src/enqueue.cc:2476-2480): Group() does that conversion itself, from this API count/type.
  // v7: the call's ncclCollConfig_t.userProfilerTag (0 = untagged), on CollApi and Coll.
  std::uint64_t user_tag = 0;
  // v7: a symmetric-memory collective run by this kernel variant (a static string such as
  // "AllReduce_AGxLL_R"; nullptr = "Unknown", as ncclSymkKernelIdToString answers). A group's
  // symmetric collectives form one sym plan (simplified: the replay does not split a group into
  // sym and non-sym plans as NCCL's scheduler does); they get no ProxyOps (the symmetric kernels
  // move data by load/store, not through the proxy).
  bool symmetric = false;
  const char* kernel_variant = nullptr;
};

struct P2pSpec {
  const char* func = "Send";
  std::size_t count = 1 << 16;
  const char* datatype = "ncclFloat32";
  int peer = 1;  // == rank: a self send/recv (no proxy ops, no KernelCh)
  std::uint8_t channels = 2;
  std::uint64_t user_tag = 0;  // v7: on P2pApi and P2p (ncclCollConfig_t.userProfilerTag)
};

// One API call of a group: a collective or a send/recv.
struct GroupTask {
  bool p2p = false;
  std::int64_t seq = -1;  // collective: an explicit seqNumber instead of the comm's own count
  CollSpec coll;          // when !p2p; seq = NCCL's seqNumber for its func, counted by ReplayComm
  P2pSpec send_recv;      // when p2p
  // Host-side transport of this task's network-less proxy ops: true makes every ProxyOp of the task
  // one that NCCL starts and never stops (P2P copy engine / SHM memcpy; CollNet always is).
  bool proxy_never_stopped = false;
};

// One task of a launched plan, for the proxy side.
struct PlannedOp {
  void* handle = nullptr;  // Coll/P2p handle (nullptr when NCCL emitted none)
  int mask = 0;            // the task's copy of the mask
  bool p2p = false;
  bool self = false;  // self send/recv
  bool collnet = false;
  bool proxy_never_stopped = false;
  bool send = false;             // p2p direction
  int peer = -1;                 // p2p peer
  std::size_t bytes = 0;         // per rank, for the network steps
  std::vector<int> channel_ids;  // channels its KernelCh / profiler proxy ops run on
  bool symmetric = false;        // v7 sym collective: no proxy ops
};

// What one ncclGroupEnd launched: the plan's tasks in NCCL's plan order.
struct PlanLaunch {
  std::vector<PlannedOp> ops;
  void* group = nullptr;
};

// The proxy side of a plan (RunPlan): GPU durations per task (plan order) and how late the
// proxy thread first sees the kernel.
struct PlanTiming {
  std::uint64_t base_ns = 0;               // GPU time of the plan's start; 0 = host clock now
  std::vector<std::uint64_t> duration_ns;  // per task; missing entries: 50 us
  std::uint64_t skew_ns = 100;  // channel k of a task starts k * skew late, runs k * skew longer
  std::uint64_t first_kernel_delay_ms = 0;  // the kernel starts this long after the launch
  // Deliver each channel's stop when its GPU end time has passed (durations are real time), as
  // NCCL's proxy thread does; otherwise back to back, in end-time order.
  bool real_time = false;
  // v7 KernelPhase spans per task (plan order; missing entries: 0): initial_sync from each
  // channel's start, final_sync up to its end, compute in between; zero-length ones not emitted.
  std::vector<std::uint64_t> initial_sync_ns;
  std::vector<std::uint64_t> final_sync_ns;
};

// A CUDA graph captured from one group: the API events happened at capture.
struct CapturedGraph {
  std::vector<GroupTask> tasks;
  std::vector<void*> api_handles;  // per task, capture-time CollApi/P2pApi handles (v5+)
  std::vector<int> masks;          // per task, the capture-time mask copies
};

// Handles of one enqueued op, for tests that steer the proxy side themselves.
struct EnqueuedOp {
  void* handle = nullptr;  // Coll/P2p handle (nullptr when NCCL got none)
  int mask = 0;            // the snapshot NCCL used
  std::uint8_t channels = 0;
  bool self = false;  // a self send/recv: NCCL raises no proxy-side event for it
};

// The four GPU stamps of one KernelCh's phases (NCCL_KERNEL_PHASE_BEGIN, AFTER_OPEN, BEFORE_CLOSE,
// END at 2.31.2): phase i spans stamps i .. i + 1.
struct PhaseStamps {
  std::uint64_t ts[4] = {0, 0, 0, 0};
};

// The user-thread side of one collective between BeginCollective and EndCollective: the API and
// group events NCCL opened around the task.
struct CollectiveEnqueue {
  EnqueuedOp op;
  void* group = nullptr;
  void* group_api = nullptr;
};

// The user-thread side of a p2p group between BeginP2pGroup and EndP2pGroup: one op per task.
struct P2pEnqueue {
  std::vector<EnqueuedOp> ops;
  void* group = nullptr;
  void* group_api = nullptr;
};

// One network operation (one channel, one peer, one direction) as NCCL's proxy raises it.
struct ProxyOpSpec {
  int channel = 0;
  int peer = 0;
  bool send = true;
  int steps = 1;
  std::size_t chunk_bytes = 65536;
  pid_t pid = 0;                   // proxyOp.pid: 0 = this process (getpid)
  void* foreign_parent = nullptr;  // PXN: parent and context values of another process
  void* foreign_context = nullptr;
  // NCCL's IB transport: a net-plugin event per posted work request with the NIC index within
  // the (merged) net device and the QP number (src/transport/net_ib.cc:2162-2170, :2405-2410).
  int ib_device = 0;
  int qp_num = 0;  // 0: no net-plugin events
};

struct PlanBuild;  // what ReplayComm::LaunchPlan carries from task to task

// One rank of one communicator, with the proxy thread that serves it and (v7) the profiler
// thread that delivers its KernelCh and KernelPhase events (src/plugin/profiler.cc:1053-1099 at
// 2.31.2); without one, v7 delivers them from the proxy thread too. v1-v3 descriptors carry
// comm_id as commHash.
class ReplayComm {
 public:
  ReplayComm(ReplayProcess& process, std::uint64_t comm_id, std::string name, int nnodes,
             int nranks, int rank, ProxyThread* proxy, ProxyThread* profiler_thread = nullptr);
  ~ReplayComm();
  ReplayComm(const ReplayComm&) = delete;
  ReplayComm& operator=(const ReplayComm&) = delete;

  // Returns whether init succeeded with a context. v7: then KernelPhase implies KernelCh in the
  // mask, and a RAS override is re-applied (src/plugin/profiler.cc:343-354 at 2.31.2).
  bool Init();
  // Idempotent. v1-v4 call the plugin's finalize even for a NULL context (NCCL 2.23-2.27), v5+
  // only for a non-NULL one.
  void Finalize();
  void* context() const { return context_; }
  std::uint64_t comm_id() const { return comm_id_; }
  int rank() const { return rank_; }
  int nranks() const { return nranks_; }

  // One collective as NCCL emits it, seqNumber `seq`. The proxy side is posted to the proxy
  // thread (runs concurrently with the Coll stop, as in NCCL).
  void Collective(const CollSpec& spec, std::uint64_t seq, const GpuTimes& gpu = {},
                  const ProxyPlan& proxy = {});
  // A user group of p2p tasks (AlltoAll/Gather/Scatter arrive like this: per-peer Send/Recv).
  void P2pGroup(const std::vector<P2pSpec>& tasks, const GpuTimes& gpu = {},
                const ProxyPlan& proxy = {});
  // ncclAlltoAll on the kernel path: a Send and a Recv per peer (count per peer).
  void AllToAll(std::size_t count_per_peer, const char* datatype, const GpuTimes& gpu = {},
                const ProxyPlan& proxy = {});
  // A copy-engine collective (v6+; NCCL emits CeColl start/stop; v7 with the call's tag).
  void CeCollective(const char* func, std::size_t count, const char* datatype, std::uint64_t seq,
                    std::uint64_t user_tag = 0);

  // The user-thread side of Collective() in two halves: NCCL's API/group events and the Coll
  // start (BeginCollective), then the Coll and group stops (EndCollective). Proxy-side events for
  // the returned op may come from any thread in between or after. Each version's gating applies
  // to the one snapshot taken here; simplified: the stops stay NULL-checked (2.23-2.25 stop a
  // started task's handle unchecked, as Group() does).
  CollectiveEnqueue BeginCollective(const CollSpec& spec, std::uint64_t seq);
  void EndCollective(const CollectiveEnqueue& enqueue);
  // The same for a group of p2p tasks (P2pGroup() in two halves).
  P2pEnqueue BeginP2pGroup(const std::vector<P2pSpec>& tasks);
  void EndP2pGroup(const P2pEnqueue& enqueue);

  // A whole ncclGroupStart .. ncclGroupEnd of this communicator: one API call per task (each with
  // its own copy of the mask), then the plan launch with the task events in NCCL's plan order.
  // `host_callback` (optional) runs the launch's Group/Coll/P2p events, as CUDA's host-callback
  // thread does (this call waits for it). Collective seqNumbers are counted per func.
  // `upload` runs where NCCL uploads the proxy ops, after the task starts and before their stops
  // (src/enqueue.cc:1309-1314): RunPlan() from there races the stops, as NCCL's proxy thread does.
  using Upload = std::function<void(const PlanLaunch&)>;
  // `before_launch` runs between the API calls and ncclGroupEnd's launch (another thread changing
  // the mask meanwhile, say).
  PlanLaunch Group(const std::vector<GroupTask>& tasks, ProxyThread* host_callback = nullptr,
                   const Upload& upload = {}, const std::function<void()>& before_launch = {});
  // The proxy side of a launched plan, posted to this communicator's proxy thread (or run here
  // without one): ProxyOps as each transport raises them, then KernelCh starts for every channel
  // of every task, then the stops in the order the tasks' GPU work ends.
  void RunPlan(const PlanLaunch& plan, const PlanTiming& timing = {}, const ProxyPlan& net = {});
  // CUDA graphs: capture a group (API events only), then launch it: the task events again at
  // every launch, with the capture-time parents and masks, from `host_callback` when given.
  CapturedGraph CaptureGraph(const std::vector<GroupTask>& tasks);
  PlanLaunch LaunchGraph(const CapturedGraph& graph, ProxyThread* host_callback = nullptr,
                         const Upload& upload = {});
  // NCCL's comm->seqNumber[func] (what the next collective of that func gets).
  std::uint64_t NextSeq(const char* func) const;
  // Runs after each API call's read of the mask and before its API events, as a thread
  // descheduled between NCCL's read (src/plugin/profiler.cc:218 at v2.28.9-1) and the startEvent
  // (:224, :294) would see another thread's change: in Group() and CaptureGraph().
  void OnMaskRead(std::function<void()> hook) { on_mask_read_ = std::move(hook); }

  // Lower-level pieces for abnormal sequences.
  EnqueuedOp StartColl(const CollSpec& spec, std::uint64_t seq);
  void StopTask(const EnqueuedOp& op);
  void KernelChannels(const EnqueuedOp& op, int channels, const GpuTimes& gpu);
  void ProxyWork(const EnqueuedOp& op, int channels, const ProxyPlan& proxy);

  // Proxy-thread events one at a time, each only when the op's mask snapshot makes NCCL emit it
  // (else the returned handle is nullptr and the matching stop does nothing).
  // KernelCh start with the channel's GPU start time, then KernelChStop state + stop at its end
  // (v3: start and stop only, no timestamp; v1/v2: none).
  void* KernelChannelStart(const EnqueuedOp& op, int channel, std::uint64_t gpu_start_ns);
  void KernelChannelStop(void* handle, std::uint64_t gpu_stop_ns);
  // v7: the phases of one KernelCh (parent `kernel_ch`, which may be NULL as in NCCL), each
  // start -> KernelPhaseStop(end) -> stop, zero-length ones skipped, when op.mask has
  // KernelPhase; call it right before KernelChannelStop (src/plugin/profiler.cc:898-941, 977).
  void KernelPhases(const EnqueuedOp& op, void* kernel_ch, int channel, const PhaseStamps& stamps);
  // ProxyOp start (and, v4+, its "in progress" state), then ProxySteps: start, states (NCCL's
  // abi::kProxyStep* values, each closing the previous one in the plugin's clock; v1-v3 with
  // NULL args), stop. Gated by each version's bits (ProxyOp|ProxyStep, v3+ also NetPlugin).
  void* ProxyOpStart(const EnqueuedOp& op, const ProxyOpSpec& spec);
  // The ProxyOp start alone: what NCCL does for the ops of transports it never progresses.
  void* ProxyOpStartOnly(const EnqueuedOp& op, const ProxyOpSpec& spec);
  // One net-plugin event (IB descriptor) for a step, when spec.qp_num != 0 and the mask has it
  // (v3+).
  void NetPluginEvent(const EnqueuedOp& op, void* step, const ProxyOpSpec& spec);
  void ProxyOpStop(void* handle);
  void* ProxyStepStart(const EnqueuedOp& op, void* proxy_op, const ProxyOpSpec& spec, int step);
  void ProxyStepState(void* step, int state, std::size_t trans_bytes);
  void ProxyStepStop(void* step);

  ReplayProcess& process() { return process_; }
  ProxyThread* proxy() { return proxy_; }
  ProxyThread* profiler_thread() { return profiler_thread_; }
  void SetProfilerThread(ProxyThread* thread) { profiler_thread_ = thread; }

 private:
  // The Coll task's descriptor for `spec` (the caller sets its parents).
  abi::EventDescrV7 CollTask(const CollSpec& spec, std::uint64_t seq) const;
  int Start(void** handle, abi::EventDescrV7& d);
  void StopIf(void* handle);
  EnqueuedOp EnqueueTask(abi::EventDescrV7 task, std::uint8_t channels, int snapshot,
                         void* api_handle);
  // The v1-v3 descriptor members NCCL fills from the communicator.
  LegacyFields Legacy(const abi::EventDescrV7& d) const;
  // v1-v3: one transfer (step) of a network ProxyOp with its ProxyOp states 0-7 and ProxyStep
  // states (see the header comment); *trans_size is the op's cumulative byte count.
  void LegacyProxyTransfer(const EnqueuedOp& op, void* proxy_op, const ProxyOpSpec& spec, int step,
                           std::size_t* trans_size);

  PlanLaunch LaunchPlan(const std::vector<GroupTask>& tasks, const std::vector<int>& masks,
                        const std::vector<void*>& api_handles, bool persistent,
                        const Upload& upload);
  // LaunchPlan's steps: a task's op, and its Coll or P2p start when `task_event`.
  void PlanColl(PlanBuild& b, const GroupTask& task, bool head, int mask, bool task_event,
                void* api_handle, PlannedOp* op, abi::EventDescrV7* d);
  void PlanP2p(PlanBuild& b, const GroupTask& task, bool task_event, PlannedOp* op,
               abi::EventDescrV7* d);
  // RunPlan's steps: network ProxyOps (started, then progressed), KernelCh (started, then stopped).
  struct NetOp;
  struct KernelChannel;
  struct Kernels;
  std::vector<NetOp> StartProxyOps(const PlanLaunch& plan, const ProxyPlan& net);
  void ProgressNetwork(std::vector<NetOp>& nets);
  Kernels StartKernels(const PlanLaunch& plan, const PlanTiming& timing);
  void StopKernels(Kernels& kernels, const PlanTiming& timing);
  void* ApiCall(const GroupTask& task, int snapshot, bool graph_captured, bool first_in_group,
                void** group_api);

  ReplayProcess& process_;
  std::map<std::string, std::uint64_t> seq_numbers_;  // comm->seqNumber[func]
  std::function<void()> on_mask_read_;
  std::uint64_t comm_id_;
  std::string name_;
  int nnodes_;
  int nranks_;
  int rank_;
  ProxyThread* proxy_;
  ProxyThread* profiler_thread_;
  void* context_ = nullptr;
  bool initialized_ = false;
};

// The NCCL event bits a snapshot makes NCCL 2.27+ (v4+) emit for each kind
// (src/plugin/profiler.cc); ReplayComm applies each version's own rules.
bool EmitsTask(int snapshot, bool p2p);
bool EmitsKernelCh(int snapshot);
bool EmitsProxyOp(int snapshot);
bool EmitsProxyStep(int snapshot);
bool EmitsNetPlugin(int snapshot);

}  // namespace ncclscope::replay
