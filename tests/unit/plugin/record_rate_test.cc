// The record-rate limit's decision (plugin/src/record_rate.h): the smallest power of two that
// brings a process's op rate under the limit, raised at once, lowered only below half the limit.
// Through the real plugin: governor_test.cc.

#include "plugin/src/record_rate.h"

#include <gtest/gtest.h>

#include "plugin/ring/ncclscope_ring.h"

namespace ncclscope::plugin::record_rate {
namespace {

TEST(RecordRateTest, TheSmallestPowerOfTwoUnderTheLimitUpAtOnceDownBelowHalf) {
  EXPECT_EQ(NextFactor(5000, 0, 8), 1u);     // no limit: every op
  EXPECT_EQ(NextFactor(900, 1000, 1), 1u);   // under it
  EXPECT_EQ(NextFactor(1000, 1000, 1), 1u);  // at it
  EXPECT_EQ(NextFactor(1001, 1000, 1), 2u);
  EXPECT_EQ(NextFactor(5000, 1000, 1), 8u);  // up at once, 625/s recorded
  EXPECT_EQ(NextFactor(5000, 1000, 8), 8u);  // steady
  // Down only as far as keeps it under half the limit: 2,000/s at 1 in 4 is 500/s.
  EXPECT_EQ(NextFactor(2000, 1000, 8), 4u);
  EXPECT_EQ(NextFactor(2000, 1000, 4), 4u);  // 1 in 2 would be 1,000/s: not under half
  EXPECT_EQ(NextFactor(400, 1000, 4), 1u);
  EXPECT_EQ(NextFactor(0, 1000, 64), 1u);  // quiet: every op again
  EXPECT_EQ(NextFactor(UINT64_MAX / 2, 1, 1), NCCLSCOPE_MAX_RECORD_ONE_IN);  // capped
  EXPECT_EQ(NextFactor(10, 1, 1), 16u);
  EXPECT_EQ(NextFactor(3, 1, 16), 4u);  // a limit of 1 has no half: down to what keeps it under
}

}  // namespace
}  // namespace ncclscope::plugin::record_rate
