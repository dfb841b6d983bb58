#pragma once

// Message-size buckets: the `size` label of every per-op series. Powers of 4 from 1 KiB to 1 GiB
// (12 buckets, lower bound inclusive): fine enough to separate latency-bound from bandwidth-bound
// messages, coarse enough to bound cardinality (NCCL Inspector uses similar ranges).

#include <cstdint>
#include <string_view>

namespace ncclscope::analytics {

inline constexpr std::uint8_t kSizeBuckets = 12;

// Bucket index of a message of `bytes` bytes, 0 .. kSizeBuckets-1.
std::uint8_t SizeBucketIndex(std::uint64_t bytes);
// "0-1KiB", "1KiB-4KiB", ..., "256MiB-1GiB", "1GiB+".
std::string_view SizeBucketLabel(std::uint8_t index);

}  // namespace ncclscope::analytics
