#pragma once

// What the replay's files share inside the library (not for its users: see nccl_replay.h): the
// mask bits of NCCL's API events, NCCL's names (datatype sizes, algorithm kinds), and the gates
// each version applies to a mask snapshot (nccl_rules.cc).

#include <cstddef>

#include "plugin/abi/nccl_profiler_abi.h"

namespace ncclscope::replay {

// The mask bits that make NCCL 2.28+ (v5+) start a GroupApi, CollApi and P2pApi event.
inline constexpr int kGroupApiMask = abi::kGroupApi | abi::kP2pApi | abi::kCollApi |
                                     abi::kKernelLaunch | abi::kGroup | abi::kColl | abi::kP2p |
                                     abi::kProxyOp | abi::kProxyStep | abi::kKernelCh |
                                     abi::kNetPlugin | abi::kCeColl | abi::kCeSync | abi::kCeBatch;
inline constexpr int kCollApiMask = abi::kCollApi | abi::kColl | abi::kProxyOp | abi::kProxyStep |
                                    abi::kKernelCh | abi::kNetPlugin | abi::kCeColl | abi::kCeSync |
                                    abi::kCeBatch;
inline constexpr int kP2pApiMask =
    abi::kP2pApi | abi::kP2p | abi::kProxyOp | abi::kProxyStep | abi::kKernelCh | abi::kNetPlugin;

// NCCL's names: AllGather/Broadcast (counted in bytes on their Coll event), datatype sizes,
// CollNet and NVLS algorithms.
bool IsAllGatherOrBroadcast(const char* func);
std::size_t DatatypeBytes(const char* datatype);
bool IsCollNetAlgo(const char* algo);
bool IsNvlsAlgo(const char* algo);

// KernelPhase brings KernelCh along (2.31's ncclProfilerEnforceMaskDeps).
int EnforceMaskDeps(int mask);
// The mask bits that make each version start a plan's Group event, a task's Coll/P2p event, a
// ProxyOp and a ProxyStep.
int GroupGate(int version);
int TaskGate(int version, bool p2p);
int ProxyOpGate(int version);
int ProxyStepGate(int version);

}  // namespace ncclscope::replay
