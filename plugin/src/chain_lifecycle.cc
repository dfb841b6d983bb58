// Plugin chaining's init, finalize and maintenance: pairing each communicator's two contexts behind
// the one NCCL holds, the chained plugin's init and finalize, the sweep of the slots a
// communicator left behind, and NCCL's mask kept at the union of the two plugins' masks.
// NCCL line numbers are at v2.28.9-1 unless marked HEAD (master 5067397c = 2.30.7) or
// v2.27.7-1.

#include "plugin/src/chain_state.h"

namespace ncclscope::plugin::chain {
namespace {

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
