// libminimal-chained-profiler.so: the cheapest possible second profiler plugin, for measuring what
// chaining (NCCLSCOPE_CHAIN) costs ncclscope itself in bench/plugin_bench. It exports the three
// tables NCCL knows, asks for Coll and KernelCh (what NCCL's Inspector asks for), and hands back
// the address of one static object for every event, as a pointer-returning plugin would.

#include "plugin/abi/nccl_profiler_abi.h"

namespace {

namespace abi = ncclscope::abi;

int g_context = 0;
int g_event = 0;

abi::Result Init(void** context, int* mask) {
  *context = &g_context;
  if (mask != nullptr) __atomic_store_n(mask, abi::kColl | abi::kKernelCh, __ATOMIC_RELAXED);
  return abi::kSuccess;
}
abi::Result InitV4(void** context, int* mask, const char*, std::uint64_t, int, int, int,
                   abi::DebugLogger) {
  return Init(context, mask);
}
abi::Result InitV5(void** context, std::uint64_t, int* mask, const char*, int, int, int,
                   abi::DebugLogger) {
  return Init(context, mask);
}
template <typename Descr>
abi::Result Start(void*, void** handle, Descr*) {
  *handle = &g_event;
  return abi::kSuccess;
}
abi::Result Stop(void*) { return abi::kSuccess; }
abi::Result Record(void*, int, abi::StateArgsV4*) { return abi::kSuccess; }
abi::Result Finalize(void*) { return abi::kSuccess; }

}  // namespace

// NOLINTBEGIN(readability-identifier-naming): NCCL's ABI names.
extern "C" {
__attribute__((visibility("default"))) abi::ProfilerV6 ncclProfiler_v6 = {
    "minimal", InitV5, Start<abi::EventDescrV6>, Stop, Record, Finalize};
__attribute__((visibility("default"))) abi::ProfilerV5 ncclProfiler_v5 = {
    "minimal", InitV5, Start<abi::EventDescrV5>, Stop, Record, Finalize};
__attribute__((visibility("default"))) abi::ProfilerV4 ncclProfiler_v4 = {
    "minimal", InitV4, Start<abi::EventDescrV4>, Stop, Record, Finalize};
}
// NOLINTEND(readability-identifier-naming)
