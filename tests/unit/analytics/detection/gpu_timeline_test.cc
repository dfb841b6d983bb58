// Compute vs communication per rank: gaps between a GPU's NCCL operations of every communicator,
// the union of their GPU intervals, and what is left out (untimed neighbours, overlaps, long
// idles).

#include "agent/analytics/detection/gpu_timeline.h"

#include <gtest/gtest.h>

#include "tests/support/exposition.h"
#include "tests/unit/analytics/analytics_test_util.h"

namespace ncclscope::analytics::detection {
namespace {

using testutil::Coll;
using testutil::Live;
using testutil::Text;

class GpuTimelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Communicators 7 (the world) and 8 (a DP group): rank 0 of both is one process and GPU
    // (the same pid, as Live gives rank r pid 100 + r); rank 1 of 7 is another GPU.
    registry_.OnTables({Live(7, 0, 2, 1), Live(7, 1, 2, 1), Live(8, 0, 2, 2)});
    registry_.EndPass(now_);
  }
  void Op(std::uint64_t comm, int rank, std::uint64_t start, std::uint64_t duration,
          std::uint32_t weight = 0) {
    Comm& c = registry_.Get(comm);
    profiler::OpView v = Coll(comm, rank, NCCLSCOPE_FUNC_ALL_REDUCE, 1 << 20, 0, start, duration);
    v.op.weight = weight;
    timeline_.OnOp(c, registry_.RankOf(c, rank), v.op);
  }
  void EndPass() { timeline_.EndPass(registry_, now_, std::chrono::minutes(10)); }
  const GpuTimeline::Stats& Of(std::uint64_t comm, int rank) {
    const GpuTimeline::Stats* s = timeline_.Find(registry_.Get(comm).label, rank);
    static const GpuTimeline::Stats kNone;
    return s != nullptr ? *s : kNone;
  }

  CommRegistry registry_{8, 4};
  GpuTimeline timeline_;
  Clock::time_point now_ = Clock::now();
};

TEST_F(GpuTimelineTest, GapsGoToTheOperationThatEndsThemWhateverItsCommunicator) {
  // GPU of rank 0: world [1000, 2000], DP [3000, 3500], world [4500, 5000] (read out of order).
  Op(7, 0, 4500, 500);
  Op(8, 0, 3000, 500);
  Op(7, 0, 1000, 1000);
  EndPass();
  EXPECT_EQ(Of(8, 0).compute_ns, 1000u);  // 2000 -> 3000
  EXPECT_EQ(Of(7, 0).compute_ns, 1000u);  // 3500 -> 4500 (nothing before the first op)
  EXPECT_EQ(Of(7, 0).communication_ns, 1500u);
  EXPECT_EQ(Of(8, 0).communication_ns, 500u);
  // The next pass continues the same GPU's timeline.
  Op(8, 0, 7000, 100);
  EndPass();
  EXPECT_EQ(Of(8, 0).compute_ns, 3000u);  // + 5000 -> 7000
  // Rank 1 of the world is another GPU, untouched by rank 0's gaps.
  Op(7, 1, 1000, 4000);
  Op(7, 1, 5500, 100);
  EndPass();
  EXPECT_EQ(Of(7, 1).compute_ns, 500u);
  const std::string text = Text(timeline_);
  const std::string world = "{comm=\"" + registry_.Label(registry_.Get(7).label) + "\",rank=\"0\"}";
  EXPECT_DOUBLE_EQ(testing::SampleValue(text, "ncclscope_nccl_rank_compute_seconds_total" + world),
                   1e-6);
  EXPECT_DOUBLE_EQ(
      testing::SampleValue(text, "ncclscope_nccl_rank_communication_seconds_total" + world),
      1.5e-6);
}

TEST_F(GpuTimelineTest, UntimedNeighboursOverlapsAndLongIdlesAreLeftOut) {
  Op(7, 0, 1000, 1000);
  Op(8, 0, 1500, 1000);  // overlaps the world op (another stream): only 2000 -> 2500 is new
  EndPass();
  EXPECT_EQ(Of(8, 0).communication_ns, 500u);
  EXPECT_EQ(Of(8, 0).compute_ns, 0u);
  Op(7, 0, 3000, 0);  // no GPU timing: the gap before the next op is not measurable
  Op(7, 0, 5000, 100);
  EndPass();
  EXPECT_EQ(Of(7, 0).compute_ns, 0u);
  Op(7, 0, 5200, 100);                               // 5100 -> 5200 counts again
  Op(7, 0, 5300 + GpuTimeline::kMaxGapNs + 1, 100);  // a job between phases: not compute
  EndPass();
  EXPECT_EQ(Of(7, 0).compute_ns, 100u);
}

// plugin.record_one_in = 4: a record stands for 4 operations, and the gap before it holds the 3
// left unrecorded. An iteration of 4 operations of 300 ns, 100 ns apart, recorded one in four:
// communication 4 x 300 per record, compute the gap (3 x 300 + 4 x 100) less 3 x 300, as if all
// had been recorded. A long operation after a short gap makes the estimate negative: carried,
// never subtracted from the counter.
TEST_F(GpuTimelineTest, WeighedRecordsEstimateWhatTheOpsTheyStandForDid) {
  for (std::uint64_t i = 0; i < 3; ++i) Op(7, 0, 1000 + i * 1600, 300, 4);
  EndPass();
  EXPECT_EQ(Of(7, 0).communication_ns, 3u * 4 * 300);
  EXPECT_EQ(Of(7, 0).compute_ns, 2u * 4 * 100);  // nothing before the first record
  // Every one recorded (weight 0 is 1, as older plugins write) gives the same per operation.
  for (std::uint64_t i = 0; i < 8; ++i) Op(7, 1, 1000 + i * 400, 300, 0);
  EndPass();
  EXPECT_EQ(Of(7, 1).communication_ns, 8u * 300);
  EXPECT_EQ(Of(7, 1).compute_ns, 7u * 100);
  // 7 x 300 stood for by a record after a 100 ns gap: -2000 carried, then paid by later gaps.
  const std::uint64_t before = Of(7, 0).compute_ns;
  const std::uint64_t end = 1000 + 2 * 1600 + 300;
  Op(7, 0, end + 100, 300, 8);
  EndPass();
  EXPECT_EQ(Of(7, 0).compute_ns, before);
  Op(7, 0, end + 400 + 2500, 300, 1);  // a 2500 ns gap: 2500 - 2000 counted
  EndPass();
  EXPECT_EQ(Of(7, 0).compute_ns, before + 500);
}

// A gap of a second or more is a pause too (a checkpoint): compute, and counted apart, so that
// the verdict can leave it out of its 30 s comparison. Just under a second is compute only. A
// rank's first pause starts its pause series at 0 and is counted in neither: rate() takes a
// series' first value as its start, so the compute would jump where the pause does not.
TEST_F(GpuTimelineTest, GapsOfASecondOrMoreArePausesToo) {
  constexpr std::uint64_t kSecond = GpuTimeline::kPauseNs;
  Op(7, 0, 1000, 100);
  Op(7, 0, 1100 + kSecond - 1, 100);  // a gap 1 ns short of a second
  EndPass();
  EXPECT_EQ(Of(7, 0).compute_ns, kSecond - 1);
  EXPECT_EQ(Of(7, 0).pause_ns, 0u);
  EXPECT_FALSE(Of(7, 0).paused);
  std::uint64_t end = 1100 + kSecond - 1 + 100;
  Op(8, 0, end + 8 * kSecond, 100);  // an 8 s checkpoint, ended by a DP op: its first
  Op(8, 0, end + 8 * kSecond + 200, 100);
  EndPass();
  EXPECT_EQ(Of(8, 0).compute_ns, 100u);
  EXPECT_EQ(Of(8, 0).pause_ns, 0u);
  EXPECT_TRUE(Of(8, 0).paused);
  end += 8 * kSecond + 300;
  Op(8, 0, end + 5 * kSecond, 100);  // the next: in both
  EndPass();
  EXPECT_EQ(Of(8, 0).compute_ns, 100 + 5 * kSecond);
  EXPECT_EQ(Of(8, 0).pause_ns, 5 * kSecond);
  EXPECT_FALSE(Of(7, 0).paused);
  const std::string text = Text(timeline_);
  const std::string dp = "{comm=\"" + registry_.Label(registry_.Get(8).label) + "\",rank=\"0\"}";
  EXPECT_DOUBLE_EQ(testing::SampleValue(text, "ncclscope_nccl_rank_pause_seconds_total" + dp), 5);
  // Only ranks that paused have a pause series (the scrape's budget); the world rank has none.
  const std::string world = "{comm=\"" + registry_.Label(registry_.Get(7).label) + "\",rank=\"0\"}";
  EXPECT_EQ(text.find("ncclscope_nccl_rank_pause_seconds_total" + world), std::string::npos);
  EXPECT_NE(text.find("ncclscope_nccl_rank_compute_seconds_total" + world), std::string::npos);
}

TEST_F(GpuTimelineTest, IdleGpusAreForgotten) {
  Op(7, 0, 1000, 1000);
  EndPass();
  EXPECT_EQ(timeline_.gpus(), 1u);
  timeline_.EndPass(registry_, now_ + std::chrono::minutes(11), std::chrono::minutes(10));
  EXPECT_EQ(timeline_.gpus(), 0u);
}

}  // namespace
}  // namespace ncclscope::analytics::detection
