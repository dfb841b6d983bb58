#pragma once

// NCCL's profiler-plugin ABI versions 1 (NCCL 2.23), 2 (2.24, 2.25) and 3 (2.26), re-declared from
// NCCL's own headers at those tags (src/include/nccl_profiler.h:21-140 at v2.23.4-1 and
// v2.24.3-1, src/include/plugin/profiler/profiler_v3.h:10-100 at v2.26.6-1) and pinned by the
// static_asserts at the end. Included by nccl_profiler_abi.h; read that file first.
//
// What these versions carry that later ones moved or dropped:
//   init(context, mask) only: no communicator hash, name, rank, size or logger. The hash and the
//     (always NULL) name come with every Coll/P2p descriptor instead; init runs before NCCL has
//     computed the hash (src/init.cc:341 vs :1452 at v2.23.4-1).
//   v1 names func, datatype, algo and proto by number (ncclFunc_t etc. at 2.23, below); v2 on
//     names them by NCCL's static strings, like v4+.
//   nMaxChannels: the tuner's upper bound for the op, not the channels used (src/enqueue.cc:
//     786-868 at v2.23.4-1); p2p has no channel count and no sequence number.
//   KernelCh (v3 only) has no GPU timestamp: NCCL's proxy thread starts and stops it when it sees
//     the channel's work counters move (src/transport/profiler.cc:20-48 at v2.26.6-1).
//   State arguments are 16 bytes: ProxyOp states 0-7 carry {transSize, steps}; ProxyStep records
//     pass no arguments at all (NULL, src/misc/profiler.cc:502 at v2.23.4-1).

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace ncclscope::abi {

// ProxyOp states of v1-v3 (ncclProfilerEventState_v1_t's first members, unnumbered in NCCL's
// enum, so 0-7 by position). NCCL 2.27+ never records them (only InProgress_v4).
enum ProxyOpStateV1 : int {
  kProxyOpSendPosted = 0,
  kProxyOpSendRemFifoWait = 1,
  kProxyOpSendTransmitted = 2,
  kProxyOpSendDone = 3,
  kProxyOpRecvPosted = 4,
  kProxyOpRecvReceived = 5,
  kProxyOpRecvTransmitted = 6,
  kProxyOpRecvDone = 7,
};

// v1's numbers (NCCL 2.23): ncclFunc_t (src/include/nccl_common.h:41-51), ncclDataType_t
// (nccl.h.in:230-243: no fp8 yet), algorithm and protocol (nccl_common.h:53-67), at v2.23.4-1.
enum FuncV1 : std::uint8_t {
  kFuncV1Broadcast = 0,
  kFuncV1Reduce = 1,
  kFuncV1AllGather = 2,
  kFuncV1ReduceScatter = 3,
  kFuncV1AllReduce = 4,
  kFuncV1SendRecv = 5,
  kFuncV1Send = 6,
  kFuncV1Recv = 7,
};
enum DatatypeV1 : std::uint8_t {
  kDatatypeV1Int8 = 0,
  kDatatypeV1Uint8 = 1,
  kDatatypeV1Int32 = 2,
  kDatatypeV1Uint32 = 3,
  kDatatypeV1Int64 = 4,
  kDatatypeV1Uint64 = 5,
  kDatatypeV1Float16 = 6,
  kDatatypeV1Float32 = 7,
  kDatatypeV1Float64 = 8,
  kDatatypeV1Bfloat16 = 9,
};
enum AlgoV1 : std::uint8_t {
  kAlgoV1Tree = 0,
  kAlgoV1Ring = 1,
  kAlgoV1CollNetDirect = 2,
  kAlgoV1CollNetChain = 3,
  kAlgoV1Nvls = 4,
  kAlgoV1NvlsTree = 5,
  kAlgoV1Pat = 6,
};
enum ProtoV1 : std::uint8_t { kProtoV1Ll = 0, kProtoV1Ll128 = 1, kProtoV1Simple = 2 };

struct ProxyOpStateArgsV1 {
  std::size_t transSize;  // bytes of the op so far
  int steps;              // steps so far
};
struct ProxyCtrlStateArgs {
  int appendedProxyOps;
};
union StateArgsV1 {
  ProxyOpStateArgsV1 proxyOp;
  ProxyCtrlStateArgs proxyCtrl;
};
using StateArgsV2 = StateArgsV1;
using StateArgsV3 = StateArgsV1;

// Union members at namespace scope (types declared inside an anonymous union are a compiler
// extension, -Wnested-anon-types): the same layout as NCCL's anonymous structs.
using ProxyOpDescrV1 = ProxyOpDescr;  // unchanged from v1 to v7

struct CollDescrV1 {
  const char* name;
  std::uint64_t commHash;
  std::uint64_t seqNumber;
  std::uint8_t func;  // FuncV1
  const void* sendBuff;
  void* recvBuff;
  std::size_t count;
  int root;
  std::uint8_t datatype;  // DatatypeV1
  std::uint32_t op;
  std::size_t trafficBytes;
  std::uint8_t nMaxChannels;
  std::uint8_t nWarps;
  std::uint8_t algo;   // AlgoV1
  std::uint8_t proto;  // ProtoV1
  int isCollnet;
  int isNvls;
};

struct P2pDescrV1 {
  const char* name;
  std::uint64_t commHash;
  std::uint8_t func;
  void* buff;
  std::uint8_t datatype;
  std::size_t count;
  int peer;
};

struct CollDescrV2 {
  const char* name;
  std::uint64_t commHash;
  std::uint64_t seqNumber;
  const char* func;
  const void* sendBuff;
  void* recvBuff;
  std::size_t count;
  int root;
  const char* datatype;
  std::size_t trafficBytes;
  std::uint8_t nMaxChannels;
  std::uint8_t nWarps;
  const char* algo;
  const char* proto;
};

struct P2pDescrV2 {  // also v3's
  const char* name;
  std::uint64_t commHash;
  const char* func;
  void* buff;
  const char* datatype;
  std::size_t count;
  int peer;
};

struct CollDescrV3 {
  const char* name;
  std::uint64_t commHash;
  std::uint64_t seqNumber;
  const char* func;
  const void* sendBuff;
  void* recvBuff;
  std::size_t count;
  int root;
  const char* datatype;
  std::uint8_t nMaxChannels;
  std::uint8_t nWarps;
  const char* algo;
  const char* proto;
};

struct KernelChDescrV3 {
  std::uint8_t channelId;  // no pTimer before v4
};

struct EventDescrV1 {
  std::uint8_t type;
  void* parentObj;
  int rank;
  union {
    CollDescrV1 coll;
    P2pDescrV1 p2p;
    ProxyOpDescr proxyOp;
    ProxyStepDescr proxyStep;
  };
};

struct EventDescrV2 {
  std::uint8_t type;
  void* parentObj;
  int rank;
  union {
    CollDescrV2 coll;
    P2pDescrV2 p2p;
    ProxyOpDescr proxyOp;
    ProxyStepDescr proxyStep;
  };
};

struct EventDescrV3 {
  std::uint8_t type;
  void* parentObj;
  int rank;
  union {
    CollDescrV3 coll;
    P2pDescrV2 p2p;
    ProxyOpDescr proxyOp;
    ProxyStepDescr proxyStep;
    KernelChDescrV3 kernelCh;
    NetPluginDescr netPlugin;
  };
};

// The vtable of v1-v3: the same six members as later versions, with init(context, mask).
template <typename Descr, typename StateArgs>
struct ProfilerVtableV1 {
  const char* name;
  int (*init)(void** context, int* eActivationMask);
  int (*startEvent)(void* context, void** eHandle, Descr* eDescr);
  int (*stopEvent)(void* eHandle);
  int (*recordEventState)(void* eHandle, int eState, StateArgs* eStateArgs);
  int (*finalize)(void* context);
};
using ProfilerV1 = ProfilerVtableV1<EventDescrV1, StateArgsV1>;
using ProfilerV2 = ProfilerVtableV1<EventDescrV2, StateArgsV2>;
using ProfilerV3 = ProfilerVtableV1<EventDescrV3, StateArgsV3>;

// ---- Layout pins (x86-64 / aarch64 LP64; measured against NCCL's headers at the tags) ----

static_assert(sizeof(StateArgsV1) == 16);
static_assert(offsetof(StateArgsV1, proxyOp.transSize) == 0);
static_assert(offsetof(StateArgsV1, proxyOp.steps) == 8);
static_assert(sizeof(ProfilerV1) == 48 && sizeof(ProfilerV3) == 48);

static_assert(sizeof(EventDescrV1) == 120);
static_assert(offsetof(EventDescrV1, coll.name) == 24);
static_assert(offsetof(EventDescrV1, coll.commHash) == 32);
static_assert(offsetof(EventDescrV1, coll.seqNumber) == 40);
static_assert(offsetof(EventDescrV1, coll.func) == 48);
static_assert(offsetof(EventDescrV1, coll.sendBuff) == 56);
static_assert(offsetof(EventDescrV1, coll.recvBuff) == 64);
static_assert(offsetof(EventDescrV1, coll.count) == 72);
static_assert(offsetof(EventDescrV1, coll.root) == 80);
static_assert(offsetof(EventDescrV1, coll.datatype) == 84);
static_assert(offsetof(EventDescrV1, coll.op) == 88);
static_assert(offsetof(EventDescrV1, coll.trafficBytes) == 96);
static_assert(offsetof(EventDescrV1, coll.nMaxChannels) == 104);
static_assert(offsetof(EventDescrV1, coll.nWarps) == 105);
static_assert(offsetof(EventDescrV1, coll.algo) == 106);
static_assert(offsetof(EventDescrV1, coll.proto) == 107);
static_assert(offsetof(EventDescrV1, coll.isCollnet) == 108);
static_assert(offsetof(EventDescrV1, coll.isNvls) == 112);
static_assert(offsetof(EventDescrV1, p2p.func) == 40);
static_assert(offsetof(EventDescrV1, p2p.buff) == 48);
static_assert(offsetof(EventDescrV1, p2p.datatype) == 56);
static_assert(offsetof(EventDescrV1, p2p.count) == 64);
static_assert(offsetof(EventDescrV1, p2p.peer) == 72);
static_assert(offsetof(EventDescrV1, proxyOp.pid) == 24);
static_assert(offsetof(EventDescrV1, proxyOp.isSend) == 44);
static_assert(offsetof(EventDescrV1, proxyStep.step) == 24);

static_assert(sizeof(EventDescrV2) == 128);
static_assert(offsetof(EventDescrV2, coll.func) == 48);
static_assert(offsetof(EventDescrV2, coll.datatype) == 88);
static_assert(offsetof(EventDescrV2, coll.trafficBytes) == 96);
static_assert(offsetof(EventDescrV2, coll.nMaxChannels) == 104);
static_assert(offsetof(EventDescrV2, coll.nWarps) == 105);
static_assert(offsetof(EventDescrV2, coll.algo) == 112);
static_assert(offsetof(EventDescrV2, coll.proto) == 120);
static_assert(offsetof(EventDescrV2, p2p.commHash) == 32);
static_assert(offsetof(EventDescrV2, p2p.func) == 40);
static_assert(offsetof(EventDescrV2, p2p.datatype) == 56);
static_assert(offsetof(EventDescrV2, p2p.count) == 64);
static_assert(offsetof(EventDescrV2, p2p.peer) == 72);

static_assert(sizeof(EventDescrV3) == 120);
static_assert(offsetof(EventDescrV3, coll.seqNumber) == 40);
static_assert(offsetof(EventDescrV3, coll.datatype) == 88);
static_assert(offsetof(EventDescrV3, coll.nMaxChannels) == 96);
static_assert(offsetof(EventDescrV3, coll.nWarps) == 97);
static_assert(offsetof(EventDescrV3, coll.algo) == 104);
static_assert(offsetof(EventDescrV3, coll.proto) == 112);
static_assert(offsetof(EventDescrV3, p2p.peer) == 72);
static_assert(offsetof(EventDescrV3, kernelCh.channelId) == 24);
static_assert(offsetof(EventDescrV3, netPlugin.id) == 24);
static_assert(offsetof(EventDescrV3, netPlugin.data) == 32);

}  // namespace ncclscope::abi
