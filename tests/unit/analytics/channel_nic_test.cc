// Channel -> NIC: PROXY_OP records with the QPs of NCCL's IB net-plugin events, the rings'
// writers, and a QP table built from rdma netlink replies as the kernel sends them
// (tests/support/nldev_messages.h, parsed by the agent's own parser), joined by the NCCL
// analytics. Exact series, merged NICs, QP numbers that repeat across processes and devices,
// refresh rate and back-off, failures by reason, PXN, expiry, the switches, and the bounds.

#include "agent/analytics/channel_nic.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "agent/analytics/nccl_analytics.h"
#include "rdma/netlink/nldev_parser.h"
#include "tests/support/exposition.h"
#include "tests/support/nldev_messages.h"
#include "tests/support/subprocess.h"
#include "tests/unit/analytics/analytics_test_util.h"

namespace ncclscope::analytics {
namespace {

namespace nl = testing::nldev;
using std::chrono::seconds;
using testutil::IbProxy;
using testutil::Init;
using testutil::Live;
using testutil::Origin;
using testutil::Proxy;

// Two local ranks in two containers: both writers are pid 7 in their own namespace; on the host
// they are processes 5000 and 6000, whose proxy threads 5003 and 6002 created their QPs.
profiler::RingOrigin Ring0() { return Origin("ncclscope-7-111.ring", 7); }
profiler::RingOrigin Ring1() { return Origin("ncclscope-7-222.ring", 7); }
constexpr std::uint64_t kComm = 0xA1;
constexpr char kCommLabel[] = "comm=\"0x00000000000000a1\"";

class FakeHosts : public HostProcesses {
 public:
  RingOwner OwnerOf(const profiler::RingOrigin& origin) override {
    ++owner_calls;
    auto it = owners.find(origin.ring);
    return it == owners.end() ? RingOwner{} : it->second;
  }
  std::optional<std::int32_t> ThreadGroupOf(std::int32_t task) override {
    auto it = groups.find(task);
    if (it == groups.end()) return std::nullopt;
    return it->second;
  }
  std::map<std::string, RingOwner> owners = {{Ring0().ring, {OwnerStatus::kOk, 5000}},
                                             {Ring1().ring, {OwnerStatus::kOk, 6000}}};
  std::map<std::int32_t, std::int32_t> groups = {
      {5000, 5000}, {5003, 5000}, {6000, 6000}, {6002, 6000}, {7001, 7000}};
  int owner_calls = 0;
};

nl::Qp Qp(std::uint32_t lqpn, std::int32_t task, std::uint32_t port = 1) {
  nl::Qp qp;
  qp.lqpn = lqpn;
  qp.pid = task;
  qp.port = port;
  return qp;
}

struct DeviceQps {
  std::uint32_t index;
  std::string name;
  std::vector<nl::Qp> qps;
};

// The QP table the kernel would give: each device's dump reply, parsed by the agent's parser.
rdma::netlink::QpDump Table(const std::vector<DeviceQps>& devices) {
  std::vector<nl::Bytes> replies;
  replies.reserve(devices.size());
  std::uint32_t seq = 1;
  for (const DeviceQps& d : devices) {
    replies.push_back(nl::QpDumpReply(d.index, d.name, d.qps, seq++, 0x5151, 3));
  }
  const nl::Bytes bytes = nl::Concat(replies);
  return rdma::netlink::ParseRecordedQpDump(bytes.data(), bytes.size());
}

// The node: rank 0's QPs on mlx5_0 (channel 0: 0x1a0/0x1a1 send, 0x1a2 recv; channel 1: 0x1a3
// send, on mlx5_1), rank 1's on mlx5_2; another process (7000) reuses rank 0's QP numbers on
// mlx5_3, a kernel QP and a QP still in RESET are listed too.
rdma::netlink::QpDump NodeTable() {
  nl::Qp kernel = Qp(0x1a0, 0);
  kernel.kernel_name = "ib_core";
  nl::Qp reset = Qp(0x1c0, 5003, 0);
  reset.state = nl::kQpsReset;
  return Table({
      {0, "mlx5_0", {Qp(0x1a0, 5003), Qp(0x1a1, 5003), Qp(0x1a2, 5003), kernel, reset}},
      {1, "mlx5_1", {Qp(0x1a3, 5003)}},
      {2, "mlx5_2", {Qp(0x2b0, 6002), Qp(0x2b1, 6002)}},
      {3, "mlx5_3", {Qp(0x1a0, 7001), Qp(0x1a1, 7001), Qp(0x1a3, 7001)}},
  });
}

std::string Render(const NcclAnalytics& a) {
  std::string text;
  metrics::TextWriter out(text);
  a.Render(out, 10'000'000'000);
  return text;
}

std::string Info(const std::string& rank, const std::string& channel, const std::string& direction,
                 const std::string& device, const std::string& port = "1") {
  return std::string("ncclscope_nccl_channel_nic_info{") + kCommLabel + ",rank=\"" + rank +
         "\",channel=\"" + channel + "\",direction=\"" + direction + "\",device=\"" + device +
         "\",port=\"" + port + "\"}";
}

double Failures(const std::string& text, const std::string& reason) {
  return testing::SampleValue(
      text, "ncclscope_nccl_channel_nic_lookup_failures_total{reason=\"" + reason + "\"}");
}

std::size_t Count(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

class ChannelNicTest : public ::testing::Test {
 protected:
  ChannelNicTest() {
    a_.SetHostProcesses(hosts_);
    a_.OnCommInit(Ring0(), Init(kComm, 0, 16, 2));
    a_.OnCommInit(Ring1(), Init(kComm, 1, 16, 2));
    Pass(t0_);
  }
  void Pass(Clock::time_point now) {
    a_.OnCommTables({Live(kComm, 0, 16, 2), Live(kComm, 1, 16, 2)});
    a_.EndPass(now);
  }
  std::shared_ptr<FakeHosts> hosts_ = std::make_shared<FakeHosts>();
  NcclAnalytics a_;
  Clock::time_point t0_ = Clock::now();
};

TEST_F(ChannelNicTest, NamesTheDeviceAndPortOfEachChannel) {
  a_.OnProxyOp(Ring0(), IbProxy(kComm, 0, 0, 9, true, 0x1a0, 0x1a1));
  a_.OnProxyOp(Ring0(), IbProxy(kComm, 0, 0, 9, false, 0x1a2));
  a_.OnProxyOp(Ring0(), IbProxy(kComm, 0, 1, 9, true, 0x1a3));
  a_.OnProxyOp(Ring1(), IbProxy(kComm, 1, 0, 8, true, 0x2b0, 0x2b1));
  Pass(t0_ + seconds(1));
  EXPECT_EQ(a_.nic().pending(), 6u);  // waiting for the QP table...
  ASSERT_TRUE(a_.WantsQpRefresh());
  a_.OnQpDump(NodeTable(), t0_ + seconds(1));
  EXPECT_EQ(a_.nic().pending(), 0u);
  EXPECT_FALSE(a_.WantsQpRefresh());

  // ...known ones need no dump: the same connections keep their QPs.
  for (int i = 0; i < 10; ++i) a_.OnProxyOp(Ring0(), IbProxy(kComm, 0, 0, 9, true, 0x1a1, 0x1a0));
  Pass(t0_ + seconds(2));
  EXPECT_FALSE(a_.WantsQpRefresh());

  const std::string text = Render(a_);
  EXPECT_EQ(testing::SampleValue(text, Info("0", "0", "send", "mlx5_0")), 1) << text;
  EXPECT_EQ(testing::SampleValue(text, Info("0", "0", "recv", "mlx5_0")), 1);
  EXPECT_EQ(testing::SampleValue(text, Info("0", "1", "send", "mlx5_1")), 1);
  EXPECT_EQ(testing::SampleValue(text, Info("1", "0", "send", "mlx5_2")), 1);
  // Exactly these four: the other process's identical QP numbers on mlx5_3 never leak in.
  EXPECT_EQ(Count(text, "ncclscope_nccl_channel_nic_info{"), 4u);
  EXPECT_EQ(text.find("mlx5_3"), std::string::npos);
  EXPECT_EQ(testing::SampleValue(text, "ncclscope_nccl_channel_nic_lookups_total"), 6 + 20);
  EXPECT_TRUE(std::isnan(Failures(text, "qp_not_found"))) << "no failure: no series";
  EXPECT_EQ(testing::SampleValue(text,
                                 "ncclscope_nccl_network_ops_by_net_type_total{net_type="
                                 "\"ib\"}"),
            14);
  EXPECT_EQ(testing::SampleValue(text, "ncclscope_nccl_qp_table_refreshes_total{result=\"ok\"}"),
            1);
  // 0x1a0..0x1a3, 0x2b0/0x2b1 and process 7000's three; the kernel QP and the RESET one are not.
  EXPECT_EQ(testing::SampleValue(text, "ncclscope_nccl_qp_table_qps"), 9);
  EXPECT_EQ(
      testing::SampleValue(text, "ncclscope_nccl_qp_table_skipped_total{reason=\"no_owner\"}"), 1);
  EXPECT_EQ(testing::SampleValue(text, "ncclscope_nccl_qp_table_skipped_total{reason=\"no_port\"}"),
            1);
  EXPECT_EQ(testing::SampleValue(text, "ncclscope_nccl_analytics_series{group=\"nic\"}"), 4);
  // One owner lookup per ring, however many records.
  EXPECT_EQ(hosts_->owner_calls, 2);
}

TEST_F(ChannelNicTest, MergedNicChannelGetsBothPhysicalDevices) {
  // NCCL_IB_MERGE_NICS: one virtual device over mlx5_0 and mlx5_1, QPs striped across them
  // (net_ib.cc:1437-1453 assigns qps[q].devIndex round robin); net_dev_index is 0 or 1 within the
  // virtual device, the table knows which HCA each QP is on.
  a_.OnProxyOp(Ring0(), IbProxy(kComm, 0, 2, 9, true, 0x1a0, 0x1a3, 0));
  Pass(t0_ + seconds(1));
  a_.OnQpDump(NodeTable(), t0_ + seconds(1));
  const std::string text = Render(a_);
  EXPECT_EQ(testing::SampleValue(text, Info("0", "2", "send", "mlx5_0")), 1);
  EXPECT_EQ(testing::SampleValue(text, Info("0", "2", "send", "mlx5_1")), 1);
}

TEST_F(ChannelNicTest, UnknownQpIsDecidedAtTheNextDumpThenRemembered) {
  a_.OnProxyOp(Ring0(), IbProxy(kComm, 0, 3, 9, true, 0x999));
  a_.OnProxyOp(Ring0(), IbProxy(kComm, 0, 3, 9, true, 0x999));
  Pass(t0_ + seconds(1));
  ASSERT_TRUE(a_.WantsQpRefresh());
  a_.OnQpDump(NodeTable(), t0_ + seconds(1));
  std::string text = Render(a_);
  EXPECT_EQ(Failures(text, "qp_not_found"), 2);  // both lookups, decided now
  EXPECT_EQ(Count(text, "ncclscope_nccl_channel_nic_info{"), 0u);

  // Remembered: no new dump for it, failures counted right away.
  a_.OnProxyOp(Ring0(), IbProxy(kComm, 0, 3, 9, true, 0x999));
  Pass(t0_ + seconds(20));
  EXPECT_FALSE(a_.WantsQpRefresh());
  EXPECT_EQ(Failures(Render(a_), "qp_not_found"), 3);

  // A new QP a second after a dump waits for the refresh interval.
  a_.OnProxyOp(Ring0(), IbProxy(kComm, 0, 4, 9, true, 0x1a2));
  a_.OnQpDump(NodeTable(), t0_ + seconds(21));  // (a dump for someone else)
  a_.OnProxyOp(Ring0(), IbProxy(kComm, 0, 5, 9, true, 0x1c1));
  Pass(t0_ + seconds(22));
  EXPECT_FALSE(a_.WantsQpRefresh());
  Pass(t0_ + seconds(26));
  EXPECT_TRUE(a_.WantsQpRefresh());
  // Meanwhile the QP appeared (a communicator finished connecting).
  rdma::netlink::QpDump later = Table({{0, "mlx5_0", {Qp(0x1c1, 5003)}}});
  a_.OnQpDump(later, t0_ + seconds(26));
  text = Render(a_);
  EXPECT_EQ(testing::SampleValue(text, Info("0", "4", "send", "mlx5_0")), 1);
  EXPECT_EQ(testing::SampleValue(text, Info("0", "5", "send", "mlx5_0")), 1);

  // After negative_ttl the remembered QP is looked for again. (Records are timed by the pass
  // before them.)
  Pass(t0_ + seconds(90));
  a_.OnProxyOp(Ring0(), IbProxy(kComm, 0, 3, 9, true, 0x999));
  Pass(t0_ + seconds(90));
  EXPECT_TRUE(a_.WantsQpRefresh());
}

TEST_F(ChannelNicTest, NoRdmaNetlinkBacksOffAndCountsUnavailable) {
  a_.OnProxyOp(Ring0(), IbProxy(kComm, 0, 0, 9, true, 0x1a0, 0x1a1));
  Pass(t0_ + seconds(1));
  ASSERT_TRUE(a_.WantsQpRefresh());
  rdma::netlink::QpDump unsupported;
  unsupported.status = rdma::netlink::DumpStatus::kUnsupported;
  unsupported.error = "the kernel has no rdma netlink";
  a_.OnQpDump(unsupported, t0_ + seconds(1));
  a_.OnProxyOp(Ring0(), IbProxy(kComm, 0, 0, 9, true, 0x1a0));
  Pass(t0_ + seconds(30));
  EXPECT_FALSE(a_.WantsQpRefresh());  // backing off: nothing pending, failures counted
  std::string text = Render(a_);
  EXPECT_EQ(Failures(text, "qp_table_unavailable"), 3);
  EXPECT_EQ(
      testing::SampleValue(text, "ncclscope_nccl_qp_table_refreshes_total{result=\"unsupported\"}"),
      1);
  // After the back-off it is tried again, and works once the module is loaded.
  Pass(t0_ + seconds(62));
  a_.OnProxyOp(Ring0(), IbProxy(kComm, 0, 0, 9, true, 0x1a0));
  Pass(t0_ + seconds(62));
  ASSERT_TRUE(a_.WantsQpRefresh());
  a_.OnQpDump(NodeTable(), t0_ + seconds(62));
  text = Render(a_);
  EXPECT_EQ(testing::SampleValue(text, Info("0", "0", "send", "mlx5_0")), 1);
  EXPECT_EQ(Failures(text, "qp_table_unavailable"), 3);
}

TEST_F(ChannelNicTest, RingWithoutKnownWriterCountsOwnerFailuresAndIsRetried) {
  hosts_->owners[Ring0().ring] = {OwnerStatus::kUnknown, 0};
  hosts_->owners[Ring1().ring] = {OwnerStatus::kAmbiguous, 0};
  a_.OnProxyOp(Ring0(), IbProxy(kComm, 0, 0, 9, true, 0x1a0, 0x1a1));
  a_.OnProxyOp(Ring1(), IbProxy(kComm, 1, 0, 8, true, 0x2b0));
  Pass(t0_ + seconds(1));
  EXPECT_FALSE(a_.WantsQpRefresh());  // nothing to look up
  std::string text = Render(a_);
  EXPECT_EQ(Failures(text, "owner_unknown"), 2);  // per QP number
  EXPECT_EQ(Failures(text, "owner_ambiguous"), 1);
  // Within owner_retry the verdict is cached; after it the ring is asked about again.
  hosts_->owners[Ring0().ring] = {OwnerStatus::kOk, 5000};
  a_.OnProxyOp(Ring0(), IbProxy(kComm, 0, 0, 9, true, 0x1a0));
  EXPECT_EQ(Failures(Render(a_), "owner_unknown"), 3);
  Pass(t0_ + seconds(10));
  a_.OnProxyOp(Ring0(), IbProxy(kComm, 0, 0, 9, true, 0x1a0));
  Pass(t0_ + seconds(10));
  ASSERT_TRUE(a_.WantsQpRefresh());
  a_.OnQpDump(NodeTable(), t0_ + seconds(10));
  EXPECT_EQ(testing::SampleValue(Render(a_), Info("0", "0", "send", "mlx5_0")), 1);
}

TEST_F(ChannelNicTest, QpNumberOnTwoDevicesOfOneProcessIsAmbiguous) {
  // QP numbers are per device: a process with QPs on two HCAs can hold 0x300 on both.
  a_.OnProxyOp(Ring0(), IbProxy(kComm, 0, 0, 9, true, 0x300));
  Pass(t0_ + seconds(1));
  a_.OnQpDump(Table({{0, "mlx5_0", {Qp(0x300, 5003)}}, {1, "mlx5_1", {Qp(0x300, 5000)}}}),
              t0_ + seconds(1));
  a_.OnProxyOp(Ring0(), IbProxy(kComm, 0, 0, 9, true, 0x300));
  const std::string text = Render(a_);
  EXPECT_EQ(Failures(text, "qp_ambiguous"), 2);
  EXPECT_EQ(Count(text, "ncclscope_nccl_channel_nic_info{"), 0u);
}

TEST_F(ChannelNicTest, QpsOfExitedThreadsAndKernelQpsAreNotMatched) {
  // The QP's creating thread exited: the kernel leaves out its PID (fill_res_name_pid); a task
  // the host no longer has is likewise unusable.
  nl::Qp orphan = Qp(0x1a0, 0);
  a_.OnProxyOp(Ring0(), IbProxy(kComm, 0, 0, 9, true, 0x1a0, 0x1a1));
  Pass(t0_ + seconds(1));
  a_.OnQpDump(Table({{0, "mlx5_0", {orphan, Qp(0x1a1, 4444)}}}), t0_ + seconds(1));
  const std::string text = Render(a_);
  EXPECT_EQ(Failures(text, "qp_not_found"), 2);
  EXPECT_EQ(
      testing::SampleValue(text, "ncclscope_nccl_qp_table_skipped_total{reason=\"no_owner\"}"), 2);
}

TEST_F(ChannelNicTest, OtherTransportsAreCountedNotLookedUp) {
  ncclscope_proxy_op_record socket = IbProxy(kComm, 0, 0, 9, true, 0, 0);
  socket.net_type = NCCLSCOPE_NET_SOCKET;
  ncclscope_proxy_op_record external = socket;
  external.net_type = NCCLSCOPE_NET_OTHER;
  ncclscope_proxy_op_record none = Proxy(kComm, 0, 0, 9, true, 100, 1, 0, 10);
  ncclscope_proxy_op_record no_qp = IbProxy(kComm, 0, 0, 9, true, 0, 0);
  a_.OnProxyOp(Ring0(), socket);
  a_.OnProxyOp(Ring0(), external);
  a_.OnProxyOp(Ring0(), external);
  a_.OnProxyOp(Ring0(), none);
  a_.OnProxyOp(Ring0(), no_qp);
  Pass(t0_ + seconds(1));
  EXPECT_FALSE(a_.WantsQpRefresh());
  const std::string text = Render(a_);
  const std::string by_type = "ncclscope_nccl_network_ops_by_net_type_total{net_type=";
  EXPECT_EQ(testing::SampleValue(text, by_type + "\"socket\"}"), 1);
  EXPECT_EQ(testing::SampleValue(text, by_type + "\"other\"}"), 2);
  EXPECT_EQ(testing::SampleValue(text, by_type + "\"none\"}"), 1);
  EXPECT_EQ(testing::SampleValue(text, by_type + "\"ib\"}"), 1);
  EXPECT_EQ(Failures(text, "no_qp"), 1);
  EXPECT_EQ(testing::SampleValue(text, "ncclscope_nccl_channel_nic_lookups_total"), 1);
  EXPECT_EQ(hosts_->owner_calls, 1);  // only the IB record needed its ring's writer
}

TEST_F(ChannelNicTest, PxnOpsUseTheQpsOfTheProcessThatPostedThem) {
  // Rank 0's traffic sent through rank 1's NIC (PXN): the record comes from rank 1's ring, with
  // rank 0's communicator found through its table; the QPs are rank 1's process's.
  ncclscope_proxy_op_record pxn = IbProxy(0, 0, 6, 9, true, 0x2b1);
  pxn.flags = NCCLSCOPE_PROXY_FOREIGN;
  pxn.origin_pid = 100;  // Live(kComm, 0, ...): pid 100 + rank
  pxn.origin_context = 0xC0;
  a_.OnProxyOp(Ring1(), pxn);
  Pass(t0_ + seconds(1));
  a_.OnQpDump(NodeTable(), t0_ + seconds(1));
  EXPECT_EQ(testing::SampleValue(Render(a_), Info("0", "6", "send", "mlx5_2")), 1);
}

TEST_F(ChannelNicTest, RecordsWaitingForTheirCommunicatorKeepTheirWriter) {
  // A communicator nothing has described yet: its records wait for the end of the pass, but the
  // ring's writer is resolved when they arrive (a ring reclaimed during the pass is gone later).
  a_.OnProxyOp(Ring0(), IbProxy(0xB2, 0, 0, 1, true, 0x1a0));
  hosts_->owners.erase(Ring0().ring);
  a_.OnCommTables({Live(0xB2, 0, 4, 2)});
  a_.EndPass(t0_ + seconds(1));
  a_.OnQpDump(NodeTable(), t0_ + seconds(1));
  EXPECT_EQ(testing::SampleValue(Render(a_),
                                 "ncclscope_nccl_channel_nic_info{comm=\"0x00000000000000b2\","
                                 "rank=\"0\",channel=\"0\",direction=\"send\",device=\"mlx5_0\","
                                 "port=\"1\"}"),
            1);
}

TEST(ChannelNicSettingsTest, EndedCommunicatorsTakeTheirRowsAlong) {
  AnalyticsSettings settings;
  settings.retention = seconds(10);
  NcclAnalytics a(settings);
  auto hosts = std::make_shared<FakeHosts>();
  a.SetHostProcesses(hosts);
  a.OnCommInit(Ring0(), Init(kComm, 0, 16, 2));
  a.OnProxyOp(Ring0(), IbProxy(kComm, 0, 0, 9, true, 0x1a0));
  const auto t0 = Clock::now();
  a.OnCommTables({});
  a.EndPass(t0 + seconds(2));
  a.OnQpDump(NodeTable(), t0 + seconds(2));
  EXPECT_EQ(Count(Render(a), "ncclscope_nccl_channel_nic_info{"), 1u);
  a.OnCommTables({});
  a.EndPass(t0 + seconds(30));
  EXPECT_EQ(Count(Render(a), "ncclscope_nccl_channel_nic_info{"), 0u);
  EXPECT_EQ(a.nic().series(), 0u);
}

TEST(ChannelNicSettingsTest, OffWithoutChannelMetricsOrWithoutQpTable) {
  for (const bool channel_metrics : {false, true}) {
    AnalyticsSettings settings;
    settings.channel_metrics = channel_metrics;
    settings.nic_lookup = !channel_metrics;  // one of the two is off each round
    NcclAnalytics a(settings);
    auto hosts = std::make_shared<FakeHosts>();
    a.SetHostProcesses(hosts);
    a.OnCommInit(Ring0(), Init(kComm, 0, 16, 2));
    a.OnProxyOp(Ring0(), IbProxy(kComm, 0, 0, 9, true, 0x1a0));
    a.OnCommTables({Live(kComm, 0, 16, 2)});
    a.EndPass(Clock::now());
    EXPECT_FALSE(a.WantsQpRefresh());
    EXPECT_EQ(hosts->owner_calls, 0);
    const std::string text = Render(a);
    EXPECT_EQ(text.find("ncclscope_nccl_channel_nic_info") != std::string::npos, channel_metrics);
    if (channel_metrics) {
      EXPECT_EQ(testing::SampleValue(text, "ncclscope_nccl_channel_nic_lookups_total"), 0);
    }
    EXPECT_EQ(
        testing::SampleValue(text, "ncclscope_nccl_network_ops_by_net_type_total{net_type=\"ib\"}"),
        1);
  }
}

TEST(ChannelNicBoundsTest, PendingQpsAndNicsAreBounded) {
  ChannelNic nic;
  nic.SetHostProcesses(std::make_shared<FakeHosts>());
  CommRegistry registry(64, 16);
  Comm& comm = registry.Get(kComm);
  const RingOwner owner{OwnerStatus::kOk, 5000};
  const Clock::time_point now = Clock::now();
  const std::uint32_t extra = 100;
  for (std::uint32_t q = 1; q <= ChannelNic::kMaxPending + extra; ++q) {
    nic.Observe(registry, &comm, owner, IbProxy(kComm, 0, 0, 9, true, q), now);
  }
  EXPECT_EQ(nic.pending(), ChannelNic::kMaxPending);
  EXPECT_EQ(nic.failures(NicFailure::kLimit), extra);
  // A table with more (device, port) pairs than the bitmask holds: the rest are counted.
  std::vector<DeviceQps> devices;
  for (std::uint32_t d = 0; d < ChannelNic::kMaxNics + 3; ++d) {
    devices.push_back({d, "mlx5_" + std::to_string(d), {Qp(d + 1, 5000)}});
  }
  nic.OnQpDump(Table(devices), now);
  EXPECT_EQ(nic.resolved(), ChannelNic::kMaxNics);
  EXPECT_EQ(nic.failures(NicFailure::kQpNotFound), ChannelNic::kMaxPending - ChannelNic::kMaxNics);
  std::string text;
  metrics::TextWriter out(text);
  nic.Render(out, true);
  EXPECT_EQ(Count(text, "ncclscope_nccl_channel_nic_info{"), ChannelNic::kMaxNics);
  EXPECT_EQ(
      testing::SampleValue(text, "ncclscope_nccl_qp_table_skipped_total{reason=\"over_limit\"}"),
      3);
}

TEST(ChannelNicExpositionTest, PassesPromtool) {
  auto hosts = std::make_shared<FakeHosts>();
  NcclAnalytics a;
  a.SetHostProcesses(hosts);
  a.OnCommInit(Ring0(), Init(kComm, 0, 16, 2));
  a.OnProxyOp(Ring0(), IbProxy(kComm, 0, 0, 9, true, 0x1a0, 0x1a3));
  a.OnCommTables({Live(kComm, 0, 16, 2)});
  a.EndPass(Clock::now());
  a.OnQpDump(NodeTable(), Clock::now());
  const std::string text = Render(a);
  ASSERT_NE(text.find("ncclscope_nccl_channel_nic_info{"), std::string::npos);
  const testing::RunResult lint =
      testing::RunCommand({NCCLSCOPE_PROMTOOL, "check", "metrics"}, text);
  EXPECT_EQ(lint.exit_code, 0) << lint.output;
  EXPECT_EQ(lint.output, "") << lint.output;
}

}  // namespace
}  // namespace ncclscope::analytics
