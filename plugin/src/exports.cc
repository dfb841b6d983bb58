// The seven data symbols NCCL looks up with dlsym, one per profiler ABI NCCL has shipped:
// ncclProfiler_v7 (NCCL 2.31+), _v6 (2.29, 2.30), _v5 (2.28), _v4 (2.27), _v3 (2.26), _v2 (2.24,
// 2.25), _v1 (2.23). Each NCCL takes the newest one it knows (src/plugin/profiler.cc:123-141 at
// 2.31.2; :70-81 at v2.28.9-1; :52-58 at v2.26.6-1; src/misc/profiler.cc:220-234 at v2.24.3-1,
// :119 at v2.23.4-1). Each adapter translates its version's descriptor into the version-neutral
// calls of the event path and of runtime.cc, declared in runtime.h. These are the only symbols the
// library exports (-fvisibility=hidden plus a version script), and nothing can be thrown out of
// them: the plugin is built without exceptions (platform/README.md). With NCCLSCOPE_CHAIN set, each
// entry point hands the event to chain.h, which calls the same functions ("...Own") for ncclscope
// and forwards the event to the chained plugin; unset, that costs one predictable branch.
//
// The start entry points' general paths are `flatten`: everything they call is inlined into them,
// one function per NCCL call, as link-time optimization does by itself while each handler has a
// single caller. Giving chain.h the address of a "StartV*Own" adds a second caller, after which
// GCC no longer inlines the handlers (measured: +21 % instructions per collective unchained before
// this, docs/benchmarks.md). The chain's entry points are noinline, so flattening leaves them out.
//
// KernelCh entry. Three calls in four are a KernelCh start, its KernelChStop record or its stop
// (one of each per channel of every op; NCCL's proxy thread makes them, src/plugin/profiler.cc
// ncclProfilerStartKernelChEvent / ncclProfilerStopKernelChEvent at v2.28.9-1), each a few dozen
// instructions of work. Inside the one flattened function that handles every event they paid its
// prologue and epilogue (six callee-saved registers, a jump table: ~47 instructions per channel,
// 15 % of an 8-channel collective, docs/benchmarks.md). So each exported function first tests for
// an untimed, unchained KernelCh event and calls its handler directly; every other event goes on
// to the general path, a function of its own (noinline), unchanged.

#include <type_traits>

#include "plugin/abi/nccl_profiler_abi.h"
#include "plugin/src/chain.h"
#include "plugin/src/clock.h"
#include "plugin/src/governor.h"
#include "plugin/src/handle.h"
#include "plugin/src/names.h"
#include "plugin/src/runtime.h"
#include "plugin/src/stderr_logger.h"

namespace ncclscope::plugin {
namespace {

// Runs `body`. Init never reports an error: on an error NCCL 2.28 continues with whatever context
// was set, and NCCL 2.29+ unloads the plugin at once and again at communicator destroy
// (src/plugin/profiler.cc:252-253 at v2.30.7-1), taking profiling from every other live
// communicator. A NULL context with success opts out. Nothing in the plugin throws: it is built
// without exceptions and links no C++ run time (platform/README.md), so no exception can cross
// into NCCL, which is C to its plugins.
template <typename Body>
abi::Result Guard(Body&& body) noexcept {
  return body();
}

// The Group (kernel plan) of a Coll/P2p task: v5+ pass it in parentGroup and the CollApi/P2pApi
// as parentObj (src/plugin/profiler.cc:402-403 and :437-438 at v2.28.9-1); v4 passes the Group as
// parentObj (src/plugin/profiler.cc:245/:281 at v2.27.7-1).
const void* CollGroup(const abi::EventDescrV4* d) { return d->parentObj; }
const void* P2pGroup(const abi::EventDescrV4* d) { return d->parentObj; }
template <typename Descr>
const void* CollGroup(const Descr* d) {
  return d->coll.parentGroup;
}
template <typename Descr>
const void* P2pGroup(const Descr* d) {
  return d->p2p.parentGroup;
}

template <typename Descr>
void StartCommon(void* context, void** handle, const Descr* d, std::uint64_t type) {
  switch (type) {
    case abi::kGroup:
      *handle = StartGroup();
      return;
    case abi::kColl: {
      OpArgs args;
      args.kind = NCCLSCOPE_KIND_COLL;
      args.parent = d->parentObj;
      args.parent_group = CollGroup(d);
      args.seq = d->coll.seqNumber;
      args.func = d->coll.func;
      args.count = d->coll.count;
      args.root = d->coll.root;
      args.datatype = d->coll.datatype;
      args.n_channels = d->coll.nChannels;
      args.n_warps = d->coll.nWarps;
      args.algo = d->coll.algo;
      args.proto = d->coll.proto;
      args.rank = d->rank;
      if constexpr (std::is_same_v<Descr, abi::EventDescrV7>) {
        args.user_tag = d->coll.userTag;
        args.symmetric = d->coll.isSymColl;
        args.kernel_variant = d->coll.kernelVariant;
      }
      StartOp(context, handle, args);
      return;
    }
    case abi::kP2p: {
      OpArgs args;
      args.kind = NCCLSCOPE_KIND_P2P;
      args.parent = d->parentObj;
      args.parent_group = P2pGroup(d);
      args.func = d->p2p.func;
      args.count = d->p2p.count;
      args.root = d->p2p.peer;
      args.datatype = d->p2p.datatype;
      args.n_channels = d->p2p.nChannels;
      args.rank = d->rank;
      if constexpr (std::is_same_v<Descr, abi::EventDescrV7>) args.user_tag = d->p2p.userTag;
      StartOp(context, handle, args);
      return;
    }
    case abi::kKernelCh:
      StartKernelCh(context, handle, d->parentObj, d->kernelCh.channelId, d->kernelCh.pTimer);
      return;
    case abi::kProxyOp: {
      ProxyOpArgs args;
      args.parent = d->parentObj;
      args.rank = d->rank;
      args.pid = d->proxyOp.pid;
      args.channel = d->proxyOp.channelId;
      args.peer = d->proxyOp.peer;
      args.n_steps = d->proxyOp.nSteps;
      args.chunk_size = d->proxyOp.chunkSize;
      args.is_send = d->proxyOp.isSend;
      StartProxyOp(context, handle, args);
      return;
    }
    case abi::kProxyStep:
      StartProxyStep(context, handle, d->parentObj, d->proxyStep.step);
      return;
    case abi::kNetPlugin:
      StartNetPlugin(handle, d->parentObj, d->netPlugin.id, d->netPlugin.data);
      return;
    default:
      // KernelLaunch, ProxyCtrl, CeSync, CeBatch: accepted, not tracked.
      // A non-NULL handle keeps NCCL's bookkeeping (e.g. seqNumber of graph plans) unchanged.
      *handle = IgnoredHandle();
      return;
  }
}

// The overhead governor times every call on a timed op and its children (governor.h): their
// handles carry governor::kTimedBit, which the child started here inherits. An untimed call pays
// one bit test. A timed one goes through a cold wrapper that takes the time and calls the entry
// point again with the bit cleared (in a copy of the descriptor for starts), so each handler keeps
// its one call site and never sees the bit.
governor::Class ClassOfEvent(std::uint64_t type) {
  switch (type) {
    case abi::kKernelCh:
    case abi::kKernelPhase:
      return governor::kKernelCalls;
    case abi::kProxyOp:
    case abi::kProxyStep:
    case abi::kNetPlugin:
      return governor::kProxyCalls;
    default:
      return governor::kOpCalls;
  }
}

governor::Class ClassOfHandle(HandleKind kind) {
  switch (kind) {
    case HandleKind::kKernelCh:
    case HandleKind::kKernelPhase:
      return governor::kKernelCalls;
    case HandleKind::kProxyOp:
    case HandleKind::kProxyStep:
      return governor::kProxyCalls;
    default:
      return governor::kOpCalls;
  }
}

abi::Result StopV(void* handle);
abi::Result RecordV(void* handle, int state, abi::StateArgsV4* args);

__attribute__((noinline, cold)) abi::Result TimedStop(void* handle) {
  void* own = governor::Strip(handle);
  governor::State& g = R().gov;
  const governor::Class c = ClassOfHandle(DecodeHandle(own).kind);
  const std::uint64_t t0 = governor::Begin(g, c);
  const abi::Result result = StopV(own);
  governor::End(g, c, t0, clock::Ticks());
  return result;
}

__attribute__((noinline, cold)) abi::Result TimedRecord(void* handle, int state,
                                                        abi::StateArgsV4* args) {
  void* own = governor::Strip(handle);
  governor::State& g = R().gov;
  const governor::Class c = ClassOfHandle(DecodeHandle(own).kind);
  const std::uint64_t t0 = governor::Begin(g, c);
  const abi::Result result = RecordV(own, state, args);
  governor::End(g, c, t0, clock::Ticks());
  return result;
}

// Whether a start's parent is a timed op (or a child of one) of this process. PXN ProxyOps carry
// another process's parent (sub->taskEventHandle with sub->pid, src/plugin/profiler.cc:485-487 at
// v2.28.9-1: the op's owner enqueued it), which may carry the bit of that process's own timing:
// it is passed through untouched, never timed here.
template <typename Descr>
bool ParentTimed(const Descr* d) {
  if (__builtin_expect(!governor::IsTimed(d->parentObj), 1)) return false;
  if (static_cast<std::uint64_t>(d->type) == abi::kProxyOp) return d->proxyOp.pid == R().pid;
  return true;
}

// A KernelCh start of an untimed op, no chained plugin loaded. The parent is tested to be an
// op's handle as StartOp makes it (kind kOp, sub-index 0: no timed bit) in one masked compare,
// after which the handler's own test of the parent's kind is known true and left out (measured:
// 1 instruction per KernelCh start). A parent of any other kind or sub-index takes the general
// path to the same handler (StartV*Own, StartCommon), which treats it as before.
template <typename Descr>
bool IsPlainKernelChStart(const Descr* d) {
  static_assert(governor::kTimedBit == 0x80);
  constexpr std::uint64_t kKindAndSub = std::uint64_t{0xF} << 60 | 0xFF;
  constexpr std::uint64_t kPlainOp = static_cast<std::uint64_t>(HandleKind::kOp) << 60;
  return static_cast<std::uint64_t>(d->type) == abi::kKernelCh && !chain::Active() &&
         (reinterpret_cast<std::uintptr_t>(d->parentObj) & kKindAndSub) == kPlainOp;
}

// A start whose parent is timed (a child of a timed op; Coll/P2p starts time themselves in
// StartOp): `own` gets a copy of the descriptor whose parent has the bit cleared, and the child's
// handle is marked.
template <typename Descr>
__attribute__((noinline, cold)) abi::Result TimedStart(abi::Result (*own)(void*, void**, Descr*),
                                                       void* context, void** handle, Descr* d,
                                                       std::uint64_t type) {
  Descr copy = *d;
  copy.parentObj = governor::Strip(d->parentObj);
  governor::State& g = R().gov;
  const governor::Class c = ClassOfEvent(type);
  const std::uint64_t t0 = governor::Begin(g, c);
  const abi::Result result = own(context, handle, &copy);
  if (*handle != nullptr && DecodeHandle(*handle).kind != HandleKind::kIgnored) {
    *handle = governor::MarkTimed(*handle);
  }
  governor::End(g, c, t0, clock::Ticks());
  return result;
}

// An untimed KernelCh handle (the timed bit is in the sub byte, above any channel number) of a
// channel below 64: one test of the sub byte's top two bits, after which the handler's own test of
// the channel is known true and left out (measured: 2 instructions per KernelCh stop and record,
// 32 per 8-channel collective). A sub-index of 64 or more names no channel: the general path
// hands it to the same handler (StopEvent, RecordEventState), which refuses it as before.
bool IsPlainKernelCh(const void* handle) {
  static_assert(governor::kTimedBit == 0x80 && NCCLSCOPE_MAX_CHANNELS == 64);
  return DecodeHandle(handle).kind == HandleKind::kKernelCh &&
         (reinterpret_cast<std::uintptr_t>(handle) & 0xC0) == 0;
}

// Stop and record: the chain calls these same functions back with ncclscope's own handle, which
// is never a chain handle, so the handlers keep one caller and the unchained cost stays one
// predictable branch (on the handle's kind: a chain handle exists only while chaining).
__attribute__((noinline)) abi::Result StopGeneral(void* handle) {
  if (__builtin_expect(DecodeHandle(handle).kind == HandleKind::kChain, 0)) {
    return chain::Stop(StopV, handle);  // a tail call: chain.h throws nothing
  }
  if (__builtin_expect(governor::IsTimed(handle), 0)) return TimedStop(handle);
  return Guard([&] {
    StopEvent(handle);
    return abi::kSuccess;
  });
}

__attribute__((flatten)) abi::Result StopV(void* handle) {
  if (__builtin_expect(IsPlainKernelCh(handle), 1)) {  // KernelCh entry (top of file)
    return Guard([&] {
      StopKernelCh(handle);
      return abi::kSuccess;
    });
  }
  return StopGeneral(handle);
}

__attribute__((noinline)) abi::Result RecordGeneral(void* handle, int state,
                                                    abi::StateArgsV4* args) {
  if (__builtin_expect(DecodeHandle(handle).kind == HandleKind::kChain, 0)) {
    return chain::Record(RecordV, handle, state, args);
  }
  if (__builtin_expect(governor::IsTimed(handle), 0)) return TimedRecord(handle, state, args);
  return Guard([&] {
    RecordEventState(handle, state, args);
    return abi::kSuccess;
  });
}

__attribute__((flatten)) abi::Result RecordV(void* handle, int state, abi::StateArgsV4* args) {
  if (__builtin_expect(state == abi::kKernelChStop && args != nullptr && IsPlainKernelCh(handle),
                       1)) {  // KernelCh entry (top of file)
    return Guard([&] {
      RecordKernelChStop(handle, args);
      return abi::kSuccess;
    });
  }
  return RecordGeneral(handle, state, args);
}

abi::Result FinalizeOwn(void* context) {
  return Guard([&] { return Finalize(context); });
}

abi::Result FinalizeV(void* context) {
  return Guard([&] { return chain::Finalize(FinalizeOwn, context); });
}

abi::Result InitOwn(void** context, std::uint64_t comm_id, int* mask, const char* name, int nnodes,
                    int nranks, int rank, abi::DebugLogger logger, int version) {
  *context = nullptr;
  return Guard(
      [&] { return Init(context, comm_id, mask, name, nnodes, nranks, rank, logger, version); });
}

abi::Result InitAny(void** context, std::uint64_t comm_id, int* mask, const char* name, int nnodes,
                    int nranks, int rank, abi::DebugLogger logger, int version) {
  *context = nullptr;
  return Guard([&] {
    return chain::Init(InitOwn, context, comm_id, mask, name, nnodes, nranks, rank, logger,
                       version);
  });
}

// ---- v6 ----

// The general path of a start: through the chain when one is loaded, else ncclscope's own.
// Chaining (chain.h) forwards the ABI versions NCCL's Inspector and other plugins of today use,
// v4 to v6; under v7 ncclscope runs alone (chain::Init resolves no table for it).
template <typename Descr>
inline constexpr bool kChainable =
    std::is_same_v<Descr, abi::EventDescrV4> || std::is_same_v<Descr, abi::EventDescrV5> ||
    std::is_same_v<Descr, abi::EventDescrV6>;

template <typename Descr, abi::Result (*Own)(void*, void**, Descr*)>
__attribute__((noinline, flatten)) abi::Result StartGeneral(void* context, void** handle,
                                                            Descr* d) {
  if constexpr (kChainable<Descr>) {
    if (__builtin_expect(chain::Active(), 0)) return chain::Start(Own, context, handle, d);
  }
  return Own(context, handle, d);
}

// A start entry point (one per ABI version, tables below): the KernelCh entry (top of file),
// every other event the general path.
template <typename Descr, abi::Result (*Own)(void*, void**, Descr*)>
__attribute__((flatten)) abi::Result StartEntry(void* context, void** handle, Descr* d) {
  if (__builtin_expect(IsPlainKernelChStart(d), 1)) {
    return Guard([&] {
      StartKernelCh(context, handle, d->parentObj, d->kernelCh.channelId, d->kernelCh.pTimer);
      return abi::kSuccess;
    });
  }
  return StartGeneral<Descr, Own>(context, handle, d);
}

// v5, v6 and v7 share init's arguments (plugin/abi: InitV5).
template <int kVersion>
abi::Result InitV5On(void** context, std::uint64_t comm_id, int* mask, const char* name, int nnodes,
                     int nranks, int rank, abi::DebugLogger logger) {
  return InitAny(context, comm_id, mask, name, nnodes, nranks, rank, logger, kVersion);
}

// Group, Coll, P2p, ProxyOp and ProxyStep, the types 1 to 16 (plugin/abi/nccl_profiler_abi.h):
// StartCommon's switch takes them by one jump table after one range check. Tested before the
// API and copy-engine events (v5+), which they would otherwise pass through one compare each
// (measured: -15 instructions a Coll start, +2 an API event's).
template <typename Descr>
bool StartCoreEvent(void* context, void** handle, const Descr* d) {
  static_assert(abi::kGroup == 1 && abi::kColl == 2 && abi::kP2p == 4 && abi::kProxyOp == 8 &&
                abi::kProxyStep == 16);
  if (d->type > abi::kProxyStep) return false;
  StartCommon(context, handle, d, d->type);
  return true;
}

// GroupApi, CollApi and P2pApi (v5+) are where NCCL copies its mask for the call.
template <typename Descr>
bool StartApiEvent(void** handle, const Descr* d) {
  switch (d->type) {
    case abi::kGroupApi:
      *handle = StartApi(abi::kGroupApi, nullptr);
      return true;
    case abi::kCollApi:
      *handle = StartApi(abi::kCollApi, d->collApi.datatype, d->collApi.graphCaptured);
      return true;
    case abi::kP2pApi:
      *handle = StartApi(abi::kP2pApi, d->p2pApi.datatype, d->p2pApi.graphCaptured);
      return true;
    default:
      return false;
  }
}

// A copy-engine collective (v6+): issued by the host, no kernel channels, a sequence of its own.
template <typename Descr>
OpArgs CeCollArgs(const Descr* d) {
  OpArgs args;
  args.kind = NCCLSCOPE_KIND_CE;
  args.seq = d->ceColl.seqNumber;
  args.func = d->ceColl.func;
  args.count = d->ceColl.count;
  args.root = d->ceColl.root;
  args.datatype = d->ceColl.datatype;
  args.rank = d->rank;
  return args;
}

abi::Result StartV6Own(void* context, void** handle, abi::EventDescrV6* d) {
  *handle = nullptr;
  if (__builtin_expect(ParentTimed(d), 0)) {
    return TimedStart(StartV6Own, context, handle, d, static_cast<std::uint64_t>(d->type));
  }
  return Guard([&] {
    if (d->type == abi::kKernelCh) {  // the most frequent event: straight to it
      StartKernelCh(context, handle, d->parentObj, d->kernelCh.channelId, d->kernelCh.pTimer);
      return abi::kSuccess;
    }
    if (StartCoreEvent(context, handle, d)) return abi::kSuccess;
    if (StartApiEvent(handle, d)) return abi::kSuccess;
    if (d->type == abi::kCeColl) {
      StartOp(context, handle, CeCollArgs(d));
    } else {
      StartCommon(context, handle, d, d->type);
    }
    return abi::kSuccess;
  });
}

// ---- v7: v6, plus userTag, symmetric collectives and KernelPhase (plugin/abi/profiler_v7.h) ----

abi::Result StartV7Own(void* context, void** handle, abi::EventDescrV7* d) {
  *handle = nullptr;
  if (__builtin_expect(ParentTimed(d), 0)) {
    return TimedStart(StartV7Own, context, handle, d, d->type);
  }
  return Guard([&] {
    switch (d->type) {
      case abi::kKernelCh:  // the most frequent event: straight to it
        StartKernelCh(context, handle, d->parentObj, d->kernelCh.channelId, d->kernelCh.pTimer);
        return abi::kSuccess;
      case abi::kKernelPhase:
        // parentObj is the KernelCh handle (src/plugin/profiler.cc:927 at 2.31.2); its channel
        // is the one the handle names.
        StartKernelPhase(handle, d->parentObj, d->kernelPhase.phaseId, d->kernelPhase.pTimer);
        return abi::kSuccess;
      case abi::kCeColl: {
        OpArgs args = CeCollArgs(d);
        args.user_tag = d->ceColl.userTag;
        StartOp(context, handle, args);
        return abi::kSuccess;
      }
      default:
        if (StartApiEvent(handle, d)) return abi::kSuccess;
        StartCommon(context, handle, d, d->type);
        return abi::kSuccess;
    }
  });
}

// ---- v5 ----

abi::Result StartV5Own(void* context, void** handle, abi::EventDescrV5* d) {
  *handle = nullptr;
  if (__builtin_expect(ParentTimed(d), 0)) {
    return TimedStart(StartV5Own, context, handle, d, static_cast<std::uint64_t>(d->type));
  }
  return Guard([&] {
    if (d->type == abi::kKernelCh) {  // the most frequent event: straight to it
      StartKernelCh(context, handle, d->parentObj, d->kernelCh.channelId, d->kernelCh.pTimer);
      return abi::kSuccess;
    }
    if (StartCoreEvent(context, handle, d)) return abi::kSuccess;
    if (StartApiEvent(handle, d)) return abi::kSuccess;
    StartCommon(context, handle, d, d->type);
    return abi::kSuccess;
  });
}

// ---- v4: init takes (mask, commName, commHash, ...) and the event type is one byte. ----

abi::Result InitV4(void** context, int* mask, const char* name, std::uint64_t comm_hash, int nnodes,
                   int nranks, int rank, abi::DebugLogger logger) {
  return InitAny(context, comm_hash, mask, name, nnodes, nranks, rank, logger, 4);
}

abi::Result StartV4Own(void* context, void** handle, abi::EventDescrV4* d) {
  *handle = nullptr;
  if (__builtin_expect(ParentTimed(d), 0)) {
    return TimedStart(StartV4Own, context, handle, d, static_cast<std::uint64_t>(d->type));
  }
  return Guard([&] {
    StartCommon(context, handle, d, static_cast<std::uint64_t>(d->type));
    return abi::kSuccess;
  });
}

// ---- v1, v2, v3 (NCCL 2.23-2.26; plugin/abi/profiler_v1_v3.h) ----
// init(context, mask) alone: the communicator's identity comes with each Coll/P2p (commHash,
// rank), and NCCL calls init before it has computed the hash (src/init.cc:341 vs :1452 at
// v2.23.4-1). Coll/P2p have the Group as parent and NCCL's mask copy is taken without an event
// (per plan at Group start in 2.23-2.25, src/misc/profiler.cc:247 at v2.23.4-1; per task at the
// API call in 2.26, src/enqueue.cc:2179/:2257 at v2.26.6-1), as under v4. No chaining.

template <int kVersion>
abi::Result InitOld(void** context, int* mask) {
  // NCCL gives v1-v3 no logger: its warnings go to stderr, as NCCL_DEBUG asks (stderr_logger.h).
  return InitAny(context, 0, mask, nullptr, 0, 0, -1, StderrLogger(), kVersion);
}

// NCCL's names: v2+ pass the strings themselves, v1 passes numbers that `name_of` names.
using NameOfV1 = const char* (*)(std::uint8_t);
const char* NameOf(const char* name, NameOfV1 /*name_of*/) { return name; }
const char* NameOf(std::uint8_t v1, NameOfV1 name_of) { return name_of(v1); }

// v1-v3's Coll: NCCL's identity of the communicator comes with each op (no init arguments for it),
// and before v4 no GPU timestamps: v3's KernelCh only say which channels ran, v1-v2 have none.
template <typename Descr, int kVersion>
OpArgs OldCollArgs(const Descr* d) {
  OpArgs args;
  args.kind = NCCLSCOPE_KIND_COLL;
  args.parent = d->parentObj;
  args.parent_group = d->parentObj;
  args.seq = d->coll.seqNumber;
  args.func = NameOf(d->coll.func, names::FuncV1);
  args.count = d->coll.count;
  args.root = d->coll.root;
  args.datatype = NameOf(d->coll.datatype, names::DatatypeV1);
  // nMaxChannels: an upper bound (src/enqueue.cc:786-868 at v2.23.4-1), recorded as NCCL's
  // announcement; v3's KernelCh say which channels ran.
  args.n_channels = d->coll.nMaxChannels;
  args.n_warps = d->coll.nWarps;
  args.algo = NameOf(d->coll.algo, names::AlgoV1);
  args.proto = NameOf(d->coll.proto, names::ProtoV1);
  args.rank = d->rank;
  args.identity_from_op = true;
  args.comm_hash = d->coll.commHash;
  args.kernel_untimed = kVersion == 3;
  args.no_kernel_events = kVersion <= 2;
  return args;
}

template <typename Descr, int kVersion>
OpArgs OldP2pArgs(const Descr* d) {
  OpArgs args;
  args.kind = NCCLSCOPE_KIND_P2P;
  args.parent = d->parentObj;
  args.parent_group = d->parentObj;
  args.func = NameOf(d->p2p.func, names::FuncV1);
  args.count = d->p2p.count;
  args.root = d->p2p.peer;
  args.datatype = NameOf(d->p2p.datatype, names::DatatypeV1);
  args.rank = d->rank;  // no channel count before v4
  args.identity_from_op = true;
  args.comm_hash = d->p2p.commHash;
  args.kernel_untimed = kVersion == 3;
  args.no_kernel_events = kVersion <= 2;
  return args;
}

template <typename Descr, int kVersion>
abi::Result StartOldOwn(void* context, void** handle, Descr* d) {
  *handle = nullptr;
  if (__builtin_expect(ParentTimed(d), 0)) {
    return TimedStart(StartOldOwn<Descr, kVersion>, context, handle, d,
                      static_cast<std::uint64_t>(d->type));
  }
  return Guard([&] {
    switch (static_cast<std::uint64_t>(d->type)) {
      case abi::kGroup:
        *handle = StartGroup();
        return abi::kSuccess;
      case abi::kColl:
        StartOp(context, handle, OldCollArgs<Descr, kVersion>(d));
        return abi::kSuccess;
      case abi::kP2p:
        StartOp(context, handle, OldP2pArgs<Descr, kVersion>(d));
        return abi::kSuccess;
      case abi::kProxyOp: {
        ProxyOpArgs args;
        args.parent = d->parentObj;
        args.rank = d->rank;
        args.pid = d->proxyOp.pid;
        args.channel = d->proxyOp.channelId;
        args.peer = d->proxyOp.peer;
        args.n_steps = d->proxyOp.nSteps;
        args.chunk_size = d->proxyOp.chunkSize;
        args.is_send = d->proxyOp.isSend;
        args.network_known = true;
        StartProxyOp(context, handle, args);
        return abi::kSuccess;
      }
      case abi::kProxyStep:
        StartProxyStep(context, handle, d->parentObj, d->proxyStep.step);
        return abi::kSuccess;
      default:
        if constexpr (std::is_same_v<Descr, abi::EventDescrV3>) {
          if (d->type == abi::kKernelCh) {
            // No GPU timestamp before v4: NCCL's proxy starts and stops it when the channel's work
            // counters move (src/transport/profiler.cc:20-48 at v2.26.6-1).
            StartKernelCh(context, handle, d->parentObj, d->kernelCh.channelId, 0);
            return abi::kSuccess;
          }
          if (d->type == abi::kNetPlugin) {
            StartNetPlugin(handle, d->parentObj, d->netPlugin.id, d->netPlugin.data);
            return abi::kSuccess;
          }
        }
        *handle = IgnoredHandle();  // ProxyCtrl
        return abi::kSuccess;
    }
  });
}

template <typename Descr, int kVersion>
abi::Result StartOld(void* context, void** handle, Descr* d) {
  return StartOldOwn<Descr, kVersion>(context, handle, d);
}

// v1-v3 states: ProxyOp 0-7 with the op's bytes so far; ProxyStep 8-12 with no arguments (NULL,
// src/misc/profiler.cc:502 at v2.23.4-1); ProxyCtrl 13-18 not tracked.
abi::Result RecordOldOwn(void* handle, int state, abi::StateArgsV1* args) {
  return Guard([&] {
    if (state >= abi::kProxyOpSendPosted && state <= abi::kProxyOpRecvDone) {
      RecordProxyOpStateV1(handle, state, args != nullptr ? args->proxyOp.transSize : 0);
    } else if (state >= abi::kProxyStepSendGpuWait && state <= abi::kProxyStepRecvGpuWait) {
      RecordEventState(handle, state, nullptr);
    }
    return abi::kSuccess;
  });
}

abi::Result RecordOld(void* handle, int state, abi::StateArgsV1* args) {
  if (__builtin_expect(governor::IsTimed(handle), 0)) {
    void* own = governor::Strip(handle);
    governor::State& g = R().gov;
    const governor::Class c = ClassOfHandle(DecodeHandle(own).kind);
    const std::uint64_t t0 = governor::Begin(g, c);
    const abi::Result result = RecordOldOwn(own, state, args);
    governor::End(g, c, t0, clock::Ticks());
    return result;
  }
  return RecordOldOwn(handle, state, args);
}

// One table per ABI version: v4 and later differ only in their init adapter and their descriptor's
// translation (stop, record and finalize kept their arguments); v1-v3 share their own adapters.
template <typename Table, typename Descr, auto kInit,
          abi::Result (*kStartOwn)(void*, void**, Descr*)>
constexpr Table TableV4On() {
  return Table{"ncclscope", kInit, StartEntry<Descr, kStartOwn>, StopV, RecordV, FinalizeV};
}

template <typename Table, typename Descr, int kVersion>
constexpr Table TableV1ToV3() {
  return Table{"ncclscope", InitOld<kVersion>, StartOld<Descr, kVersion>,
               StopV,       RecordOld,         FinalizeOwn};
}

}  // namespace
}  // namespace ncclscope::plugin

namespace {
namespace abi = ncclscope::abi;
namespace plugin = ncclscope::plugin;
}  // namespace

// NOLINTBEGIN(readability-identifier-naming): the names and types are NCCL's ABI.
extern "C" {
__attribute__((visibility("default"))) constinit abi::ProfilerV7 ncclProfiler_v7 =
    plugin::TableV4On<abi::ProfilerV7, abi::EventDescrV7, plugin::InitV5On<7>,
                      plugin::StartV7Own>();
__attribute__((visibility("default"))) constinit abi::ProfilerV6 ncclProfiler_v6 =
    plugin::TableV4On<abi::ProfilerV6, abi::EventDescrV6, plugin::InitV5On<6>,
                      plugin::StartV6Own>();
__attribute__((visibility("default"))) constinit abi::ProfilerV5 ncclProfiler_v5 =
    plugin::TableV4On<abi::ProfilerV5, abi::EventDescrV5, plugin::InitV5On<5>,
                      plugin::StartV5Own>();
__attribute__((visibility("default"))) constinit abi::ProfilerV4 ncclProfiler_v4 =
    plugin::TableV4On<abi::ProfilerV4, abi::EventDescrV4, plugin::InitV4, plugin::StartV4Own>();
__attribute__((visibility("default"))) constinit abi::ProfilerV3 ncclProfiler_v3 =
    plugin::TableV1ToV3<abi::ProfilerV3, abi::EventDescrV3, 3>();
__attribute__((visibility("default"))) constinit abi::ProfilerV2 ncclProfiler_v2 =
    plugin::TableV1ToV3<abi::ProfilerV2, abi::EventDescrV2, 2>();
__attribute__((visibility("default"))) constinit abi::ProfilerV1 ncclProfiler_v1 =
    plugin::TableV1ToV3<abi::ProfilerV1, abi::EventDescrV1, 1>();
}
// NOLINTEND(readability-identifier-naming)
