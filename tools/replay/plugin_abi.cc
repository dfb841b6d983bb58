// ProfilerPlugin: the plugin library NCCL loads and the calls each ABI version makes into it, in
// that version's argument order and descriptor layout (v1-v4 built from the v7 superset, v5/v6
// cut from it), with the events and states a version does not know dropped as NCCL's adapters
// drop them.

#include <dlfcn.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tools/replay/nccl_replay.h"
#include "tools/replay/replay_internal.h"

namespace ncclscope::replay {
namespace {

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

}  // namespace ncclscope::replay
