// ReplayComm's groups and plans: the API calls of a group (each with its own mask copy), CUDA
// graph capture and launch, and the plan launch itself: NCCL's plan order, the Group and
// Coll/P2p events each version emits, the channels each task's KernelCh run on, and seqNumbers.

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "tools/replay/nccl_replay.h"
#include "tools/replay/replay_internal.h"

namespace ncclscope::replay {
namespace {

constexpr int kMaxChannels = 64;  // MAXCHANNELS in 2.27-2.30

}  // namespace

std::uint64_t ReplayComm::NextSeq(const char* func) const {
  const auto it = seq_numbers_.find(func);
  return it == seq_numbers_.end() ? 0 : it->second;
}

void* ReplayComm::ApiCall(const GroupTask& task, int snapshot, bool graph_captured,
                          bool first_in_group, void** group_api) {
  const int version = process_.version();
  if (version < 5) return nullptr;  // 2.23-2.27 have no API events
  abi::EventDescrV7 d{};
  abi::StateArgsV6 no_args{};
  // GroupApi only for the outermost call of a group (src/plugin/profiler.cc:221-227).
  if (first_in_group && (snapshot & kGroupApiMask) != 0) {
    std::memset(&d, 0, sizeof(d));
    d.type = abi::kGroupApi;
    d.rank = rank_;
    d.groupApi.graphCaptured = graph_captured;
    d.groupApi.groupDepth = 1;
    Start(group_api, d);
    if (*group_api != nullptr) {
      process_.plugin().Record(version, *group_api, abi::kGroupStartApiStop, &no_args);
    }
  }
  void* api = nullptr;
  std::memset(&d, 0, sizeof(d));
  d.parentObj = *group_api;
  d.rank = rank_;
  if (task.p2p && (snapshot & kP2pApiMask) != 0) {
    d.type = abi::kP2pApi;  // src/plugin/profiler.cc:258-272
    d.p2pApi.func = task.send_recv.func;
    d.p2pApi.count = task.send_recv.count;
    d.p2pApi.datatype = task.send_recv.datatype;
    d.p2pApi.graphCaptured = graph_captured;
    if (version >= 7) d.p2pApi.userTag = task.send_recv.user_tag;  // :430 at 2.31.2
    Start(&api, d);
  } else if (!task.p2p && (snapshot & kCollApiMask) != 0) {
    d.type = abi::kCollApi;  // src/plugin/profiler.cc:282-297
    d.collApi.func = task.coll.func;
    d.collApi.count = task.coll.count;
    d.collApi.datatype = task.coll.datatype;
    d.collApi.root = task.coll.root;
    d.collApi.graphCaptured = graph_captured;
    if (version >= 7) d.collApi.userTag = task.coll.user_tag;  // :463 at 2.31.2
    Start(&api, d);
  }
  StopIf(api);  // the API event ends when the call returns (src/enqueue.cc:2449/2493)
  return api;
}

PlanLaunch ReplayComm::Group(const std::vector<GroupTask>& tasks, ProxyThread* host_callback,
                             const Upload& upload, const std::function<void()>& before_launch) {
  std::vector<int> masks;
  std::vector<void*> apis;
  void* group_api = nullptr;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const int snapshot = process_.MaskSnapshot();  // each call takes its own copy
    if (on_mask_read_) on_mask_read_();
    masks.push_back(snapshot);
    apis.push_back(ApiCall(tasks[i], snapshot, false, i == 0, &group_api));
  }
  if (before_launch) before_launch();
  abi::StateArgsV6 no_args{};
  if (group_api != nullptr) {  // ncclGroupEnd (src/group.cc:666)
    process_.plugin().Record(process_.version(), group_api, abi::kGroupEndApiStart, &no_args);
  }
  PlanLaunch plan;
  if (host_callback != nullptr) {
    host_callback->Post([&] { plan = LaunchPlan(tasks, masks, apis, false, upload); });
    host_callback->Drain();
  } else {
    plan = LaunchPlan(tasks, masks, apis, false, upload);
  }
  StopIf(group_api);  // src/group.cc:754
  return plan;
}

CapturedGraph ReplayComm::CaptureGraph(const std::vector<GroupTask>& tasks) {
  CapturedGraph graph;
  graph.tasks = tasks;
  void* group_api = nullptr;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const int snapshot = process_.MaskSnapshot();
    if (on_mask_read_) on_mask_read_();
    graph.masks.push_back(snapshot);
    graph.api_handles.push_back(ApiCall(tasks[i], snapshot, true, i == 0, &group_api));
  }
  abi::StateArgsV6 no_args{};
  if (group_api != nullptr) {
    process_.plugin().Record(process_.version(), group_api, abi::kGroupEndApiStart, &no_args);
  }
  StopIf(group_api);
  return graph;
}

PlanLaunch ReplayComm::LaunchGraph(const CapturedGraph& graph, ProxyThread* host_callback,
                                   const Upload& upload) {
  // A persistent plan's task events run from the host callback captured into the graph, at every
  // launch, with the tasks' capture-time parents and masks (src/enqueue.cc:1520-1532, 1307-1315).
  PlanLaunch plan;
  if (host_callback != nullptr) {
    host_callback->Post(
        [&] { plan = LaunchPlan(graph.tasks, graph.masks, graph.api_handles, true, upload); });
    host_callback->Drain();
  } else {
    plan = LaunchPlan(graph.tasks, graph.masks, graph.api_handles, true, upload);
  }
  return plan;
}

// What LaunchPlan carries from task to task.
struct PlanBuild {
  int version = 0;
  bool persistent = false;
  bool host_task = true;
  bool sym_plan = false;
  void* group = nullptr;
  int channel_cursor = 0;
  int p2p_cursor = 0;
};

namespace {

// NCCL's plan order (ncclPrepareTasks, src/enqueue.cc:348-438): collectives come out of the
// sorter size-descending, are binned by (func, op, type) in the order of each bin's first task,
// each bin size-ascending (LIFO), CollNet bins after the others; p2p tasks follow the
// collectives (src/plugin/profiler.cc:395-449). Simplified: one plan (NCCL splits a group into
// several plans when its work budget is full), the reduction op is not modeled, and channels are
// handed out as contiguous ranges in plan order (NCCL balances them by traffic and neighbours
// may share a boundary channel).
std::vector<std::size_t> PlanOrder(const std::vector<GroupTask>& tasks) {
  std::vector<std::size_t> colls;
  std::vector<std::size_t> p2ps;
  for (std::size_t i = 0; i < tasks.size(); ++i) (tasks[i].p2p ? p2ps : colls).push_back(i);
  std::stable_sort(colls.begin(), colls.end(), [&](std::size_t a, std::size_t b) {
    return tasks[a].coll.count * DatatypeBytes(tasks[a].coll.datatype) >
           tasks[b].coll.count * DatatypeBytes(tasks[b].coll.datatype);
  });
  std::vector<std::vector<std::size_t>> bins;
  std::vector<std::string> bin_keys;
  for (std::size_t i : colls) {
    const std::string key = std::string(tasks[i].coll.func) + "/" + tasks[i].coll.datatype +
                            (IsCollNetAlgo(tasks[i].coll.algo) ? "/collnet" : "");
    std::size_t b = 0;
    while (b < bin_keys.size() && bin_keys[b] != key) ++b;
    if (b == bin_keys.size()) {
      bin_keys.push_back(key);
      bins.emplace_back();
    }
    bins[b].insert(bins[b].begin(), i);  // LIFO: size ascending within the bin
  }
  std::vector<std::size_t> order;
  for (int collnet = 0; collnet <= 1; ++collnet) {
    for (std::size_t b = 0; b < bins.size(); ++b) {
      if ((bin_keys[b].find("/collnet") != std::string::npos) != (collnet == 1)) continue;
      order.insert(order.end(), bins[b].begin(), bins[b].end());
    }
  }
  order.insert(order.end(), p2ps.begin(), p2ps.end());
  return order;
}

// Before 2.27 a CUDA-graph launch runs hostStreamPlanTask only for a plan with proxy ops
// (src/enqueue.cc:1580-1597 at v2.23.4-1, :1442-1456 at v2.26.6-1): network peers, or (2.26)
// KernelCh in a capture-time mask, which adds profiler proxy ops (src/enqueue.cc:210 at
// v2.26.6-1). Simplified: nnodes > 1 stands for "has network proxy ops".
bool RunsHostTask(int version, bool persistent, int nnodes, const std::vector<int>& masks) {
  bool host_task = true;
  if (persistent && version <= 3) {
    host_task = nnodes > 1;
    if (version == 3) {
      for (int m : masks) host_task = host_task || (m & abi::kKernelCh) != 0;
    }
  }
  return host_task;
}

// The channels a collective's KernelCh run on.
void CollChannels(PlanBuild& b, const CollSpec& c, bool head, PlannedOp* op) {
  const int kernel = !c.kernel_events ? 0 : c.kernel_channels >= 0 ? c.kernel_channels : c.channels;
  if (op->symmetric) {
    // KernelCh only for the head task, on blocks 0..n-1 (src/plugin/profiler.cc:1280-1292 at
    // 2.31.2), and none under graph capture: the clean kernel runs (:1271, :1286).
    if (head && !b.persistent) {
      for (int k = 0; k < kernel; ++k) op->channel_ids.push_back(k);
    }
  } else if (op->collnet) {
    for (int k = 0; k < kernel; ++k) op->channel_ids.push_back(k);  // src/enqueue.cc:579-580
  } else {
    for (int k = 0; k < kernel; ++k)
      op->channel_ids.push_back((b.channel_cursor + k) % kMaxChannels);
    b.channel_cursor = (b.channel_cursor + c.channels) % kMaxChannels;
  }
}

// The Coll descriptor (src/plugin/profiler.cc:398-417).
void CollDescr(const PlanBuild& b, const GroupTask& task, bool head, int mask, std::size_t count,
               const char* datatype, std::uint64_t seq, const PlannedOp& op,
               abi::EventDescrV7* out) {
  const int version = b.version;
  const CollSpec& c = task.coll;
  abi::EventDescrV7& d = *out;
  d.type = abi::kColl;
  d.coll.parentGroup = b.group;
  d.coll.seqNumber = task.seq >= 0 ? static_cast<std::uint64_t>(task.seq) : seq;
  d.coll.func = c.func;
  d.coll.count = count;
  d.coll.root = c.root;
  d.coll.datatype = datatype;
  // CollNet tasks announce no channels from 2.27 on (task->nChannels, src/enqueue.cc:638);
  // 2.23-2.26 hand nMaxChannels, the count CollNet uses (src/enqueue.cc:763 at v2.23.4-1).
  d.coll.nChannels = op.collnet && version >= 4 ? 0 : c.channels;
  d.coll.nWarps = c.warps;
  d.coll.algo = c.algo;
  d.coll.proto = c.proto;
  if (version >= 7) {
    d.coll.userTag = c.user_tag;  // src/plugin/profiler.cc:620 at 2.31.2
    if (op.symmetric) {
      // :600-614 at 2.31.2: the variant, algo = its part after the first '_', proto "";
      // nChannels: the plan's channels on the head task with KernelCh, else ct->nChannels,
      // which is 0 for a sym task.
      const char* variant = c.kernel_variant != nullptr ? c.kernel_variant : "Unknown";
      const char* underscore = std::strchr(variant, '_');
      d.coll.isSymColl = true;
      d.coll.kernelVariant = variant;
      d.coll.algo = underscore != nullptr ? underscore + 1 : variant;
      d.coll.proto = "";
      d.coll.nChannels = head && (mask & abi::kKernelCh) != 0 ? c.channels : 0;
    }
  }
}

}  // namespace

void ReplayComm::PlanColl(PlanBuild& b, const GroupTask& task, bool head, int mask, bool task_event,
                          void* api_handle, PlannedOp* op, abi::EventDescrV7* d) {
  const int version = b.version;
  const CollSpec& c = task.coll;
  op->collnet = IsCollNetAlgo(c.algo);
  op->symmetric = b.sym_plan && c.symmetric;
  CollChannels(b, c, head, op);
  std::size_t count = c.count;
  const char* datatype = c.datatype;
  if (IsAllGatherOrBroadcast(c.func)) {  // src/enqueue.cc:2476-2480
    count = c.count * DatatypeBytes(c.datatype);
    datatype = "ncclInt8";
  }
  op->bytes = count * DatatypeBytes(datatype);
  std::uint64_t& seq = seq_numbers_[c.func];
  if (task_event) {  // src/plugin/profiler.cc:398-417
    CollDescr(b, task, head, mask, count, datatype, seq, *op, d);
    Start(&op->handle, *d);
  }
  if (version <= 2) {
    // seqNumber = comm->seqNumber[func]++ inside the Coll start (src/misc/profiler.cc:281 at
    // v2.23.4-1, :393 at v2.24.3-1): it advances only with a Coll event.
    if (task_event) ++seq;
  } else if (b.host_task && (!b.persistent || ((b.group != nullptr || api_handle != nullptr) &&
                                               (mask & abi::kKernelCh) != 0))) {
    // Every eager collective counts; graph-captured ones only with KernelCh in their mask
    // (src/plugin/profiler.cc:425-427; :259-267 at v2.26.6-1, which needs the Group handle).
    ++seq;
  }
}

void ReplayComm::PlanP2p(PlanBuild& b, const GroupTask& task, bool task_event, PlannedOp* op,
                         abi::EventDescrV7* out) {
  const int version = b.version;
  abi::EventDescrV7& d = *out;
  const P2pSpec& p = task.send_recv;
  op->peer = p.peer;
  op->send = std::strcmp(p.func, "Send") == 0;
  op->self = p.peer == rank_;  // nProxyOps = selfSend ? 0 : 2 (src/enqueue.cc:805)
  op->bytes = p.count * DatatypeBytes(p.datatype);
  for (int k = 0; k < p.channels; ++k) op->channel_ids.push_back((b.p2p_cursor + k) % kMaxChannels);
  b.p2p_cursor = (b.p2p_cursor + p.channels) % kMaxChannels;
  if (task_event) {  // src/plugin/profiler.cc:433-447
    d.type = abi::kP2p;
    d.p2p.parentGroup = b.group;
    d.p2p.func = p.func;
    d.p2p.count = p.count;
    d.p2p.datatype = p.datatype;
    d.p2p.peer = p.peer;
    d.p2p.nChannels = p.channels;  // 2.31: popcount(channelMask) with KernelCh (:644-645)
    if (version >= 7) d.p2p.userTag = p.user_tag;  // :658 at 2.31.2
    Start(&op->handle, d);
  }
}

PlanLaunch ReplayComm::LaunchPlan(const std::vector<GroupTask>& tasks,
                                  const std::vector<int>& masks,
                                  const std::vector<void*>& api_handles, bool persistent,
                                  const Upload& upload) {
  const int version = process_.version();
  const std::vector<std::size_t> order = PlanOrder(tasks);
  PlanLaunch plan;
  PlanBuild b;
  b.version = version;
  b.persistent = persistent;
  b.host_task = RunsHostTask(version, persistent, nnodes_, masks);
  const bool host_task = b.host_task;
  // 2.23-2.25 read the mask once per plan, at Group start: the live value, at every graph launch
  // too (src/misc/profiler.cc:247 at v2.23.4-1, :359 at v2.24.3-1); 2.26+ use the tasks' copies.
  const bool plan_snapshot = version <= 2;
  const int snapshot = plan_snapshot && host_task ? process_.MaskSnapshot() : 0;
  // The Group event follows the first task with a non-zero mask (src/plugin/profiler.cc:350-378;
  // :187-215 at v2.26.6-1).
  int first_mask = 0;
  for (std::size_t i : order) {
    if (masks[i] != 0) {
      first_mask = masks[i];
      break;
    }
  }
  if (plan_snapshot) first_mask = snapshot;
  if (host_task && (first_mask & GroupGate(version)) != 0) {
    abi::EventDescrV7 d{};
    std::memset(&d, 0, sizeof(d));
    d.type = abi::kGroup;
    Start(&plan.group, d);
  }
  b.group = plan.group;
  // v7 symmetric collectives: the plan is a sym plan when its head (first) collective is one;
  // the other versions replay a symmetric task as a regular collective (2.28 emits no event for
  // it at all, which the replay does not model).
  b.sym_plan = version >= 7 && !order.empty() && !tasks[order.front()].p2p &&
               tasks[order.front()].coll.symmetric;
  std::vector<bool> started;  // the task's startEvent was called (v1/v2 stop it unchecked)
  for (std::size_t i : order) {
    const GroupTask& task = tasks[i];
    const int mask = plan_snapshot ? snapshot : masks[i];
    PlannedOp op;
    op.mask = host_task ? mask : 0;
    op.p2p = task.p2p;
    op.proxy_never_stopped = task.proxy_never_stopped;
    abi::EventDescrV7 d{};
    std::memset(&d, 0, sizeof(d));
    d.rank = rank_;
    d.parentObj = version >= 5 ? api_handles[i] : plan.group;
    // 2.23-2.26 start task events only under a Group handle (src/misc/profiler.cc:272 at
    // v2.23.4-1, src/plugin/profiler.cc:235, :271 at v2.26.6-1).
    const bool under_group = version >= 4 || plan.group != nullptr;
    const bool task_event = host_task && under_group && (mask & TaskGate(version, task.p2p)) != 0;
    // 2.23-2.25 copy the plan's snapshot into a task only when its event was started
    // (src/misc/profiler.cc:299,318 at v2.23.4-1): the proxy side of the others is silent.
    if (plan_snapshot && !task_event) op.mask = 0;
    if (!task.p2p) {
      PlanColl(b, task, i == order.front(), mask, task_event, api_handles[i], &op, &d);
    } else {
      PlanP2p(b, task, task_event, &op, &d);
    }
    started.push_back(task_event);
    plan.ops.push_back(std::move(op));
  }
  // The proxy upload happens here in NCCL, before the stops (src/enqueue.cc:1310-1313): the
  // proxy side may run concurrently with what follows.
  if (upload) upload(plan);
  for (std::size_t k = 0; k < plan.ops.size(); ++k) {  // src/plugin/profiler.cc:455-470
    // 2.23-2.25 stop every started task without a NULL check (src/misc/profiler.cc:334,339 at
    // v2.23.4-1, :443,448 at v2.24.3-1).
    if (version <= 2 && started[k]) {
      process_.plugin().Stop(version, plan.ops[k].handle);
    } else {
      StopIf(plan.ops[k].handle);
    }
  }
  StopIf(plan.group);
  return plan;
}

}  // namespace ncclscope::replay
