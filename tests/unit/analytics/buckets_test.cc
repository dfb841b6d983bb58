// Size buckets and latency buckets: the integer fast paths agree with the documented bounds.

#include <gtest/gtest.h>

#include <cmath>

#include "agent/analytics/latency_buckets.h"
#include "agent/analytics/size_bucket.h"

namespace ncclscope::analytics {
namespace {

TEST(SizeBucketTest, PowersOfFourFromOneKiBLowerBoundInclusive) {
  EXPECT_EQ(SizeBucketLabel(SizeBucketIndex(0)), "0-1KiB");
  EXPECT_EQ(SizeBucketLabel(SizeBucketIndex(1023)), "0-1KiB");
  EXPECT_EQ(SizeBucketLabel(SizeBucketIndex(1024)), "1KiB-4KiB");
  EXPECT_EQ(SizeBucketLabel(SizeBucketIndex(4095)), "1KiB-4KiB");
  EXPECT_EQ(SizeBucketLabel(SizeBucketIndex(4096)), "4KiB-16KiB");
  EXPECT_EQ(SizeBucketLabel(SizeBucketIndex(4u << 20)), "4MiB-16MiB");
  EXPECT_EQ(SizeBucketLabel(SizeBucketIndex((1u << 30) - 1)), "256MiB-1GiB");
  EXPECT_EQ(SizeBucketLabel(SizeBucketIndex(1u << 30)), "1GiB+");
  EXPECT_EQ(SizeBucketLabel(SizeBucketIndex(UINT64_MAX)), "1GiB+");
  // Every bucket boundary: [1 KiB * 4^(i-1), 1 KiB * 4^i).
  for (std::uint8_t i = 1; i + 1 < kSizeBuckets; ++i) {
    const std::uint64_t low = 1024ull << (2 * (i - 1));
    EXPECT_EQ(SizeBucketIndex(low), i);
    EXPECT_EQ(SizeBucketIndex(low * 4 - 1), i);
  }
}

TEST(LatencyBucketTest, IntegerBucketMatchesTheSecondsBounds) {
  const auto& bounds = LatencyBounds().bounds();
  ASSERT_EQ(bounds.size(), kLatencyBounds);
  EXPECT_DOUBLE_EQ(bounds[0], 1e-6);
  EXPECT_NEAR(bounds.back(), 16.777216, 1e-9);
  auto reference = [&](std::uint64_t ns) {
    for (std::uint32_t i = 0; i < bounds.size(); ++i) {
      if (static_cast<double>(ns) <= std::llround(bounds[i] * 1e9)) return i;
    }
    return kLatencyBounds;
  };
  for (std::uint32_t i = 0; i < bounds.size(); ++i) {
    const auto edge = static_cast<std::uint64_t>(std::llround(bounds[i] * 1e9));
    for (std::uint64_t ns : {edge - 1, edge, edge + 1}) {
      EXPECT_EQ(LatencyBucket(ns), reference(ns)) << ns;
    }
  }
  EXPECT_EQ(LatencyBucket(0), 0u);
  EXPECT_EQ(LatencyBucket(UINT64_MAX / 2), kLatencyBounds);
  EXPECT_EQ(LatencyBounds().le(0), "le=\"1e-06\"");
  EXPECT_EQ(LatencyBounds().le(kLatencyBounds), "le=\"+Inf\"");
}

}  // namespace
}  // namespace ncclscope::analytics
