#pragma once

// NCCL's strings (func, datatype, algo, proto) to the ring's small codes. NCCL passes pointers to
// static strings, so each lookup first tries a tiny pointer-keyed cache (inline: one load and a
// compare); the string compare runs once per distinct pointer.

#include <atomic>
#include <cstdint>

namespace ncclscope::plugin::names {

enum Kind : std::uint32_t {
  kFunc = 0,
  kDatatype = 1,
  kAlgo = 2,
  kProto = 3,
  kKernelVariant = 4,
  kKinds = 5
};

// Direct-mapped cache of (pointer << 8 | code): one word per entry, so a reader never sees a
// pointer paired with another entry's code. Pointers at or above 2^56 (LA57) never hit.
inline constexpr std::uint32_t kCacheEntries = 64;
extern std::atomic<std::uint64_t> g_cache[kKinds][kCacheEntries];

// The slow path: compare against NCCL's names and fill the cache entry.
std::uint8_t Resolve(Kind kind, const char* name);

inline std::uint8_t Lookup(Kind kind, const char* name) {
  const auto key = reinterpret_cast<std::uintptr_t>(name);
  const std::uint64_t cached =
      g_cache[kind][(key >> 3) % kCacheEntries].load(std::memory_order_relaxed);
  // NULL is never cached (Resolve), so it matches only an empty entry, whose code 0 is what
  // Resolve gives NULL for every kind but the kernel variant: only that kind tests for NULL
  // (measured: 8 instructions per Coll start, whose four lookups are inlined with a constant kind).
  if (cached >> 8 == key && (kind != kKernelVariant || name != nullptr)) {
    return static_cast<std::uint8_t>(cached);
  }
  return Resolve(kind, name);
}

inline std::uint8_t Func(const char* name) { return Lookup(kFunc, name); }
inline std::uint8_t Datatype(const char* name) { return Lookup(kDatatype, name); }
inline std::uint8_t Algo(const char* name) { return Lookup(kAlgo, name); }
inline std::uint8_t Proto(const char* name) { return Lookup(kProto, name); }
// A v7 symmetric kernel's coll.kernelVariant: NCCLSCOPE_KV_OTHER for a variant the ring's list
// lacks (and for NULL).
inline std::uint8_t KernelVariant(const char* name) { return Lookup(kKernelVariant, name); }

// ABI v1 (NCCL 2.23) names func, datatype, algo and proto by number (plugin/abi/profiler_v1_v3.h);
// these give NCCL 2.24's static string for each, which the lookups above then code.
const char* FuncV1(std::uint8_t func);
const char* DatatypeV1(std::uint8_t datatype);
const char* AlgoV1(std::uint8_t algo);
const char* ProtoV1(std::uint8_t proto);

}  // namespace ncclscope::plugin::names
