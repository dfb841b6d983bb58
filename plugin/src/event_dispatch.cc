// NCCL's stopEvent and recordEventState, for every ABI version: the handle's kind says which event
// it is (handle.h), and each kind's handler lives with its event (op_events.cc, kernel_events.cc,
// proxy_events.cc).

#include "plugin/src/event_helpers.h"
#include "plugin/src/handle.h"
#include "plugin/src/kernel_events.h"
#include "plugin/src/op_events.h"
#include "plugin/src/proxy_events.h"
#include "plugin/src/runtime.h"

namespace ncclscope::plugin {

void StopEvent(void* handle) {
  const Handle h = DecodeHandle(handle);
  switch (h.kind) {
    case HandleKind::kOp:
      StopOp(handle);
      return;
    case HandleKind::kKernelCh:
      StopKernelCh(handle);
      return;
    case HandleKind::kProxyOp:
      StopProxyOp(handle);
      return;
    case HandleKind::kProxyStep:
      StopProxyStep(handle);
      return;
    case HandleKind::kIgnored:
    case HandleKind::kApi:
    case HandleKind::kGroup:
    case HandleKind::kKernelPhase:  // its duration came with its KernelPhaseStop record
      return;
    default:
      if (handle != nullptr) Count(NCCLSCOPE_CTR_INVALID_HANDLE);
      return;
  }
}

void RecordEventState(void* handle, int state, const abi::StateArgsV4* args) {
  const Handle h = DecodeHandle(handle);
  switch (h.kind) {
    case HandleKind::kKernelCh:
      if (state != abi::kKernelChStop || args == nullptr) break;
      RecordKernelChStop(handle, args);
      return;
    case HandleKind::kKernelPhase:
      if (state != abi::kKernelPhaseStop) break;
      RecordKernelPhaseStop(handle, args);
      return;
    case HandleKind::kProxyStep:
      if (!RecordProxyStepState(handle, state, args)) break;
      return;
    case HandleKind::kProxyOp:
      if (state != abi::kProxyOpInProgress) return;  // deprecated v1-v3 op states: ignore
      RecordProxyOpInProgress(handle);
      return;
    case HandleKind::kIgnored:
    case HandleKind::kApi:
    case HandleKind::kGroup:
      return;  // GroupApi states (23, 24), NetPluginUpdate and the like
    case HandleKind::kOp:
      break;
    default:
      if (handle != nullptr) Count(NCCLSCOPE_CTR_INVALID_HANDLE);
      return;
  }
  Count(NCCLSCOPE_CTR_UNKNOWN_EVENTS);
}

}  // namespace ncclscope::plugin
