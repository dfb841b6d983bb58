// Valid records with hostile contents, against the NCCL analytics (docs/trust-model.md): random
// ranks (the reader used to insert them linearly, minutes of CPU), random communicator ids (RSS
// from 7 to 614 MB), counters set to wrap, and a pod forging another job's communicator (fake ops,
// a fake hang, a rewritten comm_info). Each failed before issue 11.

#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>

#include "agent/analytics/nccl_analytics.h"
#include "tests/unit/analytics/analytics_test_util.h"

namespace ncclscope::analytics {
namespace {

using testutil::Coll;
using testutil::Init;
using testutil::Live;

profiler::RingOrigin Ring(std::uint32_t id, const std::string& principal) {
  profiler::RingOrigin origin;
  origin.ring = "ncclscope-" + std::to_string(id) + "-1.ring";
  origin.ring_id = id;
  origin.principal = principal;
  origin.attribution = "verified";
  origin.namespace_name = principal.substr(3);
  origin.pod = "pod-" + std::to_string(id);
  return origin;
}

profiler::LiveComm LiveFrom(const profiler::RingOrigin& origin, std::uint64_t comm, int rank,
                            int nranks) {
  profiler::LiveComm live = Live(comm, rank, nranks, 1);
  live.origin = &origin;
  return live;
}

std::string Render(const NcclAnalytics& analytics, std::uint64_t now_ns = 1'000'000'000'000) {
  std::string text;
  metrics::TextWriter out(text);
  analytics.Render(out, now_ns);
  return text;
}

double Sum(const std::string& text, const std::string& prefix) {
  double sum = 0;
  std::size_t pos = 0;
  while ((pos = text.find("\n" + prefix, pos)) != std::string::npos) {
    const std::size_t end = text.find('\n', pos + 1);
    const std::string line = text.substr(pos + 1, end - pos - 1);
    sum += std::stod(line.substr(line.rfind(' ') + 1));
    pos = end;
  }
  return sum;
}

TEST(HostileRecordsTest, RandomRanksAreBoundedAndCheap) {
  NcclAnalytics analytics;
  const profiler::RingOrigin ring = Ring(1, "ns:team");
  analytics.OnCommInit(ring, Init(0xC0, 0, NCCLSCOPE_MAX_NRANKS, 1));
  std::mt19937 random(7);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 200'000; ++i) {
    const int rank = static_cast<int>(random() % NCCLSCOPE_MAX_NRANKS);
    analytics.OnOp(ring, Coll(0xC0, rank, NCCLSCOPE_FUNC_ALL_REDUCE, 1024, i, 1000, 100));
  }
  analytics.OnCommTables({});
  analytics.EndPass(Clock::now());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 10.0);  // not a benchmark: the old linear insert took minutes here
  const Comm* comm = analytics.registry().Find(0xC0);
  ASSERT_NE(comm, nullptr);
  EXPECT_EQ(comm->ranks.size(), CommRegistry::kMaxLocalRanks);
  EXPECT_GT(analytics.registry().refusals(Refusal::kRanksPerComm), 190'000u);
  EXPECT_LT(Render(analytics).size(), 2u << 20);  // was a 15 MB scrape
}

TEST(HostileRecordsTest, RanksOutsideTheCommunicatorAreRefused) {
  NcclAnalytics analytics;
  const profiler::RingOrigin ring = Ring(1, "ns:team");
  analytics.OnCommInit(ring, Init(0xC1, 0, 8, 1));
  analytics.OnOp(ring, Coll(0xC1, 8, NCCLSCOPE_FUNC_ALL_REDUCE, 1024, 1, 1000, 100));
  analytics.OnOp(ring, Coll(0xC1, 1 << 24, NCCLSCOPE_FUNC_ALL_REDUCE, 1024, 1, 1000, 100));
  analytics.OnCommTables({});
  analytics.EndPass(Clock::now());
  EXPECT_EQ(analytics.registry().refusals(Refusal::kRankRange), 2u);
  EXPECT_EQ(Sum(Render(analytics), "ncclscope_nccl_ops_total{"), 0);
}

TEST(HostileRecordsTest, RandomCommIdsAreForgottenLeastRecentlyUsedFirst) {
  AnalyticsSettings settings;
  settings.max_tracked_comms = 256;
  NcclAnalytics analytics(settings);
  const profiler::RingOrigin job = Ring(1, "ns:team");
  const profiler::RingOrigin flood = Ring(2, "ns:evil");
  analytics.OnCommInit(job, Init(0xAAAA, 0, 2, 1));
  std::mt19937_64 random(11);
  for (int pass = 0; pass < 20; ++pass) {
    for (int i = 0; i < 5000; ++i) {
      const std::uint64_t id = random() | 1;
      analytics.OnCommInit(flood, Init(id, 0, 2, 1));
      analytics.OnOp(flood, Coll(id, 0, NCCLSCOPE_FUNC_ALL_REDUCE, 1024, 1, 1000, 100));
    }
    // The job's communicator is listed live by its ring every pass.
    analytics.SetLiveRings({1, 2});
    analytics.OnCommTables({LiveFrom(job, 0xAAAA, 0, 2)});
    analytics.EndPass(Clock::now());
    EXPECT_LE(analytics.registry().tracked(), 256u);
  }
  EXPECT_NE(analytics.registry().Find(0xAAAA), nullptr);
  EXPECT_GT(analytics.registry().refusals(Refusal::kEvicted), 90'000u);
  EXPECT_LE(analytics.registry().tracked_ranks(), 4u * 256);
}

TEST(HostileRecordsTest, APodCannotForgeAnotherJobsCommunicator) {
  NcclAnalytics analytics;
  const profiler::RingOrigin victim = Ring(1, "ns:team-a");
  const profiler::RingOrigin other_tenant = Ring(2, "ns:evil");
  const profiler::RingOrigin same_tenant = Ring(3, "ns:team-a");
  constexpr std::uint64_t kComm = 0xFEED;
  ncclscope_comm_init_record init = Init(kComm, 0, 8, 1, "tp");
  std::snprintf(init.gpu_uuid, sizeof(init.gpu_uuid), "GPU-real");
  analytics.OnCommInit(victim, init);
  for (int i = 0; i < 10; ++i) {
    analytics.OnOp(victim, Coll(kComm, 0, NCCLSCOPE_FUNC_ALL_REDUCE, 1024, i, 1000, 100));
  }
  analytics.SetLiveRings({1, 2, 3});
  analytics.OnCommTables({LiveFrom(victim, kComm, 0, 8)});
  analytics.EndPass(Clock::now());

  // Another tenant: 100,000 fake ops on the victim's rank and a new one, a rewritten identity,
  // a table slot claiming five ops in flight for an hour (a hang).
  ncclscope_comm_init_record forged = Init(kComm, 0, 8, 1, "tp");
  std::snprintf(forged.gpu_uuid, sizeof(forged.gpu_uuid), "GPU-fake");
  analytics.OnCommInit(other_tenant, forged);
  for (int i = 0; i < 100'000; ++i) {
    analytics.OnOp(other_tenant,
                   Coll(kComm, i % 2, NCCLSCOPE_FUNC_ALL_REDUCE, 1 << 20, 100 + i, 1000, 100));
  }
  profiler::LiveComm hang = LiveFrom(other_tenant, kComm, 0, 8);
  hang.slot.ops_enqueued = 5;
  for (auto& op : hang.slot.recent) op.enqueue_ns = 1;
  // The same tenant's other ring: the victim's rank is not its to write either.
  analytics.OnOp(same_tenant, Coll(kComm, 0, NCCLSCOPE_FUNC_ALL_REDUCE, 1024, 500, 1000, 100));
  profiler::LiveComm hang2 = LiveFrom(same_tenant, kComm, 0, 8);
  hang2.slot.ops_enqueued = 5;
  analytics.OnCommTables({LiveFrom(victim, kComm, 0, 8), hang, hang2});
  analytics.EndPass(Clock::now());

  const std::string text = Render(analytics, 3600'000'000'000'000ull);
  EXPECT_EQ(Sum(text, "ncclscope_nccl_ops_total{"), 10);
  EXPECT_EQ(Sum(text, "ncclscope_nccl_ops_hung{"), 0);
  EXPECT_EQ(Sum(text, "ncclscope_nccl_ops_in_flight{"), 0);
  EXPECT_NE(text.find("UUID=\"GPU-real\""), std::string::npos);
  EXPECT_EQ(text.find("GPU-fake"), std::string::npos);
  EXPECT_NE(text.find("pod=\"pod-1\""), std::string::npos);
  EXPECT_NE(text.find("attribution=\"verified\""), std::string::npos);
  EXPECT_GE(analytics.registry().refusals(Refusal::kForeignComm), 100'001u);
  EXPECT_EQ(analytics.registry().refusals(Refusal::kForeignRank), 2u);
  EXPECT_NE(text.find("ncclscope_nccl_records_foreign_total{reason=\"foreign_comm\"}"),
            std::string::npos);

  // Once the victim's ring is gone (the process restarted), its rank passes to the new ring.
  analytics.SetLiveRings({2, 3});
  analytics.OnOp(same_tenant, Coll(kComm, 0, NCCLSCOPE_FUNC_ALL_REDUCE, 1024, 600, 1000, 100));
  analytics.OnCommTables({LiveFrom(same_tenant, kComm, 0, 8)});
  analytics.EndPass(Clock::now());
  EXPECT_EQ(Sum(Render(analytics), "ncclscope_nccl_ops_total{"), 11);
}

TEST(HostileRecordsTest, SumsSaturateInsteadOfWrapping) {
  NcclAnalytics analytics;
  const profiler::RingOrigin ring = Ring(1, "ns:team");
  analytics.OnCommInit(ring, Init(0xB0, 0, 2, 1));
  for (int i = 0; i < 3; ++i) {
    profiler::OpView op = Coll(0xB0, 0, NCCLSCOPE_FUNC_ALL_REDUCE, UINT64_MAX, i, 1000, 100);
    analytics.OnOp(ring, op);
  }
  analytics.OnCommTables({});
  analytics.EndPass(Clock::now());
  EXPECT_EQ(Sum(Render(analytics), "ncclscope_nccl_op_bytes_total{"),
            static_cast<double>(UINT64_MAX));
}

TEST(HostileRecordsTest, SeriesTablesAreCapped) {
  AnalyticsSettings settings;
  settings.max_comms = 64;
  NcclAnalytics analytics(settings);
  const profiler::RingOrigin none;  // ring 0: no per-ring cap, to reach the table's
  std::uint64_t fed = 0;
  for (std::uint64_t comm = 1; comm <= 64; ++comm) {
    analytics.OnCommInit(none, Init(comm, 0, 256, 1));
    for (int rank = 0; rank < 256; ++rank) {
      for (std::uint64_t bytes : {std::uint64_t{512}, std::uint64_t{1} << 30}) {
        analytics.OnOp(none, Coll(comm, rank, NCCLSCOPE_FUNC_ALL_REDUCE, bytes, 1, 1000, 100));
        ++fed;
      }
    }
    analytics.OnCommTables({});
    analytics.EndPass(Clock::now());
  }
  EXPECT_EQ(analytics.ops().series(), SeriesTable<int>::kMaxRows);
  EXPECT_EQ(analytics.ops().refused(), fed - SeriesTable<int>::kMaxRows);
}

TEST(HostileRecordsTest, KeysStayDistinctForEveryValidRank) {
  NcclAnalytics analytics;
  const profiler::RingOrigin none;
  analytics.OnCommInit(none, Init(0xD0, 0, NCCLSCOPE_MAX_NRANKS, 1));
  analytics.OnOp(none, Coll(0xD0, 0, NCCLSCOPE_FUNC_ALL_REDUCE, 1024, 1, 1000, 100));
  analytics.OnOp(
      none, Coll(0xD0, NCCLSCOPE_MAX_NRANKS - 1, NCCLSCOPE_FUNC_ALL_REDUCE, 1024, 1, 1000, 100));
  analytics.OnCommTables({});
  analytics.EndPass(Clock::now());
  EXPECT_EQ(analytics.ops().series(), 2u);
}

}  // namespace
}  // namespace ncclscope::analytics
