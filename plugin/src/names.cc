#include "plugin/src/names.h"

#include <atomic>
#include <cstring>

#include "plugin/ring/ncclscope_ring.h"

namespace ncclscope::plugin::names {
namespace {

struct Name {
  const char* text;
  std::uint8_t code;
};

// Direct-mapped cache of (pointer << 8 | code). One word per entry, so a reader never sees a
// pointer paired with another entry's code. Pointers above 2^56 (LA57) simply never hit.
class PointerCache {
 public:
  template <std::size_t N>
  std::uint8_t Lookup(const char* name, const Name (&table)[N], std::uint8_t unknown) {
    if (name == nullptr) return unknown;
    const auto key = reinterpret_cast<std::uintptr_t>(name);
    std::atomic<std::uint64_t>& entry = entries_[(key >> 3) % kEntries];
    const std::uint64_t cached = entry.load(std::memory_order_relaxed);
    if ((cached >> 8) == (key & kKeyMask) && cached != 0) return static_cast<std::uint8_t>(cached);
    std::uint8_t code = unknown;
    for (const Name& n : table) {
      if (std::strcmp(name, n.text) == 0) {
        code = n.code;
        break;
      }
    }
    if ((key & ~kKeyMask) == 0) {
      entry.store(static_cast<std::uint64_t>(key) << 8 | code, std::memory_order_relaxed);
    }
    return code;
  }

 private:
  static constexpr std::size_t kEntries = 64;
  static constexpr std::uint64_t kKeyMask = (1ull << 56) - 1;
  std::atomic<std::uint64_t> entries_[kEntries] = {};
};

constexpr Name kFuncs[] = {
    {"AllReduce", NCCLSCOPE_FUNC_ALL_REDUCE},
    {"AllGather", NCCLSCOPE_FUNC_ALL_GATHER},
    {"ReduceScatter", NCCLSCOPE_FUNC_REDUCE_SCATTER},
    {"Broadcast", NCCLSCOPE_FUNC_BROADCAST},
    {"Reduce", NCCLSCOPE_FUNC_REDUCE},
    {"Send", NCCLSCOPE_FUNC_SEND},
    {"Recv", NCCLSCOPE_FUNC_RECV},
    {"SendRecv", NCCLSCOPE_FUNC_SEND_RECV},
    {"AlltoAll", NCCLSCOPE_FUNC_ALL_TO_ALL},
    {"Gather", NCCLSCOPE_FUNC_GATHER},
    {"Scatter", NCCLSCOPE_FUNC_SCATTER},
    {"AllGatherV", NCCLSCOPE_FUNC_ALL_GATHER_V},
    {"PutSignal", NCCLSCOPE_FUNC_PUT_SIGNAL},
    {"Signal", NCCLSCOPE_FUNC_SIGNAL},
    {"WaitSignal", NCCLSCOPE_FUNC_WAIT_SIGNAL},
};

constexpr Name kDatatypes[] = {
    {"ncclInt8", NCCLSCOPE_DT_INT8},
    {"ncclUint8", NCCLSCOPE_DT_UINT8},
    {"ncclInt32", NCCLSCOPE_DT_INT32},
    {"ncclUint32", NCCLSCOPE_DT_UINT32},
    {"ncclInt64", NCCLSCOPE_DT_INT64},
    {"ncclUint64", NCCLSCOPE_DT_UINT64},
    {"ncclFloat16", NCCLSCOPE_DT_FLOAT16},
    {"ncclFloat32", NCCLSCOPE_DT_FLOAT32},
    {"ncclFloat64", NCCLSCOPE_DT_FLOAT64},
    {"ncclBfloat16", NCCLSCOPE_DT_BFLOAT16},
    {"ncclFloat8e4m3", NCCLSCOPE_DT_FLOAT8E4M3},
    {"ncclFloat8e5m2", NCCLSCOPE_DT_FLOAT8E5M2},
};

constexpr Name kAlgos[] = {
    {"TREE", NCCLSCOPE_ALGO_TREE},
    {"RING", NCCLSCOPE_ALGO_RING},
    {"COLLNET_DIRECT", NCCLSCOPE_ALGO_COLLNET_DIRECT},
    {"COLLNET_CHAIN", NCCLSCOPE_ALGO_COLLNET_CHAIN},
    {"NVLS", NCCLSCOPE_ALGO_NVLS},
    {"NVLS_TREE", NCCLSCOPE_ALGO_NVLS_TREE},
    {"PAT", NCCLSCOPE_ALGO_PAT},
};

constexpr Name kProtos[] = {
    {"LL", NCCLSCOPE_PROTO_LL},
    {"LL128", NCCLSCOPE_PROTO_LL128},
    {"SIMPLE", NCCLSCOPE_PROTO_SIMPLE},
};

PointerCache g_funcs;
PointerCache g_datatypes;
PointerCache g_algos;
PointerCache g_protos;

}  // namespace

std::uint8_t Func(const char* name) { return g_funcs.Lookup(name, kFuncs, NCCLSCOPE_FUNC_UNKNOWN); }
std::uint8_t Datatype(const char* name) {
  return g_datatypes.Lookup(name, kDatatypes, NCCLSCOPE_DT_UNKNOWN);
}
std::uint8_t Algo(const char* name) { return g_algos.Lookup(name, kAlgos, NCCLSCOPE_ALGO_UNKNOWN); }
std::uint8_t Proto(const char* name) {
  return g_protos.Lookup(name, kProtos, NCCLSCOPE_PROTO_UNKNOWN);
}

}  // namespace ncclscope::plugin::names
