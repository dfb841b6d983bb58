// The node's straggler CUSUM: a straggler's finding within seconds, none for healthy jitter or a
// shared pause, a short stall that comes and goes, clearing after the fault.

#include "agent/analytics/detection/straggler_detector.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "tests/support/exposition.h"
#include "tests/unit/analytics/analytics_test_util.h"

namespace ncclscope::analytics::detection {
namespace {

using testutil::Live;
using testutil::Text;

class StragglerDetectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_.OnTables({Live(7, 0, 2, 1), Live(7, 1, 2, 1)});
    registry_.EndPass(now_);
    label_ = registry_.Get(7).label;
    detector_.SetLimits(0.05, 0.25);
    live_ = {label_};
    detector_.EndPass(now_, live_);  // opens the first window
  }
  // One second: `n` matched collectives, the last arriver of each from `last(i)` with `delay`.
  template <typename Last, typename Delay>
  void Second(int n, Last last, Delay delay) {
    for (int i = 0; i < n; ++i) detector_.OnMatched(registry_, label_, last(i), delay(i));
    now_ += std::chrono::seconds(1);
    detector_.EndPass(now_, live_);
  }
  bool Finding(int rank) {
    const auto* s = detector_.Find(label_, rank);
    return s != nullptr && s->finding;
  }
  double Cusum(int rank) {
    const auto* s = detector_.Find(label_, rank);
    return s != nullptr ? s->cusum_s : 0;
  }

  CommRegistry registry_{8, 4};
  StragglerDetector detector_;
  std::uint32_t label_ = 0;
  absl::flat_hash_set<std::uint32_t> live_;  // the communicators a live ring lists
  Clock::time_point now_ = Clock::now();
};

TEST_F(StragglerDetectorTest, AStragglerCosting15PercentIsFoundInTwoSecondsAndClearsAfter) {
  // 50 matched collectives a second, rank 1 last at each by 3.2 ms: 16 % of the time.
  Second(
      50, [](int) { return 1; }, [](int) { return 3'200'000; });
  EXPECT_FALSE(Finding(1));
  EXPECT_NEAR(Cusum(1), 0.135, 1e-9);
  Second(
      50, [](int) { return 1; }, [](int) { return 3'200'000; });
  EXPECT_TRUE(Finding(1));
  for (int s = 0; s < 30; ++s)
    Second(
        50, [](int) { return 1; }, [](int) { return 3'200'000; });
  EXPECT_NEAR(Cusum(1), 0.5, 1e-9) << "capped at twice the threshold";
  // Fixed: rank 0 and 1 now take turns, 0.1 ms apart (rank 1: 2.5 ms/s). Under h/2 after
  // (0.5 - 0.125) / (0.025 - 0.0025) = 16.7 s.
  int seconds = 0;
  while (Finding(1) && seconds < 60) {
    Second(
        50, [](int i) { return i % 2; }, [](int) { return 100'000; });
    ++seconds;
  }
  EXPECT_GE(seconds, 16);
  EXPECT_LE(seconds, 18);
  const std::string text = Text(detector_);
  const std::string r1 = "{comm=\"" + registry_.Label(label_) + "\",rank=\"1\"";
  EXPECT_EQ(testing::SampleValue(text, "ncclscope_nccl_straggler_alarms_total" + r1 + "}"), 1);
  EXPECT_TRUE(std::isnan(testing::SampleValue(
      text, "ncclscope_nccl_rank_finding" + r1 + ",finding=\"straggler\",severity=\"warning\"}")));
  // Rank 0 never raised an alarm: no alarm counter for it. The CUSUMs are series only while above
  // 0 (rank 1's is still draining here, rank 0's was never up).
  const std::string r0 = "{comm=\"" + registry_.Label(label_) + "\",rank=\"0\"}";
  EXPECT_TRUE(std::isnan(testing::SampleValue(text, "ncclscope_nccl_straggler_alarms_total" + r0)));
  EXPECT_EQ(Cusum(0) > 0,
            !std::isnan(testing::SampleValue(text, "ncclscope_nccl_straggler_cusum_seconds" + r0)));
  EXPECT_EQ(Cusum(1) > 0, !std::isnan(testing::SampleValue(
                              text, "ncclscope_nccl_straggler_cusum_seconds" + r1 + "}")));
}

TEST_F(StragglerDetectorTest, HealthyJitterNeverRaisesAFinding) {
  // An hour of 100 matched collectives a second, the last arriver random, its lead over the
  // second-last up to 1 ms (a third of it on average): ~1.7 % of the time per rank, under the
  // 2.5 % allowance.
  std::mt19937 random(3);
  std::uniform_int_distribution<int> who(0, 1);
  std::uniform_int_distribution<std::uint64_t> lead(0, 1'000'000);
  std::vector<int> last(100);
  std::vector<std::uint64_t> delay(100);
  for (int s = 0; s < 3600; ++s) {
    for (int i = 0; i < 100; ++i) {
      last[static_cast<std::size_t>(i)] = who(random);
      delay[static_cast<std::size_t>(i)] = lead(random) * lead(random) / 1'000'000;
    }
    Second(
        100, [&](int i) { return last[static_cast<std::size_t>(i)]; },
        [&](int i) { return delay[static_cast<std::size_t>(i)]; });
    ASSERT_FALSE(Finding(0) || Finding(1)) << "second " << s;
  }
}

TEST_F(StragglerDetectorTest, PausesFreezeItAndAShortStallComesAndGoes) {
  Second(
      50, [](int) { return 1; }, [](int) { return 4'000'000; });  // 0.2 - 0.025
  const double before = Cusum(1);
  for (int s = 0; s < 20; ++s)
    Second(
        0, [](int) { return 0; }, [](int) { return 0; });
  EXPECT_DOUBLE_EQ(Cusum(1), before) << "no collective: every rank paused, nothing to judge";
  // One 500 ms stall of rank 0 (a GC pause, say): a finding for a few seconds, then gone.
  Second(
      1, [](int) { return 0; }, [](int) { return 500'000'000; });
  EXPECT_TRUE(Finding(0));
  int seconds = 0;
  while (Finding(0) && seconds < 60) {
    Second(
        50, [](int i) { return i % 2; }, [](int) { return 50'000; });
    ++seconds;
  }
  EXPECT_LE(seconds, 16);
}

// The job ends (no live ring lists its communicator) while its straggler's finding is on: the
// finding and the CUSUM are gone at the next pass, not when the series expire minutes later.
TEST_F(StragglerDetectorTest, AJobsEndEndsItsFindingAtOnce) {
  for (int s = 0; s < 5; ++s) {
    Second(
        50, [](int) { return 1; }, [](int) { return 3'200'000; });
  }
  ASSERT_TRUE(Finding(1));
  live_.clear();
  now_ += std::chrono::milliseconds(100);
  detector_.EndPass(now_, live_);
  EXPECT_FALSE(Finding(1));
  EXPECT_EQ(Cusum(1), 0);
  const std::string text = Text(detector_);
  EXPECT_EQ(text.find("ncclscope_nccl_rank_finding{"), std::string::npos) << text;
  EXPECT_EQ(text.find("ncclscope_nccl_straggler_cusum_seconds{"), std::string::npos) << text;
}

}  // namespace
}  // namespace ncclscope::analytics::detection
