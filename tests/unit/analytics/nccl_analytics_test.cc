// The analytics as the profiler source drives them: records in, passes, text out. Op series with
// bus bytes, p2p by peer class, records that wait for their communicator's description, flushed
// ops left out, PXN network ops resolved, expiry, the channel switch, and a promtool-clean
// exposition.

#include "agent/analytics/nccl_analytics.h"

#include <gtest/gtest.h>

#include "tests/support/exposition.h"
#include "tests/support/subprocess.h"
#include "tests/unit/analytics/analytics_test_util.h"

namespace ncclscope::analytics {
namespace {

using testutil::Coll;
using testutil::Init;
using testutil::Live;
using testutil::P2p;
using testutil::Proxy;

std::string Render(const NcclAnalytics& a) {
  std::string text;
  metrics::TextWriter out(text);
  a.Render(out, 10'000'000'000);
  return text;
}

const profiler::RingOrigin kOrigin{};

TEST(NcclAnalyticsTest, OpSeriesCountBytesDurationsAndBusBytes) {
  NcclAnalytics a;
  a.OnCommInit(kOrigin, Init(1, 0, 8, 1, "TP"));
  a.OnOp(kOrigin, Coll(1, 0, NCCLSCOPE_FUNC_ALL_REDUCE, 4096, 0, 1'000'000, 3'000));
  a.OnOp(kOrigin, Coll(1, 0, NCCLSCOPE_FUNC_ALL_REDUCE, 8000, 1, 2'000'000, 300'000));
  a.OnOp(kOrigin, Coll(1, 0, NCCLSCOPE_FUNC_ALL_REDUCE, 8000, 2, 3'000'000, 0));  // untimed
  profiler::OpView flushed = Coll(1, 0, NCCLSCOPE_FUNC_ALL_REDUCE, 8000, 3, 4'000'000, 100);
  flushed.op.flags |= NCCLSCOPE_OP_FLUSHED;
  a.OnOp(kOrigin, flushed);  // never completed: not an op of these series
  const std::string text = Render(a);
  const std::string labels =
      "{comm=\"0x0000000000000001\",rank=\"0\",func=\"AllReduce\",algo=\"RING\",proto=\"SIMPLE\","
      "size=\"4KiB-16KiB\"}";
  EXPECT_EQ(testing::SampleValue(text, "ncclscope_nccl_ops_total" + labels), 3);
  EXPECT_EQ(testing::SampleValue(text, "ncclscope_nccl_op_bytes_total" + labels), 4096 + 16000);
  EXPECT_EQ(testing::SampleValue(text, "ncclscope_nccl_ops_timed_total" + labels), 2);
  EXPECT_NEAR(testing::SampleValue(text, "ncclscope_nccl_op_gpu_seconds_total" + labels), 303e-6,
              1e-15);
  // Timed ops only: (4096 + 8000) bytes x 2(n-1)/n for n = 8.
  EXPECT_DOUBLE_EQ(testing::SampleValue(text, "ncclscope_nccl_op_algo_bytes_total" + labels),
                   12096);
  EXPECT_DOUBLE_EQ(testing::SampleValue(text, "ncclscope_nccl_op_bus_bytes_total" + labels),
                   12096 * 1.75);
}

// The GPU-duration histogram: one row per communicator and collective kind, the node's ranks
// together; per rank with plugin.rank_histograms; Send/Recv rows only with plugin.p2p_histograms
// (their time is in the counters either way).
TEST(NcclAnalyticsTest, DurationHistogramRowsPerCommunicatorRankAndP2pSwitch) {
  const auto drive = [](const AnalyticsSettings& settings) {
    NcclAnalytics a(settings);
    for (int rank = 0; rank < 2; ++rank) {
      a.OnCommInit(kOrigin, Init(1, rank, 2, 1, "TP"));
      a.OnOp(kOrigin, Coll(1, rank, NCCLSCOPE_FUNC_ALL_REDUCE, 4096, 0, 1'000'000, 3'000));
      a.OnOp(kOrigin, P2p(1, rank, rank == 0, 1 - rank, 4096, 2'000));
    }
    return Render(a);
  };
  const std::string coll =
      "comm=\"0x0000000000000001\",func=\"AllReduce\",algo=\"RING\",proto=\"SIMPLE\","
      "size=\"4KiB-16KiB\"";
  const std::string send =
      "comm=\"0x0000000000000001\",func=\"Send\",algo=\"none\",proto=\"none\",size=\"4KiB-16KiB\"";
  const auto count = [](const std::string& text, const std::string& labels) {
    return testing::SampleValue(text,
                                "ncclscope_nccl_op_gpu_duration_seconds_count{" + labels + "}");
  };
  const std::string defaults = drive({});
  EXPECT_EQ(count(defaults, coll), 2);  // both ranks' AllReduce in one row
  EXPECT_EQ(defaults.find("func=\"Send\",algo=\"none\",proto=\"none\",size=\"4KiB-16KiB\",le="),
            std::string::npos);
  // The Send's time is still counted.
  EXPECT_EQ(testing::SampleValue(defaults,
                                 "ncclscope_nccl_ops_timed_total{comm=\"0x0000000000000001"
                                 "\",rank=\"0\",func=\"Send\",algo=\"none\",proto=\"none\","
                                 "size=\"4KiB-16KiB\"}"),
            1);
  AnalyticsSettings p2p;
  p2p.p2p_histograms = true;
  const std::string with_p2p = drive(p2p);
  EXPECT_EQ(count(with_p2p, coll), 2);
  EXPECT_EQ(count(with_p2p, send), 1);
  AnalyticsSettings per_rank;
  per_rank.rank_histograms = true;
  const std::string ranks = drive(per_rank);
  EXPECT_EQ(count(ranks,
                  "comm=\"0x0000000000000001\",rank=\"1\",func=\"AllReduce\",algo=\"RING\","
                  "proto=\"SIMPLE\",size=\"4KiB-16KiB\""),
            1);
  EXPECT_EQ(ranks.find("func=\"Send\",algo=\"none\",proto=\"none\",size=\"4KiB-16KiB\",le="),
            std::string::npos);
}

TEST(NcclAnalyticsTest, RecordsOfAnUndescribedCommunicatorWaitForTheTables) {
  NcclAnalytics a;
  // Rank 0's op arrives before anything says the communicator has 16 ranks on 2 nodes.
  a.OnOp(kOrigin, P2p(5, 0, true, 9, 1 << 20, 1000));
  a.OnOp(kOrigin, P2p(5, 0, true, 1, 1 << 20, 1000));
  a.OnOp(kOrigin, P2p(5, 0, false, 0, 1 << 20, 1000));
  EXPECT_EQ(Render(a).find("ncclscope_nccl_p2p_ops_total{"), std::string::npos);
  a.OnCommTables({Live(5, 0, 16, 2), Live(5, 1, 16, 2)});
  a.EndPass(Clock::now());
  const std::string text = Render(a);
  const std::string p2p = "ncclscope_nccl_p2p_ops_total{comm=\"0x0000000000000005\",rank=\"0\",";
  EXPECT_EQ(testing::SampleValue(
                text, p2p + "func=\"Send\",peer_class=\"other_node\",size=\"1MiB-4MiB\"}"),
            1);
  EXPECT_EQ(testing::SampleValue(
                text, p2p + "func=\"Send\",peer_class=\"same_node\",size=\"1MiB-4MiB\"}"),
            1);
  EXPECT_EQ(
      testing::SampleValue(text, p2p + "func=\"Recv\",peer_class=\"self\",size=\"1MiB-4MiB\"}"), 1);
  EXPECT_EQ(testing::SampleValue(text,
                                 "ncclscope_nccl_p2p_bus_bytes_total{comm=\"0x0000000000000005\","
                                 "rank=\"0\",func=\"Send\",peer_class=\"other_node\","
                                 "size=\"1MiB-4MiB\"}"),
            1 << 20);
}

TEST(NcclAnalyticsTest, PxnNetworkOpsAreResolvedThroughTheTables) {
  NcclAnalytics a;
  a.OnCommTables({Live(6, 2, 16, 2, 300)});  // pid 302, context 0xC2
  a.EndPass(Clock::now());
  ncclscope_proxy_op_record pxn = Proxy(0, 2, 1, 10, true, 64, 0, 0, 10);
  pxn.flags = NCCLSCOPE_PROXY_FOREIGN;
  pxn.origin_pid = 302;
  pxn.origin_context = 0xC2;
  a.OnProxyOp(kOrigin, pxn);
  pxn.origin_pid = 999;  // nobody we know
  a.OnProxyOp(kOrigin, pxn);
  const std::string text = Render(a);
  EXPECT_EQ(
      testing::SampleValue(text,
                           "ncclscope_nccl_channel_network_bytes_total{comm=\"0x0000000000000006\","
                           "rank=\"2\",channel=\"1\",peer=\"10\",direction=\"send\"}"),
      64);
  EXPECT_EQ(testing::SampleValue(text, "ncclscope_nccl_network_ops_unattributed_total"), 1);
}

TEST(NcclAnalyticsTest, EndedCommunicatorsExpireWithTheirSeries) {
  AnalyticsSettings settings;
  settings.retention = std::chrono::seconds(10);
  NcclAnalytics a(settings);
  a.OnCommInit(kOrigin, Init(7, 0, 2, 1));
  a.OnOp(kOrigin, Coll(7, 0, NCCLSCOPE_FUNC_ALL_GATHER, 100, 0, 1000, 100));
  const auto t0 = Clock::now();
  a.OnCommTables({});
  a.EndPass(t0 + std::chrono::seconds(2));
  EXPECT_NE(Render(a).find("comm=\"0x0000000000000007\""), std::string::npos);
  a.OnCommTables({});
  a.EndPass(t0 + std::chrono::seconds(30));
  EXPECT_EQ(Render(a).find("comm=\"0x0000000000000007\""), std::string::npos);
}

// A job's end: comm_info goes at once (alerts join it), and the ranks show as ended, with their
// identity, until their series expire (the node page's last finished jobs).
TEST(NcclAnalyticsTest, AnEndedJobsRanksShowAsEndedUntilTheirSeriesExpire) {
  AnalyticsSettings settings;
  settings.retention = std::chrono::seconds(10);
  NcclAnalytics a(settings);
  const auto t0 = Clock::now();
  a.OnCommTables({Live(9, 0, 2, 1), Live(9, 1, 2, 1)});
  a.EndPass(t0);
  std::string text = Render(a);
  EXPECT_NE(
      text.find("ncclscope_nccl_comm_info{comm=\"0x0000000000000009\",comm_name=\"\",rank=\"0\","
                "global_rank=\"0\""),
      std::string::npos)
      << text;
  EXPECT_EQ(text.find("ncclscope_nccl_comm_end_timestamp_seconds{"), std::string::npos);
  const double before =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  a.OnCommTables({});  // the job exited
  a.EndPass(t0 + std::chrono::seconds(1));
  text = Render(a);
  EXPECT_EQ(text.find("ncclscope_nccl_comm_info{"), std::string::npos) << text;
  const double ended = testing::SampleValue(
      text,
      "ncclscope_nccl_comm_end_timestamp_seconds{comm=\"0x0000000000000009\",comm_name=\"\","
      "rank=\"1\",nranks=\"2\",job_id=\"\",namespace=\"\",pod=\"\",gpu=\"\",UUID=\"\"}");
  EXPECT_GE(ended, before - 1) << text;
  EXPECT_LE(ended, before + 60);
  a.OnCommTables({});
  a.EndPass(t0 + std::chrono::seconds(30));
  EXPECT_EQ(Render(a).find("ncclscope_nccl_comm_end_timestamp_seconds{"), std::string::npos);
}

TEST(NcclAnalyticsTest, ChannelSeriesFollowTheSwitchAndTheExpositionLints) {
  AnalyticsSettings settings;
  settings.channel_metrics = false;
  NcclAnalytics a(settings);
  a.OnCommTables({Live(8, 0, 2, 1), Live(8, 1, 2, 1)});
  a.EndPass(Clock::now());
  a.OnOp(kOrigin, Coll(8, 0, NCCLSCOPE_FUNC_ALL_REDUCE, 1 << 20, 0, 1000, 5000));
  a.OnOp(kOrigin, Coll(8, 1, NCCLSCOPE_FUNC_ALL_REDUCE, 1 << 20, 0, 3000, 3000));
  std::string text = Render(a);
  EXPECT_EQ(text.find("ncclscope_nccl_channel_"), std::string::npos);
  settings.channel_metrics = true;
  settings.intra_node_channels = true;
  a.Configure(settings);
  a.OnOp(kOrigin, Coll(8, 0, NCCLSCOPE_FUNC_ALL_REDUCE, 1 << 20, 1, 1000, 5000));
  a.OnProxyOp(kOrigin, Proxy(8, 0, 1, 1, true, 100, 1, 0, 10));
  text = Render(a);
  EXPECT_NE(text.find("ncclscope_nccl_channel_gpu_busy_seconds_total{"), std::string::npos);
  EXPECT_EQ(
      testing::SampleValue(text,
                           "ncclscope_nccl_coll_last_arrivals_total{comm=\"0x0000000000000008\","
                           "rank=\"1\"}"),
      1);
  const testing::RunResult lint =
      testing::RunCommand({NCCLSCOPE_PROMTOOL, "check", "metrics"}, text);
  EXPECT_EQ(lint.exit_code, 0) << lint.output;
  EXPECT_EQ(lint.output, "") << lint.output;
  // By default only channels that carried network bytes have per-channel rows: this
  // single-node communicator's channels have none.
  settings.intra_node_channels = false;
  a.Configure(settings);
  text = Render(a);
  EXPECT_EQ(text.find("ncclscope_nccl_channel_gpu_busy_seconds_total{"), std::string::npos) << text;
  EXPECT_EQ(text.find("ncclscope_nccl_channel_bytes_total{"), std::string::npos) << text;
}

// plugin.record_one_in: a record of weight 4 stands for 4 ops, and its network records for
// theirs. The same sums as 4 records of weight 1 (0, older plugins, is 1): counts, bytes, GPU
// time, the histogram, the last arrivals and their delay, network bytes and step seconds.
TEST(NcclAnalyticsTest, WeighedRecordsCountTheOpsTheyStandFor) {
  const auto drive = [](std::uint32_t weight, int records) {
    NcclAnalytics a;
    a.OnCommTables({Live(9, 0, 2, 2), Live(9, 1, 2, 2)});
    a.EndPass(Clock::now());
    for (int i = 0; i < records; ++i) {
      const auto seq = static_cast<std::uint64_t>(i);
      for (int rank = 0; rank < 2; ++rank) {
        // Rank 1 arrives 5 us after rank 0 on every collective.
        profiler::OpView op = Coll(9, rank, NCCLSCOPE_FUNC_ALL_REDUCE, 1 << 20, seq,
                                   1'000'000 + seq * 100'000 + rank * 5'000, 20'000);
        op.op.weight = weight;
        a.OnOp(kOrigin, op);
      }
      ncclscope_proxy_op_record net = Proxy(9, 0, 1, 1, true, 4096, seq, 0, 10);
      net.state_ns[NCCLSCOPE_STEP_SEND_WAIT] = 700;
      net.weight = weight;
      a.OnProxyOp(kOrigin, net);
    }
    a.EndPass(Clock::now());
    return Render(a);
  };
  const std::string all = drive(0, 4);
  const std::string sampled = drive(4, 1);
  const std::string op =
      "{comm=\"0x0000000000000009\",rank=\"0\",func=\"AllReduce\",algo=\"RING\","
      "proto=\"SIMPLE\",size=\"1MiB-4MiB\"}";
  const std::string rank1 = "{comm=\"0x0000000000000009\",rank=\"1\"}";
  for (const std::string& series :
       {"ncclscope_nccl_ops_total" + op, "ncclscope_nccl_op_bytes_total" + op,
        "ncclscope_nccl_ops_timed_total" + op, "ncclscope_nccl_op_gpu_seconds_total" + op,
        "ncclscope_nccl_op_bus_bytes_total" + op,
        std::string("ncclscope_nccl_op_gpu_duration_seconds_count{comm=\"0x0000000000000009\","
                    "func=\"AllReduce\",algo=\"RING\",proto=\"SIMPLE\",size=\"1MiB-4MiB\"}"),
        "ncclscope_nccl_coll_last_arrivals_total" + rank1,
        "ncclscope_nccl_coll_last_arrival_delay_seconds_total" + rank1,
        std::string("ncclscope_nccl_channel_network_bytes_total{comm=\"0x0000000000000009\","
                    "rank=\"0\",channel=\"1\",peer=\"1\",direction=\"send\"}")}) {
    SCOPED_TRACE(series);
    const double expected = testing::SampleValue(all, series);
    EXPECT_GT(expected, 0);
    EXPECT_DOUBLE_EQ(testing::SampleValue(sampled, series), expected);
  }
  EXPECT_EQ(testing::SampleValue(sampled, "ncclscope_nccl_ops_total" + op), 4);
  EXPECT_DOUBLE_EQ(
      testing::SampleValue(sampled, "ncclscope_nccl_coll_last_arrival_delay_seconds_total" + rank1),
      4 * 5e-6);
}

}  // namespace
}  // namespace ncclscope::analytics
