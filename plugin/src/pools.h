#pragma once

// Slot pools for event state. Each kind of state (ops, proxy ops, communicators) lives in one
// SlotArena: an array reserved once as virtual memory (pages appear as slots are first used) and
// never unmapped, so a stale index can be bounds-checked and read but never faults. Slots are
// handed out through per-thread caches:
//
//  - Allocate() pops the calling thread's local free list (no atomic read-modify-write); when it is
//    empty it takes the whole "remote" list other threads returned (one exchange), then carves a
//    batch of fresh slots (one fetch_add). No locks, no allocation, no system call.
//  - Free() bumps the slot's generation (stale handles stop matching) and pushes the slot back to
//    the cache that carved it: a plain push when that is the caller, else a lock-free push onto
//    that cache's remote list (ops are usually freed by the proxy thread that saw them complete).
//
// Thread caches outlive their threads: at thread exit a cache is marked orphaned and the next new
// thread adopts it with everything on it, so slots freed to a dead thread are not lost.

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ncclscope::plugin {

// Every pooled state type starts with a PoolSlot. Slots are used in the zeroed state the reserved
// memory starts in (no constructor runs: the maintenance thread may scan a slot while another
// thread carves it), so every member of a pooled type is an atomic whose zero is its initial value.
struct PoolSlot {
  std::atomic<std::uint32_t> generation{0};
  std::atomic<std::uint32_t> in_use{0};
  std::atomic<std::uint32_t> owner{0};      // thread cache that gets the slot back
  std::atomic<std::uint32_t> next_free{0};  // index + 1 of the next free slot, 0 = end
};

enum ArenaId : std::uint32_t {
  kOpArena = 0,
  kProxyOpArena = 1,
  kCommArena = 2,
  kChainArena = 3,  // chain slots (chain.h), reserved only when NCCLSCOPE_CHAIN is set
  kArenaCount = 4
};

class SlotArena {
 public:
  // Reserves `capacity` slots of `stride` bytes (stride is a multiple of 64). Cold path.
  bool Reserve(ArenaId id, std::size_t stride, std::uint32_t capacity);

  PoolSlot* At(std::uint32_t index) const {
    return reinterpret_cast<PoolSlot*>(base_ + static_cast<std::size_t>(index) * stride_);
  }
  // Slots carved so far: indices below this hold constructed state.
  std::uint32_t carved() const { return carved_.load(std::memory_order_acquire); }
  std::uint32_t capacity() const { return capacity_; }
  bool reserved() const { return base_ != nullptr; }

  // Index of a free slot (marked in use), or UINT32_MAX when the arena and every cache are empty.
  // `slot`, when given, receives At(index) for a slot found: a caller that needs the slot does not
  // compute its address again (measured: 3 instructions per op start).
  std::uint32_t Allocate(PoolSlot** slot = nullptr);
  // Returns a slot; its generation is bumped first.
  void Free(std::uint32_t index) { Free(index, At(index)); }
  // The same for a caller that holds the slot (At(index)): its address is not computed again
  // (measured: 2 instructions per op completed).
  void Free(std::uint32_t index, PoolSlot* slot);
  // In a forked child, the only thread: every slot in use holds the parent's state (its
  // communicators, ops in flight). Each gets a new generation, so every handle and context the
  // child inherited is stale (refused and counted as invalid, as a foreign one), and is marked free
  // without joining a free list: left to the parent, never completed, flushed or recorded by the
  // child into a ring of its own (the child leaks them, at most what was in flight at the fork).
  void DisownAfterFork();

 private:
  ArenaId id_ = kOpArena;
  unsigned char* base_ = nullptr;
  std::size_t stride_ = 0;
  std::uint32_t capacity_ = 0;
  std::atomic<std::uint32_t> carved_{0};
};

// The calling thread's lane preference for the ring (stable per thread, spread across threads).
std::uint32_t ThreadLaneHint();

// A small number that tells the calling thread from every other live thread (its slot cache;
// 0 when there are more threads than caches).
std::uint32_t ThreadToken();

}  // namespace ncclscope::plugin
