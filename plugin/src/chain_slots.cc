// Plugin chaining's lookups: a chain handle to its slot (a seqlock read, chain_state.h), the retire
// rings that keep stopped slots resolvable and reclaim the ones they displace, and NCCL's context
// value to the communicator entry that pairs the two plugins' contexts.

#include "plugin/src/chain_state.h"

namespace ncclscope::plugin::chain {

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

namespace {

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

}  // namespace

// Puts a slot into a window; the slot it displaces is reclaimed if still in `displaced`.
void Retire(RetireRing& ring, std::uint32_t index, std::uint32_t generation, Phase displaced) {
  const std::uint64_t entry =
      1ull << 63 | static_cast<std::uint64_t>(generation) << 32 | static_cast<std::uint64_t>(index);
  const std::uint64_t at = ring.cursor.fetch_add(1, std::memory_order_relaxed) & (ring.size - 1);
  const std::uint64_t old = ring.cells[at].exchange(entry, std::memory_order_acq_rel);
  if (old != 0) Reclaim(old, displaced);
}

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

}  // namespace ncclscope::plugin::chain
