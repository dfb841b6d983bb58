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

// Only the variants NCCL 2.31 has (ncclSymKernelStr, src/include/sym_kernels.h at 2.31.2); the
// codes are ncclscope_kernel_variant's, in its order.
std::uint8_t MatchVariant(const char* name) {
  for (std::uint8_t code = NCCLSCOPE_KV_OTHER + 1; code < NCCLSCOPE_KV_COUNT; ++code) {
    if (std::strcmp(name, ncclscope_kernel_variant_name(code)) == 0) return code;
  }
  return NCCLSCOPE_KV_OTHER;
}

template <std::size_t N>
std::uint8_t Match(const char* name, const Name (&table)[N], std::uint8_t unknown) {
  for (const Name& n : table) {
    if (std::strcmp(name, n.text) == 0) return n.code;
  }
  return unknown;
}

}  // namespace

std::atomic<std::uint64_t> g_cache[kKinds][kCacheEntries] = {};

std::uint8_t Resolve(Kind kind, const char* name) {
  std::uint8_t code = 0;  // every kind's "unknown" is 0
  if (name == nullptr) return kind == kKernelVariant ? std::uint8_t{NCCLSCOPE_KV_OTHER} : code;
  switch (kind) {
    case kKernelVariant:
      code = MatchVariant(name);
      break;
    case kFunc:
      code = Match(name, kFuncs, NCCLSCOPE_FUNC_UNKNOWN);
      break;
    case kDatatype:
      code = Match(name, kDatatypes, NCCLSCOPE_DT_UNKNOWN);
      break;
    case kAlgo:
      code = Match(name, kAlgos, NCCLSCOPE_ALGO_UNKNOWN);
      break;
    default:
      code = Match(name, kProtos, NCCLSCOPE_PROTO_UNKNOWN);
      break;
  }
  const auto key = reinterpret_cast<std::uintptr_t>(name);
  if ((key >> 56) == 0) {
    g_cache[kind][(key >> 3) % kCacheEntries].store(static_cast<std::uint64_t>(key) << 8 | code,
                                                    std::memory_order_relaxed);
  }
  return code;
}

// ABI v1's numbers (plugin/abi/profiler_v1_v3.h, NCCL 2.23's enums) as NCCL's own names.
const char* FuncV1(std::uint8_t func) {
  static const char* const kNames[] = {"Broadcast", "Reduce",   "AllGather", "ReduceScatter",
                                       "AllReduce", "SendRecv", "Send",      "Recv"};
  return func < sizeof(kNames) / sizeof(kNames[0]) ? kNames[func] : "Invalid";
}

const char* DatatypeV1(std::uint8_t datatype) {
  static const char* const kNames[] = {"ncclInt8",    "ncclUint8",   "ncclInt32",   "ncclUint32",
                                       "ncclInt64",   "ncclUint64",  "ncclFloat16", "ncclFloat32",
                                       "ncclFloat64", "ncclBfloat16"};
  return datatype < sizeof(kNames) / sizeof(kNames[0]) ? kNames[datatype] : "Unknown";
}

const char* AlgoV1(std::uint8_t algo) {
  static const char* const kNames[] = {
      "TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"};
  return algo < sizeof(kNames) / sizeof(kNames[0]) ? kNames[algo] : "Unknown";
}

const char* ProtoV1(std::uint8_t proto) {
  static const char* const kNames[] = {"LL", "LL128", "SIMPLE"};
  return proto < sizeof(kNames) / sizeof(kNames[0]) ? kNames[proto] : "Unknown";
}

}  // namespace ncclscope::plugin::names
