#include "tools/replay/nccl_replay.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "platform/clock.h"

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

bool IsNvlsAlgo(const char* algo) {
  return std::strcmp(algo, "NVLS") == 0 || std::strcmp(algo, "NVLS_TREE") == 0;
}

// Event types a version knows; NCCL's cores and adapters do not deliver the others (the handle
// stays NULL): API events are v5+ (src/plugin/profiler/profiler_v4.cc:79-80 at v2.30.7-1), CE v6+
// (profiler_v5.cc at 2.31.2), KernelCh and NetPlugin v3+ (src/plugin/profiler/profiler_v2.cc:15,59
// at v2.26.6-1), KernelPhase v7 (profiler_v6.cc:18-22 at 2.31.2).
bool KnowsEvent(int version, std::uint64_t type) {
  switch (type) {
    case abi::kGroupApi:
    case abi::kCollApi:
    case abi::kP2pApi:
    case abi::kKernelLaunch:
      return version >= 5;
    case abi::kCeColl:
    case abi::kCeSync:
    case abi::kCeBatch:
      return version >= 6;
    case abi::kKernelCh:
    case abi::kNetPlugin:
      return version >= 3;
    case abi::kKernelPhase:
      return version >= 7;
    default:
      return true;
  }
}

// States a version knows (the same adapters drop the others: profiler_v3.cc:73-93 at v2.28.9-1,
// profiler_v4.cc:113-114 at v2.30.7-1, profiler_v6.cc:155-156 at 2.31.2).
bool KnowsState(int version, int state) {
  if (state >= abi::kProxyOpInProgress && state <= abi::kKernelChStop) return version >= 4;
  if (state == abi::kGroupStartApiStop || state == abi::kGroupEndApiStart) return version >= 5;
  if (state == abi::kKernelPhaseStop) return version >= 7;
  return true;
}

struct V1Name {
  const char* name;
  std::uint8_t value;
};

std::uint8_t V1Number(const V1Name* table, std::size_t n, const char* name, std::uint8_t other) {
  if (name == nullptr) return other;
  for (std::size_t i = 0; i < n; ++i) {
    if (std::strcmp(table[i].name, name) == 0) return table[i].value;
  }
  return other;
}

// 2.23 hands a v1 plugin its own enum values (src/misc/profiler.cc:282-293 at v2.23.4-1; numbers
// in plugin/abi/profiler_v1_v3.h). A name 2.23 does not have (fp8, AlltoAll, ...) maps the way
// 2.24's v1 adapter maps a string it does not know (src/misc/profiler.cc:22-61 at v2.24.3-1):
// func -> Send, datatype -> Float64, algo -> PAT, proto -> SIMPLE. "Unknown" is the replay's
// (and NCCL 2.24+'s) name for ncclUint8 (src/collectives.cc:50 at v2.24.3-1), 1 at 2.23.
std::uint8_t FuncV1(const char* func) {
  static const V1Name kFuncs[] = {
      {"Broadcast", abi::kFuncV1Broadcast}, {"Reduce", abi::kFuncV1Reduce},
      {"AllGather", abi::kFuncV1AllGather}, {"ReduceScatter", abi::kFuncV1ReduceScatter},
      {"AllReduce", abi::kFuncV1AllReduce}, {"SendRecv", abi::kFuncV1SendRecv},
      {"Send", abi::kFuncV1Send},           {"Recv", abi::kFuncV1Recv}};
  return V1Number(kFuncs, std::size(kFuncs), func, abi::kFuncV1Send);
}

std::uint8_t DatatypeV1(const char* datatype) {
  static const V1Name kTypes[] = {
      {"ncclInt8", abi::kDatatypeV1Int8},        {"ncclUint8", abi::kDatatypeV1Uint8},
      {"Unknown", abi::kDatatypeV1Uint8},        {"ncclInt32", abi::kDatatypeV1Int32},
      {"ncclUint32", abi::kDatatypeV1Uint32},    {"ncclInt64", abi::kDatatypeV1Int64},
      {"ncclUint64", abi::kDatatypeV1Uint64},    {"ncclFloat16", abi::kDatatypeV1Float16},
      {"ncclFloat32", abi::kDatatypeV1Float32},  {"ncclFloat64", abi::kDatatypeV1Float64},
      {"ncclBfloat16", abi::kDatatypeV1Bfloat16}};
  return V1Number(kTypes, std::size(kTypes), datatype, abi::kDatatypeV1Float64);
}

std::uint8_t AlgoV1(const char* algo) {
  static const V1Name kAlgos[] = {{"TREE", abi::kAlgoV1Tree},
                                  {"RING", abi::kAlgoV1Ring},
                                  {"COLLNET_DIRECT", abi::kAlgoV1CollNetDirect},
                                  {"COLLNET_CHAIN", abi::kAlgoV1CollNetChain},
                                  {"NVLS", abi::kAlgoV1Nvls},
                                  {"NVLS_TREE", abi::kAlgoV1NvlsTree},
                                  {"PAT", abi::kAlgoV1Pat}};
  return V1Number(kAlgos, std::size(kAlgos), algo, abi::kAlgoV1Pat);
}

std::uint8_t ProtoV1(const char* proto) {
  static const V1Name kProtos[] = {
      {"LL", abi::kProtoV1Ll}, {"LL128", abi::kProtoV1Ll128}, {"SIMPLE", abi::kProtoV1Simple}};
  return V1Number(kProtos, std::size(kProtos), proto, abi::kProtoV1Simple);
}

// The members every v1-v3 descriptor shares with the superset: header, ProxyOp, ProxyStep.
template <typename Legacy>
void CopyLegacyCommon(Legacy& out, const abi::EventDescrV7& d) {
  out.type = static_cast<std::uint8_t>(d.type);
  out.parentObj = d.parentObj;
  out.rank = d.rank;
  if (d.type == abi::kProxyOp) {
    static_assert(sizeof(out.proxyOp) == sizeof(d.proxyOp));
    std::memcpy(&out.proxyOp, &d.proxyOp, sizeof(out.proxyOp));
  } else if (d.type == abi::kProxyStep) {
    out.proxyStep.step = d.proxyStep.step;
  }
}

// v2/v3 Coll and P2p: NCCL's strings, name NULL (comm->commName is never assigned before 2.27:
// research/nccl-v1-v3.md section 2), commHash, nMaxChannels (src/plugin/profiler.cc:238-255,
// 276-287 at v2.26.6-1; src/misc/profiler.cc:388-424 at v2.24.3-1).
template <typename Legacy>
void CopyStringTask(Legacy& out, const abi::EventDescrV7& d, const LegacyFields& legacy) {
  if (d.type == abi::kColl) {
    out.coll.name = nullptr;
    out.coll.commHash = legacy.comm_hash;
    out.coll.seqNumber = d.coll.seqNumber;
    out.coll.func = d.coll.func;
    out.coll.sendBuff = d.coll.sendBuff;
    out.coll.recvBuff = d.coll.recvBuff;
    out.coll.count = d.coll.count;
    out.coll.root = d.coll.root;
    out.coll.datatype = d.coll.datatype;
    out.coll.nMaxChannels = d.coll.nChannels;
    out.coll.nWarps = d.coll.nWarps;
    out.coll.algo = d.coll.algo;
    out.coll.proto = d.coll.proto;
  } else if (d.type == abi::kP2p) {
    out.p2p.name = nullptr;
    out.p2p.commHash = legacy.comm_hash;
    out.p2p.func = d.p2p.func;
    out.p2p.buff = d.p2p.buff;
    out.p2p.datatype = d.p2p.datatype;
    out.p2p.count = d.p2p.count;
    out.p2p.peer = d.p2p.peer;
  }
}

}  // namespace

int* ReplayProcess::mask() {
  static int nccl_profiler_event_mask = 0;
  return &nccl_profiler_event_mask;
}

namespace {

// NCCL 2.31's RAS override of the mask (ncclProfilerRasOverrideActive/Mask, process-global).
struct RasOverrideState {
  std::atomic<bool> active{false};
  std::atomic<int> mask{0};
};

RasOverrideState& Ras() {
  static RasOverrideState state;
  return state;
}

// ncclProfilerEnforceMaskDeps (src/plugin/profiler.cc:304-314 at 2.31.2): phases are children of
// KernelCh ops, so KernelPhase brings KernelCh along.
int EnforceMaskDeps(int mask) {
  if ((mask & abi::kKernelPhase) != 0 && (mask & abi::kKernelCh) == 0) mask |= abi::kKernelCh;
  return mask;
}

// The bits that start a plan's Group event: 2.23-2.25 test Coll|P2p|ProxyOp|ProxyStep only (the
// Group bit alone emits nothing: src/misc/profiler.cc:249 at v2.23.4-1, :361 at v2.24.3-1), 2.26+
// the Group bit and every child (src/plugin/profiler.cc:211 at v2.26.6-1, :350-378).
int GroupGate(int version) {
  return version <= 2 ? (abi::kColl | abi::kP2p | abi::kProxyOp | abi::kProxyStep) : kGroupMask;
}

// The bits that start a task's Coll/P2p event. 2.23-2.25: Coll|ProxyOp|ProxyStep for both kinds
// (the P2p bit is never tested: src/misc/profiler.cc:271 at v2.23.4-1, :383 at v2.24.3-1); 2.26:
// P2p without NetPlugin (src/plugin/profiler.cc:236, :274 at v2.26.6-1); 2.27+: EmitsTask().
int TaskGate(int version, bool p2p) {
  if (version <= 2) return abi::kColl | abi::kProxyOp | abi::kProxyStep;
  if (version == 3 && p2p) return abi::kP2p | abi::kProxyOp | abi::kProxyStep | abi::kKernelCh;
  return (p2p ? abi::kP2p : abi::kColl) | abi::kProxyOp | abi::kProxyStep | abi::kKernelCh |
         abi::kNetPlugin;
}

// ProxyOp and ProxyStep: 2.23-2.25 without NetPlugin (src/misc/profiler.cc:352, :407 at
// v2.23.4-1), 2.26+ with it (src/plugin/profiler.cc:326, :381 at v2.26.6-1).
int ProxyOpGate(int version) {
  const int net_plugin = version >= 3 ? static_cast<int>(abi::kNetPlugin) : 0;
  return abi::kProxyOp | abi::kProxyStep | net_plugin;
}
int ProxyStepGate(int version) {
  const int net_plugin = version >= 3 ? static_cast<int>(abi::kNetPlugin) : 0;
  return abi::kProxyStep | net_plugin;
}

}  // namespace

bool ReplayProcess::SetRasOverride(int mask) {
  if (version_ < 7) return false;  // 2.30 and older have no override
  // src/plugin/profiler.cc:318-323 at 2.31.2: deps first, then the mask, then the copy and flag.
  mask = EnforceMaskDeps(mask);
  __atomic_store_n(ReplayProcess::mask(), mask, __ATOMIC_RELAXED);
  Ras().mask.store(mask, std::memory_order_relaxed);
  Ras().active.store(true, std::memory_order_release);
  return true;
}

void ReplayProcess::ClearRasOverride() { Ras().active.store(false, std::memory_order_release); }

bool ReplayProcess::RasOverride(int* mask) {
  if (!Ras().active.load(std::memory_order_acquire)) return false;
  *mask = Ras().mask.load(std::memory_order_relaxed);
  return true;
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

namespace {

template <typename Table>
const char* TableName(const Table* table) {
  return table != nullptr ? table->name : nullptr;
}

}  // namespace

ProfilerPlugin::ProfilerPlugin(const std::string& path) {
  lib_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib_ == nullptr) {
    error_ = dlerror();
    return;
  }
  v1_ = static_cast<const abi::ProfilerV1*>(dlsym(lib_, "ncclProfiler_v1"));
  v2_ = static_cast<const abi::ProfilerV2*>(dlsym(lib_, "ncclProfiler_v2"));
  v3_ = static_cast<const abi::ProfilerV3*>(dlsym(lib_, "ncclProfiler_v3"));
  v4_ = static_cast<const abi::ProfilerV4*>(dlsym(lib_, "ncclProfiler_v4"));
  v5_ = static_cast<const abi::ProfilerV5*>(dlsym(lib_, "ncclProfiler_v5"));
  v6_ = static_cast<const abi::ProfilerV6*>(dlsym(lib_, "ncclProfiler_v6"));
  v7_ = static_cast<const abi::ProfilerV7*>(dlsym(lib_, "ncclProfiler_v7"));
}

ProfilerPlugin::~ProfilerPlugin() {
  if (lib_ != nullptr) dlclose(lib_);  // as NCCL does after the last communicator
}

bool ProfilerPlugin::Has(int version) const {
  const void* tables[] = {v1_, v2_, v3_, v4_, v5_, v6_, v7_};
  return version >= 1 && version <= 7 && tables[version - 1] != nullptr;
}

const char* ProfilerPlugin::Name(int version) const {
  const char* const names[] = {TableName(v1_), TableName(v2_), TableName(v3_), TableName(v4_),
                               TableName(v5_), TableName(v6_), TableName(v7_)};
  return version >= 1 && version <= 7 ? names[version - 1] : nullptr;
}

int ProfilerPlugin::Init(int version, void** context, std::uint64_t comm_id, int* mask,
                         const char* name, int nnodes, int nranks, int rank) const {
  switch (version) {
    case 1:  // init(&comm->profilerContext, &mask) (src/misc/profiler.cc:223 at v2.23.4-1)
      return v1_->init(context, mask);
    case 2:  // (src/misc/profiler.cc:335 at v2.24.3-1)
      return v2_->init(context, mask);
    case 3:  // (src/plugin/profiler.cc:165 at v2.26.6-1)
      return v3_->init(context, mask);
    case 4:
      return v4_->init(context, mask, name, comm_id, nnodes, nranks, rank, Logger);
    case 5:
      return v5_->init(context, comm_id, mask, name, nnodes, nranks, rank, Logger);
    case 6:
      return v6_->init(context, comm_id, mask, name, nnodes, nranks, rank, Logger);
    default:
      return v7_->init(context, comm_id, mask, name, nnodes, nranks, rank, Logger);
  }
}

namespace {

// Start's descriptors, one per layout NCCL hands the plugin.

// v1 (2.23): legacy fields and NCCL's own enums.
void DescrV1(const abi::EventDescrV7& d, const LegacyFields& legacy, abi::EventDescrV1* out) {
  abi::EventDescrV1& v1 = *out;
  std::memset(&v1, 0, sizeof(v1));
  CopyLegacyCommon(v1, d);
  if (d.type == abi::kColl) {  // src/misc/profiler.cc:275-296 at v2.23.4-1
    v1.coll.name = nullptr;
    v1.coll.commHash = legacy.comm_hash;
    v1.coll.seqNumber = d.coll.seqNumber;
    v1.coll.func = FuncV1(d.coll.func);
    v1.coll.sendBuff = d.coll.sendBuff;
    v1.coll.recvBuff = d.coll.recvBuff;
    v1.coll.count = d.coll.count;
    v1.coll.root = d.coll.root;
    v1.coll.datatype = DatatypeV1(d.coll.datatype);
    v1.coll.op = legacy.op;
    v1.coll.trafficBytes = legacy.traffic_bytes;
    v1.coll.nMaxChannels = d.coll.nChannels;
    v1.coll.nWarps = d.coll.nWarps;
    v1.coll.algo = AlgoV1(d.coll.algo);
    v1.coll.proto = ProtoV1(d.coll.proto);
    // isNvls: NVLS, NVLS_TREE; isCollnet: CollNet, and NVLS (not NVLS_TREE) across nodes
    // (src/enqueue.cc:603-614 at v2.23.4-1).
    const char* algo = d.coll.algo != nullptr ? d.coll.algo : "";
    v1.coll.isNvls = IsNvlsAlgo(algo) ? 1 : 0;
    v1.coll.isCollnet =
        IsCollNetAlgo(algo) || (std::strcmp(algo, "NVLS") == 0 && legacy.nnodes > 1) ? 1 : 0;
  } else if (d.type == abi::kP2p) {  // :304-315
    v1.p2p.name = nullptr;
    v1.p2p.commHash = legacy.comm_hash;
    v1.p2p.func = FuncV1(d.p2p.func);
    v1.p2p.buff = d.p2p.buff;
    v1.p2p.datatype = DatatypeV1(d.p2p.datatype);
    v1.p2p.count = d.p2p.count;
    v1.p2p.peer = d.p2p.peer;
  }
}

// v4 (2.27): the fields it has, copied one by one.
void DescrV4(const abi::EventDescrV7& d, abi::EventDescrV4* out) {
  abi::EventDescrV4& v4 = *out;
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
      static_assert(sizeof(v4.proxyOp) == sizeof(d.proxyOp));
      std::memcpy(&v4.proxyOp, &d.proxyOp, sizeof(v4.proxyOp));
      break;
    case abi::kProxyStep:
      v4.proxyStep.step = d.proxyStep.step;
      break;
    case abi::kKernelCh:
      v4.kernelCh.channelId = d.kernelCh.channelId;
      v4.kernelCh.pTimer = d.kernelCh.pTimer;
      break;
    case abi::kNetPlugin:
      v4.netPlugin.id = d.netPlugin.id;
      v4.netPlugin.data = d.netPlugin.data;
      break;
    default:
      break;
  }
}

}  // namespace

int ProfilerPlugin::Start(int version, void* context, void** handle, const abi::EventDescrV6& d,
                          const LegacyFields& legacy) const {
  abi::EventDescrV7 wide{};
  std::memset(&wide, 0, sizeof(wide));
  static_assert(sizeof(d) <= sizeof(wide));
  std::memcpy(&wide, &d, sizeof(d));  // v7 keeps every v6 offset (plugin/abi/profiler_v7.h)
  return Start(version, context, handle, wide, legacy);
}

int ProfilerPlugin::Start(int version, void* context, void** handle, const abi::EventDescrV7& d,
                          const LegacyFields& legacy) const {
  // Events the version does not know are not delivered (handle stays NULL).
  if (!KnowsEvent(version, d.type)) {
    *handle = nullptr;
    return 0;
  }
  switch (version) {
    case 1: {
      abi::EventDescrV1 v1{};
      DescrV1(d, legacy, &v1);
      return v1_->startEvent(context, handle, &v1);
    }
    case 2: {
      abi::EventDescrV2 v2{};
      std::memset(&v2, 0, sizeof(v2));
      CopyLegacyCommon(v2, d);
      CopyStringTask(v2, d, legacy);
      if (d.type == abi::kColl) v2.coll.trafficBytes = legacy.traffic_bytes;  // :400 at 2.24.3
      return v2_->startEvent(context, handle, &v2);
    }
    case 3: {
      abi::EventDescrV3 v3{};
      std::memset(&v3, 0, sizeof(v3));
      CopyLegacyCommon(v3, d);
      CopyStringTask(v3, d, legacy);
      if (d.type == abi::kKernelCh) {
        v3.kernelCh.channelId = d.kernelCh.channelId;  // no timestamp before v4
      } else if (d.type == abi::kNetPlugin) {
        v3.netPlugin.id = d.netPlugin.id;
        v3.netPlugin.data = d.netPlugin.data;
      }
      return v3_->startEvent(context, handle, &v3);
    }
    case 4:
      break;
    case 5:
    case 6: {
      // v5 and v6 are v7's first 112 bytes. v7's appended members are dropped, as 2.28-2.30 have
      // none to fill (and 2.31's v6 adapter copies into a zeroed descriptor, profiler_v6.cc:24):
      // the tags that fall inside those 112 bytes are cleared.
      abi::EventDescrV7 cut = d;
      if (d.type == abi::kCollApi) cut.collApi.userTag = 0;
      if (d.type == abi::kP2pApi) cut.p2pApi.userTag = 0;
      if (d.type == abi::kP2p) cut.p2p.userTag = 0;
      if (version == 5) {
        abi::EventDescrV5 v5{};
        static_assert(sizeof(v5) == 112 && sizeof(v5) < sizeof(cut));
        std::memcpy(&v5, &cut, sizeof(v5));
        return v5_->startEvent(context, handle, &v5);
      }
      abi::EventDescrV6 v6{};
      static_assert(sizeof(v6) == 112 && sizeof(v6) < sizeof(cut));
      std::memcpy(&v6, &cut, sizeof(v6));
      return v6_->startEvent(context, handle, &v6);
    }
    default:
      return v7_->startEvent(context, handle, const_cast<abi::EventDescrV7*>(&d));
  }
  abi::EventDescrV4 v4{};
  DescrV4(d, &v4);
  return v4_->startEvent(context, handle, &v4);
}

int ProfilerPlugin::Stop(int version, void* handle) const {
  switch (version) {
    case 1:
      return v1_->stopEvent(handle);
    case 2:
      return v2_->stopEvent(handle);
    case 3:
      return v3_->stopEvent(handle);
    case 4:
      return v4_->stopEvent(handle);
    case 5:
      return v5_->stopEvent(handle);
    case 6:
      return v6_->stopEvent(handle);
    default:
      return v7_->stopEvent(handle);
  }
}

int ProfilerPlugin::Record(int version, void* handle, int state, abi::StateArgsV6* args) const {
  if (!KnowsState(version, state)) return 0;
  if (version <= 3) {
    // ProxyStep records pass no arguments before 2.27 (src/misc/profiler.cc:502 at v2.23.4-1,
    // src/plugin/profiler.cc:497 at v2.26.6-1).
    if (state >= abi::kProxyStepSendGpuWait && state <= abi::kProxyStepRecvGpuWait) {
      return RecordV1(version, handle, state, nullptr);
    }
    if (args == nullptr) return RecordV1(version, handle, state, nullptr);
    abi::StateArgsV1 v1{};
    std::memset(&v1, 0, sizeof(v1));
    if (state >= abi::kProxyCtrlIdle && state <= abi::kProxyCtrlAppendEnd) {
      v1.proxyCtrl.appendedProxyOps = args->proxyCtrl.appendedProxyOps;
    } else {
      v1.proxyOp.transSize = args->proxyStep.transSize;
    }
    return RecordV1(version, handle, state, &v1);
  }
  switch (version) {
    case 4:
      return v4_->recordEventState(handle, state, args);
    case 5:
      return v5_->recordEventState(handle, state, args);
    case 6:
      return v6_->recordEventState(handle, state, args);
    default:
      return v7_->recordEventState(handle, state, args);
  }
}

int ProfilerPlugin::RecordV1(int version, void* handle, int state, abi::StateArgsV1* args) const {
  if (!KnowsState(version, state)) return 0;
  switch (version) {
    case 1:
      return v1_->recordEventState(handle, state, args);
    case 2:
      return v2_->recordEventState(handle, state, args);
    case 3:
      return v3_->recordEventState(handle, state, args);
    default:
      return 0;  // 2.27+ record no ProxyOp state but InProgress (src/transport/net.cc:1118 at
                 // v2.27.7-1)
  }
}

int ProfilerPlugin::Finalize(int version, void* context) const {
  switch (version) {
    case 1:
      return v1_->finalize(context);
    case 2:
      return v2_->finalize(context);
    case 3:
      return v3_->finalize(context);
    case 4:
      return v4_->finalize(context);
    case 5:
      return v5_->finalize(context);
    case 6:
      return v6_->finalize(context);
    default:
      return v7_->finalize(context);
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

EnqueuedOp ReplayComm::StartColl(const CollSpec& spec, std::uint64_t seq) {
  const int snapshot = process_.MaskSnapshot();
  abi::EventDescrV7 d{};
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
  if (process_.version() >= 7) d.coll.userTag = spec.user_tag;
  return EnqueueTask(d, spec.channels, snapshot, nullptr);
}

void ReplayComm::StopTask(const EnqueuedOp& op) { StopIf(op.handle); }

void ReplayComm::KernelChannels(const EnqueuedOp& op, int channels, const GpuTimes& gpu) {
  if (!EmitsKernelCh(op.mask)) return;
  GpuTimes times = gpu;
  if (times.base == 0) times.base = platform::RealtimeNs();
  std::vector<void*> handles(static_cast<std::size_t>(channels), nullptr);
  for (int c = 0; c < channels; ++c) {
    handles[static_cast<std::size_t>(c)] = KernelChannelStart(op, c, times.Start(c));
  }
  for (int c = 0; c < channels; ++c) {
    PhaseStamps stamps;
    stamps.ts[0] = times.Start(c);
    stamps.ts[3] = times.Stop(c);
    stamps.ts[1] = std::min(stamps.ts[0] + times.initial_sync_ns, stamps.ts[3]);
    stamps.ts[2] = std::max(
        stamps.ts[1], stamps.ts[3] - std::min(times.final_sync_ns, stamps.ts[3] - stamps.ts[0]));
    KernelPhases(op, handles[static_cast<std::size_t>(c)], c, stamps);
    KernelChannelStop(handles[static_cast<std::size_t>(c)], times.Stop(c));
  }
}

void* ReplayComm::KernelChannelStart(const EnqueuedOp& op, int channel,
                                     std::uint64_t gpu_start_ns) {
  // No KernelCh before 2.26 (v3); v3's carries no timestamp (ProfilerPlugin drops it).
  if (op.self || !EmitsKernelCh(op.mask) || process_.version() < 3) return nullptr;
  abi::EventDescrV7 d{};
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
  if (process_.version() >= 4) {
    abi::StateArgsV6 args;
    args.kernelCh.pTimer = gpu_stop_ns;
    process_.plugin().Record(process_.version(), handle, abi::kKernelChStop, &args);
  }
  // 2.26: stopEvent alone, when the proxy thread sees the channel's completed counter
  // (src/plugin/profiler.cc:468-476 at v2.26.6-1).
  process_.plugin().Stop(process_.version(), handle);
}

void ReplayComm::KernelPhases(const EnqueuedOp& op, void* kernel_ch, int channel,
                              const PhaseStamps& stamps) {
  // profilerFireKernelPhaseEvents (src/plugin/profiler.cc:898-941 at 2.31.2): only with
  // KernelPhase in the task's mask copy (:900); phase i spans stamps i..i+1, skipped when a stamp
  // is missing or the span is empty (:922-923). The stamps' folding of a missing middle boundary
  // (:912-919) is the caller's: the replay's stamps are always complete.
  static const char* const kPhaseNames[] = {"initial_sync", "compute", "final_sync"};  // :896
  if (process_.version() < 7 || op.self || (op.mask & abi::kKernelPhase) == 0) return;
  for (int i = 0; i < abi::kPhaseCount; ++i) {
    const std::uint64_t start = stamps.ts[i];
    const std::uint64_t end = stamps.ts[i + 1];
    if (start == 0 || end == 0 || start == end) continue;
    abi::EventDescrV7 d{};
    std::memset(&d, 0, sizeof(d));  // rank stays 0 (:925)
    d.type = abi::kKernelPhase;
    d.parentObj = kernel_ch;  // op->kernelEventHandle (:927)
    d.kernelPhase.channelId = static_cast<std::uint8_t>(channel);
    d.kernelPhase.phaseId = static_cast<std::uint8_t>(i);
    d.kernelPhase.phaseName = kPhaseNames[i];
    d.kernelPhase.pTimer = start;
    void* phase = nullptr;
    Start(&phase, d);
    if (phase == nullptr) continue;  // no record, no stop (:933)
    abi::StateArgsV7 args{};
    args.kernelCh.pTimer = end;  // :936-937
    process_.plugin().Record(process_.version(), phase, abi::kKernelPhaseStop, &args);
    process_.plugin().Stop(process_.version(), phase);
  }
}

void* ReplayComm::ProxyOpStart(const EnqueuedOp& op, const ProxyOpSpec& spec) {
  void* handle = ProxyOpStartOnly(op, spec);
  if (handle != nullptr && process_.version() >= 4) {
    process_.plugin().Record(process_.version(), handle, abi::kProxyOpInProgress, nullptr);
  }
  return handle;
}

void ReplayComm::NetPluginEvent(const EnqueuedOp& op, void* step, const ProxyOpSpec& spec) {
  if (step == nullptr || spec.qp_num == 0 || !EmitsNetPlugin(op.mask)) return;
  if (process_.version() < 3) return;  // no net-plugin events before 2.26
  // src/plugin/profiler.cc:687-712: parent = the step's handle; id = type << 16 | version
  // (2.26: src/plugin/profiler.cc:548-563 at v2.26.6-1).
  abi::NetIbDescrV1 descr{};
  descr.type = abi::kNetIbQpEvent;
  descr.qp.device = spec.ib_device;
  descr.qp.opcode = spec.send ? 4 /* IBV_WR_RDMA_WRITE_WITH_IMM */ : 0;
  descr.qp.qpNum = spec.qp_num;
  descr.qp.length = spec.chunk_bytes;
  abi::EventDescrV7 d{};
  std::memset(&d, 0, sizeof(d));
  d.type = abi::kNetPlugin;
  d.parentObj = step;
  d.rank = rank_;
  d.netPlugin.id = static_cast<std::int64_t>(abi::kNetPluginTypeIb << 16 | abi::kNetIbDescrVersion);
  d.netPlugin.data = &descr;
  void* context = spec.foreign_context != nullptr ? spec.foreign_context : context_;
  void* handle = nullptr;
  process_.plugin().Start(process_.version(), context, &handle, d, Legacy(d));
  // Stopped when the work request completes (ncclIbTest, src/transport/net_ib.cc).
  if (handle != nullptr) process_.plugin().Stop(process_.version(), handle);
}

void* ReplayComm::ProxyOpStartOnly(const EnqueuedOp& op, const ProxyOpSpec& spec) {
  if (op.self || (op.mask & ProxyOpGate(process_.version())) == 0) return nullptr;
  abi::EventDescrV7 d{};
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
  process_.plugin().Start(process_.version(), context, &handle, d, Legacy(d));
  return handle;
}

void ReplayComm::ProxyOpStop(void* handle) {
  if (handle != nullptr) process_.plugin().Stop(process_.version(), handle);
}

void* ReplayComm::ProxyStepStart(const EnqueuedOp& op, void* proxy_op, const ProxyOpSpec& spec,
                                 int step) {
  // NCCL checks sub->opEventHandle: no ProxyOp handle, no steps.
  if (proxy_op == nullptr || (op.mask & ProxyStepGate(process_.version())) == 0) return nullptr;
  abi::EventDescrV7 d{};
  std::memset(&d, 0, sizeof(d));
  d.type = abi::kProxyStep;
  d.parentObj = proxy_op;
  d.rank = rank_;
  d.proxyStep.step = step;
  void* context = spec.foreign_context != nullptr ? spec.foreign_context : context_;
  void* handle = nullptr;
  process_.plugin().Start(process_.version(), context, &handle, d, Legacy(d));
  return handle;
}

void ReplayComm::ProxyStepState(void* step, int state, std::size_t trans_bytes) {
  if (step == nullptr) return;
  abi::StateArgsV6 args;
  args.proxyStep.transSize = trans_bytes;
  process_.plugin().Record(process_.version(), step, state, &args);  // v1-v3: NULL args
}

void ReplayComm::ProxyStepStop(void* step) {
  if (step != nullptr) process_.plugin().Stop(process_.version(), step);
}

void ReplayComm::LegacyProxyTransfer(const EnqueuedOp& op, void* proxy_op, const ProxyOpSpec& spec,
                                     int step, std::size_t* trans_size) {
  // One network transfer of a 2.23-2.26 net proxy op, in the order of sendProxyProgress and
  // recvProxyProgress (src/transport/net.cc:1104-1241 and 1285-1514 at v2.26.6-1; the same calls
  // at :1047-1193 and :1236-1461 at v2.23.4-1). Simplified: sliceSteps = 1 and one transfer at a
  // time (NCCL posts up to NCCL_STEPS ahead), so `steps` is step + 1 in every record.
  if (proxy_op == nullptr) return;  // every record below needs the ProxyOp handle
  const int version = process_.version();
  auto op_state = [&](int state) {
    abi::StateArgsV1 args{};
    std::memset(&args, 0, sizeof(args));
    args.proxyOp.transSize = *trans_size;
    args.proxyOp.steps = step + 1;
    process_.plugin().RecordV1(version, proxy_op, state, &args);
  };
  void* h = ProxyStepStart(op, proxy_op, spec, step);
  if (spec.send) {
    op_state(abi::kProxyOpSendPosted);                  // :1143
    ProxyStepState(h, abi::kProxyStepSendGpuWait, 0);   // :1144
    op_state(abi::kProxyOpSendRemFifoWait);             // :1191, before isend
    NetPluginEvent(op, h, spec);                        // isend's work request (v3)
    if (version >= 2) *trans_size += spec.chunk_bytes;  // :1199 (2.24+: before the record)
    op_state(abi::kProxyOpSendTransmitted);             // :1202
    if (version == 1) *trans_size += spec.chunk_bytes;  // :1136-1138 at v2.23.4-1: after it
    ProxyStepState(h, abi::kProxyStepSendWait, 0);      // :1203
    ProxyStepStop(h);                                   // :1222
    op_state(abi::kProxyOpSendDone);                    // :1223
  } else {
    NetPluginEvent(op, h, spec);                         // irecv's work request (v3)
    op_state(abi::kProxyOpRecvPosted);                   // :1366
    ProxyStepState(h, abi::kProxyStepRecvWait, 0);       // :1367
    *trans_size += spec.chunk_bytes;                     // :1396
    op_state(abi::kProxyOpRecvReceived);                 // :1398
    ProxyStepState(h, abi::kProxyStepRecvFlushWait, 0);  // :1399
    op_state(abi::kProxyOpRecvTransmitted);              // :1462
    ProxyStepState(h, abi::kProxyStepRecvGpuWait, 0);    // :1463
    ProxyStepStop(h);                                    // :1498
    op_state(abi::kProxyOpRecvDone);                     // :1499
  }
}

void ReplayComm::ProxyWork(const EnqueuedOp& op, int channels, const ProxyPlan& proxy) {
  if (!proxy.enabled || (op.mask & ProxyOpGate(process_.version())) == 0) return;
  const bool legacy = process_.version() <= 3;
  struct Sub {
    void* handle = nullptr;
    ProxyOpSpec spec;
    std::size_t trans_size = 0;  // v1-v3: the ProxyOp's cumulative bytes
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
    for (Sub& sub : subs) {
      if (legacy) {
        LegacyProxyTransfer(op, sub.handle, sub.spec, step, &sub.trans_size);
        continue;
      }
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
    if (version >= 7) d.coll.userTag = spec.user_tag;
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

// ---- Groups and plans ----

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

struct ReplayComm::NetOp {
  void* handle = nullptr;
  ProxyOpSpec spec;
  EnqueuedOp enqueued;
};

struct ReplayComm::KernelChannel {
  void* handle = nullptr;
  EnqueuedOp op;
  int channel = 0;
  PhaseStamps stamps;  // ts[0] start, ts[3] end
};

struct ReplayComm::Kernels {
  std::uint64_t base = 0;  // GPU time of the plan's start
  std::vector<KernelChannel> channels;
};

// ProxyOps at append, before the kernel runs (src/proxy.cc:427); 2.23-2.26 start them only in
// the network transport, when the op becomes ready (src/transport/net.cc:1104, :1285 at
// v2.26.6-1), and have no never-stopped ones.
std::vector<ReplayComm::NetOp> ReplayComm::StartProxyOps(const PlanLaunch& plan,
                                                         const ProxyPlan& net) {
  const bool legacy = process_.version() <= 3;
  std::vector<NetOp> nets;
  for (const PlannedOp& op : plan.ops) {
    if (op.self || op.symmetric) continue;
    EnqueuedOp e{op.handle, op.mask, static_cast<std::uint8_t>(op.channel_ids.size())};
    if ((op.mask & ProxyOpGate(process_.version())) == 0) continue;
    const bool never_stopped = op.collnet || op.proxy_never_stopped;
    if (never_stopped && legacy) continue;
    if (!never_stopped && !net.enabled) continue;
    for (int channel : op.channel_ids) {
      for (int dir = 0; dir < 2; ++dir) {
        const bool send = dir == 1;
        if (op.p2p && send != op.send) continue;  // a send task has send proxy ops only
        NetOp n;
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
  return nets;
}

// Network work while the kernel runs: in progress, steps (with net-plugin events), stop.
void ReplayComm::ProgressNetwork(std::vector<NetOp>& nets) {
  const bool legacy = process_.version() <= 3;
  for (NetOp& n : nets) {
    if (n.handle == nullptr) continue;
    if (legacy) {
      std::size_t trans_size = 0;
      for (int step = 0; step < n.spec.steps; ++step) {
        LegacyProxyTransfer(n.enqueued, n.handle, n.spec, step, &trans_size);
      }
      ProxyOpStop(n.handle);
      continue;
    }
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
}

// KernelCh starts for every channel of every task, as each channel starts.
ReplayComm::Kernels ReplayComm::StartKernels(const PlanLaunch& plan, const PlanTiming& timing) {
  const int version = process_.version();
  if (timing.first_kernel_delay_ms != 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(timing.first_kernel_delay_ms));
  }
  Kernels kernels;
  const std::uint64_t base = timing.base_ns != 0 ? timing.base_ns : platform::RealtimeNs();
  kernels.base = base;
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    const PlannedOp& op = plan.ops[i];
    if (op.self) continue;
    const std::uint64_t duration = i < timing.duration_ns.size() ? timing.duration_ns[i] : 50'000;
    const std::uint64_t initial = i < timing.initial_sync_ns.size() ? timing.initial_sync_ns[i] : 0;
    const std::uint64_t final = i < timing.final_sync_ns.size() ? timing.final_sync_ns[i] : 0;
    EnqueuedOp e{op.handle, op.mask, static_cast<std::uint8_t>(op.channel_ids.size())};
    for (std::size_t k = 0; k < op.channel_ids.size(); ++k) {
      const std::uint64_t start = base + k * timing.skew_ns;
      KernelChannel ch;
      ch.op = e;
      ch.channel = op.channel_ids[k];
      ch.handle = KernelChannelStart(e, op.channel_ids[k], start);
      ch.stamps.ts[0] = start;
      ch.stamps.ts[3] = start + duration + k * timing.skew_ns;
      const std::uint64_t span = ch.stamps.ts[3] - start;
      ch.stamps.ts[1] = start + std::min(initial, span);
      ch.stamps.ts[2] = std::max(ch.stamps.ts[1], ch.stamps.ts[3] - std::min(final, span));
      // v7 phases come even under a NULL KernelCh handle (their parent is then NULL).
      const bool phases =
          version >= 7 && EmitsKernelCh(e.mask) && (e.mask & abi::kKernelPhase) != 0;
      if (ch.handle != nullptr || phases) kernels.channels.push_back(ch);
    }
  }
  return kernels;
}

// The channels end in the order of their GPU end times: a plan's ops finish out of order. v7:
// each channel's phases right before its KernelChStop (src/plugin/profiler.cc:972-977 at
// 2.31.2).
void ReplayComm::StopKernels(Kernels& kernels, const PlanTiming& timing) {
  std::vector<KernelChannel>& channels = kernels.channels;
  std::stable_sort(channels.begin(), channels.end(),
                   [](const KernelChannel& a, const KernelChannel& b) {
                     return a.stamps.ts[3] < b.stamps.ts[3];
                   });
  const auto wall_start = std::chrono::steady_clock::now();
  for (const KernelChannel& ch : channels) {
    if (timing.real_time) {
      std::this_thread::sleep_until(wall_start +
                                    std::chrono::nanoseconds(ch.stamps.ts[3] - kernels.base));
    }
    KernelPhases(ch.op, ch.handle, ch.channel, ch.stamps);
    KernelChannelStop(ch.handle, ch.stamps.ts[3]);
  }
}

void ReplayComm::RunPlan(const PlanLaunch& plan, const PlanTiming& timing, const ProxyPlan& net) {
  const int version = process_.version();
  // The steps run on NCCL's threads after RunPlan returns: they hold copies of the plan.
  auto start_proxy_ops = [this, plan, net] { return StartProxyOps(plan, net); };
  auto progress_network = [this](std::vector<NetOp>& nets) { ProgressNetwork(nets); };
  auto start_kernels = [this, plan, timing] { return StartKernels(plan, timing); };
  auto stop_kernels = [this, timing](Kernels& kernels) { StopKernels(kernels, timing); };
  if (version >= 7 && profiler_thread_ != nullptr) {
    // 2.31.2: KernelCh and phases from the communicator's profiler thread (:1053-1099), the
    // network from the proxy thread, concurrently; both wait for the kernel to start. A channel
    // still ends only after its op's network transfers (the kernel waits for the proxy's data and
    // credits), as on the single proxy thread below: the channels' stops wait for the network.
    auto network_done = std::make_shared<std::promise<void>>();
    std::shared_future<void> network_ended = network_done->get_future().share();
    auto kernel_work = [start_kernels, stop_kernels, network_ended]() mutable {
      Kernels kernels = start_kernels();
      network_ended.wait();
      stop_kernels(kernels);
    };
    auto proxy_work = [start_proxy_ops, progress_network, timing, network_done]() mutable {
      std::vector<NetOp> nets = start_proxy_ops();
      if (timing.first_kernel_delay_ms != 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(timing.first_kernel_delay_ms));
      }
      progress_network(nets);
      network_done->set_value();
    };
    profiler_thread_->Post(kernel_work);
    if (proxy_ != nullptr) {
      proxy_->Post(proxy_work);
    } else {
      proxy_work();
    }
    return;
  }
  auto work = [start_proxy_ops, progress_network, start_kernels, stop_kernels]() mutable {
    std::vector<NetOp> nets = start_proxy_ops();
    Kernels kernels = start_kernels();
    progress_network(nets);
    stop_kernels(kernels);
  };
  if (proxy_ != nullptr) {
    proxy_->Post(work);
  } else {
    work();
  }
}

}  // namespace ncclscope::replay
