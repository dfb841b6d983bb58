// Small helpers every file of the event path shares: the op's state word (who completes an op),
// counting into the ring header, relaxed stores into the ring's shared tables, bit arithmetic.
#pragma once

#include <atomic>
#include <cstdint>

#include "plugin/src/runtime.h"

namespace ncclscope::plugin {

// The op's state word: the slot's generation above kStateGenShift, the completion bits (state.h,
// kOpEnqueued, kOpKernelDone, kOpForced) below.
constexpr std::uint32_t kStateGenShift = 8;

inline std::uint32_t StateGen(std::uint32_t state) { return state >> kStateGenShift; }

// StateGen(state) == generation && !OpComplete(state), in one compare (every KernelCh start
// asks): with the generation cleared, and the bits no state word uses, the op is open when what is
// left is 0, kOpEnqueued or kOpKernelDone, and complete when both or kOpForced are set.
inline bool OpOpen(std::uint32_t state, std::uint32_t generation) {
  constexpr std::uint32_t kUnused =
      ((1u << kStateGenShift) - 1) & ~(kOpEnqueued | kOpKernelDone | kOpForced);
  static_assert(kOpEnqueued == 1 && kOpKernelDone == 2 && kOpForced == 4);
  return ((state ^ (generation << kStateGenShift)) & ~kUnused) < (kOpEnqueued | kOpKernelDone);
}

// Sets `bits` in the op's state word if it still belongs to `generation`. Returns the previous
// word, or nullopt-like UINT32_MAX when the slot has moved on.
inline std::uint32_t SetStateBits(OpState* op, std::uint32_t generation, std::uint32_t bits) {
  std::uint32_t old = op->state.load(std::memory_order_acquire);
  while (true) {
    if (StateGen(old) != generation) return UINT32_MAX;
    if ((old & bits) == bits) return old;
    if (op->state.compare_exchange_weak(old, old | bits, std::memory_order_acq_rel,
                                        std::memory_order_acquire)) {
      return old;
    }
  }
}

// Whether SetStateBits(op, generation, bit) completed the op, `old` being what it returned, for
// `bit` kOpEnqueued or kOpKernelDone: `old` was of this generation (not UINT32_MAX, whose low bits
// are all set), not complete, and complete with `bit`, which is exactly "of the three completion
// bits, only the other one was set" (OpComplete reads no other bit). One compare where the three
// tests took ~10 instructions (measured: 14 per op, at its stop and at its last KernelCh stop).
inline bool CompletedBy(std::uint32_t old, std::uint32_t bit) {
  constexpr std::uint32_t kBits = kOpEnqueued | kOpKernelDone | kOpForced;
  return (old & kBits) == ((kOpEnqueued | kOpKernelDone) & ~bit);
}

inline void Count(ncclscope_counter counter) { R().ring.Count(counter); }

inline void StoreShared64(std::uint64_t& field, std::uint64_t value) {
  std::atomic_ref<std::uint64_t>(field).store(value, std::memory_order_relaxed);
}
inline void StoreShared32(std::uint32_t& field, std::uint32_t value) {
  std::atomic_ref<std::uint32_t>(field).store(value, std::memory_order_relaxed);
}

// Inline bit count: the x86-64 baseline has no popcnt, and __builtin_popcountll there is a libgcc
// call.
inline std::uint32_t PopCount(std::uint64_t x) {
  x -= (x >> 1) & 0x5555555555555555ull;
  x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
  x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
  return static_cast<std::uint32_t>((x * 0x0101010101010101ull) >> 56);
}

inline std::uint32_t Saturate32(std::uint64_t value) {
  return value > UINT32_MAX ? UINT32_MAX : static_cast<std::uint32_t>(value);
}

}  // namespace ncclscope::plugin
