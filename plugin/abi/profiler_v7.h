#pragma once

// NCCL's profiler-plugin ABI version 7 (NCCL 2.31), re-declared from
// src/include/plugin/profiler/profiler_v7.h:13-173 and src/include/plugin/nccl_profiler.h:29,78
// at NVIDIA/nccl 8898068 (2.31.2), pinned by the static_asserts below. v7 is v6 with members
// appended at the end of their union structs (no v6 offset moved) and one new event:
//   userTag (collApi, p2pApi, coll, p2p, ceColl): the application's tag for the call,
//     ncclCollConfig_t.userProfilerTag of the nccl*Config entry points; 0 = untagged, values
//     with the top bit set are reserved by NCCL (src/nccl.h.in at 2.31.2).
//   coll.kernelVariant, coll.isSymColl: symmetric-memory collectives, which 2.31 reports (2.28
//     reported no event for them); their algo is the variant's suffix and proto "".
//   KernelPhase (1 << 15): spans of one kernel channel, timed by the GPU's globaltimer: phase 0
//     initial_sync, 1 compute, 2 final_sync. Parent: the KernelCh handle. Stop time through
//     recordEventState(KernelPhaseStop = 31, args->kernelCh.pTimer).
// The draft "v7" of NVIDIA/nccl PR #2045 (a string userTag on the same bit) never shipped; this is
// not it.

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace ncclscope::abi {

// The event bit (kKernelPhase) and the stop state (kKernelPhaseStop) are in nccl_profiler_abi.h
// with the other versions' values, which include this file.

// kernelPhase.phaseId (profiler_v7.h:131; names src/plugin/profiler.cc:896 at 2.31.2).
enum KernelPhaseId : std::uint8_t {
  kPhaseInitialSync = 0,
  kPhaseCompute = 1,
  kPhaseFinalSync = 2,
  kPhaseCount = 3,
};

// Union members at namespace scope (types declared inside an anonymous union are a compiler
// extension, -Wnested-anon-types): the same layout as NCCL's anonymous structs. v6's members
// (nccl_profiler_abi.h) are reused where v7 left them as they were.
struct CollApiDescrV7 {
  const char* func;
  std::size_t count;
  const char* datatype;
  int root;
  void* stream;
  bool graphCaptured;
  std::uint64_t userTag;
};

struct P2pApiDescrV7 {
  const char* func;
  std::size_t count;
  const char* datatype;
  void* stream;
  bool graphCaptured;
  std::uint64_t userTag;
};

struct CollDescrV7 {
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
  const char* kernelVariant;
  bool isSymColl;
  std::uint64_t userTag;
};

struct P2pDescrV7 {
  const char* func;
  void* buff;
  const char* datatype;
  std::size_t count;
  int peer;
  std::uint8_t nChannels;
  void* parentGroup;
  std::uint64_t userTag;
};

struct CeCollDescrV7 {
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
  std::uint64_t userTag;
};

struct KernelPhaseDescr {
  std::uint8_t channelId;
  std::uint8_t phaseId;  // KernelPhaseId
  const char* phaseName;
  std::uint64_t pTimer;  // GPU globaltimer at the phase's start
};

struct EventDescrV7 {
  std::uint64_t type;
  void* parentObj;
  int rank;
  union {
    GroupApiDescr groupApi;
    CollApiDescrV7 collApi;
    P2pApiDescrV7 p2pApi;
    KernelLaunchDescr kernelLaunch;
    CollDescrV7 coll;
    P2pDescrV7 p2p;
    ProxyOpDescr proxyOp;
    ProxyStepDescr proxyStep;
    KernelChDescr kernelCh;
    NetPluginDescr netPlugin;
    CeCollDescrV7 ceColl;
    CeSyncDescrV6 ceCollSync;
    CeBatchDescrV6 ceCollBatch;
    KernelPhaseDescr kernelPhase;
  };
};

// ---- Layout pins (x86-64 / aarch64 LP64) ----
static_assert(sizeof(EventDescrV7) == 136);
static_assert(offsetof(EventDescrV7, collApi.graphCaptured) == 64);
static_assert(offsetof(EventDescrV7, collApi.userTag) == 72);
static_assert(offsetof(EventDescrV7, p2pApi.graphCaptured) == 56);
static_assert(offsetof(EventDescrV7, p2pApi.userTag) == 64);
static_assert(offsetof(EventDescrV7, coll.seqNumber) == 24);
static_assert(offsetof(EventDescrV7, coll.nChannels) == 80);
static_assert(offsetof(EventDescrV7, coll.parentGroup) == 104);
static_assert(offsetof(EventDescrV7, coll.kernelVariant) == 112);
static_assert(offsetof(EventDescrV7, coll.isSymColl) == 120);
static_assert(offsetof(EventDescrV7, coll.userTag) == 128);
static_assert(offsetof(EventDescrV7, p2p.nChannels) == 60);
static_assert(offsetof(EventDescrV7, p2p.parentGroup) == 64);
static_assert(offsetof(EventDescrV7, p2p.userTag) == 72);
static_assert(offsetof(EventDescrV7, proxyOp.isSend) == 44);
static_assert(offsetof(EventDescrV7, kernelCh.pTimer) == 32);
static_assert(offsetof(EventDescrV7, netPlugin.data) == 32);
static_assert(offsetof(EventDescrV7, ceColl.stream) == 104);
static_assert(offsetof(EventDescrV7, ceColl.userTag) == 112);
static_assert(offsetof(EventDescrV7, kernelPhase.channelId) == 24);
static_assert(offsetof(EventDescrV7, kernelPhase.phaseId) == 25);
static_assert(offsetof(EventDescrV7, kernelPhase.phaseName) == 32);
static_assert(offsetof(EventDescrV7, kernelPhase.pTimer) == 40);

}  // namespace ncclscope::abi
