// Plugin chaining: see chain.h for what NCCL does that shapes this. NCCL line numbers are at
// v2.28.9-1 unless marked HEAD (master 5067397c = 2.30.7) or v2.27.7-1.
//
// Slots. A chain slot (64 bytes, in a SlotArena: per-thread caches, no lock, no system call) holds
// ncclscope's handle, the chained plugin's handle, NCCL's context value, ncclscope's mask
// snapshot for the event's descendants, and a state word (slot generation << 2 | phase). NCCL
// gets EncodeHandle(kChain, generation, index): every lookup is a bound check against the carved
// slots and a compare of the generation, so a stale or foreign value is refused, never followed.
// Readers check the state word before and after reading the fields (a seqlock whose writer is
// the slot's allocation: release stores of the fields, acquire loads; no fences, which
// ThreadSanitizer cannot model); stops claim the slot with one compare-and-swap on that word, so a
// stop is forwarded at most once even when a lease runs out at the same moment.
//
// Lifetimes (by event type):
//  - freed at stop: Group, KernelLaunch, KernelCh, ProxyStep, NetPlugin, ProxyCtrl, CeColl,
//    CeSync, CeBatch. Their children start between their start and stop: Coll/P2p inside the
//    Group (src/enqueue.cc:1308-1315), CeSync/CeBatch inside the CeColl (HEAD src/ce_coll.cc:1367
//    -1406), NetPlugin while the step's handle is set (src/plugin/profiler.cc:695; the step's
//    stop clears it, :556). KernelLaunch, KernelCh and ProxyCtrl have no children.
//  - retained after stop: GroupApi, CollApi, P2pApi, Coll, P2p (see chain.h for why). A stopped
//    slot goes into a retire ring and stays resolvable until kTaskWindow newer retirements
//    displace it (kGraphWindow for API events captured into a CUDA graph, whose handle every
//    replay's Coll names as parent: src/plugin/profiler.cc:403).
//  - leased: ProxyOp. NCCL stops only network ProxyOps (src/transport/net.cc:1364, :1635), so a
//    ProxyOp slot is freed at its stop or, if NCCL never stops it, when kProxyWindow newer
//    ProxyOps have started.
//  When the arena is full, the event gets ncclscope's own handle (ncclscope is unaffected) and the
//  chained plugin misses it and its children (counted).

#include "plugin/src/chain.h"

#include <dlfcn.h>
#include <sys/mman.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <new>
#include <type_traits>

#include "platform/pod_vector.h"
#include "platform/posix_thread.h"
#include "plugin/src/handle.h"
#include "plugin/src/log.h"
#include "plugin/src/pools.h"
#include "plugin/src/runtime.h"
#include "plugin/src/settings.h"

namespace ncclscope::plugin::chain {

std::atomic<bool> g_active{false};

namespace {

// Sizes. 2^18 slots of 64 bytes are reserved as virtual memory (pages appear as slots are first
// carved): room for both retire windows, the proxy lease window and the events in flight.
constexpr std::uint32_t kSlots = 1u << 18;
constexpr std::uint32_t kTaskWindow = 1u << 16;   // ~20000 ops of CPU run-ahead (3 per collective)
constexpr std::uint32_t kGraphWindow = 1u << 12;  // API events of the last 4096 captured ops
constexpr std::uint32_t kProxyWindow = 1u << 16;  // ProxyOps started since
constexpr std::uint32_t kChainOnlyComms = 4096;   // communicators only the chained plugin profiles

constexpr std::uint32_t kCeEvents = abi::kCeColl | abi::kCeSync | abi::kCeBatch;

enum Phase : std::uint32_t { kDead = 0, kLive = 1, kStopped = 2 };
enum Lifetime : std::uint32_t { kFreeAtStop = 0, kRetainTask = 1, kRetainGraph = 2, kLease = 3 };

std::uint32_t StateWord(std::uint32_t generation, Phase phase) {
  return (generation & kGenerationMask) << 2 | phase;
}

// Slot::info bits.
constexpr std::uint32_t kInfoVersion = 0xF;  // ABI version of the entry point NCCL called
constexpr std::uint32_t kInfoLifetimeShift = 4;
constexpr std::uint32_t kInfoForeign = 1u << 6;  // PXN: the contexts are another process's
constexpr std::uint32_t kInfoMissed = 1u << 7;   // the chained plugin never saw this event

struct alignas(64) Slot {
  PoolSlot slot;
  std::atomic<std::uint32_t> state{0};
  std::atomic<std::uint32_t> info{0};
  std::atomic<std::uint64_t> ours{0};
  std::atomic<std::uint64_t> chained{0};
  std::atomic<std::uint64_t> context{0};   // NCCL's context value (finalize sweep)
  std::atomic<std::uint32_t> snapshot{0};  // ncclscope's mask snapshot, inherited by children
  std::atomic<std::uint32_t> type{0};
};
static_assert(sizeof(Slot) == 64 && std::is_trivially_destructible_v<Slot>);

// One communicator: NCCL's context value and the two plugins' contexts behind it.
struct CommEntry {
  std::atomic<std::uint64_t> key{0};  // NCCL's context value; 0 = unused
  std::atomic<std::uint64_t> ours{0};
  std::atomic<std::uint64_t> chained{0};
  std::atomic<std::uint32_t> version{0};
  std::atomic<std::uint32_t> generation{0};  // chain-only entries: bumped at finalize
};

// The chained plugin's table for the ABI version NCCL chose.
struct ChainedTable {
  int version = 0;  // 4, 5 or 6; 0 = not resolved (or absent)
  bool tried = false;
  bool drops_ce = false;  // a v5 table behind NCCL's v6: NCCL's v5 adapter rules (see Supports)
  const void* table = nullptr;
  const char* name = "";
};

struct RetireRing {
  std::atomic<std::uint64_t> cursor{0};
  std::atomic<std::uint64_t>* cells = nullptr;
  std::uint32_t size = 0;  // power of two
};

enum LogKind : std::uint32_t {
  kLogStartError = 1u << 0,
  kLogStopError = 1u << 1,
  kLogRecordError = 1u << 2,
  kLogNullHandle = 1u << 3,
  kLogTableFull = 1u << 4,
  kLogParentLost = 1u << 5,
  kLogStale = 1u << 6,
};

struct Chain {
  platform::Mutex mutex;  // init, finalize, maintenance; never taken on the event path
  bool configured = false;
  PathText path;
  void* lib = nullptr;
  ChainedTable tables[7];
  bool warned_abi = false;  // "NCCL chose an ABI the chain does not forward", logged once
  abi::DebugLogger logger = nullptr;
  std::uint64_t pending_errors = 0;  // counted once ncclscope's ring exists

  SlotArena slots;
  RetireRing task;
  RetireRing graph;
  RetireRing proxy;

  CommEntry* comms = nullptr;
  std::uint32_t ours_capacity = 0;  // entries [0, ours_capacity): by ncclscope's comm slot
  std::uint32_t chain_only_next = 0;
  platform::PodQueue<std::uint32_t> chain_only_free;
  std::atomic<std::uint32_t> live_chained{0};  // communicators the chained plugin profiles

  std::atomic<int*> nccl_mask{nullptr};
  std::atomic<std::uint32_t> pending_logs{0};
  std::uint32_t logged = 0;  // under mutex
};

// Created at load in static storage, never destroyed (no destructor is registered for a placement
// new): NCCL's threads may run events while static destructors run.
alignas(Chain) unsigned char g_chain_storage[sizeof(Chain)];
Chain* const g_chain = new (g_chain_storage) Chain();  // NOLINT(cert-err58-cpp)
Chain& G() { return *g_chain; }

// The two plugins' own event-mask ints (NCCL's is one process-global int,
// src/plugin/profiler.cc:185; every init gets its address, :192). Read and written with
// __atomic builtins, as NCCL reads its own.
alignas(64) int g_ours_mask = 0;
alignas(64) int g_chained_mask = 0;

std::uint32_t LoadMask(const int* mask) {
  return static_cast<std::uint32_t>(__atomic_load_n(mask, __ATOMIC_RELAXED));
}

void LogWith(abi::DebugLogger logger, int level, const char* format, ...)
    __attribute__((format(printf, 3, 4)));
void LogWith(abi::DebugLogger logger, int level, const char* format, ...) {
  va_list args;
  va_start(args, format);
  LogVia(logger, level, __FILE__, __LINE__, "chain: ", format, args);
  va_end(args);
}

void CountError(std::uint64_t n = 1) { R().ring.Count(NCCLSCOPE_CTR_CHAIN_ERRORS, n); }

// A failure on NCCL's threads: counted now, logged once by the next maintenance pass.
void Fail(LogKind kind) {
  CountError();
  Chain& g = G();
  if ((g.pending_logs.load(std::memory_order_relaxed) & kind) == 0) {
    g.pending_logs.fetch_or(kind, std::memory_order_relaxed);
  }
}

// Under g.mutex.
void FlushLogs(Chain& g) {
  const std::uint32_t fresh = g.pending_logs.load(std::memory_order_relaxed) & ~g.logged;
  if (fresh == 0) return;
  g.logged |= fresh;
  struct Line {
    LogKind kind;
    const char* text;
  };
  static constexpr Line kLines[] = {
      {kLogStartError, "returned an error from startEvent"},
      {kLogStopError, "returned an error from stopEvent"},
      {kLogRecordError, "returned an error from recordEventState"},
      {kLogNullHandle, "returned a NULL handle for an event type in its own mask"},
      {kLogTableFull,
       "missed events: all chain slots in use (ncclscope recorded them; their children are not "
       "forwarded either)"},
      {kLogParentLost,
       "missed events whose parent was displaced from the chain's retire window or never "
       "reached it"},
      {kLogStale, "missed a stop or record: the event's lease or retire window had run out"},
  };
  for (const Line& line : kLines) {
    if ((fresh & line.kind) == 0) continue;
    LogWith(g.logger, abi::kLogWarn,
            "chained plugin %s %s; counted in chain_error, logged only once", g.path.c_str(),
            line.text);
  }
}

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

// ---- Slots ----

Slot* At(std::uint32_t index) { return reinterpret_cast<Slot*>(G().slots.At(index)); }

struct View {
  Slot* slot = nullptr;
  std::uint32_t index = 0;
  std::uint32_t generation = 0;
  std::uint32_t phase = kDead;
  std::uint32_t info = 0;
  std::uint32_t snapshot = 0;
  std::uint32_t type = 0;
  void* ours = nullptr;
  void* chained = nullptr;
  std::uint64_t context = 0;
};

void* AsPointer(std::uint64_t value) {
  // Handles and contexts are opaque values that NCCL stores and passes back.
  // NOLINTNEXTLINE(performance-no-int-to-ptr)
  return reinterpret_cast<void*>(static_cast<std::uintptr_t>(value));
}
std::uint64_t AsValue(const void* pointer) {
  return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(pointer));
}

// Reads a live (or stopped and retained) slot named by a chain handle; false when the handle is
// out of bounds, stale or dead.
bool Read(const Handle& h, View* v) {
  Chain& g = G();
  if (h.kind != HandleKind::kChain || h.index >= g.slots.carved()) return false;
  Slot* s = At(h.index);
  const std::uint32_t state = s->state.load(std::memory_order_acquire);
  if ((state >> 2) != h.generation || (state & 3) == kDead) return false;
  // Acquire loads, paired with the release stores of the slot's next occupant (StartT): a field
  // that already holds the next occupant's value makes the re-check below see its generation.
  v->ours = AsPointer(s->ours.load(std::memory_order_acquire));
  v->chained = AsPointer(s->chained.load(std::memory_order_acquire));
  v->context = s->context.load(std::memory_order_acquire);
  v->info = s->info.load(std::memory_order_acquire);
  v->snapshot = s->snapshot.load(std::memory_order_acquire);
  v->type = s->type.load(std::memory_order_acquire);
  // The fields belong to this generation only if the slot was not reallocated meanwhile.
  if ((s->state.load(std::memory_order_relaxed) >> 2) != h.generation) return false;
  v->slot = s;
  v->index = h.index;
  v->generation = h.generation;
  v->phase = state & 3;
  return true;
}

// Frees the slot that `entry` (pushed by Retire) names if it is still in `phase`.
void Reclaim(std::uint64_t entry, Phase phase) {
  const auto index = static_cast<std::uint32_t>(entry);
  const auto generation = static_cast<std::uint32_t>(entry >> 32) & kGenerationMask;
  if (index >= G().slots.carved()) return;
  std::uint32_t expected = StateWord(generation, phase);
  if (At(index)->state.compare_exchange_strong(expected, StateWord(generation, kDead),
                                               std::memory_order_acq_rel)) {
    G().slots.Free(index);
  }
}

// Puts a slot into a window; the slot it displaces is reclaimed if still in `displaced`.
void Retire(RetireRing& ring, std::uint32_t index, std::uint32_t generation, Phase displaced) {
  const std::uint64_t entry =
      1ull << 63 | static_cast<std::uint64_t>(generation) << 32 | static_cast<std::uint64_t>(index);
  const std::uint64_t at = ring.cursor.fetch_add(1, std::memory_order_relaxed) & (ring.size - 1);
  const std::uint64_t old = ring.cells[at].exchange(entry, std::memory_order_acq_rel);
  if (old != 0) Reclaim(old, displaced);
}

// ---- Communicators ----

struct Comm {
  void* ours = nullptr;     // ncclscope's context (NCCL's own value, or NULL for chain-only)
  void* chained = nullptr;  // the chained plugin's context, NULL when it does not profile it
  int version = 0;
  CommEntry* entry = nullptr;
};

CommEntry* EntryFor(const void* context) {
  Chain& g = G();
  if (context == nullptr || g.comms == nullptr) return nullptr;
  const Handle h = DecodeHandle(context);
  CommEntry* e = nullptr;
  if (h.kind == HandleKind::kContext && h.index < g.ours_capacity) {
    e = &g.comms[h.index];
  } else if (h.kind == HandleKind::kChainContext && h.index < kChainOnlyComms) {
    e = &g.comms[g.ours_capacity + h.index];
  } else {
    return nullptr;
  }
  return e->key.load(std::memory_order_acquire) == AsValue(context) ? e : nullptr;
}

Comm Lookup(void* context) {
  Comm c;
  // A chain-only context stands for ncclscope's NULL: ncclscope gets NULL, as it would alone.
  c.ours = DecodeHandle(context).kind == HandleKind::kChainContext ? nullptr : context;
  if (CommEntry* e = EntryFor(context)) {
    c.chained = AsPointer(e->chained.load(std::memory_order_relaxed));
    c.version = static_cast<int>(e->version.load(std::memory_order_relaxed));
    c.entry = e;
  }
  return c;
}

// ---- Masks ----

// NCCL's mask = ncclscope's | the chained plugin's (while it profiles a communicator).
void PublishMask(Chain& g) {
  int* target = g.nccl_mask.load(std::memory_order_relaxed);
  if (target == nullptr) return;
  std::uint32_t mask = LoadMask(&g_ours_mask);
  if (g.live_chained.load(std::memory_order_relaxed) != 0) {
    std::uint32_t chained = LoadMask(&g_chained_mask);
    for (const ChainedTable& t : g.tables) {
      if (t.table != nullptr && t.drops_ce) chained &= ~kCeEvents;
    }
    mask |= chained;
  }
  if (LoadMask(target) != mask) __atomic_store_n(target, static_cast<int>(mask), __ATOMIC_RELAXED);
}

// ---- Loading ----

template <typename Table>
bool Complete(const Table* t) {
  return t->init != nullptr && t->startEvent != nullptr && t->stopEvent != nullptr &&
         t->recordEventState != nullptr && t->finalize != nullptr;
}

// Resolves the chained plugin's table for NCCL's `version` (under g.mutex). NCCL looks up
// ncclProfiler_v<N> from its newest N down (src/plugin/profiler.cc:70-82); the chain wants the
// version NCCL chose for ncclscope, and behind v6 also takes a v5 table, as NCCL itself would
// load a v5-only plugin (NCCL's Inspector exports only ncclProfiler_v5: HEAD
// plugins/profiler/inspector/inspector_plugin.cc:806).
const ChainedTable& Resolve(Chain& g, int version, abi::DebugLogger logger) {
  ChainedTable& t = g.tables[version];
  if (t.tried || g.lib == nullptr) return t;
  t.tried = true;
  const int candidates[2] = {version, version == 6 ? 5 : 0};
  for (int candidate : candidates) {
    if (candidate == 0) break;
    char symbol[32];
    std::snprintf(symbol, sizeof(symbol), "ncclProfiler_v%d", candidate);
    void* found = dlsym(g.lib, symbol);
    if (found == nullptr) continue;
    Dl_info self{};
    Dl_info other{};
    if (dladdr(reinterpret_cast<void*>(&Maintain), &self) != 0 && dladdr(found, &other) != 0 &&
        self.dli_fbase == other.dli_fbase) {
      LogWith(logger, abi::kLogWarn, "NCCLSCOPE_CHAIN=%s is ncclscope itself; ncclscope runs alone",
              g.path.c_str());
      ++g.pending_errors;
      return t;
    }
    bool complete = false;
    const char* name = nullptr;
    if (candidate == 4) {
      const auto* v4 = static_cast<const abi::ProfilerV4*>(found);
      complete = Complete(v4);
      name = v4->name;
    } else if (candidate == 5) {
      const auto* v5 = static_cast<const abi::ProfilerV5*>(found);
      complete = Complete(v5);
      name = v5->name;
    } else {
      const auto* v6 = static_cast<const abi::ProfilerV6*>(found);
      complete = Complete(v6);
      name = v6->name;
    }
    if (!complete) {
      LogWith(logger, abi::kLogWarn,
              "%s in %s lacks a function (init, startEvent, stopEvent, recordEventState or "
              "finalize is NULL); ncclscope runs alone",
              symbol, g.path.c_str());
      ++g.pending_errors;
      return t;
    }
    t.version = candidate;
    t.drops_ce = candidate != version;
    t.table = found;
    t.name = name != nullptr ? name : "(unnamed)";
    LogWith(logger, abi::kLogInfo, "forwarding every event to %s (%s, %s%s)", g.path.c_str(),
            t.name, symbol,
            t.drops_ce ? " behind NCCL's v6, without CE events, as NCCL's v5 adapter does" : "");
    g_active.store(true, std::memory_order_release);
    return t;
  }
  LogWith(logger, abi::kLogWarn,
          "%s exports no ncclProfiler_v%d%s (the ABI version NCCL chose for ncclscope); "
          "ncclscope runs alone",
          g.path.c_str(), version, version == 6 ? " or ncclProfiler_v5" : "");
  ++g.pending_errors;
  return t;
}

bool ReserveRing(RetireRing& ring, std::uint32_t size) {
  void* map = ::mmap(nullptr, size * sizeof(std::uint64_t), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map == MAP_FAILED) return false;
  ring.cells = static_cast<std::atomic<std::uint64_t>*>(map);  // zeroed: every cell empty
  ring.size = size;
  return true;
}

// First init (under g.mutex): NCCLSCOPE_CHAIN, and the chained library.
void Configure(Chain& g, abi::DebugLogger logger) {
  g.configured = true;
  const EnvLookup env = ProcessEnv();
  g.path = ChainPath(env);
  if (g.path.empty()) return;
  Settings probe;
  ApplyEnvironment(env, probe);
  if (probe.disabled) return;  // NCCLSCOPE_DISABLE: NCCL runs without profiler events at all
  const bool reserved = g.slots.Reserve(kChainArena, sizeof(Slot), kSlots) &&
                        ReserveRing(g.task, kTaskWindow) && ReserveRing(g.graph, kGraphWindow) &&
                        ReserveRing(g.proxy, kProxyWindow);
  if (!reserved) {
    LogWith(logger, abi::kLogWarn,
            "cannot reserve memory for NCCLSCOPE_CHAIN=%s; ncclscope runs "
            "alone",
            g.path.c_str());
    ++g.pending_errors;
    return;
  }
  // As NCCL opens profiler plugins (src/plugin/plugin_open.cc:37). Never closed: its threads may
  // outlive the last communicator, and ncclscope itself is never unloaded (-z nodelete).
  g.lib = dlopen(g.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (g.lib == nullptr) {
    const char* error = dlerror();
    LogWith(logger, abi::kLogWarn, "NCCLSCOPE_CHAIN=%s cannot be loaded (%s); ncclscope runs alone",
            g.path.c_str(), error != nullptr ? error : "unknown error");
    ++g.pending_errors;
  }
}

// The table of the communicator map, once ncclscope's comm arena exists (under g.mutex).
bool EnsureComms(Chain& g) {
  if (g.comms != nullptr) return true;
  const std::uint32_t ours = R().comms.capacity();
  const std::size_t bytes = (static_cast<std::size_t>(ours) + kChainOnlyComms) * sizeof(CommEntry);
  void* map = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map == MAP_FAILED) return false;
  g.comms = static_cast<CommEntry*>(map);  // zeroed memory: every entry unused
  g.ours_capacity = ours;
  return true;
}

// ---- Calls into the chained plugin ----
// Its ABI is C, as NCCL calls it: a C++ exception thrown out of it is its crash, as it would be
// under NCCL alone (ncclscope is built without exceptions and links no C++ run time,
// platform/README.md, so it catches none either).

abi::Result ChainedInit(const ChainedTable& t, void** context, std::uint64_t comm_id,
                        const char* name, int nnodes, int nranks, int rank,
                        abi::DebugLogger logger) {
  switch (t.version) {
    case 4:
      return static_cast<const abi::ProfilerV4*>(t.table)->init(
          context, &g_chained_mask, name, comm_id, nnodes, nranks, rank, logger);
    case 5:
      return static_cast<const abi::ProfilerV5*>(t.table)->init(context, comm_id, &g_chained_mask,
                                                                name, nnodes, nranks, rank, logger);
    default:
      return static_cast<const abi::ProfilerV6*>(t.table)->init(context, comm_id, &g_chained_mask,
                                                                name, nnodes, nranks, rank, logger);
  }
}

template <typename Call>
abi::Result Guarded(Call&& call) {
  return call();
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

abi::Result ChainedFinalize(const ChainedTable& t, void* context) {
  return Guarded([&] {
    switch (t.version) {
      case 4:
        return static_cast<const abi::ProfilerV4*>(t.table)->finalize(context);
      case 5:
        return static_cast<const abi::ProfilerV5*>(t.table)->finalize(context);
      default:
        return static_cast<const abi::ProfilerV6*>(t.table)->finalize(context);
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

namespace {

// Init's steps, under g.mutex.

// The chained plugin's init for this communicator: its context, or null when it has none.
void* InitChained(Chain& g, const ChainedTable& table, std::uint64_t comm_id, const char* name,
                  int nnodes, int nranks, int rank, abi::DebugLogger logger) {
  void* chained = nullptr;
  if (table.table != nullptr && EnsureComms(g)) {
    const abi::Result chained_rc =
        ChainedInit(table, &chained, comm_id, name, nnodes, nranks, rank, logger);
    if (chained_rc != abi::kSuccess) {
      // NCCL would unload it (HEAD src/plugin/profiler.cc:252-253); we only stop using it for this
      // communicator, and never finalize what it says it did not initialize.
      LogWith(logger, abi::kLogWarn,
              "chained plugin %s: init failed (error %d) for communicator %#llx rank %d; "
              "ncclscope profiles it alone",
              g.path.c_str(), chained_rc, static_cast<unsigned long long>(comm_id), rank);
      CountError();
      chained = nullptr;
    }
  } else if (table.table != nullptr) {
    LogWith(logger, abi::kLogWarn,
            "no memory for the chain's communicator map; ncclscope runs "
            "alone");
    CountError();
  }
  return chained;
}

// The entry that pairs ncclscope's context `ours` with the chained plugin's, and in `*key` the
// context NCCL gets for the pair; null when there is no room.
CommEntry* NewEntry(Chain& g, void* ours, std::uint64_t* key) {
  CommEntry* entry = nullptr;
  if (ours != nullptr) {
    const Handle h = DecodeHandle(ours);
    if (h.kind == HandleKind::kContext && h.index < g.ours_capacity) {
      entry = &g.comms[h.index];
      *key = AsValue(ours);
    }
  } else {
    // ncclscope does not profile this communicator (no ring, or its table is full): NCCL gets a
    // context that only the chain knows.
    std::uint32_t at = UINT32_MAX;
    if (!g.chain_only_free.empty()) {
      at = g.chain_only_free.Pop();
    } else if (g.chain_only_next < kChainOnlyComms) {
      at = g.chain_only_next++;
    }
    if (at != UINT32_MAX) {
      entry = &g.comms[g.ours_capacity + at];
      *key = AsValue(EncodeHandle(HandleKind::kChainContext,
                                  entry->generation.load(std::memory_order_relaxed), at));
    }
  }
  return entry;
}

// Pairs the two plugins' contexts and hands NCCL the pair's (`*context`); without room, the
// chained plugin's is finalized again and NCCL keeps ncclscope's.
void PairContexts(Chain& g, const ChainedTable& table, void* ours, void* chained,
                  std::uint64_t comm_id, int rank, int abi_version, abi::DebugLogger logger,
                  void** context) {
  std::uint64_t key = 0;
  CommEntry* entry = NewEntry(g, ours, &key);
  if (entry == nullptr) {
    LogWith(logger, abi::kLogWarn,
            "no room to chain communicator %#llx rank %d; finalized it in %s again",
            static_cast<unsigned long long>(comm_id), rank, g.path.c_str());
    CountError();
    if (ChainedFinalize(table, chained) != abi::kSuccess) CountError();
    return;
  }
  entry->ours.store(AsValue(ours), std::memory_order_relaxed);
  entry->chained.store(AsValue(chained), std::memory_order_relaxed);
  entry->version.store(static_cast<std::uint32_t>(abi_version), std::memory_order_relaxed);
  entry->key.store(key, std::memory_order_release);
  g.live_chained.fetch_add(1, std::memory_order_relaxed);
  *context = AsPointer(key);
}

}  // namespace

abi::Result Init(OwnInit own, void** context, std::uint64_t comm_id, int* mask, const char* name,
                 int nnodes, int nranks, int rank, abi::DebugLogger logger, int abi_version) {
  Chain& g = G();
  platform::MutexLock lock(g.mutex);
  if (logger != nullptr) g.logger = logger;
  if (!g.configured) Configure(g, logger);
  const bool chainable = abi_version >= 4 && abi_version <= 6;
  const ChainedTable& table = chainable ? Resolve(g, abi_version, logger) : g.tables[0];
  if (!chainable && g.lib != nullptr && !g.warned_abi) {
    // v1-v3 (NCCL 2.23-2.26) and v7 (2.31+): the chained plugin gets no init and no event.
    LogWith(logger, abi::kLogWarn,
            "NCCL chose profiler ABI v%d; NCCLSCOPE_CHAIN forwards v4 to v6 only: %s gets no "
            "events; ncclscope runs alone",
            abi_version, g.path.c_str());
    g.warned_abi = true;
  }
  if (!Active()) {
    // Unchained: ncclscope exactly as without NCCLSCOPE_CHAIN, on NCCL's own mask.
    const abi::Result rc =
        own(context, comm_id, mask, name, nnodes, nranks, rank, logger, abi_version);
    if (g.pending_errors != 0) CountError(g.pending_errors);
    g.pending_errors = 0;
    return rc;
  }
  if (mask != nullptr) g.nccl_mask.store(mask, std::memory_order_relaxed);
  void* ours = nullptr;
  const abi::Result rc =
      own(&ours, comm_id, &g_ours_mask, name, nnodes, nranks, rank, logger, abi_version);
  if (g.pending_errors != 0) CountError(g.pending_errors);
  g.pending_errors = 0;
  *context = ours;

  void* chained = InitChained(g, table, comm_id, name, nnodes, nranks, rank, logger);
  if (chained != nullptr) {
    PairContexts(g, table, ours, chained, comm_id, rank, abi_version, logger, context);
  }
  PublishMask(g);
  FlushLogs(g);
  // Never an error because of the chain; and none when only the chained plugin profiles it.
  return *context != ours ? abi::kSuccess : rc;
}

namespace {

// Frees every slot still held for communicator `key` (under g.mutex, after NCCL's last event for
// it: finalize comes after the proxy thread joined).
void Sweep(Chain& g, std::uint64_t key) {
  const std::uint32_t carved = g.slots.carved();
  for (std::uint32_t i = 0; i < carved; ++i) {
    Slot* s = At(i);
    std::uint32_t state = s->state.load(std::memory_order_acquire);
    if ((state & 3) == kDead || s->context.load(std::memory_order_relaxed) != key ||
        (s->info.load(std::memory_order_relaxed) & kInfoForeign) != 0) {
      continue;
    }
    if (s->state.compare_exchange_strong(state, StateWord(state >> 2, kDead),
                                         std::memory_order_acq_rel)) {
      g.slots.Free(i);
    }
  }
}

}  // namespace

abi::Result Finalize(OwnFinalize own, void* context) {
  if (!Active()) return own(context);
  Chain& g = G();
  platform::MutexLock lock(g.mutex);
  const bool chain_only = DecodeHandle(context).kind == HandleKind::kChainContext;
  // ncclscope's finalize work first (NCCL 2.27 finalizes NULL contexts too:
  // v2.27.7-1 src/plugin/profiler.cc:182-183; ncclscope handles that as it would alone).
  const abi::Result rc = chain_only ? abi::kSuccess : own(context);
  // Slots this communicator left behind (events NCCL never stopped) go back now.
  if (context != nullptr) Sweep(g, AsValue(context));
  if (CommEntry* entry = EntryFor(context)) {
    void* chained = AsPointer(entry->chained.load(std::memory_order_relaxed));
    const int version = static_cast<int>(entry->version.load(std::memory_order_relaxed));
    entry->key.store(0, std::memory_order_release);
    entry->chained.store(0, std::memory_order_relaxed);
    entry->ours.store(0, std::memory_order_relaxed);
    if (chain_only) {
      entry->generation.store(
          (entry->generation.load(std::memory_order_relaxed) + 1) & kGenerationMask,
          std::memory_order_relaxed);
      g.chain_only_free.Push(static_cast<std::uint32_t>(entry - g.comms) - g.ours_capacity);
    }
    g.live_chained.fetch_sub(1, std::memory_order_relaxed);
    // Then the chained plugin's, for the communicator it initialized.
    if (chained != nullptr && version >= 4 && version <= 6 && g.tables[version].table != nullptr) {
      const abi::Result chained_rc = ChainedFinalize(g.tables[version], chained);
      if (chained_rc != abi::kSuccess) {
        LogWith(g.logger, abi::kLogWarn, "chained plugin %s: finalize failed (error %d)",
                g.path.c_str(), chained_rc);
        CountError();
      }
    }
  }
  PublishMask(g);
  FlushLogs(g);
  return rc;
}

void PublishOwnMask() {
  if (Active()) PublishMask(G());
}

void Maintain() {
  if (!Active()) return;
  Chain& g = G();
  platform::MutexLock lock(g.mutex);
  PublishMask(g);
  FlushLogs(g);
}

}  // namespace ncclscope::plugin::chain
