// RankTimeline: time inside a communicator rank's timed ops and between them, against
// hand-computed timelines: gaps, overlapping ops counted once, an op reported after a later one,
// untimed ops ending the stretch, one row per (comm, rank), dropped labels; and through
// NcclAnalytics, a promtool-clean exposition with the share computable from the two counters.

#include "agent/analytics/rank_timeline.h"

#include <gtest/gtest.h>

#include "agent/analytics/nccl_analytics.h"
#include "tests/support/agent_process.h"
#include "tests/support/subprocess.h"
#include "tests/unit/analytics/analytics_test_util.h"

namespace ncclscope::analytics {
namespace {

using testutil::Coll;
using testutil::Init;
using testutil::Live;
using testutil::P2p;
using testutil::Text;

constexpr const char* kRank0 = "{comm=\"0x0000000000000001\",rank=\"0\"}";
constexpr const char* kRank1 = "{comm=\"0x0000000000000001\",rank=\"1\"}";

double Inside(const std::string& text, const char* labels) {
  return testing::SampleValue(text,
                              std::string("ncclscope_nccl_rank_inside_seconds_total") + labels);
}
double Between(const std::string& text, const char* labels) {
  return testing::SampleValue(text,
                              std::string("ncclscope_nccl_rank_between_seconds_total") + labels);
}

class RankTimelineTest : public ::testing::Test {
 protected:
  RankTimelineTest() {
    registry_.OnPass({Live(1, 0, 2, 1), Live(1, 1, 2, 1)}, Clock::now());
    label_ = registry_.Find(1)->label;
  }
  void Observe(const profiler::OpView& v) { timeline_.Observe(registry_, label_, v.op); }

  CommRegistry registry_{64, 16, 4096};
  std::uint32_t label_ = 0;
  RankTimeline timeline_;
};

TEST_F(RankTimelineTest, GapsBetweenConsecutiveOpsAreTheComputeSide) {
  // 0-1 ms inside, 1-4 ms compute, 4-6 ms inside, 6-7 ms compute, 7-7.5 ms inside.
  Observe(Coll(1, 0, NCCLSCOPE_FUNC_ALL_REDUCE, 1 << 20, 0, 1'000'000, 1'000'000));
  Observe(Coll(1, 0, NCCLSCOPE_FUNC_ALL_GATHER, 1 << 20, 0, 5'000'000, 2'000'000));
  Observe(Coll(1, 0, NCCLSCOPE_FUNC_ALL_REDUCE, 1 << 20, 1, 8'000'000, 500'000));
  const std::string text = Text(timeline_);
  EXPECT_NEAR(Inside(text, kRank0), 3.5e-3, 1e-12);
  EXPECT_NEAR(Between(text, kRank0), 4e-3, 1e-12);
  // Share of the iteration spent communicating: 3.5 / 7.5.
  EXPECT_NEAR(Inside(text, kRank0) / (Inside(text, kRank0) + Between(text, kRank0)), 3.5 / 7.5,
              1e-9);
}

TEST_F(RankTimelineTest, OverlappingOpsCountOnceAndLateReportsAddNothing) {
  // A group's Send (1.0-2.0 ms) and Recv (1.5-2.5 ms): 1.5 ms inside, no gap.
  profiler::OpView send = P2p(1, 0, true, 1, 4096, 1'000'000);
  profiler::OpView recv = P2p(1, 0, false, 1, 4096, 1'000'000);
  recv.op.gpu_start_ns += 500'000;
  recv.op.gpu_end_ns += 500'000;
  Observe(send);
  Observe(recv);
  // Reported after the Recv but ended before it (1.2-1.8 ms): inside the union already.
  profiler::OpView late = Coll(1, 0, NCCLSCOPE_FUNC_ALL_REDUCE, 4096, 0, 1'200'000, 600'000);
  Observe(late);
  // Then 2.5-3.0 ms compute and 3.0-3.25 ms inside.
  Observe(Coll(1, 0, NCCLSCOPE_FUNC_ALL_REDUCE, 4096, 1, 3'000'000, 250'000));
  const std::string text = Text(timeline_);
  EXPECT_NEAR(Inside(text, kRank0), 1.75e-3, 1e-12);
  EXPECT_NEAR(Between(text, kRank0), 0.5e-3, 1e-12);
}

TEST_F(RankTimelineTest, AnUntimedOpEndsTheStretch) {
  Observe(Coll(1, 0, NCCLSCOPE_FUNC_ALL_REDUCE, 4096, 0, 1'000'000, 100'000));
  Observe(Coll(1, 0, NCCLSCOPE_FUNC_ALL_REDUCE, 4096, 1, 2'000'000, 0));  // kernel tracing off
  // 50 ms later tracing is back: the time since 1.1 ms is not known to be compute.
  Observe(Coll(1, 0, NCCLSCOPE_FUNC_ALL_REDUCE, 4096, 2, 52'000'000, 100'000));
  Observe(Coll(1, 0, NCCLSCOPE_FUNC_ALL_REDUCE, 4096, 3, 52'400'000, 100'000));
  const std::string text = Text(timeline_);
  EXPECT_NEAR(Inside(text, kRank0), 0.3e-3, 1e-12);
  EXPECT_NEAR(Between(text, kRank0), 0.3e-3, 1e-12);
}

TEST_F(RankTimelineTest, OneRowPerRankAndDroppedLabelsGo) {
  Observe(Coll(1, 0, NCCLSCOPE_FUNC_ALL_REDUCE, 4096, 0, 1'000'000, 100'000));
  Observe(Coll(1, 1, NCCLSCOPE_FUNC_ALL_REDUCE, 4096, 0, 1'000'000, 300'000));
  Observe(Coll(1, 1, NCCLSCOPE_FUNC_BROADCAST, 1 << 24, 0, 2'000'000, 300'000));
  EXPECT_EQ(timeline_.series(), 2u);
  std::string text = Text(timeline_);
  EXPECT_NEAR(Inside(text, kRank1), 0.6e-3, 1e-12);
  EXPECT_NEAR(Between(text, kRank1), 0.7e-3, 1e-12);
  EXPECT_NEAR(Between(text, kRank0), 0, 1e-12);
  timeline_.DropLabels({label_});
  EXPECT_EQ(timeline_.series(), 0u);
  text = Text(timeline_);
  EXPECT_EQ(text.find("rank_inside_seconds_total{"), std::string::npos);
}

TEST(RankTimelineAnalyticsTest, RenderedByTheAnalyticsAndPromtoolClean) {
  NcclAnalytics a;
  a.OnCommInit({}, Init(1, 0, 2, 1, "DP"));
  a.OnOp({}, Coll(1, 0, NCCLSCOPE_FUNC_ALL_REDUCE, 1 << 20, 0, 1'000'000, 1'000'000));
  a.OnOp({}, Coll(1, 0, NCCLSCOPE_FUNC_ALL_REDUCE, 1 << 20, 1, 3'000'000, 1'000'000));
  std::string text;
  metrics::TextWriter out(text);
  a.Render(out, 10'000'000'000);
  EXPECT_NEAR(Inside(text, kRank0), 2e-3, 1e-12);
  EXPECT_NEAR(Between(text, kRank0), 1e-3, 1e-12);
  EXPECT_EQ(testing::SampleValue(text, "ncclscope_nccl_analytics_series{group=\"timeline\"}"), 1);
  const testing::RunResult lint =
      testing::RunCommand({NCCLSCOPE_PROMTOOL, "check", "metrics"}, text);
  EXPECT_EQ(lint.exit_code, 0) << lint.output;
  EXPECT_EQ(lint.output, "") << lint.output;
}

}  // namespace
}  // namespace ncclscope::analytics
