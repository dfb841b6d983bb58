// ReplayComm, the user thread's side: a communicator's init and finalize, the descriptors it hands
// the plugin (with the v1-v3 legacy members), and the one-call paths (Collective, P2pGroup,
// AllToAll, CeCollective) with their Begin/End halves. Groups and plans are in plan.cc, the proxy
// side in proxy_side.cc.

#include <cstring>
#include <string>
#include <vector>

#include "tools/replay/nccl_replay.h"
#include "tools/replay/replay_internal.h"

namespace ncclscope::replay {

ReplayComm::ReplayComm(ReplayProcess& process, std::uint64_t comm_id, std::string name, int nnodes,
                       int nranks, int rank, ProxyThread* proxy, ProxyThread* profiler_thread)
    : process_(process),
      comm_id_(comm_id),
      name_(std::move(name)),
      nnodes_(nnodes),
      nranks_(nranks),
      rank_(rank),
      proxy_(proxy),
      profiler_thread_(profiler_thread) {}

ReplayComm::~ReplayComm() { Finalize(); }

bool ReplayComm::Init() {
  const int rc =
      process_.plugin().Init(process_.version(), &context_, comm_id_, ReplayProcess::mask(),
                             name_.empty() ? nullptr : name_.c_str(), nnodes_, nranks_, rank_);
  initialized_ = rc == 0;
  if (process_.version() >= 7) {
    // 2.31.2 after the plugin's init: KernelPhase implies KernelCh (src/plugin/profiler.cc:343-344;
    // the replay's plugin is always loaded), then a RAS override is written back over whatever
    // init wrote (:349-354).
    int* mask = ReplayProcess::mask();
    __atomic_store_n(mask, EnforceMaskDeps(__atomic_load_n(mask, __ATOMIC_RELAXED)),
                     __ATOMIC_RELAXED);
    int ras = 0;
    if (ReplayProcess::RasOverride(&ras)) __atomic_store_n(mask, ras, __ATOMIC_RELAXED);
  }
  return rc == 0 && context_ != nullptr;
}

void ReplayComm::Finalize() {
  if (!initialized_) return;
  if (proxy_ != nullptr) proxy_->Drain();
  if (profiler_thread_ != nullptr) profiler_thread_->Drain();
  // 2.28+ call finalize only for a non-NULL context (src/plugin/profiler.cc:203); 2.23-2.27 for
  // any (src/misc/profiler.cc:235-237 at v2.23.4-1, src/plugin/profiler.cc:177-179 at v2.26.6-1,
  // :182-184 at v2.27.7-1).
  if (context_ != nullptr || process_.version() <= 4) {
    process_.plugin().Finalize(process_.version(), context_);
  }
  initialized_ = false;
}

LegacyFields ReplayComm::Legacy(const abi::EventDescrV7& d) const {
  LegacyFields legacy;
  legacy.comm_hash = comm_id_;  // comm->commHash, equal on all ranks
  legacy.nnodes = nnodes_;
  if (d.type == abi::kColl && d.coll.func != nullptr && d.coll.datatype != nullptr) {
    // t->trafficBytes = count * elementSize * ncclFuncTrafficPerByte(func, nRanks), after the
    // AllGather/Broadcast bytes conversion (src/enqueue.cc:58-65, 2278-2284 at v2.23.4-1).
    std::size_t per_byte = 1;
    if (std::strcmp(d.coll.func, "AllReduce") == 0) per_byte = 2;
    if (std::strcmp(d.coll.func, "AllGather") == 0 ||
        std::strcmp(d.coll.func, "ReduceScatter") == 0) {
      per_byte = static_cast<std::size_t>(nranks_);
    }
    legacy.traffic_bytes = d.coll.count * DatatypeBytes(d.coll.datatype) * per_byte;
  }
  return legacy;
}

int ReplayComm::Start(void** handle, abi::EventDescrV7& d) {
  *handle = nullptr;
  return process_.plugin().Start(process_.version(), context_, handle, d, Legacy(d));
}

void ReplayComm::StopIf(void* handle) {
  if (handle != nullptr) process_.plugin().Stop(process_.version(), handle);
}

EnqueuedOp ReplayComm::EnqueueTask(abi::EventDescrV7 task, std::uint8_t channels, int snapshot,
                                   void* api_handle) {
  EnqueuedOp op;
  op.mask = snapshot;
  op.channels = channels;
  if ((snapshot & TaskGate(process_.version(), task.type == abi::kP2p)) == 0) return op;
  task.parentObj = process_.version() >= 5 ? api_handle : nullptr;  // v4: set by caller
  Start(&op.handle, task);
  return op;
}

// The Coll task's descriptor as NCCL fills it for `spec` (parent and group set by the caller):
// AllGather and Broadcast report bytes as ncclInt8 (src/enqueue.cc:2476-2480).
abi::EventDescrV7 ReplayComm::CollTask(const CollSpec& spec, std::uint64_t seq) const {
  abi::EventDescrV7 d{};
  std::memset(&d, 0, sizeof(d));
  d.type = abi::kColl;
  d.rank = rank_;
  d.coll.seqNumber = seq;
  d.coll.func = spec.func;
  d.coll.count = spec.count;
  d.coll.root = spec.root;
  d.coll.datatype = spec.datatype;
  if (IsAllGatherOrBroadcast(spec.func)) {
    d.coll.count = spec.count * DatatypeBytes(spec.datatype);
    d.coll.datatype = "ncclInt8";
  }
  d.coll.nChannels = spec.channels;
  d.coll.nWarps = spec.warps;
  d.coll.algo = spec.algo;
  d.coll.proto = spec.proto;
  if (process_.version() >= 7) d.coll.userTag = spec.user_tag;
  return d;
}

EnqueuedOp ReplayComm::StartColl(const CollSpec& spec, std::uint64_t seq) {
  return EnqueueTask(CollTask(spec, seq), spec.channels, process_.MaskSnapshot(), nullptr);
}

void ReplayComm::StopTask(const EnqueuedOp& op) { StopIf(op.handle); }

CollectiveEnqueue ReplayComm::BeginCollective(const CollSpec& spec, std::uint64_t seq) {
  const int version = process_.version();
  const int snapshot = process_.MaskSnapshot();
  CollectiveEnqueue e;
  // ncclAllReduce(...): an implicit group around one CollApi (v5+).
  void* coll_api = nullptr;
  abi::EventDescrV7 d{};
  if (version >= 5 && (snapshot & kGroupApiMask) != 0) {
    std::memset(&d, 0, sizeof(d));
    d.type = abi::kGroupApi;
    d.rank = rank_;
    d.groupApi.groupDepth = 1;
    Start(&e.group_api, d);
  }
  if (version >= 5 && (snapshot & kCollApiMask) != 0) {
    std::memset(&d, 0, sizeof(d));
    d.type = abi::kCollApi;
    d.parentObj = e.group_api;
    d.rank = rank_;
    d.collApi.func = spec.func;
    d.collApi.count = spec.count;
    d.collApi.datatype = spec.datatype;
    d.collApi.root = spec.root;
    if (version >= 7) d.collApi.userTag = spec.user_tag;
    Start(&coll_api, d);
  }
  StopIf(coll_api);
  // Plan launch: legacy Group, then the task events around the proxy upload. v1/v2 read the mask
  // here (one snapshot per plan); v1-v3 need the Group handle for the task events.
  if ((snapshot & GroupGate(version)) != 0) {
    std::memset(&d, 0, sizeof(d));
    d.type = abi::kGroup;
    Start(&e.group, d);
  }
  e.op.mask = snapshot;
  e.op.channels = spec.channels;
  const bool task_event =
      (version >= 4 || e.group != nullptr) && (snapshot & TaskGate(version, false)) != 0;
  if (version <= 2 && !task_event) e.op.mask = 0;  // the task gets the snapshot only with an event
  if (task_event) {
    d = CollTask(spec, seq);
    d.parentObj = version >= 5 ? coll_api : e.group;
    d.coll.parentGroup = e.group;
    Start(&e.op.handle, d);
  }
  return e;
}

void ReplayComm::EndCollective(const CollectiveEnqueue& enqueue) {
  StopIf(enqueue.op.handle);
  StopIf(enqueue.group);
  StopIf(enqueue.group_api);
}

namespace {

PlanTiming TimingOf(const GpuTimes& gpu, std::size_t ops) {
  PlanTiming t;
  t.base_ns = gpu.base;
  t.duration_ns.assign(ops, gpu.duration_ns);
  t.skew_ns = gpu.skew_ns;
  t.initial_sync_ns.assign(ops, gpu.initial_sync_ns);
  t.final_sync_ns.assign(ops, gpu.final_sync_ns);
  return t;
}

}  // namespace

void ReplayComm::Collective(const CollSpec& spec, std::uint64_t seq, const GpuTimes& gpu,
                            const ProxyPlan& proxy) {
  GroupTask task;
  task.coll = spec;
  task.seq = static_cast<std::int64_t>(seq);
  const PlanTiming timing = TimingOf(gpu, 1);
  Group({task}, nullptr, [&](const PlanLaunch& plan) { RunPlan(plan, timing, proxy); });
}

P2pEnqueue ReplayComm::BeginP2pGroup(const std::vector<P2pSpec>& tasks) {
  // ncclGroupStart(); per task ncclSend/ncclRecv, each taking its own mask copy; ncclGroupEnd().
  const int version = process_.version();
  P2pEnqueue e;
  abi::EventDescrV7 d{};
  abi::StateArgsV6 no_args{};
  std::vector<void*> api_handles;
  std::vector<int> masks;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    GroupTask task;
    task.p2p = true;
    task.send_recv = tasks[i];
    const int snapshot = process_.MaskSnapshot();
    masks.push_back(snapshot);
    api_handles.push_back(ApiCall(task, snapshot, false, i == 0, &e.group_api));
  }
  if (e.group_api != nullptr) {
    process_.plugin().Record(version, e.group_api, abi::kGroupEndApiStart, &no_args);
  }
  int first_mask = 0;
  for (int m : masks) {
    if (m != 0) {
      first_mask = m;
      break;
    }
  }
  if (version <= 2) {  // one snapshot per plan, at Group start (src/misc/profiler.cc:247)
    first_mask = process_.MaskSnapshot();
    for (int& m : masks) m = first_mask;
  }
  if ((first_mask & GroupGate(version)) != 0) {
    std::memset(&d, 0, sizeof(d));
    d.type = abi::kGroup;
    Start(&e.group, d);
  }
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const P2pSpec& task = tasks[i];
    EnqueuedOp op;
    op.mask = masks[i];
    op.channels = task.channels;
    op.self = task.peer == rank_;  // no proxy ops, no KernelCh (src/enqueue.cc:805)
    const bool task_event =
        (version >= 4 || e.group != nullptr) && (op.mask & TaskGate(version, true)) != 0;
    if (version <= 2 && !task_event) op.mask = 0;
    if (task_event) {
      std::memset(&d, 0, sizeof(d));
      d.type = abi::kP2p;
      d.parentObj = version >= 5 ? api_handles[i] : e.group;
      d.rank = rank_;
      d.p2p.func = task.func;
      d.p2p.count = task.count;
      d.p2p.datatype = task.datatype;
      d.p2p.peer = task.peer;
      d.p2p.nChannels = task.channels;
      d.p2p.parentGroup = e.group;
      if (version >= 7) d.p2p.userTag = task.user_tag;
      Start(&op.handle, d);
    }
    e.ops.push_back(op);
  }
  return e;
}

void ReplayComm::EndP2pGroup(const P2pEnqueue& enqueue) {
  for (const EnqueuedOp& op : enqueue.ops) StopIf(op.handle);
  StopIf(enqueue.group);
  StopIf(enqueue.group_api);
}

void ReplayComm::P2pGroup(const std::vector<P2pSpec>& tasks, const GpuTimes& gpu,
                          const ProxyPlan& proxy) {
  std::vector<GroupTask> group;
  for (const P2pSpec& spec : tasks) {
    GroupTask task;
    task.p2p = true;
    task.send_recv = spec;
    group.push_back(task);
  }
  const PlanTiming timing = TimingOf(gpu, group.size());
  Group(group, nullptr, [&](const PlanLaunch& plan) { RunPlan(plan, timing, proxy); });
}

void ReplayComm::AllToAll(std::size_t count_per_peer, const char* datatype, const GpuTimes& gpu,
                          const ProxyPlan& proxy) {
  // ncclAlltoAll appends a Send and a Recv per peer, this rank included (src/enqueue.cc:2585-2589).
  std::vector<P2pSpec> tasks;
  for (int peer = 0; peer < nranks_; ++peer) {
    tasks.push_back({"Send", count_per_peer, datatype, peer, 1});
    tasks.push_back({"Recv", count_per_peer, datatype, peer, 1});
  }
  P2pGroup(tasks, gpu, proxy);
}

void ReplayComm::CeCollective(const char* func, std::size_t count, const char* datatype,
                              std::uint64_t seq, std::uint64_t user_tag) {
  const int snapshot = process_.MaskSnapshot();
  if ((snapshot & (abi::kCeColl | abi::kCeSync | abi::kCeBatch)) == 0) return;
  abi::EventDescrV7 d{};
  std::memset(&d, 0, sizeof(d));
  d.type = abi::kCeColl;
  d.rank = rank_;
  d.ceColl.seqNumber = seq;
  d.ceColl.func = func;
  d.ceColl.count = count;
  d.ceColl.datatype = datatype;
  d.ceColl.syncStrategy = "UC";
  d.ceColl.ceSeqNum = static_cast<std::uint32_t>(seq);
  if (process_.version() >= 7) d.ceColl.userTag = user_tag;  // :1422 at 2.31.2
  void* h = nullptr;
  Start(&h, d);
  StopIf(h);
}

}  // namespace ncclscope::replay
