// What NCCL decides from names and masks, as the replay's other files ask it: datatype sizes and
// algorithm kinds, NCCL's process-global event mask and 2.31's RAS override of it, and the bits
// that make each version emit each event (the gates; Emits* for 2.27+).

#include <atomic>
#include <cstring>

#include "tools/replay/nccl_replay.h"
#include "tools/replay/replay_internal.h"

namespace ncclscope::replay {
namespace {

constexpr int kGroupMask = abi::kGroup | abi::kColl | abi::kP2p | abi::kProxyOp | abi::kProxyStep |
                           abi::kKernelCh | abi::kNetPlugin;

}  // namespace

bool IsAllGatherOrBroadcast(const char* func) {
  return std::strcmp(func, "AllGather") == 0 || std::strcmp(func, "Broadcast") == 0;
}

std::size_t DatatypeBytes(const char* datatype) {
  static const struct {
    const char* name;
    std::size_t bytes;
  } kSizes[] = {{"ncclInt8", 1},      {"ncclUint8", 1},    {"Unknown", 1},
                {"ncclInt32", 4},     {"ncclUint32", 4},   {"ncclInt64", 8},
                {"ncclUint64", 8},    {"ncclFloat16", 2},  {"ncclFloat32", 4},
                {"ncclFloat64", 8},   {"ncclBfloat16", 2}, {"ncclFloat8e4m3", 1},
                {"ncclFloat8e5m2", 1}};
  for (const auto& s : kSizes) {
    if (std::strcmp(s.name, datatype) == 0) return s.bytes;
  }
  return 1;
}

bool IsCollNetAlgo(const char* algo) {
  return std::strcmp(algo, "COLLNET_DIRECT") == 0 || std::strcmp(algo, "COLLNET_CHAIN") == 0;
}

bool IsNvlsAlgo(const char* algo) {
  return std::strcmp(algo, "NVLS") == 0 || std::strcmp(algo, "NVLS_TREE") == 0;
}

int* ReplayProcess::mask() {
  static int nccl_profiler_event_mask = 0;
  return &nccl_profiler_event_mask;
}

namespace {

// NCCL 2.31's RAS override of the mask (ncclProfilerRasOverrideActive/Mask, process-global).
struct RasOverrideState {
  std::atomic<bool> active{false};
  std::atomic<int> mask{0};
};

RasOverrideState& Ras() {
  static RasOverrideState state;
  return state;
}

}  // namespace

// ncclProfilerEnforceMaskDeps (src/plugin/profiler.cc:304-314 at 2.31.2): phases are children of
// KernelCh ops, so KernelPhase brings KernelCh along.
int EnforceMaskDeps(int mask) {
  if ((mask & abi::kKernelPhase) != 0 && (mask & abi::kKernelCh) == 0) mask |= abi::kKernelCh;
  return mask;
}

// The bits that start a plan's Group event: 2.23-2.25 test Coll|P2p|ProxyOp|ProxyStep only (the
// Group bit alone emits nothing: src/misc/profiler.cc:249 at v2.23.4-1, :361 at v2.24.3-1), 2.26+
// the Group bit and every child (src/plugin/profiler.cc:211 at v2.26.6-1, :350-378).
int GroupGate(int version) {
  return version <= 2 ? (abi::kColl | abi::kP2p | abi::kProxyOp | abi::kProxyStep) : kGroupMask;
}

// The bits that start a task's Coll/P2p event. 2.23-2.25: Coll|ProxyOp|ProxyStep for both kinds
// (the P2p bit is never tested: src/misc/profiler.cc:271 at v2.23.4-1, :383 at v2.24.3-1); 2.26:
// P2p without NetPlugin (src/plugin/profiler.cc:236, :274 at v2.26.6-1); 2.27+: EmitsTask().
int TaskGate(int version, bool p2p) {
  if (version <= 2) return abi::kColl | abi::kProxyOp | abi::kProxyStep;
  if (version == 3 && p2p) return abi::kP2p | abi::kProxyOp | abi::kProxyStep | abi::kKernelCh;
  return (p2p ? abi::kP2p : abi::kColl) | abi::kProxyOp | abi::kProxyStep | abi::kKernelCh |
         abi::kNetPlugin;
}

// ProxyOp and ProxyStep: 2.23-2.25 without NetPlugin (src/misc/profiler.cc:352, :407 at
// v2.23.4-1), 2.26+ with it (src/plugin/profiler.cc:326, :381 at v2.26.6-1).
int ProxyOpGate(int version) {
  const int net_plugin = version >= 3 ? static_cast<int>(abi::kNetPlugin) : 0;
  return abi::kProxyOp | abi::kProxyStep | net_plugin;
}
int ProxyStepGate(int version) {
  const int net_plugin = version >= 3 ? static_cast<int>(abi::kNetPlugin) : 0;
  return abi::kProxyStep | net_plugin;
}

bool ReplayProcess::SetRasOverride(int mask) {
  if (version_ < 7) return false;  // 2.30 and older have no override
  // src/plugin/profiler.cc:318-323 at 2.31.2: deps first, then the mask, then the copy and flag.
  mask = EnforceMaskDeps(mask);
  __atomic_store_n(ReplayProcess::mask(), mask, __ATOMIC_RELAXED);
  Ras().mask.store(mask, std::memory_order_relaxed);
  Ras().active.store(true, std::memory_order_release);
  return true;
}

void ReplayProcess::ClearRasOverride() { Ras().active.store(false, std::memory_order_release); }

bool ReplayProcess::RasOverride(int* mask) {
  if (!Ras().active.load(std::memory_order_acquire)) return false;
  *mask = Ras().mask.load(std::memory_order_relaxed);
  return true;
}

bool EmitsTask(int snapshot, bool p2p) {
  const int wanted = (p2p ? abi::kP2p : abi::kColl) | abi::kProxyOp | abi::kProxyStep |
                     abi::kKernelCh | abi::kNetPlugin;
  return (snapshot & wanted) != 0;
}
bool EmitsKernelCh(int snapshot) { return (snapshot & abi::kKernelCh) != 0; }
bool EmitsProxyOp(int snapshot) {
  return (snapshot & (abi::kProxyOp | abi::kProxyStep | abi::kNetPlugin)) != 0;
}
bool EmitsProxyStep(int snapshot) { return (snapshot & (abi::kProxyStep | abi::kNetPlugin)) != 0; }
bool EmitsNetPlugin(int snapshot) { return (snapshot & abi::kNetPlugin) != 0; }

}  // namespace ncclscope::replay
