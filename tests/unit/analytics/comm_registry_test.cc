// Communicators and their local ranks from init/finalize records and the rings' tables; the
// `comm` label cap; expiry; where a peer is; the per-rank `peer` label cap.

#include "agent/analytics/comm_registry.h"

#include <gtest/gtest.h>

#include "tests/unit/analytics/analytics_test_util.h"

namespace ncclscope::analytics {
namespace {

using testutil::Init;
using testutil::Live;

TEST(CommRegistryTest, InitRecordsAndTablesDescribeLocalRanks) {
  CommRegistry registry(8, 4);
  profiler::RingOrigin origin;
  origin.pid = 42;
  origin.ring = "ncclscope-42-1.ring";
  origin.hostname = "pod-a";
  origin.job_id = "job7";
  registry.OnCommInit(origin, Init(0xA, 3, 16, 2, "DP Group 0"));
  Comm* comm = registry.Find(0xA);
  ASSERT_NE(comm, nullptr);
  EXPECT_EQ(comm->nranks, 16);
  EXPECT_EQ(comm->nnodes, 2);
  EXPECT_EQ(comm->name, "DP Group 0");
  ASSERT_EQ(comm->ranks.size(), 1u);
  EXPECT_EQ(comm->ranks[0].pid, 42);
  EXPECT_EQ(comm->ranks[0].job_id, "job7");
  EXPECT_FALSE(comm->live);

  // The table lists ranks 1 and 3 (rank 1's init record was never seen): ranks stay sorted.
  registry.OnTables({Live(0xA, 3, 16, 2), Live(0xA, 1, 16, 2)});
  registry.EndPass(Clock::now());
  EXPECT_TRUE(comm->live);
  ASSERT_EQ(comm->ranks.size(), 2u);
  EXPECT_EQ(comm->ranks[0].rank, 1);
  EXPECT_EQ(comm->LocalIndex(3), 1);
  EXPECT_TRUE(comm->ranks[1].in_table);
  ASSERT_TRUE(comm->ranks[1].table.has_value());

  ncclscope_comm_finalize_record fin{};
  fin.comm_id = 0xA;
  fin.rank = 3;
  registry.OnCommFinalize(origin, fin);
  EXPECT_TRUE(comm->ranks[1].finalized);
}

// Admit skips the principal compare for the ring that last matched (a ring's principal is fixed
// when it is opened): whatever order the rings' records come in, another principal stays refused.
TEST(CommRegistryTest, AnotherPrincipalIsRefusedWhateverTheOrderOfRings) {
  CommRegistry registry(8, 4);
  Comm& comm = registry.Get(0xB);
  EXPECT_NE(registry.Admit(1, "ns:a", comm, 0), nullptr);
  EXPECT_EQ(registry.Admit(2, "ns:b", comm, 1), nullptr);
  EXPECT_NE(registry.Admit(1, "ns:a", comm, 0), nullptr);
  EXPECT_EQ(registry.Admit(2, "ns:b", comm, 1), nullptr);
  EXPECT_NE(registry.Admit(3, "ns:a", comm, 1), nullptr);  // another ring of the same principal
  EXPECT_EQ(registry.Admit(0, "ns:b", comm, 2), nullptr);  // no ring: always compared
  EXPECT_NE(registry.Admit(1, "ns:a", comm, 0), nullptr);
  EXPECT_EQ(registry.refusals(Refusal::kForeignComm), 3u);
}

// Use() is the record path's lookup: it never creates a communicator (records of an unknown one
// wait for the end of the pass), and what it returned is kept like Get()'s when a new
// communicator evicts others.
TEST(CommRegistryTest, UseFindsWithoutCreatingAndKeepsWhatItReturned) {
  CommRegistry registry(8, 4, /*max_tracked=*/2);
  EXPECT_EQ(registry.Use(0xA), nullptr);
  EXPECT_EQ(registry.tracked(), 0u);
  Comm& a = registry.Get(0xA);
  registry.Get(0xB);
  EXPECT_EQ(registry.Use(0xA), &a);
  registry.Get(0xC);  // over the limit: others go, never the one returned last
  EXPECT_EQ(registry.Find(0xA), &a);
  EXPECT_EQ(registry.Find(0xB), nullptr);
  EXPECT_EQ(registry.Use(0xB), nullptr);
  EXPECT_EQ(registry.refusals(Refusal::kEvicted), 1u);
}

TEST(CommRegistryTest, PeerClassFollowsTheLocalRanks) {
  CommRegistry registry(8, 4);
  registry.OnTables({Live(0xB, 0, 16, 2), Live(0xB, 1, 16, 2), Live(0xC, 0, 4, 1)});
  registry.EndPass(Clock::now());
  const Comm& b = *registry.Find(0xB);
  EXPECT_EQ(registry.ClassOf(b, 0, 0), PeerClass::kSelf);
  EXPECT_EQ(registry.ClassOf(b, 0, 1), PeerClass::kSameNode);
  EXPECT_EQ(registry.ClassOf(b, 0, 9), PeerClass::kOtherNode);
  EXPECT_EQ(registry.ClassOf(b, 0, -1), PeerClass::kUnknown);
  // A single-node communicator: every peer is on this node.
  EXPECT_EQ(registry.ClassOf(*registry.Find(0xC), 0, 3), PeerClass::kSameNode);
}

TEST(CommRegistryTest, CapSharesOtherAndExpiryFreesLabels) {
  CommRegistry registry(2, 4);
  const auto t0 = Clock::now();
  for (std::uint64_t id = 1; id <= 4; ++id) registry.Get(id);
  EXPECT_EQ(registry.admitted(), 2u);
  EXPECT_EQ(registry.overflowed(), 2u);
  EXPECT_EQ(registry.Label(registry.Get(1).label), "0x0000000000000001");
  EXPECT_EQ(registry.Label(registry.Get(3).label), "other");
  registry.OnTables({Live(2, 0, 2, 1)});  // 2 is live in a ring
  registry.EndPass(t0);
  const std::vector<std::uint32_t> freed =
      registry.Expire(t0 + std::chrono::minutes(5), std::chrono::minutes(1));
  ASSERT_EQ(freed.size(), 1u);  // communicator 1 (3 and 4 had no label of their own)
  EXPECT_EQ(registry.Find(1), nullptr);
  EXPECT_NE(registry.Find(2), nullptr);
  // The freed label goes to the next communicator.
  EXPECT_EQ(registry.Label(registry.Get(5).label), "0x0000000000000005");
}

// Records held to a pass's end can name a communicator after the pass's OnPass (no table lists
// it, its ring may be gone): it must not be expired in that same pass as if idle since forever.
TEST(CommRegistryTest, ACommunicatorFirstSeenAfterThePassIsNotExpiredAtOnce) {
  CommRegistry registry(4, 4);
  const auto t0 = Clock::now();
  registry.OnTables({});
  registry.EndPass(t0);
  registry.Get(7);  // a held op's communicator, after OnPass
  EXPECT_TRUE(registry.Expire(t0, std::chrono::seconds(1)).empty());
  EXPECT_NE(registry.Find(7), nullptr);
  // Idle for longer than the retention after that: it goes.
  registry.OnTables({});
  registry.EndPass(t0 + std::chrono::seconds(1));
  EXPECT_EQ(registry.Expire(t0 + std::chrono::seconds(3), std::chrono::seconds(1)).size(), 1u);
  EXPECT_EQ(registry.Find(7), nullptr);
}

TEST(CommRegistryTest, PeersBeyondTheCapShareOtherAndAreCounted) {
  CommRegistry registry(8, 2);
  Comm& comm = registry.Get(0xD);
  LocalRank& rank = registry.RankOf(comm, 0);
  EXPECT_EQ(registry.PeerKey(rank, 5), 5);
  EXPECT_EQ(registry.PeerKey(rank, 6), 6);
  EXPECT_EQ(registry.PeerKey(rank, 5), 5);
  EXPECT_EQ(registry.PeerKey(rank, 7), CommRegistry::kOtherPeer);
  EXPECT_EQ(registry.PeerKey(rank, 7), CommRegistry::kOtherPeer);
  EXPECT_EQ(registry.PeerKey(rank, 8), CommRegistry::kOtherPeer);
  EXPECT_EQ(registry.peers_overflowed(), 2u);
}

}  // namespace
}  // namespace ncclscope::analytics
