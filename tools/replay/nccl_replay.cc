#include "tools/replay/nccl_replay.h"

#include <dlfcn.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

namespace ncclscope::replay {
namespace {

constexpr int kGroupApiMask = abi::kGroupApi | abi::kP2pApi | abi::kCollApi | abi::kKernelLaunch |
                              abi::kGroup | abi::kColl | abi::kP2p | abi::kProxyOp |
                              abi::kProxyStep | abi::kKernelCh | abi::kNetPlugin | abi::kCeColl |
                              abi::kCeSync | abi::kCeBatch;
constexpr int kCollApiMask = abi::kCollApi | abi::kColl | abi::kProxyOp | abi::kProxyStep |
                             abi::kKernelCh | abi::kNetPlugin | abi::kCeColl | abi::kCeSync |
                             abi::kCeBatch;
constexpr int kP2pApiMask =
    abi::kP2pApi | abi::kP2p | abi::kProxyOp | abi::kProxyStep | abi::kKernelCh | abi::kNetPlugin;
constexpr int kGroupMask = abi::kGroup | abi::kColl | abi::kP2p | abi::kProxyOp | abi::kProxyStep |
                           abi::kKernelCh | abi::kNetPlugin;

// NCCL's debug logger; the plugin may call it from init/finalize.
__attribute__((format(printf, 5, 6))) void Logger(int /*level*/, unsigned long /*flags*/,
                                                  const char* /*file*/, int /*line*/,
                                                  const char* format, ...) {
  if (std::getenv("NCCLSCOPE_REPLAY_LOG") == nullptr) return;  // NOLINT(concurrency-mt-unsafe)
  va_list args;
  va_start(args, format);
  std::vfprintf(stderr, format, args);
  va_end(args);
  std::fputc('\n', stderr);
}

bool IsV5Event(std::uint64_t type) {
  return type == abi::kGroupApi || type == abi::kCollApi || type == abi::kP2pApi ||
         type == abi::kKernelLaunch;
}

bool IsAllGatherOrBroadcast(const char* func) {
  return std::strcmp(func, "AllGather") == 0 || std::strcmp(func, "Broadcast") == 0;
}

std::size_t DatatypeBytes(const char* datatype) {
  static const struct {
    const char* name;
    std::size_t bytes;
  } kSizes[] = {{"ncclInt8", 1},      {"ncclUint8", 1},    {"Unknown", 1},
                {"ncclInt32", 4},     {"ncclUint32", 4},   {"ncclInt64", 8},
                {"ncclUint64", 8},    {"ncclFloat16", 2},  {"ncclFloat32", 4},
                {"ncclFloat64", 8},   {"ncclBfloat16", 2}, {"ncclFloat8e4m3", 1},
                {"ncclFloat8e5m2", 1}};
  for (const auto& s : kSizes) {
    if (std::strcmp(s.name, datatype) == 0) return s.bytes;
  }
  return 1;
}

bool IsCollNetAlgo(const char* algo) {
  return std::strcmp(algo, "COLLNET_DIRECT") == 0 || std::strcmp(algo, "COLLNET_CHAIN") == 0;
}

bool IsV6Event(std::uint64_t type) {
  return type == abi::kCeColl || type == abi::kCeSync || type == abi::kCeBatch;
}

}  // namespace

int* ReplayProcess::mask() {
  static int nccl_profiler_event_mask = 0;
  return &nccl_profiler_event_mask;
}

std::uint64_t RealtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

bool EmitsTask(int snapshot, bool p2p) {
  const int wanted = (p2p ? abi::kP2p : abi::kColl) | abi::kProxyOp | abi::kProxyStep |
                     abi::kKernelCh | abi::kNetPlugin;
  return (snapshot & wanted) != 0;
}
bool EmitsKernelCh(int snapshot) { return (snapshot & abi::kKernelCh) != 0; }
bool EmitsProxyOp(int snapshot) {
  return (snapshot & (abi::kProxyOp | abi::kProxyStep | abi::kNetPlugin)) != 0;
}
bool EmitsProxyStep(int snapshot) { return (snapshot & (abi::kProxyStep | abi::kNetPlugin)) != 0; }
bool EmitsNetPlugin(int snapshot) { return (snapshot & abi::kNetPlugin) != 0; }

// ---- ProfilerPlugin ----

ProfilerPlugin::ProfilerPlugin(const std::string& path) {
  lib_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib_ == nullptr) {
    error_ = dlerror();
    return;
  }
  v4_ = static_cast<const abi::ProfilerV4*>(dlsym(lib_, "ncclProfiler_v4"));
  v5_ = static_cast<const abi::ProfilerV5*>(dlsym(lib_, "ncclProfiler_v5"));
  v6_ = static_cast<const abi::ProfilerV6*>(dlsym(lib_, "ncclProfiler_v6"));
}

ProfilerPlugin::~ProfilerPlugin() {
  if (lib_ != nullptr) dlclose(lib_);  // as NCCL does after the last communicator
}

bool ProfilerPlugin::Has(int version) const {
  return (version == 4 && v4_ != nullptr) || (version == 5 && v5_ != nullptr) ||
         (version == 6 && v6_ != nullptr);
}

const char* ProfilerPlugin::Name(int version) const {
  if (version == 4 && v4_ != nullptr) return v4_->name;
  if (version == 5 && v5_ != nullptr) return v5_->name;
  if (version == 6 && v6_ != nullptr) return v6_->name;
  return nullptr;
}

int ProfilerPlugin::Init(int version, void** context, std::uint64_t comm_id, int* mask,
                         const char* name, int nnodes, int nranks, int rank) const {
  switch (version) {
    case 4:
      return v4_->init(context, mask, name, comm_id, nnodes, nranks, rank, Logger);
    case 5:
      return v5_->init(context, comm_id, mask, name, nnodes, nranks, rank, Logger);
    default:
      return v6_->init(context, comm_id, mask, name, nnodes, nranks, rank, Logger);
  }
}

int ProfilerPlugin::Start(int version, void* context, void** handle,
                          const abi::EventDescrV6& d) const {
  // NCCL's adapters drop events an older plugin does not know (handle stays NULL).
  if (version == 6) return v6_->startEvent(context, handle, const_cast<abi::EventDescrV6*>(&d));
  if (IsV6Event(d.type)) {
    *handle = nullptr;
    return 0;
  }
  if (version == 5) {
    abi::EventDescrV5 v5{};
    static_assert(sizeof(v5) == sizeof(d));
    std::memcpy(&v5, &d, sizeof(v5));
    return v5_->startEvent(context, handle, &v5);
  }
  if (IsV5Event(d.type)) {
    *handle = nullptr;
    return 0;
  }
  abi::EventDescrV4 v4{};
  std::memset(&v4, 0, sizeof(v4));
  v4.type = static_cast<std::uint8_t>(d.type);
  v4.parentObj = d.parentObj;
  v4.rank = d.rank;
  switch (d.type) {
    case abi::kColl:
      v4.coll.seqNumber = d.coll.seqNumber;
      v4.coll.func = d.coll.func;
      v4.coll.sendBuff = d.coll.sendBuff;
      v4.coll.recvBuff = d.coll.recvBuff;
      v4.coll.count = d.coll.count;
      v4.coll.root = d.coll.root;
      v4.coll.datatype = d.coll.datatype;
      v4.coll.nChannels = d.coll.nChannels;
      v4.coll.nWarps = d.coll.nWarps;
      v4.coll.algo = d.coll.algo;
      v4.coll.proto = d.coll.proto;
      break;
    case abi::kP2p:
      v4.p2p.func = d.p2p.func;
      v4.p2p.buff = d.p2p.buff;
      v4.p2p.datatype = d.p2p.datatype;
      v4.p2p.count = d.p2p.count;
      v4.p2p.peer = d.p2p.peer;
      v4.p2p.nChannels = d.p2p.nChannels;
      break;
    case abi::kProxyOp:
      v4.proxyOp = d.proxyOp;
      break;
    case abi::kProxyStep:
      v4.proxyStep = d.proxyStep;
      break;
    case abi::kKernelCh:
      v4.kernelCh = d.kernelCh;
      break;
    case abi::kNetPlugin:
      v4.netPlugin = d.netPlugin;
      break;
    default:
      break;
  }
  return v4_->startEvent(context, handle, &v4);
}

int ProfilerPlugin::Stop(int version, void* handle) const {
  switch (version) {
    case 4:
      return v4_->stopEvent(handle);
    case 5:
      return v5_->stopEvent(handle);
    default:
      return v6_->stopEvent(handle);
  }
}

int ProfilerPlugin::Record(int version, void* handle, int state, abi::StateArgsV6* args) const {
  switch (version) {
    case 4:
      return v4_->recordEventState(handle, state, args);
    case 5:
      return v5_->recordEventState(handle, state, args);
    default:
      return v6_->recordEventState(handle, state, args);
  }
}

int ProfilerPlugin::Finalize(int version, void* context) const {
  switch (version) {
    case 4:
      return v4_->finalize(context);
    case 5:
      return v5_->finalize(context);
    default:
      return v6_->finalize(context);
  }
}

// ---- ProxyThread ----

ProxyThread::ProxyThread() : thread_([this] { Run(); }) {}

ProxyThread::~ProxyThread() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void ProxyThread::Post(std::function<void()> work) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(work));
  }
  cv_.notify_all();
}

void ProxyThread::Drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_cv_.wait(lock, [this] { return queue_.empty() && !busy_; });
}

void ProxyThread::Run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty() && stop_) return;
    std::function<void()> work = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    work();
    lock.lock();
    busy_ = false;
    if (queue_.empty()) idle_cv_.notify_all();
  }
}

// ---- ReplayComm ----

ReplayComm::ReplayComm(ReplayProcess& process, std::uint64_t comm_id, std::string name, int nnodes,
                       int nranks, int rank, ProxyThread* proxy)
    : process_(process),
      comm_id_(comm_id),
      name_(std::move(name)),
      nnodes_(nnodes),
      nranks_(nranks),
      rank_(rank),
      proxy_(proxy) {}

ReplayComm::~ReplayComm() { Finalize(); }

bool ReplayComm::Init() {
  const int rc =
      process_.plugin().Init(process_.version(), &context_, comm_id_, ReplayProcess::mask(),
                             name_.empty() ? nullptr : name_.c_str(), nnodes_, nranks_, rank_);
  initialized_ = rc == 0;
  return rc == 0 && context_ != nullptr;
}

void ReplayComm::Finalize() {
  if (!initialized_) return;
  if (proxy_ != nullptr) proxy_->Drain();
  // NCCL calls finalize only for a non-NULL context.
  if (context_ != nullptr) process_.plugin().Finalize(process_.version(), context_);
  initialized_ = false;
}

int ReplayComm::Start(void** handle, abi::EventDescrV6& d) {
  *handle = nullptr;
  return process_.plugin().Start(process_.version(), context_, handle, d);
}

void ReplayComm::StopIf(void* handle) {
  if (handle != nullptr) process_.plugin().Stop(process_.version(), handle);
}

EnqueuedOp ReplayComm::EnqueueTask(abi::EventDescrV6 task, std::uint8_t channels, int snapshot,
                                   void* api_handle) {
  EnqueuedOp op;
  op.mask = snapshot;
  op.channels = channels;
  if (!EmitsTask(snapshot, task.type == abi::kP2p)) return op;
  task.parentObj = process_.version() >= 5 ? api_handle : nullptr;  // v4: set by caller
  Start(&op.handle, task);
  return op;
}

EnqueuedOp ReplayComm::StartColl(const CollSpec& spec, std::uint64_t seq) {
  const int snapshot = process_.MaskSnapshot();
  abi::EventDescrV6 d{};
  std::memset(&d, 0, sizeof(d));
  d.type = abi::kColl;
  d.rank = rank_;
  d.coll.seqNumber = seq;
  d.coll.func = spec.func;
  d.coll.count = spec.count;
  d.coll.root = spec.root;
  d.coll.datatype = spec.datatype;
  d.coll.nChannels = spec.channels;
  d.coll.nWarps = spec.warps;
  d.coll.algo = spec.algo;
  d.coll.proto = spec.proto;
  return EnqueueTask(d, spec.channels, snapshot, nullptr);
}

void ReplayComm::StopTask(const EnqueuedOp& op) { StopIf(op.handle); }

void ReplayComm::KernelChannels(const EnqueuedOp& op, int channels, const GpuTimes& gpu) {
  if (!EmitsKernelCh(op.mask)) return;
  GpuTimes times = gpu;
  if (times.base == 0) times.base = RealtimeNs();
  std::vector<void*> handles(static_cast<std::size_t>(channels), nullptr);
  for (int c = 0; c < channels; ++c) {
    handles[static_cast<std::size_t>(c)] = KernelChannelStart(op, c, times.Start(c));
  }
  for (int c = 0; c < channels; ++c) {
    KernelChannelStop(handles[static_cast<std::size_t>(c)], times.Stop(c));
  }
}

void* ReplayComm::KernelChannelStart(const EnqueuedOp& op, int channel,
                                     std::uint64_t gpu_start_ns) {
  if (op.self || !EmitsKernelCh(op.mask)) return nullptr;
  abi::EventDescrV6 d{};
  std::memset(&d, 0, sizeof(d));
  d.type = abi::kKernelCh;
  d.parentObj = op.handle;
  d.kernelCh.channelId = static_cast<std::uint8_t>(channel);
  d.kernelCh.pTimer = gpu_start_ns;
  void* handle = nullptr;
  Start(&handle, d);
  return handle;
}

void ReplayComm::KernelChannelStop(void* handle, std::uint64_t gpu_stop_ns) {
  if (handle == nullptr) return;
  abi::StateArgsV6 args;
  args.kernelCh.pTimer = gpu_stop_ns;
  process_.plugin().Record(process_.version(), handle, abi::kKernelChStop, &args);
  process_.plugin().Stop(process_.version(), handle);
}

void* ReplayComm::ProxyOpStart(const EnqueuedOp& op, const ProxyOpSpec& spec) {
  void* handle = ProxyOpStartOnly(op, spec);
  if (handle != nullptr) {
    process_.plugin().Record(process_.version(), handle, abi::kProxyOpInProgress, nullptr);
  }
  return handle;
}

void ReplayComm::NetPluginEvent(const EnqueuedOp& op, void* step, const ProxyOpSpec& spec) {
  if (step == nullptr || spec.qp_num == 0 || !EmitsNetPlugin(op.mask)) return;
  // src/plugin/profiler.cc:687-712: parent = the step's handle; id = type << 16 | version.
  abi::NetIbDescrV1 descr{};
  descr.type = abi::kNetIbQpEvent;
  descr.qp.device = spec.ib_device;
  descr.qp.opcode = spec.send ? 4 /* IBV_WR_RDMA_WRITE_WITH_IMM */ : 0;
  descr.qp.qpNum = spec.qp_num;
  descr.qp.length = spec.chunk_bytes;
  abi::EventDescrV6 d{};
  std::memset(&d, 0, sizeof(d));
  d.type = abi::kNetPlugin;
  d.parentObj = step;
  d.rank = rank_;
  d.netPlugin.id = static_cast<std::int64_t>(abi::kNetPluginTypeIb << 16 | abi::kNetIbDescrVersion);
  d.netPlugin.data = &descr;
  void* context = spec.foreign_context != nullptr ? spec.foreign_context : context_;
  void* handle = nullptr;
  process_.plugin().Start(process_.version(), context, &handle, d);
  // Stopped when the work request completes (ncclIbTest, src/transport/net_ib.cc).
  if (handle != nullptr) process_.plugin().Stop(process_.version(), handle);
}

void* ReplayComm::ProxyOpStartOnly(const EnqueuedOp& op, const ProxyOpSpec& spec) {
  if (op.self || !EmitsProxyOp(op.mask)) return nullptr;
  abi::EventDescrV6 d{};
  std::memset(&d, 0, sizeof(d));
  d.type = abi::kProxyOp;
  d.parentObj = spec.foreign_parent != nullptr ? spec.foreign_parent : op.handle;
  d.rank = rank_;
  d.proxyOp.pid = spec.pid != 0 ? spec.pid : ::getpid();
  d.proxyOp.channelId = static_cast<std::uint8_t>(spec.channel);
  d.proxyOp.peer = spec.peer;
  d.proxyOp.nSteps = spec.steps;
  d.proxyOp.chunkSize = static_cast<int>(spec.chunk_bytes);
  d.proxyOp.isSend = spec.send ? 1 : 0;
  void* context = spec.foreign_context != nullptr ? spec.foreign_context : context_;
  void* handle = nullptr;
  process_.plugin().Start(process_.version(), context, &handle, d);
  return handle;
}

void ReplayComm::ProxyOpStop(void* handle) {
  if (handle != nullptr) process_.plugin().Stop(process_.version(), handle);
}

void* ReplayComm::ProxyStepStart(const EnqueuedOp& op, void* proxy_op, const ProxyOpSpec& spec,
                                 int step) {
  // NCCL checks sub->opEventHandle: no ProxyOp handle, no steps.
  if (proxy_op == nullptr || !EmitsProxyStep(op.mask)) return nullptr;
  abi::EventDescrV6 d{};
  std::memset(&d, 0, sizeof(d));
  d.type = abi::kProxyStep;
  d.parentObj = proxy_op;
  d.rank = rank_;
  d.proxyStep.step = step;
  void* context = spec.foreign_context != nullptr ? spec.foreign_context : context_;
  void* handle = nullptr;
  process_.plugin().Start(process_.version(), context, &handle, d);
  return handle;
}

void ReplayComm::ProxyStepState(void* step, int state, std::size_t trans_bytes) {
  if (step == nullptr) return;
  abi::StateArgsV6 args;
  args.proxyStep.transSize = trans_bytes;
  process_.plugin().Record(process_.version(), step, state, &args);
}

void ReplayComm::ProxyStepStop(void* step) {
  if (step != nullptr) process_.plugin().Stop(process_.version(), step);
}

void ReplayComm::ProxyWork(const EnqueuedOp& op, int channels, const ProxyPlan& proxy) {
  if (!proxy.enabled || !EmitsProxyOp(op.mask)) return;
  struct Sub {
    void* handle = nullptr;
    ProxyOpSpec spec;
  };
  std::vector<Sub> subs;
  for (int c = 0; c < channels; ++c) {
    for (int dir = 0; dir < 2; ++dir) {
      Sub sub;
      sub.spec.channel = c;
      sub.spec.send = dir == 1;
      sub.spec.peer = dir == 1 ? (rank_ + 1) % nranks_ : (rank_ + nranks_ - 1) % nranks_;
      sub.spec.steps = proxy.steps;
      sub.spec.chunk_bytes = proxy.step_bytes;
      sub.spec.pid = proxy.pid;
      sub.spec.foreign_parent = proxy.foreign_parent;
      sub.spec.foreign_context = proxy.foreign_context;
      sub.handle = ProxyOpStart(op, sub.spec);
      subs.push_back(sub);
    }
  }
  for (int step = 0; step < proxy.steps; ++step) {
    for (const Sub& sub : subs) {
      void* h = ProxyStepStart(op, sub.handle, sub.spec, step);
      if (h == nullptr) continue;
      const int states_send[] = {abi::kProxyStepSendGpuWait, abi::kProxyStepSendPeerWait,
                                 abi::kProxyStepSendWait};
      const int states_recv[] = {abi::kProxyStepRecvWait, abi::kProxyStepRecvFlushWait,
                                 abi::kProxyStepRecvGpuWait};
      for (int state : sub.spec.send ? states_send : states_recv) {
        ProxyStepState(h, state, proxy.step_bytes);
      }
      ProxyStepStop(h);
    }
  }
  for (const Sub& sub : subs) ProxyOpStop(sub.handle);
}

CollectiveEnqueue ReplayComm::BeginCollective(const CollSpec& spec, std::uint64_t seq) {
  const int version = process_.version();
  const int snapshot = process_.MaskSnapshot();
  CollectiveEnqueue e;
  // ncclAllReduce(...): an implicit group around one CollApi (v5+).
  void* coll_api = nullptr;
  abi::EventDescrV6 d{};
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
    Start(&coll_api, d);
  }
  StopIf(coll_api);
  // Plan launch: legacy Group, then the task events around the proxy upload.
  if ((snapshot & kGroupMask) != 0) {
    std::memset(&d, 0, sizeof(d));
    d.type = abi::kGroup;
    Start(&e.group, d);
  }
  e.op.mask = snapshot;
  e.op.channels = spec.channels;
  if (EmitsTask(snapshot, false)) {
    std::memset(&d, 0, sizeof(d));
    d.type = abi::kColl;
    d.parentObj = version >= 5 ? coll_api : e.group;
    d.rank = rank_;
    d.coll.seqNumber = seq;
    d.coll.func = spec.func;
    d.coll.count = spec.count;
    d.coll.root = spec.root;
    d.coll.datatype = spec.datatype;
    if (IsAllGatherOrBroadcast(spec.func)) {  // bytes and ncclInt8 (src/enqueue.cc:2476-2480)
      d.coll.count = spec.count * DatatypeBytes(spec.datatype);
      d.coll.datatype = "ncclInt8";
    }
    d.coll.nChannels = spec.channels;
    d.coll.nWarps = spec.warps;
    d.coll.algo = spec.algo;
    d.coll.proto = spec.proto;
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
  abi::EventDescrV6 d{};
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
  if ((first_mask & kGroupMask) != 0) {
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
    if (EmitsTask(op.mask, true)) {
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
                              std::uint64_t seq) {
  const int snapshot = process_.MaskSnapshot();
  if ((snapshot & (abi::kCeColl | abi::kCeSync | abi::kCeBatch)) == 0) return;
  abi::EventDescrV6 d{};
  std::memset(&d, 0, sizeof(d));
  d.type = abi::kCeColl;
  d.rank = rank_;
  d.ceColl.seqNumber = seq;
  d.ceColl.func = func;
  d.ceColl.count = count;
  d.ceColl.datatype = datatype;
  d.ceColl.syncStrategy = "UC";
  d.ceColl.ceSeqNum = static_cast<std::uint32_t>(seq);
  void* h = nullptr;
  Start(&h, d);
  StopIf(h);
}

}  // namespace ncclscope::replay

// ---- Groups and plans ----

namespace ncclscope::replay {
namespace {

constexpr int kMaxChannels = 64;  // MAXCHANNELS in 2.27-2.30
constexpr int kTaskEventMask = abi::kProxyOp | abi::kProxyStep | abi::kKernelCh | abi::kNetPlugin;

}  // namespace

std::uint64_t ReplayComm::NextSeq(const char* func) const {
  const auto it = seq_numbers_.find(func);
  return it == seq_numbers_.end() ? 0 : it->second;
}

void* ReplayComm::ApiCall(const GroupTask& task, int snapshot, bool graph_captured,
                          bool first_in_group, void** group_api) {
  const int version = process_.version();
  if (version < 5) return nullptr;  // 2.27 has no API events
  abi::EventDescrV6 d{};
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
    Start(&api, d);
  } else if (!task.p2p && (snapshot & kCollApiMask) != 0) {
    d.type = abi::kCollApi;  // src/plugin/profiler.cc:282-297
    d.collApi.func = task.coll.func;
    d.collApi.count = task.coll.count;
    d.collApi.datatype = task.coll.datatype;
    d.collApi.root = task.coll.root;
    d.collApi.graphCaptured = graph_captured;
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

PlanLaunch ReplayComm::LaunchPlan(const std::vector<GroupTask>& tasks,
                                  const std::vector<int>& masks,
                                  const std::vector<void*>& api_handles, bool persistent,
                                  const Upload& upload) {
  const int version = process_.version();
  // NCCL's plan order (ncclPrepareTasks, src/enqueue.cc:348-438): collectives come out of the
  // sorter size-descending, are binned by (func, op, type) in the order of each bin's first task,
  // each bin size-ascending (LIFO), CollNet bins after the others; p2p tasks follow the
  // collectives (src/plugin/profiler.cc:395-449). Simplified: one plan (NCCL splits a group into
  // several plans when its work budget is full), the reduction op is not modeled, and channels are
  // handed out as contiguous ranges in plan order (NCCL balances them by traffic and neighbours
  // may share a boundary channel).
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

  PlanLaunch plan;
  // The Group event follows the first task with a non-zero mask (src/plugin/profiler.cc:350-378).
  int first_mask = 0;
  for (std::size_t i : order) {
    if (masks[i] != 0) {
      first_mask = masks[i];
      break;
    }
  }
  abi::EventDescrV6 d{};
  if ((first_mask & kGroupMask) != 0) {
    std::memset(&d, 0, sizeof(d));
    d.type = abi::kGroup;
    Start(&plan.group, d);
  }
  int channel_cursor = 0;
  int p2p_cursor = 0;
  for (std::size_t i : order) {
    const GroupTask& task = tasks[i];
    const int mask = masks[i];
    PlannedOp op;
    op.mask = mask;
    op.p2p = task.p2p;
    op.proxy_never_stopped = task.proxy_never_stopped;
    std::memset(&d, 0, sizeof(d));
    d.rank = rank_;
    d.parentObj = version >= 5 ? api_handles[i] : plan.group;
    if (!task.p2p) {
      const CollSpec& c = task.coll;
      op.collnet = IsCollNetAlgo(c.algo);
      const int kernel = !c.kernel_events         ? 0
                         : c.kernel_channels >= 0 ? c.kernel_channels
                                                  : c.channels;
      if (op.collnet) {
        for (int k = 0; k < kernel; ++k) op.channel_ids.push_back(k);  // src/enqueue.cc:579-580
      } else {
        for (int k = 0; k < kernel; ++k)
          op.channel_ids.push_back((channel_cursor + k) % kMaxChannels);
        channel_cursor = (channel_cursor + c.channels) % kMaxChannels;
      }
      std::size_t count = c.count;
      const char* datatype = c.datatype;
      if (IsAllGatherOrBroadcast(c.func)) {  // src/enqueue.cc:2476-2480
        count = c.count * DatatypeBytes(c.datatype);
        datatype = "ncclInt8";
      }
      op.bytes = count * DatatypeBytes(datatype);
      std::uint64_t& seq = seq_numbers_[c.func];
      if ((mask & (abi::kColl | kTaskEventMask)) != 0) {  // src/plugin/profiler.cc:398-417
        d.type = abi::kColl;
        d.coll.parentGroup = plan.group;
        d.coll.seqNumber = task.seq >= 0 ? static_cast<std::uint64_t>(task.seq) : seq;
        d.coll.func = c.func;
        d.coll.count = count;
        d.coll.root = c.root;
        d.coll.datatype = datatype;
        d.coll.nChannels = op.collnet ? 0 : c.channels;
        d.coll.nWarps = c.warps;
        d.coll.algo = c.algo;
        d.coll.proto = c.proto;
        Start(&op.handle, d);
      }
      // seqNumber: graph-captured collectives count only with KernelCh in their mask
      // (src/plugin/profiler.cc:425-427).
      if (!persistent ||
          ((plan.group != nullptr || api_handles[i] != nullptr) && (mask & abi::kKernelCh) != 0)) {
        ++seq;
      }
    } else {
      const P2pSpec& p = task.send_recv;
      op.peer = p.peer;
      op.send = std::strcmp(p.func, "Send") == 0;
      op.self = p.peer == rank_;  // nProxyOps = selfSend ? 0 : 2 (src/enqueue.cc:805)
      op.bytes = p.count * DatatypeBytes(p.datatype);
      for (int k = 0; k < p.channels; ++k)
        op.channel_ids.push_back((p2p_cursor + k) % kMaxChannels);
      p2p_cursor = (p2p_cursor + p.channels) % kMaxChannels;
      if ((mask & (abi::kP2p | kTaskEventMask)) != 0) {  // src/plugin/profiler.cc:433-447
        d.type = abi::kP2p;
        d.p2p.parentGroup = plan.group;
        d.p2p.func = p.func;
        d.p2p.count = p.count;
        d.p2p.datatype = p.datatype;
        d.p2p.peer = p.peer;
        d.p2p.nChannels = p.channels;
        Start(&op.handle, d);
      }
    }
    plan.ops.push_back(std::move(op));
  }
  // The proxy upload happens here in NCCL, before the stops (src/enqueue.cc:1310-1313): the
  // proxy side may run concurrently with what follows.
  if (upload) upload(plan);
  for (const PlannedOp& op : plan.ops) StopIf(op.handle);  // src/plugin/profiler.cc:455-470
  StopIf(plan.group);
  return plan;
}

void ReplayComm::RunPlan(const PlanLaunch& plan, const PlanTiming& timing, const ProxyPlan& net) {
  auto work = [this, plan, timing, net] {
    struct Net {
      void* handle = nullptr;
      ProxyOpSpec spec;
      const PlannedOp* op = nullptr;
      EnqueuedOp enqueued;
    };
    std::vector<Net> nets;
    // ProxyOps at append, before the kernel runs (src/proxy.cc:427).
    for (const PlannedOp& op : plan.ops) {
      if (op.self || !EmitsProxyOp(op.mask)) continue;
      EnqueuedOp e{op.handle, op.mask, static_cast<std::uint8_t>(op.channel_ids.size())};
      const bool never_stopped = op.collnet || op.proxy_never_stopped;
      if (!never_stopped && !net.enabled) continue;
      for (int channel : op.channel_ids) {
        for (int dir = 0; dir < 2; ++dir) {
          const bool send = dir == 1;
          if (op.p2p && send != op.send) continue;  // a send task has send proxy ops only
          Net n;
          n.op = &op;
          n.enqueued = e;
          n.spec.channel = channel;
          n.spec.send = send && !never_stopped;  // isSend: network sends only
          n.spec.peer =
              op.p2p ? op.peer : (send ? (rank_ + 1) % nranks_ : (rank_ + nranks_ - 1) % nranks_);
          n.spec.steps = never_stopped ? 0 : net.steps;
          n.spec.chunk_bytes = net.step_bytes;
          n.spec.pid = net.pid;
          n.spec.foreign_parent = net.foreign_parent;
          n.spec.foreign_context = net.foreign_context;
          n.spec.ib_device = net.ib_device;
          n.spec.qp_num = net.qp_base != 0 ? net.qp_base + 2 * channel + dir : 0;
          n.handle = ProxyOpStartOnly(e, n.spec);
          if (!never_stopped) nets.push_back(n);
        }
      }
    }
    if (timing.first_kernel_delay_ms != 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(timing.first_kernel_delay_ms));
    }
    const std::uint64_t base = timing.base_ns != 0 ? timing.base_ns : RealtimeNs();
    struct Channel {
      void* handle = nullptr;
      std::uint64_t end = 0;
    };
    std::vector<Channel> channels;
    for (std::size_t i = 0; i < plan.ops.size(); ++i) {
      const PlannedOp& op = plan.ops[i];
      if (op.self) continue;
      const std::uint64_t duration = i < timing.duration_ns.size() ? timing.duration_ns[i] : 50'000;
      EnqueuedOp e{op.handle, op.mask, static_cast<std::uint8_t>(op.channel_ids.size())};
      for (std::size_t k = 0; k < op.channel_ids.size(); ++k) {
        const std::uint64_t start = base + k * timing.skew_ns;
        Channel ch;
        ch.handle = KernelChannelStart(e, op.channel_ids[k], start);
        ch.end = start + duration + k * timing.skew_ns;
        if (ch.handle != nullptr) channels.push_back(ch);
      }
    }
    // Network work while the kernel runs: in progress, steps (with net-plugin events), stop.
    for (Net& n : nets) {
      if (n.handle == nullptr) continue;
      process_.plugin().Record(process_.version(), n.handle, abi::kProxyOpInProgress, nullptr);
      for (int step = 0; step < n.spec.steps; ++step) {
        void* h = ProxyStepStart(n.enqueued, n.handle, n.spec, step);
        if (h == nullptr) continue;
        NetPluginEvent(n.enqueued, h, n.spec);
        const int states_send[] = {abi::kProxyStepSendGpuWait, abi::kProxyStepSendPeerWait,
                                   abi::kProxyStepSendWait};
        const int states_recv[] = {abi::kProxyStepRecvWait, abi::kProxyStepRecvFlushWait,
                                   abi::kProxyStepRecvGpuWait};
        for (int state : n.spec.send ? states_send : states_recv) {
          ProxyStepState(h, state, n.spec.chunk_bytes);
        }
        ProxyStepStop(h);
      }
      ProxyOpStop(n.handle);
    }
    // The channels end in the order of their GPU end times: a plan's ops finish out of order.
    std::stable_sort(channels.begin(), channels.end(),
                     [](const Channel& a, const Channel& b) { return a.end < b.end; });
    const auto wall_start = std::chrono::steady_clock::now();
    for (const Channel& ch : channels) {
      if (timing.real_time) {
        std::this_thread::sleep_until(wall_start + std::chrono::nanoseconds(ch.end - base));
      }
      KernelChannelStop(ch.handle, ch.end);
    }
  };
  if (proxy_ != nullptr) {
    proxy_->Post(work);
  } else {
    work();
  }
}

}  // namespace ncclscope::replay
