// Network records: the wait decomposition per channel and peer, or totals per direction, the peer
// label cap, and PXN records resolved to their communicator or counted as unknown.

#include "agent/analytics/network_waits.h"

#include <gtest/gtest.h>

#include "tests/support/exposition.h"
#include "tests/unit/analytics/analytics_test_util.h"

namespace ncclscope::analytics {
namespace {

using testutil::Live;
using testutil::Proxy;

std::string Render(const NetworkWaits& waits, bool per_channel) {
  std::string text;
  metrics::TextWriter out(text);
  waits.Render(out, per_channel);
  return text;
}

TEST(NetworkWaitsTest, TotalsAndWaitDecompositionPerChannelAndPeer) {
  CommRegistry registry(8, 2);
  NetworkWaits waits;
  Comm& comm = registry.Get(0xE);
  ncclscope_proxy_op_record send = Proxy(0xE, 3, 5, 11, true, 1 << 20, 0, 1000, 9000);
  send.state_ns[NCCLSCOPE_STEP_SEND_GPU_WAIT] = 1000;
  send.state_ns[NCCLSCOPE_STEP_SEND_PEER_WAIT] = 2000;
  send.state_ns[NCCLSCOPE_STEP_SEND_WAIT] = 5000;
  waits.Observe(registry, &comm, send, true);
  waits.Observe(registry, &comm, send, true);
  ncclscope_proxy_op_record recv = Proxy(0xE, 3, 5, 12, false, 4096, 0, 0, 100);
  recv.state_ns[NCCLSCOPE_STEP_RECV_WAIT] = 70;
  waits.Observe(registry, &comm, recv, true);
  // A third peer of the same rank goes to peer="other".
  waits.Observe(registry, &comm, Proxy(0xE, 3, 6, 13, true, 10, 0, 0, 1), true);

  const std::string text = Render(waits, true);
  const std::string rank = "comm=\"0x000000000000000e\",rank=\"3\"";
  // The per-rank totals are the channels' sums: exported only when the channels are not.
  EXPECT_EQ(text.find("ncclscope_nccl_network_"), std::string::npos);
  EXPECT_EQ(testing::SampleValue(text, "ncclscope_nccl_channel_network_bytes_total{" + rank +
                                           ",channel=\"5\",peer=\"11\",direction=\"send\"}") +
                testing::SampleValue(text, "ncclscope_nccl_channel_network_bytes_total{" + rank +
                                               ",channel=\"6\",peer=\"other\",direction=\"send\"}"),
            2.0 * (1 << 20) + 10);
  const std::string totals = Render(waits, false);
  EXPECT_EQ(testing::SampleValue(
                totals, "ncclscope_nccl_network_bytes_total{" + rank + ",direction=\"send\"}"),
            2.0 * (1 << 20) + 10);
  EXPECT_EQ(testing::SampleValue(
                totals, "ncclscope_nccl_network_ops_total{" + rank + ",direction=\"send\"}"),
            3);
  EXPECT_DOUBLE_EQ(
      testing::SampleValue(totals, "ncclscope_nccl_network_step_state_seconds_total{" + rank +
                                       ",direction=\"send\",state=\"send_wait\"}"),
      10e-6);
  const std::string ch = rank + ",channel=\"5\",peer=\"11\",direction=\"send\"";
  EXPECT_DOUBLE_EQ(
      testing::SampleValue(text, "ncclscope_nccl_channel_network_busy_seconds_total{" + ch + "}"),
      16e-6);
  EXPECT_DOUBLE_EQ(testing::SampleValue(text, "ncclscope_nccl_channel_step_state_seconds_total{" +
                                                  ch + ",state=\"send_peer_wait\"}"),
                   4e-6);
  // Send steps have no receive states.
  EXPECT_EQ(text.find(ch + ",state=\"recv_wait\""), std::string::npos);
  EXPECT_DOUBLE_EQ(
      testing::SampleValue(text, "ncclscope_nccl_channel_step_state_seconds_total{" + rank +
                                     ",channel=\"5\",peer=\"12\",direction=\"recv\","
                                     "state=\"recv_wait\"}"),
      70e-9);
  EXPECT_EQ(testing::SampleValue(text, "ncclscope_nccl_channel_network_bytes_total{" + rank +
                                           ",channel=\"6\",peer=\"other\",direction=\"send\"}"),
            10);
  EXPECT_EQ(registry.peers_overflowed(), 1u);
  // Per-channel families off: totals only.
  EXPECT_EQ(totals.find("ncclscope_nccl_channel_"), std::string::npos);
}

TEST(NetworkWaitsTest, UnknownCommunicatorsUseTheirOwnLabel) {
  CommRegistry registry(8, 2);
  NetworkWaits waits;
  waits.Observe(registry, nullptr, Proxy(0, 1, 0, 2, true, 5, 0, 0, 1), true);
  EXPECT_EQ(testing::SampleValue(Render(waits, false),
                                 "ncclscope_nccl_network_bytes_total{comm=\"unknown\",rank=\"1\","
                                 "direction=\"send\"}"),
            5);
  EXPECT_EQ(testing::SampleValue(Render(waits, true),
                                 "ncclscope_nccl_channel_network_bytes_total{comm=\"unknown\","
                                 "rank=\"1\",channel=\"0\",peer=\"other\",direction=\"send\"}"),
            5);
}

TEST(PxnResolverTest, OriginPidAndContextNameTheCommunicator) {
  PxnResolver pxn;
  profiler::LiveComm c = Live(0xF, 2, 8, 2, 300);  // pid 302, context 0xC2
  pxn.Rebuild({c});
  EXPECT_EQ(pxn.Resolve(302, 0xC2), 0xFu);
  EXPECT_EQ(pxn.Resolve(302, 0xC3), 0u);
}

}  // namespace
}  // namespace ncclscope::analytics
