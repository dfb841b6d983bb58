// Per-channel transport attribution: single-node ops are all NVLink; multi-node ops with network
// steps split network vs NVLink whatever order their records arrive in (within a pass of each
// other); unsampled ops only add GPU time.

#include "agent/analytics/channel_transport.h"

#include <gtest/gtest.h>

#include "tests/unit/analytics/analytics_test_util.h"

namespace ncclscope::analytics {
namespace {

using testutil::Coll;
using testutil::Live;
using testutil::Proxy;

class ChannelTransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_.OnTables({Live(1, 0, 8, 1), Live(2, 0, 16, 2)});
    registry_.EndPass(Clock::now());
  }
  // An AllReduce of 8 MiB on 4 channels, 100 us per channel, with the proxy flag as asked.
  profiler::OpView Op(std::uint64_t comm, std::uint64_t index, bool proxy) {
    profiler::OpView v =
        Coll(comm, 0, NCCLSCOPE_FUNC_ALL_REDUCE, 8 << 20, index, 1'000'000, 100'000);
    if (proxy) v.op.flags |= NCCLSCOPE_OP_PROXY_REQUESTED;
    return v;
  }
  BandwidthModel Model(std::uint64_t comm) {
    return ModelFor(NCCLSCOPE_FUNC_ALL_REDUCE, 8 << 20, registry_.Find(comm)->nranks);
  }
  const ChannelTransport::Stats& Row(std::uint64_t comm, int channel) {
    const ChannelTransport::Stats* s = t_.Find(registry_.Find(comm)->label, 0, channel);
    EXPECT_NE(s, nullptr);
    return *s;
  }

  CommRegistry registry_{8, 4};
  ChannelTransport t_;
};

TEST_F(ChannelTransportTest, SingleNodeOpsAreAllNvlink) {
  const Comm& comm = *registry_.Find(1);
  t_.OnOp(registry_, comm, Op(1, 0, true), Model(1), 1);
  const double share = Model(1).bus_bytes() / 4;
  for (int c = 0; c < 4; ++c) {
    EXPECT_DOUBLE_EQ(Row(1, c).bytes[ChannelTransport::kNvlink], share);
    EXPECT_EQ(Row(1, c).busy_ns[ChannelTransport::kNvlink], 100'000u);
    EXPECT_EQ(Row(1, c).gpu_busy_ns, 100'000u);
    EXPECT_FALSE(Row(1, c).networked);
  }
  EXPECT_EQ(t_.result(ChannelTransport::kIntraNode), 1u);
}

TEST_F(ChannelTransportTest, NetworkStepsSplitTheirChannelWhicheverArrivesFirst) {
  const Comm& comm = *registry_.Find(2);
  const double share = Model(2).bus_bytes() / 4;
  const auto net = static_cast<std::uint64_t>(share);
  // Op 0: its network record comes first (same pass). Op 1: the record comes a pass later.
  t_.OnProxyOp(Proxy(2, 0, 1, 9, true, net, 0, 5'000, 65'000), 1);
  t_.OnProxyOp(Proxy(2, 0, 1, 9, false, net, 0, 5'000, 70'000), 1);  // receives never count
  t_.OnOp(registry_, comm, Op(2, 0, true), Model(2), 1);
  t_.OnOp(registry_, comm, Op(2, 1, true), Model(2), 1);
  t_.EndPass(registry_, 1);  // nothing attributed yet: records may still be in other lanes
  EXPECT_EQ(Row(2, 1).bytes[ChannelTransport::kNetwork], 0);
  t_.OnProxyOp(Proxy(2, 0, 1, 9, true, net, 1, 2'000, 42'000), 2);
  t_.EndPass(registry_, 2);
  EXPECT_EQ(t_.result(ChannelTransport::kSplit), 2u);
  EXPECT_DOUBLE_EQ(Row(2, 1).bytes[ChannelTransport::kNetwork], 2.0 * net);
  EXPECT_EQ(Row(2, 1).busy_ns[ChannelTransport::kNetwork], 60'000u + 40'000u);
  EXPECT_NEAR(Row(2, 1).bytes[ChannelTransport::kNvlink], 2 * (share - net), 1e-6);
  EXPECT_TRUE(Row(2, 1).networked);
  // The other channels sent everything over NVLink.
  EXPECT_DOUBLE_EQ(Row(2, 0).bytes[ChannelTransport::kNvlink], 2 * share);
  EXPECT_FALSE(Row(2, 0).networked);
}

TEST_F(ChannelTransportTest, UnsampledOpsAddGpuTimeOnlyAndOrphanRecordsAreCounted) {
  const Comm& comm = *registry_.Find(2);
  t_.OnOp(registry_, comm, Op(2, 0, false), Model(2), 1);
  EXPECT_EQ(t_.result(ChannelTransport::kUnsampled), 1u);
  EXPECT_EQ(Row(2, 0).gpu_busy_ns, 100'000u);
  EXPECT_EQ(Row(2, 0).bytes[ChannelTransport::kNvlink], 0);
  t_.OnProxyOp(Proxy(2, 0, 1, 9, true, 100, 77, 0, 10), 1);  // its op never comes
  for (std::uint64_t pass = 1; pass <= 4; ++pass) t_.EndPass(registry_, pass);
  EXPECT_EQ(t_.result(ChannelTransport::kLateNetwork), 1u);
}

}  // namespace
}  // namespace ncclscope::analytics
