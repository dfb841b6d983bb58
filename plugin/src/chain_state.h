#pragma once

// Plugin chaining's shared state, for its files (chain_*.cc; the interface is chain.h, which says
// what NCCL does that shapes all this): the slots, the communicator map, the retire rings, the
// chained plugin's tables and the two plugins' mask ints, in one Chain object that lives for the
// process. NCCL line numbers are at v2.28.9-1 unless marked HEAD (master 5067397c = 2.30.7) or
// v2.27.7-1.
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

#include <atomic>
#include <cstdint>
#include <type_traits>

#include "platform/pod_vector.h"
#include "platform/posix_thread.h"
#include "plugin/abi/nccl_profiler_abi.h"
#include "plugin/src/chain.h"
#include "plugin/src/handle.h"
#include "plugin/src/pools.h"
#include "plugin/src/settings.h"

namespace ncclscope::plugin::chain {

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

inline std::uint32_t StateWord(std::uint32_t generation, Phase phase) {
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

// Created at load in static storage (chain_load.cc), never destroyed (no destructor is registered
// for a placement new): NCCL's threads may run events while static destructors run.
extern Chain* const g_chain;
inline Chain& G() { return *g_chain; }

// The two plugins' own event-mask ints (NCCL's is one process-global int,
// src/plugin/profiler.cc:185; every init gets its address, :192). Read and written with
// __atomic builtins, as NCCL reads its own.
extern int g_ours_mask;
extern int g_chained_mask;

inline std::uint32_t LoadMask(const int* mask) {
  return static_cast<std::uint32_t>(__atomic_load_n(mask, __ATOMIC_RELAXED));
}

inline Slot* At(std::uint32_t index) { return reinterpret_cast<Slot*>(G().slots.At(index)); }

// What Read() found in a slot.
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

inline void* AsPointer(std::uint64_t value) {
  // Handles and contexts are opaque values that NCCL stores and passes back.
  // NOLINTNEXTLINE(performance-no-int-to-ptr)
  return reinterpret_cast<void*>(static_cast<std::uintptr_t>(value));
}
inline std::uint64_t AsValue(const void* pointer) {
  return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(pointer));
}

// A communicator as the event path sees it (Lookup()).
struct Comm {
  void* ours = nullptr;     // ncclscope's context (NCCL's own value, or NULL for chain-only)
  void* chained = nullptr;  // the chained plugin's context, NULL when it does not profile it
  int version = 0;
  CommEntry* entry = nullptr;
};

// ---- Calls into the chained plugin (chain_forward.cc, chain_lifecycle.cc) ----
// Its ABI is C, as NCCL calls it: a C++ exception thrown out of it is its crash, as it would be
// under NCCL alone (ncclscope is built without exceptions and links no C++ run time,
// platform/README.md, so it catches none either).
template <typename Call>
abi::Result Guarded(Call&& call) {
  return call();
}

// ---- Failures (chain_log.cc) ----

void LogWith(abi::DebugLogger logger, int level, const char* format, ...)
    __attribute__((format(printf, 3, 4)));
void CountError(std::uint64_t n = 1);
// Fail(): counted at once; FlushLogs(), under g.mutex: the once-only log lines since.
void Fail(LogKind kind);
void FlushLogs(Chain& g);

// ---- Slots and communicators (chain_slots.cc) ----

// A chain handle's slot; a slot into a retire ring; NCCL's context value to its communicator
// entry, and to the two plugins' contexts behind it.
bool Read(const Handle& h, View* v);
void Retire(RetireRing& ring, std::uint32_t index, std::uint32_t generation, Phase displaced);
CommEntry* EntryFor(const void* context);
Comm Lookup(void* context);

// ---- Loading (chain_load.cc), under g.mutex: NCCLSCOPE_CHAIN, the chained plugin's table for
// NCCL's ABI version, the communicator map ----

void Configure(Chain& g, abi::DebugLogger logger);
const ChainedTable& Resolve(Chain& g, int version, abi::DebugLogger logger);
bool EnsureComms(Chain& g);

}  // namespace ncclscope::plugin::chain
