#pragma once

// The NCCL profiler-plugin ABI, versions 1 to 7 (NCCL 2.23 through 2.31+): v4, v5 and v6 here,
// re-declared from the facts in shared/reference/nccl-profiler-abi.md; v1-v3 in profiler_v1_v3.h
// and v7 in profiler_v7.h (included at the end), each from NCCL's header of its version. NCCL's
// own headers are never included: these types exist only so that our exported structs and the
// descriptors NCCL hands us have exactly the layout NCCL compiled against. The static_asserts pin
// every size and offset we rely on (x86_64 / aarch64 Linux, LP64).
//
// Version summary:
//   v1 (2.23): uint8_t type; init(ctx, mask); func/datatype/algo/proto as numbers; no KernelCh.
//   v2 (2.24, 2.25): v1 with NCCL's strings for func, datatype, algo and proto.
//   v3 (2.26): v2 without trafficBytes, plus KernelCh (no GPU timestamp) and NetPlugin.
//   v4 (2.27): uint8_t event type; init(ctx, mask, commName, commHash, nNodes, nranks, rank, log);
//              Coll/P2p parent is the Group handle.
//   v5 (2.28): uint64_t event type; init(ctx, commId, mask, commName, nNodes, nranks, rank, log);
//              API events; Coll/P2p parent is the CollApi/P2pApi handle, Group in parentGroup.
//   v6 (2.29, 2.30): v5 plus copy-engine events (CeColl, CeSync, CeBatch) at the same size.
//   v7 (2.31+): v6 plus userTag, symmetric collectives and KernelPhase events (136 bytes).

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace ncclscope::abi {

// ncclResult_t is an int-sized enum; only success and "internal error" are ever returned by us.
using Result = int;
inline constexpr Result kSuccess = 0;
inline constexpr Result kInternalError = 3;

// ncclDebugLogger_t(level, flags, file, line, fmt, ...).
using DebugLogger = void (*)(int level, unsigned long flags, const char* file, int line,
                             const char* fmt, ...);
inline constexpr int kLogWarn = 2;
inline constexpr int kLogInfo = 3;
inline constexpr unsigned long kLogSubsysProfile = 0x4000;  // NCCL_PROFILE

// Event-type bits (eDescr->type and *eActivationMask).
enum EventType : std::uint64_t {
  kGroup = 1u << 0,
  kColl = 1u << 1,
  kP2p = 1u << 2,
  kProxyOp = 1u << 3,
  kProxyStep = 1u << 4,
  kProxyCtrl = 1u << 5,
  kKernelCh = 1u << 6,
  kNetPlugin = 1u << 7,
  kGroupApi = 1u << 8,       // v5+
  kCollApi = 1u << 9,        // v5+
  kP2pApi = 1u << 10,        // v5+
  kKernelLaunch = 1u << 11,  // v5+
  kCeColl = 1u << 12,        // v6+
  kCeSync = 1u << 13,        // v6+
  kCeBatch = 1u << 14,       // v6+
  kKernelPhase = 1u << 15,   // v7+
};

// NCCL's name of an event type (ncclProfile<Name>), "unknown" for anything else: for logs and
// tests.
constexpr const char* EventTypeName(std::uint64_t type) {
  switch (type) {
    case kGroup:
      return "Group";
    case kColl:
      return "Coll";
    case kP2p:
      return "P2p";
    case kProxyOp:
      return "ProxyOp";
    case kProxyStep:
      return "ProxyStep";
    case kProxyCtrl:
      return "ProxyCtrl";
    case kKernelCh:
      return "KernelCh";
    case kNetPlugin:
      return "NetPlugin";
    case kGroupApi:
      return "GroupApi";
    case kCollApi:
      return "CollApi";
    case kP2pApi:
      return "P2pApi";
    case kKernelLaunch:
      return "KernelLaunch";
    case kCeColl:
      return "CeColl";
    case kCeSync:
      return "CeSync";
    case kCeBatch:
      return "CeBatch";
    case kKernelPhase:
      return "KernelPhase";
    default:
      return "unknown";
  }
}

// recordEventState states: one enum shared by all versions; the values are the ABI.
enum EventState : int {
  kProxyStepSendGpuWait = 8,
  kProxyStepSendWait = 9,
  kProxyStepRecvWait = 10,
  kProxyStepRecvFlushWait = 11,
  kProxyStepRecvGpuWait = 12,
  kProxyCtrlIdle = 13,
  kProxyCtrlAppendEnd = 18,
  kProxyOpInProgress = 19,      // v4+
  kProxyStepSendPeerWait = 20,  // v4+: waiting for the receiver's clear-to-send credit
  kNetPluginUpdate = 21,        // v4+
  kKernelChStop = 22,           // v4+: GPU stop timestamp in args->kernelCh.pTimer
  kGroupStartApiStop = 23,      // v5+
  kGroupEndApiStart = 24,       // v5+
  kKernelPhaseStop = 31,        // v7+: GPU stop timestamp in args->kernelCh.pTimer
};

// State arguments: identical 8-byte union in v4, v5 and v6.
union StateArgsV4 {
  struct {
    std::size_t transSize;
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void* data;
  } netPlugin;
  struct {
    std::uint64_t pTimer;
  } kernelCh;
};
using StateArgsV5 = StateArgsV4;
using StateArgsV6 = StateArgsV4;

// ---- Descriptor members shared by v4, v5 and v6 (same layout inside the union at offset 24). --

struct ProxyOpDescr {
  pid_t pid;  // the process that raised the op (PXN: another process)
  std::uint8_t channelId;
  int peer;
  int nSteps;
  int chunkSize;
  int isSend;
};

struct ProxyStepDescr {
  int step;
};

struct KernelChDescr {
  std::uint8_t channelId;
  std::uint64_t pTimer;  // GPU %globaltimer at channel start, ns
};

struct NetPluginDescr {
  std::int64_t id;
  void* data;
};

// ---- v4 (NCCL 2.27) ----

struct CollDescrV4 {
  std::uint64_t seqNumber;
  const char* func;
  const void* sendBuff;
  void* recvBuff;
  std::size_t count;
  int root;
  const char* datatype;
  std::uint8_t nChannels;
  std::uint8_t nWarps;
  const char* algo;
  const char* proto;
};

struct P2pDescrV4 {
  const char* func;
  void* buff;
  const char* datatype;
  std::size_t count;
  int peer;
  std::uint8_t nChannels;
};

struct EventDescrV4 {
  std::uint8_t type;
  void* parentObj;
  int rank;
  union {
    CollDescrV4 coll;
    P2pDescrV4 p2p;
    ProxyOpDescr proxyOp;
    ProxyStepDescr proxyStep;
    KernelChDescr kernelCh;
    NetPluginDescr netPlugin;
  };
};

// ---- v5 (NCCL 2.28) and v6 (NCCL 2.29+) ----

struct GroupApiDescr {
  bool graphCaptured;
  int groupDepth;
};

struct CollApiDescr {
  const char* func;
  std::size_t count;
  const char* datatype;
  int root;
  void* stream;
  bool graphCaptured;
};

struct P2pApiDescr {
  const char* func;
  std::size_t count;
  const char* datatype;
  void* stream;
  bool graphCaptured;
};

struct KernelLaunchDescr {
  void* stream;
};

struct CollDescrV5 {
  std::uint64_t seqNumber;
  const char* func;
  const void* sendBuff;
  void* recvBuff;
  std::size_t count;
  int root;
  const char* datatype;
  std::uint8_t nChannels;
  std::uint8_t nWarps;
  const char* algo;
  const char* proto;
  void* parentGroup;
};

struct P2pDescrV5 {
  const char* func;
  void* buff;
  const char* datatype;
  std::size_t count;
  int peer;
  std::uint8_t nChannels;
  void* parentGroup;
};

struct CeCollDescrV6 {
  std::uint64_t seqNumber;
  const char* func;
  const void* sendBuff;
  void* recvBuff;
  std::size_t count;
  int root;
  const char* datatype;
  const char* syncStrategy;
  bool intraBatchSync;
  std::uint32_t batchSize;
  std::uint32_t numBatches;
  std::uint32_t ceSeqNum;
  void* stream;
};

struct CeSyncDescrV6 {
  bool isComplete;
  int nRanks;
};

struct CeBatchDescrV6 {
  int numOps;
  std::size_t totalBytes;
  bool useIntraSync;
};

struct EventDescrV5 {
  std::uint64_t type;
  void* parentObj;
  int rank;
  union {
    GroupApiDescr groupApi;
    CollApiDescr collApi;
    P2pApiDescr p2pApi;
    KernelLaunchDescr kernelLaunch;
    CollDescrV5 coll;
    P2pDescrV5 p2p;
    ProxyOpDescr proxyOp;
    ProxyStepDescr proxyStep;
    KernelChDescr kernelCh;
    NetPluginDescr netPlugin;
  };
};

struct EventDescrV6 {
  std::uint64_t type;
  void* parentObj;
  int rank;
  union {
    GroupApiDescr groupApi;
    CollApiDescr collApi;
    P2pApiDescr p2pApi;
    KernelLaunchDescr kernelLaunch;
    CollDescrV5 coll;
    P2pDescrV5 p2p;
    ProxyOpDescr proxyOp;
    ProxyStepDescr proxyStep;
    KernelChDescr kernelCh;
    NetPluginDescr netPlugin;
    CeCollDescrV6 ceColl;
    CeSyncDescrV6 ceCollSync;
    CeBatchDescrV6 ceCollBatch;
  };
};

// ---- The exported descriptor ("vtable"), a data object named ncclProfiler_vN. ----

template <typename Descr, typename StateArgs, typename InitFn>
struct ProfilerVtable {
  const char* name;
  InitFn init;
  Result (*startEvent)(void* context, void** eHandle, Descr* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, int eState, StateArgs* eStateArgs);
  Result (*finalize)(void* context);
};

using InitV4 = Result (*)(void** context, int* eActivationMask, const char* commName,
                          std::uint64_t commHash, int nNodes, int nranks, int rank,
                          DebugLogger logfn);
using InitV5 = Result (*)(void** context, std::uint64_t commId, int* eActivationMask,
                          const char* commName, int nNodes, int nranks, int rank,
                          DebugLogger logfn);

using ProfilerV4 = ProfilerVtable<EventDescrV4, StateArgsV4, InitV4>;
using ProfilerV5 = ProfilerVtable<EventDescrV5, StateArgsV5, InitV5>;
using ProfilerV6 = ProfilerVtable<EventDescrV6, StateArgsV6, InitV5>;

// ---- Layout pins (values from the reference, measured against NCCL's headers). ----

static_assert(sizeof(StateArgsV4) == 8);
static_assert(offsetof(StateArgsV4, proxyStep.transSize) == 0);
static_assert(offsetof(StateArgsV4, kernelCh.pTimer) == 0);

static_assert(sizeof(ProfilerV4) == 48 && sizeof(ProfilerV5) == 48 && sizeof(ProfilerV6) == 48);
static_assert(offsetof(ProfilerV5, name) == 0);
static_assert(offsetof(ProfilerV5, init) == 8);
static_assert(offsetof(ProfilerV5, startEvent) == 16);
static_assert(offsetof(ProfilerV5, stopEvent) == 24);
static_assert(offsetof(ProfilerV5, recordEventState) == 32);
static_assert(offsetof(ProfilerV5, finalize) == 40);

// v4: 104 bytes, uint8_t type.
static_assert(sizeof(EventDescrV4) == 104);
static_assert(offsetof(EventDescrV4, type) == 0);
static_assert(offsetof(EventDescrV4, parentObj) == 8);
static_assert(offsetof(EventDescrV4, rank) == 16);
static_assert(offsetof(EventDescrV4, coll.seqNumber) == 24);
static_assert(offsetof(EventDescrV4, coll.func) == 32);
static_assert(offsetof(EventDescrV4, coll.sendBuff) == 40);
static_assert(offsetof(EventDescrV4, coll.recvBuff) == 48);
static_assert(offsetof(EventDescrV4, coll.count) == 56);
static_assert(offsetof(EventDescrV4, coll.root) == 64);
static_assert(offsetof(EventDescrV4, coll.datatype) == 72);
static_assert(offsetof(EventDescrV4, coll.nChannels) == 80);
static_assert(offsetof(EventDescrV4, coll.nWarps) == 81);
static_assert(offsetof(EventDescrV4, coll.algo) == 88);
static_assert(offsetof(EventDescrV4, coll.proto) == 96);
static_assert(offsetof(EventDescrV4, p2p.func) == 24);
static_assert(offsetof(EventDescrV4, p2p.buff) == 32);
static_assert(offsetof(EventDescrV4, p2p.datatype) == 40);
static_assert(offsetof(EventDescrV4, p2p.count) == 48);
static_assert(offsetof(EventDescrV4, p2p.peer) == 56);
static_assert(offsetof(EventDescrV4, p2p.nChannels) == 60);
static_assert(offsetof(EventDescrV4, proxyOp.pid) == 24);
static_assert(offsetof(EventDescrV4, proxyOp.channelId) == 28);
static_assert(offsetof(EventDescrV4, proxyOp.peer) == 32);
static_assert(offsetof(EventDescrV4, proxyOp.nSteps) == 36);
static_assert(offsetof(EventDescrV4, proxyOp.chunkSize) == 40);
static_assert(offsetof(EventDescrV4, proxyOp.isSend) == 44);
static_assert(offsetof(EventDescrV4, proxyStep.step) == 24);
static_assert(offsetof(EventDescrV4, kernelCh.channelId) == 24);
static_assert(offsetof(EventDescrV4, kernelCh.pTimer) == 32);
static_assert(offsetof(EventDescrV4, netPlugin.id) == 24);
static_assert(offsetof(EventDescrV4, netPlugin.data) == 32);

// v5: 112 bytes, uint64_t type.
static_assert(sizeof(EventDescrV5) == 112);
static_assert(offsetof(EventDescrV5, type) == 0);
static_assert(offsetof(EventDescrV5, parentObj) == 8);
static_assert(offsetof(EventDescrV5, rank) == 16);
static_assert(offsetof(EventDescrV5, groupApi.graphCaptured) == 24);
static_assert(offsetof(EventDescrV5, groupApi.groupDepth) == 28);
static_assert(offsetof(EventDescrV5, collApi.func) == 24);
static_assert(offsetof(EventDescrV5, collApi.count) == 32);
static_assert(offsetof(EventDescrV5, collApi.datatype) == 40);
static_assert(offsetof(EventDescrV5, collApi.root) == 48);
static_assert(offsetof(EventDescrV5, collApi.stream) == 56);
static_assert(offsetof(EventDescrV5, collApi.graphCaptured) == 64);
static_assert(offsetof(EventDescrV5, p2pApi.func) == 24);
static_assert(offsetof(EventDescrV5, p2pApi.count) == 32);
static_assert(offsetof(EventDescrV5, p2pApi.datatype) == 40);
static_assert(offsetof(EventDescrV5, p2pApi.stream) == 48);
static_assert(offsetof(EventDescrV5, p2pApi.graphCaptured) == 56);
static_assert(offsetof(EventDescrV5, kernelLaunch.stream) == 24);
static_assert(offsetof(EventDescrV5, coll.seqNumber) == 24);
static_assert(offsetof(EventDescrV5, coll.func) == 32);
static_assert(offsetof(EventDescrV5, coll.sendBuff) == 40);
static_assert(offsetof(EventDescrV5, coll.recvBuff) == 48);
static_assert(offsetof(EventDescrV5, coll.count) == 56);
static_assert(offsetof(EventDescrV5, coll.root) == 64);
static_assert(offsetof(EventDescrV5, coll.datatype) == 72);
static_assert(offsetof(EventDescrV5, coll.nChannels) == 80);
static_assert(offsetof(EventDescrV5, coll.nWarps) == 81);
static_assert(offsetof(EventDescrV5, coll.algo) == 88);
static_assert(offsetof(EventDescrV5, coll.proto) == 96);
static_assert(offsetof(EventDescrV5, coll.parentGroup) == 104);
static_assert(offsetof(EventDescrV5, p2p.func) == 24);
static_assert(offsetof(EventDescrV5, p2p.buff) == 32);
static_assert(offsetof(EventDescrV5, p2p.datatype) == 40);
static_assert(offsetof(EventDescrV5, p2p.count) == 48);
static_assert(offsetof(EventDescrV5, p2p.peer) == 56);
static_assert(offsetof(EventDescrV5, p2p.nChannels) == 60);
static_assert(offsetof(EventDescrV5, p2p.parentGroup) == 64);
static_assert(offsetof(EventDescrV5, proxyOp.pid) == 24);
static_assert(offsetof(EventDescrV5, proxyOp.channelId) == 28);
static_assert(offsetof(EventDescrV5, proxyOp.peer) == 32);
static_assert(offsetof(EventDescrV5, proxyOp.nSteps) == 36);
static_assert(offsetof(EventDescrV5, proxyOp.chunkSize) == 40);
static_assert(offsetof(EventDescrV5, proxyOp.isSend) == 44);
static_assert(offsetof(EventDescrV5, proxyStep.step) == 24);
static_assert(offsetof(EventDescrV5, kernelCh.channelId) == 24);
static_assert(offsetof(EventDescrV5, kernelCh.pTimer) == 32);
static_assert(offsetof(EventDescrV5, netPlugin.id) == 24);
static_assert(offsetof(EventDescrV5, netPlugin.data) == 32);

// v6: v5 plus the CE members, same size; no v5 offset moved.
static_assert(sizeof(EventDescrV6) == 112);
static_assert(offsetof(EventDescrV6, coll.parentGroup) == 104);
static_assert(offsetof(EventDescrV6, p2p.parentGroup) == 64);
static_assert(offsetof(EventDescrV6, kernelCh.pTimer) == 32);
static_assert(offsetof(EventDescrV6, ceColl.seqNumber) == 24);
static_assert(offsetof(EventDescrV6, ceColl.func) == 32);
static_assert(offsetof(EventDescrV6, ceColl.sendBuff) == 40);
static_assert(offsetof(EventDescrV6, ceColl.recvBuff) == 48);
static_assert(offsetof(EventDescrV6, ceColl.count) == 56);
static_assert(offsetof(EventDescrV6, ceColl.root) == 64);
static_assert(offsetof(EventDescrV6, ceColl.datatype) == 72);
static_assert(offsetof(EventDescrV6, ceColl.syncStrategy) == 80);
static_assert(offsetof(EventDescrV6, ceColl.intraBatchSync) == 88);
static_assert(offsetof(EventDescrV6, ceColl.batchSize) == 92);
static_assert(offsetof(EventDescrV6, ceColl.numBatches) == 96);
static_assert(offsetof(EventDescrV6, ceColl.ceSeqNum) == 100);
static_assert(offsetof(EventDescrV6, ceColl.stream) == 104);
static_assert(offsetof(EventDescrV6, ceCollSync.isComplete) == 24);
static_assert(offsetof(EventDescrV6, ceCollSync.nRanks) == 28);
static_assert(offsetof(EventDescrV6, ceCollBatch.numOps) == 24);
static_assert(offsetof(EventDescrV6, ceCollBatch.totalBytes) == 32);
static_assert(offsetof(EventDescrV6, ceCollBatch.useIntraSync) == 40);

// Net-plugin event payloads. NetPlugin events carry `id` = type << 16 | version and `data`, a
// pointer to the transport's own descriptor (src/include/plugin/nccl_profiler.h:80-87 and
// src/include/plugin/profiler/net_ib_v1.h at v2.28.9-1; unchanged through 2.30). NCCL's IB
// transport fills one per posted work request (src/transport/net_ib.cc:2162 send, :2405 recv).
inline constexpr std::uint32_t kNetPluginTypeIb = 1;
inline constexpr std::uint32_t kNetPluginTypeSocket = 2;
inline constexpr std::uint32_t kNetIbDescrVersion = 1;
inline constexpr std::uint8_t kNetIbQpEvent = 1;  // ncclProfileQp

struct NetIbDescrV1 {
  std::uint8_t type;  // kNetIbQpEvent
  struct {
    int device;  // index into the communicator's (possibly merged) net device's NICs
    std::uint64_t wr_id;
    int opcode;
    int qpNum;
    std::size_t length;
  } qp;
};
static_assert(sizeof(NetIbDescrV1) == 40);
static_assert(offsetof(NetIbDescrV1, qp.device) == 8);
static_assert(offsetof(NetIbDescrV1, qp.qpNum) == 28);

}  // namespace ncclscope::abi

#include "plugin/abi/profiler_v1_v3.h"  // IWYU pragma: export
#include "plugin/abi/profiler_v7.h"     // IWYU pragma: export

namespace ncclscope::abi {
using StateArgsV7 = StateArgsV6;  // unchanged: the phase stop reuses kernelCh.pTimer
using ProfilerV7 = ProfilerVtable<EventDescrV7, StateArgsV7, InitV5>;
static_assert(sizeof(ProfilerV7) == 48);
}  // namespace ncclscope::abi
