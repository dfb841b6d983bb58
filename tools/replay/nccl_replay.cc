#include "tools/replay/nccl_replay.h"

#include <dlfcn.h>
#include <time.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>

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
  if (!EmitsKernelCh(op.mask)) return nullptr;
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
  if (!EmitsProxyOp(op.mask)) return nullptr;
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
  if (handle != nullptr) {
    process_.plugin().Record(process_.version(), handle, abi::kProxyOpInProgress, nullptr);
  }
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

void ReplayComm::Collective(const CollSpec& spec, std::uint64_t seq, const GpuTimes& gpu,
                            const ProxyPlan& proxy) {
  const CollectiveEnqueue enqueue = BeginCollective(spec, seq);
  const int kernel_channels = spec.kernel_channels >= 0 ? spec.kernel_channels : spec.channels;
  const bool kernel = spec.kernel_events;
  auto work = [this, op = enqueue.op, kernel_channels, kernel, gpu, proxy,
               channels = spec.channels] {
    ProxyWork(op, channels, proxy);
    if (kernel) KernelChannels(op, kernel_channels, gpu);
  };
  // The proxy side runs concurrently with the Coll stop, as in NCCL.
  if (proxy_ != nullptr) proxy_->Post(work);
  EndCollective(enqueue);
  if (proxy_ == nullptr) work();
}

P2pEnqueue ReplayComm::BeginP2pGroup(const std::vector<P2pSpec>& tasks) {
  const int version = process_.version();
  const int snapshot = process_.MaskSnapshot();
  P2pEnqueue e;
  abi::EventDescrV6 d{};
  abi::StateArgsV6 no_args{};
  // ncclGroupStart(); per task ncclSend/ncclRecv; ncclGroupEnd().
  if (version >= 5 && (snapshot & kGroupApiMask) != 0) {
    std::memset(&d, 0, sizeof(d));
    d.type = abi::kGroupApi;
    d.rank = rank_;
    d.groupApi.groupDepth = 2;
    Start(&e.group_api, d);
    if (e.group_api != nullptr) {
      process_.plugin().Record(version, e.group_api, abi::kGroupStartApiStop, &no_args);
    }
  }
  std::vector<void*> api_handles;
  for (const P2pSpec& task : tasks) {
    void* p2p_api = nullptr;
    if (version >= 5 && (snapshot & kP2pApiMask) != 0) {
      std::memset(&d, 0, sizeof(d));
      d.type = abi::kP2pApi;
      d.parentObj = e.group_api;
      d.rank = rank_;
      d.p2pApi.func = task.func;
      d.p2pApi.count = task.count;
      d.p2pApi.datatype = task.datatype;
      Start(&p2p_api, d);
    }
    StopIf(p2p_api);
    api_handles.push_back(p2p_api);
  }
  if (e.group_api != nullptr) {
    process_.plugin().Record(version, e.group_api, abi::kGroupEndApiStart, &no_args);
  }
  if ((snapshot & kGroupMask) != 0) {
    std::memset(&d, 0, sizeof(d));
    d.type = abi::kGroup;
    Start(&e.group, d);
  }
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const P2pSpec& task = tasks[i];
    EnqueuedOp op;
    op.mask = snapshot;
    op.channels = task.channels;
    if (EmitsTask(snapshot, true)) {
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
  const P2pEnqueue enqueue = BeginP2pGroup(tasks);
  auto work = [this, ops = enqueue.ops, gpu, proxy] {
    for (const EnqueuedOp& op : ops) {
      ProxyWork(op, op.channels, proxy);
      KernelChannels(op, op.channels, gpu);
    }
  };
  if (proxy_ != nullptr) proxy_->Post(work);
  EndP2pGroup(enqueue);
  if (proxy_ == nullptr) work();
}

void ReplayComm::AllToAll(std::size_t count_per_peer, const char* datatype, const GpuTimes& gpu,
                          const ProxyPlan& proxy) {
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
