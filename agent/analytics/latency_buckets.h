#pragma once

// Time histograms of the NCCL analytics (GPU duration, arrival lag): bounds 1 us x 4^k up to
// ~16.8 s, so small-message latency and multi-second stalls both resolve in 14 buckets.

#include <cstdint>

#include "agent/core/text_exposition.h"

namespace ncclscope::analytics {

inline constexpr std::uint32_t kLatencyBounds = 13;                   // 1 us .. 4^12 us
inline constexpr std::uint32_t kLatencyBuckets = kLatencyBounds + 1;  // with +Inf

// The bounds in seconds, with their `le` text.
const metrics::HistogramBounds& LatencyBounds();

// Bucket of a duration in ns: the first k with ns <= 1000 * 4^k, or kLatencyBounds (+Inf).
inline std::uint32_t LatencyBucket(std::uint64_t ns) {
  const std::uint64_t us = (ns + 999) / 1000;  // ns <= 1000 * 4^k  <=>  ceil(ns / 1000) <= 4^k
  if (us <= 1) return 0;
  const auto bits = static_cast<std::uint32_t>(64 - __builtin_clzll(us - 1));
  const std::uint32_t k = (bits + 1) / 2;
  return k < kLatencyBounds ? k : kLatencyBounds;
}

// Counts per bucket plus their sum, in ns.
struct LatencyHistogram {
  std::uint64_t counts[kLatencyBuckets] = {};
  std::uint64_t sum_ns = 0;
  // `weight`: the observations this one stands for (a record's weight, plugin.record_one_in).
  void Observe(std::uint64_t ns, std::uint32_t weight = 1) {
    counts[LatencyBucket(ns)] += weight;
    const std::uint64_t add = ns > UINT64_MAX / weight ? UINT64_MAX : ns * weight;
    sum_ns = add > UINT64_MAX - sum_ns ? UINT64_MAX : sum_ns + add;  // saturating
  }
};

}  // namespace ncclscope::analytics
