// Slow-rank matching across the node's ranks: last arriver, arrival lag, waiting, the fallback to
// enqueue times, participants learned from the tables, and bounded memory.

#include "agent/analytics/arrival_matcher.h"

#include <gtest/gtest.h>

#include <cmath>
#include <tuple>
#include <vector>

#include "tests/support/exposition.h"
#include "tests/unit/analytics/analytics_test_util.h"

namespace ncclscope::analytics {
namespace {

using testutil::Coll;
using testutil::Live;
using testutil::Text;

class ArrivalMatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_.OnTables({Live(7, 0, 8, 2), Live(7, 1, 8, 2), Live(7, 2, 8, 2)});
    registry_.EndPass(now_);
    comm_ = registry_.Find(7);
  }
  void Arrive(int rank, std::uint64_t seq, std::uint64_t start, bool gpu = true,
              std::uint64_t sync_ns = ArrivalMatcher::kNoSync) {
    profiler::OpView v =
        Coll(7, rank, NCCLSCOPE_FUNC_ALL_REDUCE, 1 << 20, seq, start, gpu ? 50'000 : 0);
    matcher_.OnOp(registry_, *comm_, v.op, now_, sync_ns);
  }
  double Sample(const std::string& series) { return testing::SampleValue(Text(matcher_), series); }
  std::string R(int rank) {
    return "{comm=\"" + registry_.Label(comm_->label) + "\",rank=\"" + std::to_string(rank) + "\"}";
  }

  CommRegistry registry_{8, 4};
  ArrivalMatcher matcher_;
  Comm* comm_ = nullptr;
  Clock::time_point now_ = Clock::now();
};

TEST_F(ArrivalMatcherTest, LastArriverLagAndWait) {
  for (std::uint64_t seq = 0; seq < 5; ++seq) {
    const std::uint64_t t = 1'000'000'000 + seq * 10'000'000;
    Arrive(0, seq, t);
    Arrive(2, seq, t + 3'000'000);  // 3 ms late, every time
    Arrive(1, seq, t + 1'000);
  }
  EXPECT_EQ(matcher_.pending(), 0u);
  EXPECT_EQ(
      Sample("ncclscope_nccl_coll_matched_total{comm=\"" + registry_.Label(comm_->label) + "\"}"),
      5);
  EXPECT_EQ(Sample("ncclscope_nccl_coll_last_arrivals_total" + R(2)), 5);
  EXPECT_EQ(Sample("ncclscope_nccl_coll_last_arrivals_total" + R(0)), 0);
  EXPECT_NEAR(Sample("ncclscope_nccl_coll_last_arrival_delay_seconds_total" + R(2)), 5 * 2.999e-3,
              1e-12);
  EXPECT_NEAR(Sample("ncclscope_nccl_coll_arrival_lag_seconds_total" + R(2)), 5 * 3e-3, 1e-12);
  EXPECT_NEAR(Sample("ncclscope_nccl_coll_wait_seconds_total" + R(0)), 5 * 3e-3, 1e-12);
  EXPECT_NEAR(Sample("ncclscope_nccl_coll_wait_seconds_total" + R(2)), 0, 1e-12);
  // The lag histogram only with plugin.rank_histograms (16 series per rank); 3 ms falls in the
  // (1.024 ms, 4.096 ms] bucket.
  EXPECT_TRUE(std::isnan(Sample("ncclscope_nccl_coll_arrival_lag_seconds_count" + R(2))));
  matcher_.SetLagHistogram(true);
  EXPECT_NEAR(Sample("ncclscope_nccl_coll_arrival_lag_seconds_sum" + R(2)), 5 * 3e-3, 1e-12);
  EXPECT_EQ(Sample("ncclscope_nccl_coll_arrival_lag_seconds_count" + R(2)), 5);
  EXPECT_EQ(Sample("ncclscope_nccl_coll_arrival_lag_seconds_bucket{comm=\"" +
                   registry_.Label(comm_->label) + "\",rank=\"2\",le=\"0.001024\"}"),
            0);
  EXPECT_EQ(Sample("ncclscope_nccl_coll_arrival_lag_seconds_bucket{comm=\"" +
                   registry_.Label(comm_->label) + "\",rank=\"2\",le=\"0.004096\"}"),
            5);
}

// The agent reads the last arriver's record first as often as not (its process's ring, its lane):
// its delay is still measured against the second-last arrival, not against itself.
TEST_F(ArrivalMatcherTest, TheLastArriversRecordReadFirstStillCountsItsDelay) {
  std::vector<std::tuple<std::uint32_t, std::int32_t, std::uint64_t>> seen;
  matcher_.SetObserver([&](std::uint32_t label, std::int32_t rank, std::uint64_t delay,
                           const ArrivalMatcher::SyncWitness& sync, std::uint32_t weight) {
    EXPECT_EQ(weight, 1u);     // records of older plugins (weight 0) stand for one op
    EXPECT_EQ(sync.rank, -1);  // no kernel phases: no second witness
    seen.emplace_back(label, rank, delay);
  });
  for (std::uint64_t seq = 0; seq < 3; ++seq) {
    const std::uint64_t t = 1'000'000'000 + seq * 10'000'000;
    Arrive(2, seq, t + 4'000'000);
    Arrive(0, seq, t);
    Arrive(1, seq, t + 1'000'000);
  }
  EXPECT_EQ(Sample("ncclscope_nccl_coll_last_arrivals_total" + R(2)), 3);
  EXPECT_NEAR(Sample("ncclscope_nccl_coll_last_arrival_delay_seconds_total" + R(2)), 3 * 3e-3,
              1e-12);
  ASSERT_EQ(seen.size(), 3u);
  for (const auto& [label, rank, delay] : seen) {
    EXPECT_EQ(label, comm_->label);
    EXPECT_EQ(rank, 2);
    EXPECT_EQ(delay, 3'000'000u);
  }
}

// NCCL 2.31+ symmetric kernels measure each rank's wait at the opening barrier on the GPU: the
// straggler waits least, by the others' lead. A straggler 4 ms late by kernel start waited 0.1 ms
// at the barrier while the others waited 3-4 ms: both witnesses name it, with the same delay.
TEST_F(ArrivalMatcherTest, TheBarrierWaitWitnessAgreesWithArrivalOrder) {
  std::vector<ArrivalMatcher::SyncWitness> witnesses;
  std::vector<std::int32_t> last;
  matcher_.SetObserver([&](std::uint32_t, std::int32_t rank, std::uint64_t,
                           const ArrivalMatcher::SyncWitness& sync,
                           std::uint32_t) { last.push_back(rank), witnesses.push_back(sync); });
  for (std::uint64_t seq = 0; seq < 4; ++seq) {
    const std::uint64_t t = 1'000'000'000 + seq * 10'000'000;
    Arrive(0, seq, t, true, 4'100'000);
    Arrive(1, seq, t + 1'000'000, true, 3'100'000);
    Arrive(2, seq, t + 4'000'000, true, 100'000);
  }
  ASSERT_EQ(witnesses.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(last[i], 2);
    EXPECT_EQ(witnesses[i].rank, 2);
    EXPECT_EQ(witnesses[i].delay_ns, 3'000'000u);  // the second-least wait minus its own
  }
  EXPECT_EQ(Sample("ncclscope_nccl_coll_least_sync_waits_total" + R(2)), 4);
  EXPECT_TRUE(std::isnan(Sample("ncclscope_nccl_coll_least_sync_waits_total" + R(0))));
  EXPECT_TRUE(std::isnan(Sample("ncclscope_nccl_coll_witness_disagreements_total{comm=\"" +
                                registry_.Label(comm_->label) + "\"}")));
}

// Where they differ (kernel starts skewed by a late launch, not by a late rank) the instance is
// counted, and the detectors get both. Without phases on every rank there is no second witness.
TEST_F(ArrivalMatcherTest, DisagreeingWitnessesAreCountedAndAPartialWitnessIsNone) {
  std::vector<ArrivalMatcher::SyncWitness> witnesses;
  matcher_.SetObserver([&](std::uint32_t, std::int32_t, std::uint64_t,
                           const ArrivalMatcher::SyncWitness& sync,
                           std::uint32_t) { witnesses.push_back(sync); });
  Arrive(0, 0, 1'000'000, true, 2'000'000);
  Arrive(1, 0, 5'000'000, true, 1'500'000);  // last by kernel start...
  Arrive(2, 0, 2'000'000, true, 200'000);    // ...but rank 2 waited least at the barrier
  Arrive(0, 1, 1'000'000, true, 2'000'000);
  Arrive(1, 1, 5'000'000, true);  // no phases from rank 1
  Arrive(2, 1, 2'000'000, true, 200'000);
  ASSERT_EQ(witnesses.size(), 2u);
  EXPECT_EQ(witnesses[0].rank, 2);
  EXPECT_EQ(witnesses[0].delay_ns, 1'300'000u);
  EXPECT_EQ(witnesses[1].rank, -1);
  EXPECT_EQ(Sample("ncclscope_nccl_coll_witness_disagreements_total{comm=\"" +
                   registry_.Label(comm_->label) + "\"}"),
            1);
}

TEST_F(ArrivalMatcherTest, WithoutGpuTimingEnqueueTimesDecide) {
  Arrive(0, 0, 2'000'000, true);
  Arrive(1, 0, 1'000'000, false);  // enqueued 10 us before 1 ms: the earliest host time
  Arrive(2, 0, 5'000'000, true);
  EXPECT_EQ(Sample("ncclscope_nccl_coll_last_arrivals_total" + R(2)), 1);
  EXPECT_NEAR(Sample("ncclscope_nccl_coll_arrival_lag_seconds_total" + R(2)), 4e-3, 1e-12);
}

TEST_F(ArrivalMatcherTest, IncompleteInstancesAreEvictedAfterTheTimeoutOrTheWindow) {
  matcher_.SetLimits({16, std::chrono::seconds(10)});
  Arrive(0, 100, 1'000);
  Arrive(1, 100, 2'000);  // rank 2's record never comes
  matcher_.EndPass(registry_, now_ + std::chrono::seconds(5));
  EXPECT_EQ(matcher_.pending(), 1u);
  matcher_.EndPass(registry_, now_ + std::chrono::seconds(11));
  EXPECT_EQ(matcher_.pending(), 0u);
  EXPECT_EQ(matcher_.evictions(ArrivalMatcher::kIncomplete), 1u);
  for (std::uint64_t seq = 0; seq < 20; ++seq) Arrive(0, seq, 1'000);
  EXPECT_EQ(matcher_.pending(), 16u);
  EXPECT_EQ(matcher_.evictions(ArrivalMatcher::kCapacity), 4u);
  Arrive(0, 10, 1'000);  // a duplicate of a waiting one changes nothing
  EXPECT_EQ(matcher_.evictions(ArrivalMatcher::kCapacity), 4u);
  EXPECT_EQ(matcher_.pending(), 16u);
}

// A job that ends leaves collectives some of its ranks never reached (they exit at their own
// pace): once no live ring lists the communicator they are dropped, not counted as given up.
TEST_F(ArrivalMatcherTest, CollectivesOfAnEndedJobAreNotGivenUp) {
  matcher_.SetLimits({16, std::chrono::seconds(10)});
  Arrive(0, 100, 1'000);
  Arrive(1, 100, 2'000);
  registry_.OnTables({});  // the job exited: no live ring lists the communicator
  registry_.EndPass(now_);
  matcher_.EndPass(registry_, now_ + std::chrono::seconds(11));
  EXPECT_EQ(matcher_.pending(), 0u);
  EXPECT_EQ(matcher_.evictions(ArrivalMatcher::kIncomplete), 0u);
}

TEST(ArrivalMatcherSettleTest, RecordsBeforeTheTablesWaitForTheParticipants) {
  CommRegistry registry(8, 4);
  ArrivalMatcher matcher;
  const auto now = Clock::now();
  Comm& comm = registry.Get(9);  // nothing known yet: not live
  for (int rank = 0; rank < 2; ++rank) {
    matcher.OnOp(registry, comm,
                 Coll(9, rank, NCCLSCOPE_FUNC_ALL_REDUCE, 64, 0, 1000 + rank * 500, 100).op, now);
  }
  EXPECT_EQ(matcher.pending(), 1u);
  registry.OnTables({Live(9, 0, 2, 1), Live(9, 1, 2, 1)});
  registry.EndPass(now);
  matcher.EndPass(registry, now);
  EXPECT_EQ(matcher.pending(), 0u);
  EXPECT_EQ(matcher.matched(comm.label), 1u);
  // A communicator with a single rank here is not matched at all.
  Comm& solo = registry.Get(10);
  registry.OnTables({Live(9, 0, 2, 1), Live(9, 1, 2, 1), Live(10, 0, 4, 4)});
  registry.EndPass(now);
  matcher.OnOp(registry, solo, Coll(10, 0, NCCLSCOPE_FUNC_ALL_REDUCE, 64, 0, 1000, 100).op, now);
  EXPECT_EQ(matcher.pending(), 0u);
}

}  // namespace
}  // namespace ncclscope::analytics
