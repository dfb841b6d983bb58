// Progress from the communicator table: in-flight ops, the age of the oldest (also beyond the 8
// the table keeps), hung ops against the timeout, and comms over the cap aggregated.

#include "agent/analytics/hang_tracker.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/support/exposition.h"
#include "tests/unit/analytics/analytics_test_util.h"

namespace ncclscope::analytics {
namespace {

profiler::CommSlotSnapshot Slot(std::uint64_t enqueued, std::uint64_t completed) {
  profiler::CommSlotSnapshot s;
  s.ops_enqueued = enqueued;
  s.ops_completed = completed;
  s.last_complete_ns = 500;
  for (std::uint64_t k = enqueued > 8 ? enqueued - 8 : 0; k < enqueued; ++k) {
    s.recent[k % 8].enqueue_ns = 1000 + k * 100;  // op k enqueued at 1000 + 100 k
  }
  return s;
}

TEST(HangTrackerTest, OldestInFlightAgeAndHungOps) {
  // Ops 10 and 11 in flight, enqueued at 2000 and 2100.
  RankProgress p = ProgressOf(Slot(12, 10), 5000, 2950);
  EXPECT_EQ(p.in_flight, 2u);
  EXPECT_EQ(p.oldest_age_ns, 3000u);
  EXPECT_EQ(p.hung, 1u);  // 3000 > 2950, 2900 is not
  EXPECT_EQ(p.last_completion_ns, 500u);
  EXPECT_EQ(ProgressOf(Slot(12, 12), 5000, 1).in_flight, 0u);
  EXPECT_EQ(ProgressOf(Slot(12, 12), 5000, 1).oldest_age_ns, 0u);
}

TEST(HangTrackerTest, MoreInFlightThanTheTableKeepsCountsAsAtLeastThatOld) {
  // 20 in flight; the table keeps ops 22..29 (oldest at 3200): all 20 are older than that.
  RankProgress p = ProgressOf(Slot(30, 10), 10'000, 6000);
  EXPECT_EQ(p.in_flight, 20u);
  EXPECT_EQ(p.oldest_age_ns, 10'000u - 3200u);
  EXPECT_EQ(p.hung, 20u);  // 22..29 are 6800..6100 old: all > 6000; the 12 before, older
}

TEST(HangTrackerTest, RendersPerRankAndAggregatesCommsOverTheCap) {
  CommRegistry registry(1, 4);
  auto live = [](std::uint64_t comm, int rank, std::uint64_t enqueued, std::uint64_t completed) {
    profiler::LiveComm c = testutil::Live(comm, rank, 4, 1);
    profiler::CommSlotSnapshot s = Slot(enqueued, completed);
    s.comm_id = comm;
    s.rank = rank;
    s.nranks = 4;
    s.nnodes = 1;
    c.slot = s;
    return c;
  };
  registry.OnTables({live(1, 0, 12, 11), live(2, 0, 12, 10), live(3, 0, 12, 11)});
  registry.EndPass(Clock::now());
  std::string text;
  metrics::TextWriter out(text);
  RenderProgress(registry, 5000, 1000, out);
  EXPECT_EQ(testing::SampleValue(text,
                                 "ncclscope_nccl_ops_in_flight{comm=\"0x0000000000000001\","
                                 "rank=\"0\"}"),
            1);
  // Communicators 2 and 3 share comm="other": counts summed, the oldest age is the maximum.
  EXPECT_EQ(testing::SampleValue(text, "ncclscope_nccl_ops_in_flight{comm=\"other\",rank=\"0\"}"),
            3);
  EXPECT_EQ(testing::SampleValue(
                text, "ncclscope_nccl_oldest_in_flight_op_age_seconds{comm=\"other\",rank=\"0\"}"),
            3000e-9);
  EXPECT_EQ(testing::SampleValue(text, "ncclscope_nccl_ops_hung{comm=\"other\",rank=\"0\"}"), 3);
}

// The enqueued seq always (the rank behind in a hang is found with it); the completed seq and the
// hung count only while an op of the rank hangs.
TEST(HangTrackerTest, CompletedSeqAndHungCountOnlyWhileARankHangs) {
  CommRegistry registry(4, 4);
  auto live = [](std::uint64_t comm, std::uint64_t enqueued, std::uint64_t completed) {
    profiler::LiveComm c = testutil::Live(comm, 0, 4, 1);
    profiler::CommSlotSnapshot s = Slot(enqueued, completed);
    s.comm_id = comm;
    s.nranks = 4;
    s.nnodes = 1;
    s.last_enqueue_func = NCCLSCOPE_FUNC_ALL_REDUCE;
    s.last_enqueue_seq = enqueued;
    s.last_complete_func = NCCLSCOPE_FUNC_ALL_REDUCE;
    s.last_complete_seq = completed;
    c.slot = s;
    return c;
  };
  // Comm 1: op 11 in flight since 2100, 2900 ago (under the 2950 timeout). Comm 2: op 10 in
  // flight since 2000, 3000 ago: hung.
  registry.OnTables({live(1, 12, 11), live(2, 12, 10)});
  registry.EndPass(Clock::now());
  std::string text;
  metrics::TextWriter out(text);
  RenderProgress(registry, 5000, 2950, out);
  const std::string c1 = "{comm=\"0x0000000000000001\",rank=\"0\"";
  const std::string c2 = "{comm=\"0x0000000000000002\",rank=\"0\"";
  EXPECT_EQ(
      testing::SampleValue(text, "ncclscope_nccl_last_enqueued_seq" + c1 + ",func=\"AllReduce\"}"),
      12);
  EXPECT_TRUE(std::isnan(testing::SampleValue(
      text, "ncclscope_nccl_last_completed_seq" + c1 + ",func=\"AllReduce\"}")));
  EXPECT_TRUE(std::isnan(testing::SampleValue(text, "ncclscope_nccl_ops_hung" + c1 + "}")));
  EXPECT_EQ(
      testing::SampleValue(text, "ncclscope_nccl_last_completed_seq" + c2 + ",func=\"AllReduce\"}"),
      10);
  EXPECT_EQ(testing::SampleValue(text, "ncclscope_nccl_ops_hung" + c2 + "}"), 1);
}

}  // namespace
}  // namespace ncclscope::analytics
