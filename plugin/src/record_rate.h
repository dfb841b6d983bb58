#pragma once

// plugin.record_rate_limit: the most operations per second a process records. Every pass the
// maintenance thread counts the ops its communicators started (the comm table's ops_enqueued,
// summed over live communicators, from the maintenance thread alone: nothing on NCCL's threads)
// and sets the factor record_one_in is multiplied by to the smallest power of two that brings the
// rate under the limit. It raises the factor at once, from the first pass (200 ms) that sees the
// rate above what the factor allows; it lowers it only when the rate would stay
// under half the limit (no flapping at a rate near the limit). Powers of two keep the ops
// recorded at a larger factor a subset of those at a smaller one (ncclscope_op_recorded), so the
// ranks of a job that change factor a second apart still record the same collectives at the
// coarser one. The factor in force and the rate are published in the ring header
// (ncclscope_governor_state.record_one_in, .op_rate) for the agent's metrics.

#include <cstdint>

#include "platform/pod_vector.h"

namespace ncclscope::plugin {
struct Runtime;
}

namespace ncclscope::plugin::record_rate {

inline constexpr std::uint64_t kWindowNs = 1'000'000'000;
// The shortest window a raise is decided on (a maintenance pass is 200 ms): shorter ones are too
// few ops to tell a burst from a rate.
inline constexpr std::uint64_t kMinRaiseWindowNs = 150'000'000;

// The maintenance thread's view of the last window.
struct Window {
  std::uint64_t start_ns = 0;
  struct Seen {
    std::uint32_t generation = 0;  // at the window's start
    std::uint64_t ops = 0;
    std::uint32_t generation_now = 0;  // at the last pass
    std::uint64_t ops_now = 0;
  };
  platform::PodVector<Seen> comms;  // by comm index: the slot's generation and ops_enqueued then
};

// Starts a window now: when the maintenance thread starts, so the first pass decides already.
void Start(Runtime& r, std::uint64_t now_ns);

// The factor for `rate` ops/s under `limit` (0: none), starting from `current` (a power of two).
std::uint32_t NextFactor(std::uint64_t rate, std::uint32_t limit, std::uint32_t current);

// Every maintenance pass: counts; raises the factor as soon as the rate since the window's start
// needs it, otherwise decides once a window has passed; publishes. Maintenance thread only.
void Evaluate(Runtime& r, std::uint64_t now_ns);

// record_one_in x the factor, at most NCCLSCOPE_MAX_RECORD_ONE_IN: what StartOp records by.
std::uint32_t OneIn(const Runtime& r);

}  // namespace ncclscope::plugin::record_rate
