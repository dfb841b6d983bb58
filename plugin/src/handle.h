#pragma once

// Event handles and contexts handed to NCCL are not pointers but encoded integers:
//
//   bits 60..63  kind (never 0, so a handle is never NULL)
//   bits 40..59  generation of the slot (20 bits)
//   bits  8..39  slot index in the kind's pool
//   bits  0..7   sub-index (KernelCh: channel; ProxyStep: step slot)
//
// NCCL only stores handles and passes them back (it never dereferences them), so decoding is a
// shift and a compare: a stale handle (its slot was freed and reused), a handle of the wrong kind,
// a NULL parent, or a value from another process (PXN) is rejected by the index bound and the
// generation check instead of being dereferenced.

#include <cstdint>

namespace ncclscope::plugin {

enum class HandleKind : std::uint32_t {
  kNone = 0,
  kOp = 1,        // Coll, P2p, CeColl
  kKernelCh = 2,  // one channel of an op (lives inside the op)
  kProxyOp = 3,
  kProxyStep = 4,  // one step slot of a ProxyOp (lives inside it)
  kContext = 5,    // a communicator
  kIgnored = 6,    // events accepted but not tracked (KernelLaunch, ProxyCtrl, NetPlugin, ...)
  // Stateless handles that carry what a later event needs to know about its parent:
  kApi = 7,          // GroupApi/CollApi/P2pApi: index = NCCL's mask snapshot of that API call,
                     // sub = ApiSub bits (the API datatype; KernelCh uncertain)
  kGroup = 8,        // Group (one kernel plan): index = the plan's number in this process
  kKernelPhase = 9,  // v7: one phase of one channel of an op (lives inside the op):
                     // sub = channel | phase << 6
  // Kinds 14 and 15 belong to plugin chaining (chain.h, NCCLSCOPE_CHAIN) and appear only while a
  // chained plugin is loaded.
  kChain = 14,  // one event: a chain slot holding ncclscope's and the chained plugin's handle
  kChainContext = 15,  // a communicator only the chained plugin profiles (ncclscope has no context)
};

// ApiSub bits of a kApi handle: the API call's datatype code (ncclscope_datatype, 4 bits) and
// whether NCCL's copy may differ from the value read in KernelCh (another thread switched it, on
// or off, between this thread's previous API call and this one).
inline constexpr std::uint32_t kApiDatatypeMask = 0x0F;
inline constexpr std::uint32_t kApiKernelUncertain = 0x10;
inline constexpr std::uint32_t kApiGraphCaptured = 0x20;  // the call was captured into a graph

inline constexpr std::uint32_t kGenerationMask = (1u << 20) - 1;

struct Handle {
  HandleKind kind = HandleKind::kNone;
  std::uint32_t generation = 0;
  std::uint32_t index = 0;
  std::uint32_t sub = 0;
};

inline void* EncodeHandle(HandleKind kind, std::uint32_t generation, std::uint32_t index,
                          std::uint32_t sub = 0) {
  const std::uint64_t value = static_cast<std::uint64_t>(kind) << 60 |
                              static_cast<std::uint64_t>(generation & kGenerationMask) << 40 |
                              static_cast<std::uint64_t>(index) << 8 | (sub & 0xFF);
  // An opaque integer in pointer clothing: NCCL only stores and returns it.
  // NOLINTNEXTLINE(performance-no-int-to-ptr)
  return reinterpret_cast<void*>(static_cast<std::uintptr_t>(value));
}

inline Handle DecodeHandle(const void* handle) {
  const auto value = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(handle));
  Handle h;
  h.kind = static_cast<HandleKind>(value >> 60);
  h.generation = static_cast<std::uint32_t>(value >> 40) & kGenerationMask;
  h.index = static_cast<std::uint32_t>(value >> 8);
  h.sub = static_cast<std::uint32_t>(value & 0xFF);
  return h;
}

inline void* IgnoredHandle() { return EncodeHandle(HandleKind::kIgnored, 0, 0); }

}  // namespace ncclscope::plugin
