// Plugin chaining's event path, while a chained plugin is loaded: which events NCCL sends to each
// plugin (the gates of src/plugin/profiler.cc), the calls into the chained plugin, and the
// start/stop/record forwarding with each plugin's own parents and contexts behind one chain
// handle. Lock-free, allocation-free, system-call-free (chain.h). NCCL line numbers are at
// v2.28.9-1 unless marked HEAD (master 5067397c = 2.30.7) or v2.27.7-1.

#include <cstring>
#include <type_traits>

#include "plugin/src/chain_state.h"
#include "plugin/src/runtime.h"

namespace ncclscope::plugin::chain {
namespace {

// ---- Which events NCCL sends: the gates of src/plugin/profiler.cc ----

constexpr std::uint32_t kNetChildren =
    abi::kProxyOp | abi::kProxyStep | abi::kKernelCh | abi::kNetPlugin;

// The mask bits that make NCCL emit an event of `type` (for a task snapshot or the global mask),
// by the bit index of the type.
constexpr std::uint32_t kGates[15] = {
    // Group :374
    abi::kGroup | abi::kColl | abi::kP2p | kNetChildren,
    // Coll :398, P2p :433
    abi::kColl | kNetChildren,
    abi::kP2p | kNetChildren,
    // ProxyOp :482, ProxyStep :516/:535, ProxyCtrl :568, KernelCh :593, NetPlugin :692
    abi::kProxyOp | abi::kProxyStep | abi::kNetPlugin,
    abi::kProxyStep | abi::kNetPlugin,
    abi::kProxyCtrl,
    abi::kKernelCh,
    abi::kNetPlugin,
    // GroupApi :219 (HEAD adds the CE bits, :281-283)
    abi::kGroupApi | abi::kP2pApi | abi::kCollApi | abi::kKernelLaunch | abi::kGroup | abi::kColl |
        abi::kP2p | kNetChildren | kCeEvents,
    // CollApi :292 (HEAD: CE bits, :366-367), P2pApi :267, KernelLaunch :333
    abi::kCollApi | abi::kColl | kNetChildren | kCeEvents,
    abi::kP2pApi | abi::kP2p | kNetChildren,
    abi::kKernelLaunch,
    // CeColl HEAD :826-827, CeSync :873, CeBatch :908
    kCeEvents,
    abi::kCeSync,
    abi::kCeBatch,
};

std::uint32_t Gate(std::uint64_t type) {
  // One bit set, below 1 << 15: a known type; anything else is not ours to judge (forward it).
  if (type == 0 || (type & (type - 1)) != 0 || type >= (1u << 15)) return ~0u;
  return kGates[__builtin_ctzll(type)];
}

// Events NCCL starts only when the parent's handle is non-NULL: CeSync/CeBatch (HEAD :872,
// :906: args->ceCollProfHandle) and, in 2.27, ProxySteps (v2.27.7-1 :361: sub->opEventHandle).
bool NeedsParent(std::uint64_t type, int version) {
  return type == abi::kCeSync || type == abi::kCeBatch || (type == abi::kProxyStep && version == 4);
}

// Where ncclscope's snapshot comes from. NCCL snapshots the global mask at each API call
// (:218, kept by the task: src/enqueue.cc:2486, :2403) and every child of the task follows the
// task's snapshot (proxy ops copy it: src/enqueue.cc:1276); ProxyCtrl (:567) and CE events
// (HEAD :827) read the global mask directly. The chain reads ncclscope's mask when NCCL starts
// the API event, so ncclscope sees what NCCL would have sent it alone. Simplified: a Group takes
// ncclscope's mask at the Group's start (NCCL: the plan's first task, :356-371), and under v4
// (no API events) a Coll/P2p takes it at its start (NCCL 2.27: at the API call, v2.27.7-1
// src/enqueue.cc:2370).
bool InheritsSnapshot(std::uint64_t type) {
  switch (type) {
    case abi::kColl:
    case abi::kP2p:
    case abi::kKernelLaunch:
    case abi::kKernelCh:
    case abi::kProxyOp:
    case abi::kProxyStep:
    case abi::kNetPlugin:
      return true;
    default:
      return false;
  }
}

Lifetime LifetimeOf(std::uint64_t type, bool graph_captured) {
  switch (type) {
    case abi::kGroupApi:
    case abi::kCollApi:
    case abi::kP2pApi:
      return graph_captured ? kRetainGraph : kRetainTask;
    case abi::kColl:
    case abi::kP2p:
      return kRetainTask;
    case abi::kProxyOp:
      return kLease;
    default:
      return kFreeAtStop;
  }
}

// NCCL's v5 adapter behind v6 drops CE events and CE states (HEAD
// src/plugin/profiler/profiler_v5.cc:111-116, :126-134) and clears the CE bits of the mask
// (:179-182).
bool Supports(const ChainedTable& t, std::uint64_t type) {
  return !t.drops_ce || (type & kCeEvents) == 0;
}
bool SupportsState(const ChainedTable& t, int state) {
  return !t.drops_ce || state < 25 || state > 30;
}

abi::Result ChainedStop(const ChainedTable& t, void* handle) {
  return Guarded([&] {
    switch (t.version) {
      case 4:
        return static_cast<const abi::ProfilerV4*>(t.table)->stopEvent(handle);
      case 5:
        return static_cast<const abi::ProfilerV5*>(t.table)->stopEvent(handle);
      default:
        return static_cast<const abi::ProfilerV6*>(t.table)->stopEvent(handle);
    }
  });
}

abi::Result ChainedRecord(const ChainedTable& t, void* handle, int state, abi::StateArgsV4* args) {
  return Guarded([&] {
    switch (t.version) {
      case 4:
        return static_cast<const abi::ProfilerV4*>(t.table)->recordEventState(handle, state, args);
      case 5:
        return static_cast<const abi::ProfilerV5*>(t.table)->recordEventState(handle, state, args);
      default:
        return static_cast<const abi::ProfilerV6*>(t.table)->recordEventState(handle, state, args);
    }
  });
}

// Starts the event in the chained plugin. `d` already carries the chained plugin's parents.
template <typename Descr>
void* ChainedStart(const ChainedTable& t, void* context, Descr* d) {
  void* handle = nullptr;
  const abi::Result rc = Guarded([&] {
    if constexpr (std::is_same_v<Descr, abi::EventDescrV4>) {
      return static_cast<const abi::ProfilerV4*>(t.table)->startEvent(context, &handle, d);
    } else if constexpr (std::is_same_v<Descr, abi::EventDescrV5>) {
      return static_cast<const abi::ProfilerV5*>(t.table)->startEvent(context, &handle, d);
    } else {
      if (t.version == 6) {
        return static_cast<const abi::ProfilerV6*>(t.table)->startEvent(context, &handle, d);
      }
      // v5 behind v6: the same layout for every non-CE event (plugin/abi static_asserts).
      static_assert(sizeof(abi::EventDescrV5) == sizeof(abi::EventDescrV6));
      abi::EventDescrV5 v5{};
      std::memcpy(&v5, d, sizeof(v5));
      return static_cast<const abi::ProfilerV5*>(t.table)->startEvent(context, &handle, &v5);
    }
  });
  if (rc != abi::kSuccess) Fail(kLogStartError);
  if (handle == nullptr && (LoadMask(&g_chained_mask) & d->type) != 0) Fail(kLogNullHandle);
  return handle;
}

// Each plugin gets NCCL's descriptor with its own parents. NCCL's descriptor is a local of the
// function that starts the event, never read after startEvent returns (src/plugin/profiler.cc
// :214-699 at v2.28.9-1, HEAD :823-850 for CE; its adapters build their own copy): the parents
// are set in place for each call and restored afterwards, instead of copying 112 bytes twice.
template <typename Descr>
struct Parents {
  Descr* d;
  void* parent;
  void* group = nullptr;
  explicit Parents(Descr* descr) : d(descr), parent(descr->parentObj) {
    if constexpr (!std::is_same_v<Descr, abi::EventDescrV4>) {
      if (d->type == abi::kColl) group = d->coll.parentGroup;
      if (d->type == abi::kP2p) group = d->p2p.parentGroup;
    }
  }
  ~Parents() { Set(parent, group); }
  Parents(const Parents&) = delete;
  Parents& operator=(const Parents&) = delete;
  void Set(void* p, void* g) {
    d->parentObj = p;
    if constexpr (!std::is_same_v<Descr, abi::EventDescrV4>) {
      if (d->type == abi::kColl) d->coll.parentGroup = g;
      if (d->type == abi::kP2p) d->p2p.parentGroup = g;
    }
  }
};

// ---- The event path ----

template <typename Descr>
constexpr int kVersion = std::is_same_v<Descr, abi::EventDescrV4>   ? 4
                         : std::is_same_v<Descr, abi::EventDescrV5> ? 5
                                                                    : 6;

// A parent handle NCCL passed, resolved.
struct Parent {
  enum State : std::uint8_t { kNone, kSlot, kPlain, kLost };
  State state = kNone;
  bool foreign = false;
  bool missed = false;  // the chained plugin never got this parent
  std::uint32_t snapshot = 0;
  void* ours = nullptr;
  void* chained = nullptr;
};

Parent ResolveParent(void* handle) {
  Parent p;
  if (handle == nullptr) return p;
  const Handle h = DecodeHandle(handle);
  if (h.kind != HandleKind::kChain) {
    // ncclscope's own handle: the parent got no slot, so the chained plugin never saw it.
    p.state = Parent::kPlain;
    p.ours = handle;
    p.missed = true;
    return p;
  }
  Chain& g = G();
  Slot* s = h.index < g.slots.carved() ? At(h.index) : nullptr;
  const std::uint32_t state = s != nullptr ? s->state.load(std::memory_order_acquire) : 0;
  if (s == nullptr || (state >> 2) != h.generation || (state & 3) == kDead) {
    p.state = Parent::kLost;
    p.missed = true;
    return p;
  }
  p.ours = AsPointer(s->ours.load(std::memory_order_acquire));  // as in Read()
  p.chained = AsPointer(s->chained.load(std::memory_order_acquire));
  p.snapshot = s->snapshot.load(std::memory_order_acquire);
  const std::uint32_t info = s->info.load(std::memory_order_acquire);
  if ((s->state.load(std::memory_order_relaxed) >> 2) != h.generation) {
    p = Parent{};
    p.state = Parent::kLost;
    p.missed = true;
    return p;
  }
  p.state = Parent::kSlot;
  p.foreign = (info & kInfoForeign) != 0;
  p.missed = (info & kInfoMissed) != 0;
  return p;
}

template <typename Descr>
bool GraphCaptured(const Descr* d) {
  if constexpr (std::is_same_v<Descr, abi::EventDescrV4>) {
    return false;
  } else {
    switch (d->type) {
      case abi::kGroupApi:
        return d->groupApi.graphCaptured;
      case abi::kCollApi:
        return d->collApi.graphCaptured;
      case abi::kP2pApi:
        return d->p2pApi.graphCaptured;
      default:
        return false;
    }
  }
}

// Where a start goes: to ncclscope, to the chained plugin, to both or to neither, and with which
// parents and contexts on each side.
struct Route {
  Parent parent;
  Parent group;  // v5+ Coll/P2p: the Group parent
  Comm comm;
  bool foreign = false;  // PXN: another process's context and parent
  std::uint32_t snapshot = 0;
  bool to_ours = false;
  bool to_chained = false;
  bool missed = false;  // the chained plugin lost this event's parent: it misses this one too
};

// always_inline, with PublishSlot: StartT's steps as calls cost ~30 instructions per start more
// (callgrind, plugin_bench's chained mode: 10,154 per chained collective inlined, 10,306 not).
template <typename Descr>
__attribute__((always_inline)) inline Route RouteStart(Chain& g, void* context, const Descr* d) {
  constexpr int version = kVersion<Descr>;
  const auto type = static_cast<std::uint64_t>(d->type);
  Route r;
  // PXN: a ProxyOp our proxy raises for another process carries that process's context and
  // parent (src/proxy.cc:385, src/enqueue.cc:1275); so do its steps and net-plugin events.
  const bool foreign_op = type == abi::kProxyOp && d->proxyOp.pid != R().pid;
  if (foreign_op) {
    r.parent.state = Parent::kSlot;
    r.parent.ours = d->parentObj;
    r.parent.chained = d->parentObj;
    r.parent.foreign = true;
  } else {
    r.parent = ResolveParent(d->parentObj);
  }
  if constexpr (version >= 5) {
    if (type == abi::kColl) r.group = ResolveParent(d->coll.parentGroup);
    if (type == abi::kP2p) r.group = ResolveParent(d->p2p.parentGroup);
  }
  r.foreign = foreign_op || r.parent.foreign;

  if (r.foreign) {
    r.comm.ours = context;
    r.comm.chained = g.live_chained.load(std::memory_order_relaxed) != 0 ? context : nullptr;
    r.comm.version = version;
  } else {
    r.comm = Lookup(context);
  }

  // ncclscope: exactly the events NCCL would have sent it alone.
  r.snapshot = InheritsSnapshot(type) && r.parent.state == Parent::kSlot && !r.foreign
                   ? r.parent.snapshot
                   : LoadMask(&g_ours_mask);
  r.to_ours =
      (Gate(type) & r.snapshot) != 0 && (!NeedsParent(type, version) || r.parent.ours != nullptr);

  // The chained plugin: every event NCCL emits, with its own parents.
  const ChainedTable& table = g.tables[version];
  r.to_chained = r.comm.chained != nullptr && table.table != nullptr && Supports(table, type);
  if (r.to_chained && r.parent.missed) {
    r.to_chained = false;
    r.missed = true;
  }
  if (r.to_chained && NeedsParent(type, version) && r.parent.chained == nullptr) {
    r.to_chained = false;
  }
  return r;
}

// The chain slot of a started event: both plugins' handles, and what its children and its stop
// need to know. Release stores: a reader of the slot's previous occupant that sees one of these
// values also sees that occupant's end (the claim and Free() happen before this allocation), see
// Read().
__attribute__((always_inline)) inline void* PublishSlot(Chain& g, std::uint32_t index, int version,
                                                        std::uint64_t type, bool graph_captured,
                                                        const Route& r, void* context, void* ours,
                                                        void* chained) {
  Slot* s = At(index);
  const std::uint32_t generation = s->slot.generation.load(std::memory_order_relaxed);
  const Lifetime lifetime = LifetimeOf(type, graph_captured);
  std::uint32_t info = static_cast<std::uint32_t>(version) | lifetime << kInfoLifetimeShift;
  if (r.foreign) info |= kInfoForeign;
  if (r.missed) info |= kInfoMissed;  // so its children are not forwarded either
  s->ours.store(AsValue(ours), std::memory_order_release);
  s->chained.store(AsValue(chained), std::memory_order_release);
  s->context.store(AsValue(context), std::memory_order_release);
  s->info.store(info, std::memory_order_release);
  s->snapshot.store(r.snapshot, std::memory_order_release);
  s->type.store(static_cast<std::uint32_t>(type), std::memory_order_release);
  s->state.store(StateWord(generation, kLive), std::memory_order_release);
  if (lifetime == kLease) Retire(g.proxy, index, generation, kLive);
  return EncodeHandle(HandleKind::kChain, generation, index);
}

template <typename Descr, typename Own>
abi::Result StartT(Own own, void* context, void** handle, Descr* d) {
  constexpr int version = kVersion<Descr>;
  *handle = nullptr;
  Chain& g = G();
  const auto type = static_cast<std::uint64_t>(d->type);
  const Route r = RouteStart(g, context, d);
  if (!r.to_ours && !r.to_chained && !r.missed) return abi::kSuccess;  // neither plugin gets it

  Parents<Descr> original(d);  // restores NCCL's parents on return
  const std::uint32_t index = g.slots.Allocate();
  if (index == UINT32_MAX) {
    // No slot: ncclscope keeps the event (its own handle); the chained plugin misses it.
    if (r.to_chained || r.missed) Fail(kLogTableFull);
    if (r.to_ours) {
      original.Set(r.parent.ours, r.group.ours);
      own(r.comm.ours, handle, d);
    }
    return abi::kSuccess;
  }
  if (r.missed) Fail(kLogParentLost);

  void* ours = nullptr;
  if (r.to_ours) {
    original.Set(r.parent.ours, r.group.ours);
    own(r.comm.ours, &ours, d);
  }
  void* chained = nullptr;
  if (r.to_chained) {
    // A parentGroup the chained plugin never saw becomes NULL (it is a v4 compatibility field).
    original.Set(r.parent.chained,
                 r.group.state == Parent::kSlot && !r.group.missed ? r.group.chained : nullptr);
    chained = ChainedStart(g.tables[version], r.comm.chained, d);
  }
  if (ours == nullptr && chained == nullptr && !r.missed) {
    g.slots.Free(index);  // never published: nobody can name it
    return abi::kSuccess;
  }
  *handle = PublishSlot(g, index, version, type, GraphCaptured(d), r, context, ours, chained);
  return abi::kSuccess;
}

}  // namespace

abi::Result Start(OwnStartV4 own, void* context, void** handle, abi::EventDescrV4* d) noexcept {
  return StartT(own, context, handle, d);
}
abi::Result Start(OwnStartV5 own, void* context, void** handle, abi::EventDescrV5* d) noexcept {
  return StartT(own, context, handle, d);
}
abi::Result Start(OwnStartV6 own, void* context, void** handle, abi::EventDescrV6* d) noexcept {
  return StartT(own, context, handle, d);
}

abi::Result Stop(OwnStop own, void* handle) noexcept {
  const Handle h = DecodeHandle(handle);
  if (h.kind != HandleKind::kChain) return own(handle);  // ncclscope's own (no slot was free)
  View v;
  if (!Read(h, &v)) {
    // NCCL only passes back handles it got, so a stale one outlived its lease or window.
    R().ring.Count(NCCLSCOPE_CTR_INVALID_HANDLE);
    Fail(kLogStale);
    return abi::kSuccess;
  }
  const auto lifetime = static_cast<Lifetime>(v.info >> kInfoLifetimeShift & 3);
  const bool retained = lifetime == kRetainTask || lifetime == kRetainGraph;
  std::uint32_t expected = StateWord(v.generation, kLive);
  if (!v.slot->state.compare_exchange_strong(expected,
                                             StateWord(v.generation, retained ? kStopped : kDead),
                                             std::memory_order_acq_rel)) {
    // Stopped before (NCCL never does: it clears its copy at stop, e.g. src/plugin/profiler.cc
    // :505, :556). ncclscope judges its own handle as it would alone; the chained plugin never
    // gets a second stop.
    if (v.ours != nullptr) own(v.ours);
    return abi::kSuccess;
  }
  if (v.ours != nullptr) own(v.ours);
  if (v.chained != nullptr) {
    const ChainedTable& table = G().tables[v.info & kInfoVersion];
    if (ChainedStop(table, v.chained) != abi::kSuccess) Fail(kLogStopError);
  }
  switch (lifetime) {
    case kRetainTask:
      Retire(G().task, v.index, v.generation, kStopped);
      break;
    case kRetainGraph:
      Retire(G().graph, v.index, v.generation, kStopped);
      break;
    default:
      G().slots.Free(v.index);  // a ProxyOp's lease entry then no longer matches
      break;
  }
  return abi::kSuccess;
}

abi::Result Record(OwnRecord own, void* handle, int state, abi::StateArgsV4* args) noexcept {
  const Handle h = DecodeHandle(handle);
  if (h.kind != HandleKind::kChain) return own(handle, state, args);
  View v;
  if (!Read(h, &v)) {
    R().ring.Count(NCCLSCOPE_CTR_INVALID_HANDLE);
    Fail(kLogStale);
    return abi::kSuccess;
  }
  // NCCL records and stops one handle from one thread, record first (e.g. KernelCh:
  // src/plugin/profiler.cc:611-612; ProxyStep states and stop on the proxy thread), so a slot
  // read here is not being stopped concurrently.
  if (v.ours != nullptr) {
    // ProxyCtrl records follow the global mask at record time (:646): ncclscope's part of it.
    if (v.type != abi::kProxyCtrl || (LoadMask(&g_ours_mask) & abi::kProxyCtrl) != 0) {
      own(v.ours, state, args);
    }
  }
  if (v.chained != nullptr) {
    const ChainedTable& table = G().tables[v.info & kInfoVersion];
    if (SupportsState(table, state) &&
        ChainedRecord(table, v.chained, state, args) != abi::kSuccess) {
      Fail(kLogRecordError);
    }
  }
  return abi::kSuccess;
}

}  // namespace ncclscope::plugin::chain
