#pragma once

// A stand-in for NCCL that drives the real libnccl-profiler-ncclscope.so through its exported ABI,
// the way NCCL 2.27 (v4), 2.28 (v5) and 2.29+ (v6) call a profiler plugin: dlopen(RTLD_NOW |
// RTLD_LOCAL), dlsym("ncclProfiler_vN"), init per communicator with the process-global event-mask
// int, and per operation the event sequence of NCCL's enqueue path on the user thread (Group/API
// events, Coll/P2p start and stop around the proxy upload) and of its proxy thread (ProxyOp and
// ProxyStep with their states, KernelCh start / KernelChStop state / stop). What NCCL emits follows
// the mask snapshot taken at the API call, as NCCL does, so runtime mask changes by the plugin
// (duty cycles, agent controls) are exercised for real.
//
// GPU timestamps are synthetic but deterministic (see GpuTimes) so tests can check durations. The
// proxy-side pieces are also callable one by one (KernelChannelStart/Stop, ProxyOpStart,
// ProxyStep*) for callers that decide when each event happens: the workload simulator (tools/sim)
// emits them at the times its job model says, so the plugin's own clock measures the modeled step
// states.
//
// Used by the plugin's tests, its benchmark, tests/support/nccl-replay and ncclscope-sim.

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
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
  // KernelCh actually emitted (NCCL sometimes differs from nChannels); -1 = channels.
  int kernel_channels = -1;
};

struct P2pSpec {
  const char* func = "Send";
  std::size_t count = 1 << 16;
  const char* datatype = "ncclFloat32";
  int peer = 1;
  std::uint8_t channels = 2;
};

// Handles of one enqueued op, for tests that steer the proxy side themselves.
struct EnqueuedOp {
  void* handle = nullptr;  // Coll/P2p handle (nullptr when NCCL got none)
  int mask = 0;            // the snapshot NCCL used
  std::uint8_t channels = 0;
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

  ReplayProcess& process_;
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

// Host CLOCK_REALTIME in ns.
std::uint64_t RealtimeNs();

}  // namespace ncclscope::replay
