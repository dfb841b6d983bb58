// The cardinality limiter: admission up to the limit, overflow counted once per key, reuse.

#include "agent/analytics/label_cap.h"

#include <gtest/gtest.h>

namespace ncclscope::analytics {
namespace {

TEST(LabelCapTest, AdmitsUpToTheLimitAndCountsEachRefusedKeyOnce) {
  LabelCap cap(2);
  const std::uint32_t a = cap.Admit(10);
  const std::uint32_t b = cap.Admit(20);
  EXPECT_NE(a, LabelCap::kOverflow);
  EXPECT_NE(b, LabelCap::kOverflow);
  EXPECT_NE(a, b);
  EXPECT_EQ(cap.Admit(10), a);  // stable
  EXPECT_EQ(cap.Admit(30), LabelCap::kOverflow);
  EXPECT_EQ(cap.Admit(30), LabelCap::kOverflow);
  EXPECT_EQ(cap.Admit(40), LabelCap::kOverflow);
  EXPECT_EQ(cap.overflowed(), 2u);
  EXPECT_EQ(cap.admitted(), 2u);
  EXPECT_FALSE(cap.Find(30).has_value());
}

TEST(LabelCapTest, ReleasedIndexesGoToNewKeysAndLimitChangesApplyFromNowOn) {
  LabelCap cap(2);
  const std::uint32_t a = cap.Admit(1);
  cap.Admit(2);
  cap.Release(1);
  EXPECT_EQ(cap.Admit(3), a);
  cap.SetLimit(1);
  EXPECT_EQ(cap.admitted(), 2u);  // admitted ones stay
  EXPECT_EQ(cap.Admit(4), LabelCap::kOverflow);
  cap.SetLimit(3);
  EXPECT_NE(cap.Admit(4), LabelCap::kOverflow);
  EXPECT_EQ(cap.overflowed(), 1u);
}

}  // namespace
}  // namespace ncclscope::analytics
