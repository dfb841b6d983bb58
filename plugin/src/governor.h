#pragma once

// The overhead governor: the plugin measures its own time on NCCL's threads and, when its share
// exceeds a budget, samples less, so that an NCCL release that makes profiling expensive cannot
// slow jobs unnoticed.
//
// Measuring. 1 op in `sample_every` (a hash of the communicator's op index, so that a periodic
// workload is not always sampled at the same position of its iteration) is *timed*: its Coll/P2p
// start, and every later call on its handle or on the handles of its children (KernelCh,
// ProxyOp, ProxyStep, NetPlugin) reads the tick counter on entry and on exit and adds the
// difference to a per-class accumulator (ops, kernel channels, proxy). The op's handle carries a
// bit (kTimedBit, in the handle's sub field, which no kind uses above 0x3F) that its children's
// handles inherit, so an untimed call costs one bit test: no thread-local, no shared counter.
// The estimate of the plugin's time is the timed time x sample_every. Not timed: API events
// (GroupApi/CollApi/P2pApi, Group), which return stateless handles in a few instructions, and
// failed starts.
//
// Deciding (Evaluate, on the maintenance thread). Every window of at least one duty-cycle period
// (so that the proxy window's share is averaged in) and at least 8 timed ops, the estimate is
// divided by the window's length and by the process's local GPUs: the plugin's share of one core
// per GPU. Above the budget it lowers the proxy duty cycle, in proportion to what the proxy
// events cost, and once that is 0 the kernel_ch duty cycle; below half the budget for `hold`
// windows it steps the last lowered one back up (doubling), and a step up that goes over budget
// doubles `hold` (up to 64 windows). The duty cycles it sets are limits on what the controls
// ask for, applied by DesiredMask: every mask change still goes through pending_mask and
// WriteNcclMask right after NCCL's read (runtime.cc), so the plugin keeps knowing which mask
// each op was copied with and no op is lost or left waiting. The state is published in the ring
// header (ncclscope_governor_state) for the agent's metrics.

#include <atomic>
#include <cstdint>

#include "plugin/src/settings.h"

namespace ncclscope::plugin {
struct Runtime;
}

namespace ncclscope::plugin::governor {

enum Class : std::uint32_t { kOpCalls = 0, kKernelCalls = 1, kProxyCalls = 2, kClasses = 3 };

// Set in the handle of a timed op and of every child of it (handle.h: the sub field).
inline constexpr std::uintptr_t kTimedBit = 0x80;

inline bool IsTimed(const void* handle) {
  return (reinterpret_cast<std::uintptr_t>(handle) & kTimedBit) != 0;
}
// NOLINTBEGIN(performance-no-int-to-ptr): handles are integers in pointer clothing (handle.h).
inline void* Strip(void* handle) {
  return reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(handle) & ~kTimedBit);
}
inline void* MarkTimed(void* handle) {
  if (handle == nullptr) return nullptr;
  return reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(handle) | kTimedBit);
}
// NOLINTEND(performance-no-int-to-ptr)

inline constexpr std::uint64_t kMaxCallNs = 250'000;

struct alignas(64) Accumulator {
  std::atomic<std::uint64_t> ticks{0};
  std::atomic<std::uint64_t> calls{0};
  std::atomic<std::uint64_t> descheduled{0};  // timed calls over kMaxCallNs, not accounted
};

struct State {
  // Hot: written by timed calls only (one in sample_every ops), each class on its own line (the
  // user thread starts ops, the proxy thread runs kernel channels and network steps).
  Accumulator classes[kClasses];
  alignas(64) std::atomic<std::uint64_t> timed_ops{0};
  std::atomic<std::uint32_t> sample_mask{255};  // sample_every - 1
  // A timed call longer than this was descheduled in the middle (a time slice is milliseconds,
  // no plugin call takes that long): not accounted. Ticks of kMaxCallNs.
  std::atomic<std::uint64_t> max_call_ticks{UINT64_MAX};
  // TEST ONLY (NCCLSCOPE_TEST_SPIN_FILE): busy-wait added to each timed call of a class, ns.
  std::atomic<std::uint32_t> spin_ns[kClasses] = {};
  // What DesiredMask applies on top of the controls: the duty cycles may not exceed these.
  alignas(64) std::atomic<std::uint32_t> kernel_limit_pm{1000};
  std::atomic<std::uint32_t> proxy_limit_pm{1000};

  // Maintenance thread only.
  std::uint64_t window_start_ns = 0;
  std::uint64_t last_ticks[kClasses] = {};
  std::uint64_t last_timed_ops = 0;
  std::uint32_t good_windows = 0;  // consecutive windows under half the budget
  std::uint32_t hold = 0;          // windows under half the budget before a step up
  bool probing = false;            // the last change was a step up
  std::uint32_t windows = 0;
  PathText spin_file;
  std::uint64_t spin_checked_ns = 0;
};

// Whether the op with this index in its communicator is timed (about 1 in sample_every).
inline bool SampleOp(const State& g, std::uint64_t op_index, std::uint32_t comm_index) {
  const std::uint64_t h =
      (op_index + static_cast<std::uint64_t>(comm_index) * 0x632BE59BD9B4E019ull) *
      0x9E3779B97F4A7C15ull;
  return ((h >> 40) & g.sample_mask.load(std::memory_order_relaxed)) == 0;
}

// Busy-waits for `ns` (tests only: NCCLSCOPE_TEST_SPIN_FILE).
void Spin(std::uint32_t ns);

// Start and end of a timed call: Begin returns the tick count, End accounts the call.
std::uint64_t Begin(State& g, Class c);
inline void End(State& g, Class c, std::uint64_t begin_ticks, std::uint64_t end_ticks) {
  const std::uint64_t ticks = end_ticks - begin_ticks;
  Accumulator& a = g.classes[c];
  if (ticks > g.max_call_ticks.load(std::memory_order_relaxed)) {
    a.descheduled.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  a.ticks.fetch_add(ticks, std::memory_order_relaxed);
  a.calls.fetch_add(1, std::memory_order_relaxed);
}

// Cold paths (governor.cc).
// At the first init: sampling, test knobs, the header's initial state.
void Setup(Runtime& r);
// One maintenance pass: test knobs, and at the end of a window the decision. Before DesiredMask.
void Evaluate(Runtime& r, std::uint64_t now_ns);
// NCCL took the mask over (runtime.cc, CheckMaskOverride): the level and NCCL's mask, now rather
// than at the end of the window (a duty-cycle period: 10 s by default).
void PublishNcclOverride(Runtime& r);
// The duty cycles in force: what the controls ask for, capped by the governor's limits.
std::uint32_t KernelDutyPm(const Runtime& r);
std::uint32_t ProxyDutyPm(const Runtime& r);

}  // namespace ncclscope::plugin::governor
