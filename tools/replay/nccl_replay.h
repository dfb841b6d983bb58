#pragma once

// A stand-in for NCCL that drives the real libnccl-profiler-ncclscope.so through its exported ABI,
// the way NCCL 2.27 (v4), 2.28 (v5) and 2.29/2.30 (v6) call a profiler plugin. What it claims about
// NCCL is read from NCCL's source and cited (file:line at tag v2.28.9-1 unless marked; see also
// shared/reference/nccl-call-order.md); where it simplifies, it says so.
//
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
//
// GPU timestamps are synthetic but deterministic so tests can check durations. The proxy-side
// pieces are also callable one by one (KernelChannelStart/Stop, ProxyOpStart, ProxyStep*) for
// callers that decide when each event happens: the workload simulator (tools/sim) emits them at
// the times its job model says, so the plugin's own clock measures the modeled step states.
//
// Used by the plugin's tests, its benchmark, tests/support/nccl-replay and ncclscope-sim.

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

// The plugin library and the vtable NCCL would use for one ABI version.
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

  // Calls in the version's own argument order and descriptor layout. `d` is given in the v6
  // layout (a superset) and translated, like NCCL's adapters do for older plugins.
  int Init(int version, void** context, std::uint64_t comm_id, int* mask, const char* name,
           int nnodes, int nranks, int rank) const;
  int Start(int version, void* context, void** handle, const abi::EventDescrV6& d) const;
  int Stop(int version, void* handle) const;
  int Record(int version, void* handle, int state, abi::StateArgsV6* args) const;
  int Finalize(int version, void* context) const;

 private:
  void* lib_ = nullptr;
  std::string error_;
  const abi::ProfilerV4* v4_ = nullptr;
  const abi::ProfilerV5* v5_ = nullptr;
  const abi::ProfilerV6* v6_ = nullptr;
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

 private:
  const ProfilerPlugin& plugin_;
  int version_;
};

// Synthetic GPU times for one op: channel c starts at base + c * skew and runs duration + c * skew.
struct GpuTimes {
  std::uint64_t base = 0;  // 0: use the host clock now
  std::uint64_t duration_ns = 50'000;
  std::uint64_t skew_ns = 100;
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
};

struct P2pSpec {
  const char* func = "Send";
  std::size_t count = 1 << 16;
  const char* datatype = "ncclFloat32";
  int peer = 1;  // == rank: a self send/recv (no proxy ops, no KernelCh)
  std::uint8_t channels = 2;
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

// One rank of one communicator, with the proxy thread that serves it.
class ReplayComm {
 public:
  ReplayComm(ReplayProcess& process, std::uint64_t comm_id, std::string name, int nnodes,
             int nranks, int rank, ProxyThread* proxy);
  ~ReplayComm();
  ReplayComm(const ReplayComm&) = delete;
  ReplayComm& operator=(const ReplayComm&) = delete;

  bool Init();      // returns whether init succeeded with a context
  void Finalize();  // idempotent
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
  // A copy-engine collective (v6 only; NCCL emits CeColl start/stop).
  void CeCollective(const char* func, std::size_t count, const char* datatype, std::uint64_t seq);

  // The user-thread side of Collective() in two halves: NCCL's API/group events and the Coll
  // start (BeginCollective), then the Coll and group stops (EndCollective). Proxy-side events for
  // the returned op may come from any thread in between or after.
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
  // KernelCh start with the channel's GPU start time, then KernelChStop state + stop at its end.
  void* KernelChannelStart(const EnqueuedOp& op, int channel, std::uint64_t gpu_start_ns);
  void KernelChannelStop(void* handle, std::uint64_t gpu_stop_ns);
  // ProxyOp start (and its "in progress" state), then ProxySteps: start, states (NCCL's
  // abi::kProxyStep* values, each closing the previous one in the plugin's clock), stop.
  void* ProxyOpStart(const EnqueuedOp& op, const ProxyOpSpec& spec);
  // The ProxyOp start alone: what NCCL does for the ops of transports it never progresses.
  void* ProxyOpStartOnly(const EnqueuedOp& op, const ProxyOpSpec& spec);
  // One net-plugin event (IB descriptor) for a step, when spec.qp_num != 0 and the mask has it.
  void NetPluginEvent(const EnqueuedOp& op, void* step, const ProxyOpSpec& spec);
  void ProxyOpStop(void* handle);
  void* ProxyStepStart(const EnqueuedOp& op, void* proxy_op, const ProxyOpSpec& spec, int step);
  void ProxyStepState(void* step, int state, std::size_t trans_bytes);
  void ProxyStepStop(void* step);

  ReplayProcess& process() { return process_; }
  ProxyThread* proxy() { return proxy_; }

 private:
  int Start(void** handle, abi::EventDescrV6& d);
  void StopIf(void* handle);
  EnqueuedOp EnqueueTask(abi::EventDescrV6 task, std::uint8_t channels, int snapshot,
                         void* api_handle);

  PlanLaunch LaunchPlan(const std::vector<GroupTask>& tasks, const std::vector<int>& masks,
                        const std::vector<void*>& api_handles, bool persistent,
                        const Upload& upload);
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
  void* context_ = nullptr;
  bool initialized_ = false;
};

// The NCCL event bits a snapshot makes NCCL emit for each kind (src/plugin/profiler.cc).
bool EmitsTask(int snapshot, bool p2p);
bool EmitsKernelCh(int snapshot);
bool EmitsProxyOp(int snapshot);
bool EmitsProxyStep(int snapshot);
bool EmitsNetPlugin(int snapshot);

// Host CLOCK_REALTIME in ns.
std::uint64_t RealtimeNs();

}  // namespace ncclscope::replay
