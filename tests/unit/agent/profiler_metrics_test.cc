// The profiler source's aggregation (bounded labels, buckets, expiry) and its controls, checked
// against the plugin's own parser so agent and plugin agree on every control.

#include <gtest/gtest.h>

#include <cstring>

#include "agent/config/config.h"
#include "agent/profiler/op_metrics.h"
#include "agent/profiler/profiler_source.h"
#include "plugin/src/settings.h"

namespace ncclscope::profiler {
namespace {

OpView Op(std::uint64_t comm, int rank, std::uint64_t bytes, std::uint64_t gpu_ns) {
  OpView v;
  std::memset(&v.op, 0, sizeof(v.op));
  v.op.comm_id = comm;
  v.op.rank = rank;
  v.op.func = NCCLSCOPE_FUNC_ALL_GATHER;
  v.op.algo = NCCLSCOPE_ALGO_RING;
  v.op.proto = NCCLSCOPE_PROTO_LL128;
  v.op.bytes = bytes;
  if (gpu_ns != 0) {
    v.op.flags = NCCLSCOPE_OP_GPU_TIMING;
    v.op.gpu_start_ns = 1000;
    v.op.gpu_end_ns = 1000 + gpu_ns;
  }
  return v;
}

const prometheus::MetricFamily* Family(const std::vector<prometheus::MetricFamily>& families,
                                       const std::string& name) {
  for (const auto& f : families) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::string Label(const prometheus::ClientMetric& m, const std::string& name) {
  for (const auto& l : m.label) {
    if (l.name == name) return l.value;
  }
  return "";
}

TEST(OpMetricsTest, SizeBucketsArePowersOfFourFromOneKiB) {
  EXPECT_EQ(SizeBucket(0), "0-1KiB");
  EXPECT_EQ(SizeBucket(1023), "0-1KiB");
  EXPECT_EQ(SizeBucket(1024), "1KiB-4KiB");
  EXPECT_EQ(SizeBucket(4u << 20), "4MiB-16MiB");
  EXPECT_EQ(SizeBucket((1u << 30) - 1), "256MiB-1GiB");
  EXPECT_EQ(SizeBucket(1u << 30), "1GiB+");
  EXPECT_EQ(CommLabel(0xAB), "0x00000000000000ab");
}

TEST(OpMetricsTest, CountsBytesAndGpuHistogramPerSeries) {
  OpMetrics metrics(64, std::chrono::minutes(10));
  const RingOrigin origin;
  metrics.OnOp(origin, Op(1, 0, 4096, 3000));     // 3 us
  metrics.OnOp(origin, Op(1, 0, 8000, 300'000));  // 300 us, same bucket 4KiB-16KiB
  metrics.OnOp(origin, Op(1, 0, 8000, 0));        // no GPU timing
  metrics.OnOp(origin, Op(1, 1, 8000, 3000));     // another rank
  std::vector<prometheus::MetricFamily> out;
  metrics.Render(out);
  EXPECT_EQ(metrics.OpsFor(CommLabel(1), 0, "AllGather", "RING", "LL128", "4KiB-16KiB"), 3u);
  const auto* bytes = Family(out, "ncclscope_nccl_op_bytes_total");
  ASSERT_NE(bytes, nullptr);
  ASSERT_EQ(bytes->metric.size(), 2u);
  EXPECT_EQ(bytes->metric[0].counter.value, 4096 + 8000 + 8000);
  const auto* hist = Family(out, "ncclscope_nccl_op_gpu_duration_seconds");
  ASSERT_NE(hist, nullptr);
  const auto& h = hist->metric[0].histogram;
  EXPECT_EQ(h.sample_count, 2u);  // the untimed op is not observed
  EXPECT_NEAR(h.sample_sum, 303e-6, 1e-12);
  EXPECT_EQ(h.bucket[0].cumulative_count, 0u);  // <= 1 us
  EXPECT_EQ(h.bucket[1].cumulative_count, 1u);  // <= 4 us
  EXPECT_EQ(h.bucket[5].cumulative_count, 2u);  // <= 1.024 ms
  EXPECT_EQ(Label(hist->metric[0], "size"), "4KiB-16KiB");
  EXPECT_EQ(Label(hist->metric[0], "func"), "AllGather");
}

TEST(OpMetricsTest, CommunicatorsBeyondTheCapShareOneLabelAndAreCounted) {
  OpMetrics metrics(2, std::chrono::minutes(10));
  const RingOrigin origin;
  for (std::uint64_t comm = 1; comm <= 5; ++comm) {
    metrics.OnOp(origin, Op(comm, 0, 100, 0));
    metrics.OnOp(origin, Op(comm, 0, 100, 0));
  }
  EXPECT_EQ(metrics.OpsFor("other", 0, "AllGather", "RING", "LL128", "0-1KiB"), 6u);
  std::vector<prometheus::MetricFamily> out;
  metrics.Render(out);
  EXPECT_EQ(Family(out, "ncclscope_nccl_comms")->metric[0].gauge.value, 2);
  EXPECT_EQ(Family(out, "ncclscope_nccl_comms_over_limit_total")->metric[0].counter.value, 3);
}

TEST(OpMetricsTest, IdleCommunicatorsOfEndedJobsExpire) {
  OpMetrics metrics(2, std::chrono::seconds(60));
  const RingOrigin origin;
  metrics.OnOp(origin, Op(1, 0, 100, 0));
  metrics.OnOp(origin, Op(2, 0, 100, 0));
  const auto later = OpMetrics::Clock::now() + std::chrono::minutes(5);
  metrics.Expire({2}, later);  // 2 is still live in some ring
  EXPECT_EQ(metrics.OpsFor(CommLabel(1), 0, "AllGather", "RING", "LL128", "0-1KiB"), 0u);
  EXPECT_EQ(metrics.OpsFor(CommLabel(2), 0, "AllGather", "RING", "LL128", "0-1KiB"), 1u);
  // The freed label slot goes to the next communicator.
  metrics.OnOp(origin, Op(3, 0, 100, 0));
  EXPECT_EQ(metrics.OpsFor(CommLabel(3), 0, "AllGather", "RING", "LL128", "0-1KiB"), 1u);
}

TEST(OpMetricsTest, NetworkTimeIsSplitBySendAndReceiveStates) {
  OpMetrics metrics(8, std::chrono::minutes(10));
  ncclscope_proxy_op_record rec{};
  rec.comm_id = 9;
  rec.rank = 2;
  rec.is_send = 1;
  rec.bytes = 1 << 20;
  rec.state_ns[NCCLSCOPE_STEP_SEND_PEER_WAIT] = 2'000'000'000;
  metrics.OnProxyOp(RingOrigin{}, rec);
  rec.comm_id = 0;  // PXN, comm unknown here
  metrics.OnProxyOp(RingOrigin{}, rec);
  std::vector<prometheus::MetricFamily> out;
  metrics.Render(out);
  const auto* states = Family(out, "ncclscope_nccl_network_step_state_seconds_total");
  ASSERT_NE(states, nullptr);
  ASSERT_EQ(states->metric.size(), 6u);  // 3 send states x 2 comms
  bool found = false;
  for (const auto& m : states->metric) {
    if (Label(m, "comm") == CommLabel(9) && Label(m, "state") == "send_peer_wait") {
      EXPECT_EQ(m.counter.value, 2.0);
      found = true;
    }
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(Label(Family(out, "ncclscope_nccl_network_bytes_total")->metric[1], "comm"), "unknown");
}

TEST(ProfilerControlsTest, TheAgentsControlsAreWhatThePluginReads) {
  config::PluginConfig plugin;
  plugin.events = {"coll", "kernel_ch", "proxy_step"};
  plugin.min_bytes = 12345;
  plugin.duty_cycle_period = config::Seconds(30);
  plugin.kernel_duty_cycle = 0.25;
  plugin.proxy_duty_cycle = 0.05;
  plugin.ring_size = 32u << 20;
  const ncclscope_controls header = ControlsFromConfig(plugin);
  EXPECT_EQ(header.event_mask, 0x2u | 0x40u | 0x18u);
  EXPECT_EQ(header.kernel_duty_pm, 250u);
  EXPECT_EQ(header.proxy_duty_pm, 50u);
  EXPECT_EQ(header.duty_period_ns, 30'000'000'000u);

  plugin::Settings settings;
  plugin::ApplyControlsFile(ControlsFileText(plugin), settings);
  EXPECT_TRUE(settings.warnings.empty()) << settings.warnings[0];
  EXPECT_EQ(settings.event_mask, header.event_mask);
  EXPECT_EQ(settings.min_bytes, header.min_bytes);
  EXPECT_EQ(settings.duty_period_ns, header.duty_period_ns);
  EXPECT_EQ(settings.kernel_duty_pm, header.kernel_duty_pm);
  EXPECT_EQ(settings.proxy_duty_pm, header.proxy_duty_pm);
  EXPECT_EQ(settings.ring_bytes, plugin.ring_size);

  plugin.events.clear();
  plugin::Settings none;
  plugin::ApplyControlsFile(ControlsFileText(plugin), none);
  EXPECT_EQ(none.event_mask, 0u);
}

}  // namespace
}  // namespace ncclscope::profiler
