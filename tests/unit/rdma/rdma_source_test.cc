// The rdma source end to end in-process: fixture sysfs trees, a ManualClock stepping through
// scenarios over minutes and hours, and the metric text a scrape would get.

#include "agent/rdma/rdma_source.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <thread>

#include "tests/support/sysfs_tree.h"
#include "tests/unit/rdma/fault_reader.h"
#include "tests/unit/rdma/source_test_util.h"

namespace ncclscope::rdma {
namespace {

using ncclscope::testing::SysfsTree;
using rdma::testing::Exposition;
using rdma::testing::FaultReader;
using rdma::testing::Sample;
using std::chrono::minutes;
using std::chrono::seconds;

class CannedVerbs : public verbs::VerbsApi {
 public:
  int ListDevices(std::vector<verbs::DeviceAttr>* devices) override {
    ++calls;
    *devices = devices_;
    return 0;
  }
  std::vector<verbs::DeviceAttr> devices_;
  int calls = 0;
};

struct Fixture {
  SysfsTree tree;
  std::shared_ptr<FaultReader> reader = std::make_shared<FaultReader>();
  std::shared_ptr<CannedVerbs> verbs = std::make_shared<CannedVerbs>();
  std::shared_ptr<platform::ManualClock> clock = std::make_shared<platform::ManualClock>();
  config::RdmaConfig config;
  RdmaSource source{{reader, verbs, clock}};

  Fixture() {
    // mlx5_0: two NDR IB ports behind the same PCIe switch as GPU 0000:03:00.0; mlx5_2: a RoCE
    // port with hw_counters on socket 1.
    tree.AddStandardNode();
    config.sysfs_root = tree.root();
  }
  std::string Poll(std::chrono::seconds step = seconds(10)) {
    clock->Advance(step);
    source.PollOnce();
    return Exposition(source);
  }
};

TEST(RdmaSourceTest, ExportsPortsCountersAndInfo) {
  Fixture f;
  f.source.Configure(f.config);
  // Packet counts and VL15 drops only with rdma.packet_counters (node_exporter has them).
  const std::string defaults = f.Poll();
  EXPECT_EQ(defaults.find("ncclscope_infiniband_port_packets_received_total"), std::string::npos);
  EXPECT_EQ(defaults.find("ncclscope_infiniband_unicast_packets_"), std::string::npos);
  EXPECT_EQ(defaults.find("ncclscope_infiniband_vl15_dropped_total"), std::string::npos);
  EXPECT_NE(defaults.find("ncclscope_infiniband_symbol_error_total"), std::string::npos);
  f.config.packet_counters = true;
  f.source.Configure(f.config);
  const std::string text = f.Poll();
  // x4: port_xmit_data counts 4-byte words.
  EXPECT_EQ(
      Sample(text,
             R"(ncclscope_infiniband_port_data_transmitted_bytes_total{device="mlx5_0",port="1"})"),
      2880761508848.0 * 4);
  EXPECT_EQ(
      Sample(text, R"(ncclscope_infiniband_port_packets_received_total{device="mlx5_0",port="2"})"),
      541889824);
  EXPECT_EQ(Sample(text, R"(ncclscope_infiniband_state_id{device="mlx5_0",port="1"})"), 4);
  EXPECT_EQ(Sample(text, R"(ncclscope_infiniband_physical_state_id{device="mlx5_0",port="1"})"), 5);
  EXPECT_EQ(Sample(text, R"(ncclscope_infiniband_rate_bytes_per_second{device="mlx5_0",port="1"})"),
            50e9);
  EXPECT_EQ(Sample(text, R"(ncclscope_infiniband_rate_bytes_per_second{device="mlx5_2",port="1"})"),
            25e9);
  EXPECT_EQ(
      Sample(
          text,
          R"(ncclscope_infiniband_info{device="mlx5_0",board_id="MT_0000000838",firmware_version="28.39.1002",hca_type="MT4129",node_guid="a088:c203:0012:3456",pci_address="0000:04:00.0"})"),
      1);
  EXPECT_EQ(
      Sample(
          text,
          R"(ncclscope_infiniband_port_info{device="mlx5_2",port="1",link_layer="Ethernet",width="4X",speed="HDR",netdev="eth2"})"),
      1);
  // RoCE congestion and Q counters from hw_counters; lifespan in seconds (10 ms).
  EXPECT_EQ(
      Sample(
          text,
          R"(ncclscope_infiniband_np_ecn_marked_roce_packets_received_total{device="mlx5_2",port="1"})"),
      7);
  EXPECT_EQ(
      Sample(text,
             R"(ncclscope_infiniband_local_ack_timeout_errors_total{device="mlx5_2",port="1"})"),
      131);
  EXPECT_DOUBLE_EQ(
      Sample(text, R"(ncclscope_infiniband_lifespan_seconds{device="mlx5_2",port="1"})"), 0.01);
  // Affinity: the GPU shares a switch with mlx5_0 and is across sockets from mlx5_2.
  EXPECT_EQ(
      Sample(
          text,
          R"(ncclscope_gpu_nic_affinity_info{gpu_bus_id="0000:03:00.0",device="mlx5_0",port="1",numa_node="0",gpu_numa_node="0",relation="PIX",pci_distance="4"})"),
      1);
  EXPECT_NE(text.find(R"(device="mlx5_2",port="1",numa_node="1",gpu_numa_node="0",relation="SYS")"),
            std::string::npos);
  EXPECT_EQ(Sample(text, R"(ncclscope_rdma_devices{state="monitored"})"), 2);
  EXPECT_EQ(Sample(text, "ncclscope_rdma_verbs_devices"), 0);
  EXPECT_TRUE(f.source.Status().up);
  // Findings are there, all clear.
  EXPECT_TRUE(std::isnan(Sample(
      text,
      R"(ncclscope_infiniband_finding{device="mlx5_0",port="1",finding="link_down",severity="critical"})")));
  EXPECT_TRUE(std::isnan(Sample(
      text,
      R"(ncclscope_infiniband_finding{device="mlx5_2",port="1",finding="cnp_ignored",severity="warning"})")));
  // No RoCE findings on a port without hw_counters.
  EXPECT_EQ(text.find(R"(device="mlx5_0",port="1",finding="cnp_ignored")"), std::string::npos);
}

TEST(RdmaSourceTest, ScrapesNeverReadSysfs) {
  Fixture f;
  f.source.Configure(f.config);
  f.Poll();
  const std::size_t reads = f.reader->reads.size();
  for (int i = 0; i < 5; ++i) Exposition(f.source);
  EXPECT_EQ(f.reader->reads.size(), reads);
}

TEST(RdmaSourceTest, SaturatedCountersAreFlaggedAndResetsCounted) {
  Fixture f;
  f.source.Configure(f.config);
  f.tree.SetCounter("mlx5_0", 1, "counters", "link_downed", 255);
  f.tree.SetCounter("mlx5_0", 1, "counters", "port_xmit_wait", 4294967295u);
  f.tree.SetCounter("mlx5_0", 1, "counters", "symbol_error", 900);
  std::string text = f.Poll();
  EXPECT_EQ(
      Sample(
          text,
          R"(ncclscope_infiniband_port_saturated{device="mlx5_0",port="1",counter="link_downed"})"),
      1);
  EXPECT_EQ(
      Sample(
          text,
          R"(ncclscope_infiniband_port_saturated{device="mlx5_0",port="1",counter="port_xmit_wait"})"),
      1);
  EXPECT_EQ(
      Sample(text, R"(ncclscope_infiniband_port_saturated_counters{device="mlx5_0",port="1"})"), 2);
  EXPECT_EQ(Sample(text, R"(ncclscope_infiniband_link_downed_total{device="mlx5_0",port="1"})"),
            255);
  EXPECT_EQ(
      Sample(
          text,
          R"(ncclscope_infiniband_finding{device="mlx5_0",port="1",finding="counter_saturated",severity="info"})"),
      1);
  EXPECT_TRUE(std::isnan(Sample(
      text,
      R"(ncclscope_infiniband_port_saturated{device="mlx5_0",port="2",counter="link_downed"})")));

  // perfquery -R: everything back near zero.
  f.tree.SetCounter("mlx5_0", 1, "counters", "link_downed", 0);
  f.tree.SetCounter("mlx5_0", 1, "counters", "port_xmit_wait", 10);
  f.tree.SetCounter("mlx5_0", 1, "counters", "symbol_error", 2);
  text = f.Poll();
  EXPECT_EQ(
      Sample(
          text,
          R"(ncclscope_infiniband_port_clears_total{device="mlx5_0",port="1",counter="symbol_error"})"),
      1);
  EXPECT_EQ(
      Sample(
          text,
          R"(ncclscope_infiniband_port_clears_total{device="mlx5_0",port="1",counter="link_downed"})"),
      1);
  EXPECT_TRUE(std::isnan(  // absent while no counter is saturated
      Sample(text, R"(ncclscope_infiniband_port_saturated_counters{device="mlx5_0",port="1"})")));
  EXPECT_EQ(Sample(text, R"(ncclscope_infiniband_symbol_error_total{device="mlx5_0",port="1"})"),
            2);
  // The symbol errors since the reset count towards thresholds, the drop does not count at all.
  EXPECT_TRUE(std::isnan(Sample(
      text,
      R"(ncclscope_infiniband_finding{device="mlx5_0",port="1",finding="symbol_error_ber",severity="critical"})")));
}

TEST(RdmaSourceTest, FlappingPortOverAnHour) {
  Fixture f;
  f.source.Configure(f.config);
  f.Poll();
  std::string text;
  for (int episode = 0; episode < 3; ++episode) {
    f.tree.SetPortAttribute("mlx5_0", 2, "state", "1: DOWN");
    f.tree.SetPortAttribute("mlx5_0", 2, "phys_state", "2: Polling");
    for (int i = 0; i < 4; ++i) f.Poll();  // 40 s down
    f.tree.SetPortAttribute("mlx5_0", 2, "state", "4: ACTIVE");
    f.tree.SetPortAttribute("mlx5_0", 2, "phys_state", "5: LinkUp");
    for (int i = 0; i < 30; ++i) text = f.Poll();  // 5 min up
  }
  EXPECT_EQ(
      Sample(
          text,
          R"(ncclscope_infiniband_finding{device="mlx5_0",port="2",finding="link_flapping",severity="critical"})"),
      1);
  EXPECT_TRUE(std::isnan(Sample(
      text,
      R"(ncclscope_infiniband_finding{device="mlx5_0",port="2",finding="link_down",severity="critical"})")));
  EXPECT_EQ(Sample(text, R"(ncclscope_infiniband_port_flap_episodes{device="mlx5_0",port="2"})"),
            3);
  EXPECT_EQ(
      Sample(
          text,
          R"(ncclscope_infiniband_port_state_transitions_total{device="mlx5_0",port="2",from="active",to="down"})"),
      3);
  EXPECT_EQ(
      Sample(
          text,
          R"(ncclscope_infiniband_port_state_transitions_total{device="mlx5_0",port="2",from="down",to="active"})"),
      3);
  EXPECT_TRUE(std::isnan(Sample(
      text,
      R"(ncclscope_infiniband_finding{device="mlx5_0",port="1",finding="link_flapping",severity="critical"})")));
  // An hour later without episodes, it clears by itself.
  for (int i = 0; i < 60; ++i) text = f.Poll(seconds(60));
  EXPECT_TRUE(std::isnan(Sample(
      text,
      R"(ncclscope_infiniband_finding{device="mlx5_0",port="2",finding="link_flapping",severity="critical"})")));
}

TEST(RdmaSourceTest, LinkDownAfterFourMinutesAndExpectedPorts) {
  Fixture f;
  f.config.expected.ports = 2;
  f.config.expected.rate_gbps = 400;
  f.source.Configure(f.config);
  std::string text = f.Poll();
  EXPECT_EQ(Sample(text, "ncclscope_infiniband_active_ports"), 2);  // the RoCE port is not IB
  EXPECT_EQ(Sample(text, "ncclscope_infiniband_expected_active_ports"), 2);
  EXPECT_EQ(Sample(text, "ncclscope_infiniband_expected_rate_bytes_per_second"), 50e9);
  EXPECT_TRUE(std::isnan(Sample(
      text,
      R"(ncclscope_infiniband_finding{finding="ports_below_expected",severity="critical"})")));

  f.tree.SetPortAttribute("mlx5_0", 1, "state", "1: DOWN");
  f.tree.SetPortAttribute("mlx5_0", 1, "phys_state", "3: Disabled");
  text = f.Poll();
  // Fewer ports than expected: critical at once, and the port that is missing is named.
  EXPECT_EQ(
      Sample(text,
             R"(ncclscope_infiniband_finding{finding="ports_below_expected",severity="critical"})"),
      1);
  EXPECT_EQ(
      Sample(
          text,
          R"(ncclscope_infiniband_finding{device="mlx5_0",port="1",finding="link_down",severity="critical"})"),
      1);
  f.config.expected.ports = 0;  // without the expectation, link_down needs 4 minutes of history
  f.source.Configure(f.config);
  text = f.Poll(seconds(60));
  EXPECT_TRUE(std::isnan(Sample(
      text,
      R"(ncclscope_infiniband_finding{device="mlx5_0",port="1",finding="link_down",severity="critical"})")));
  for (int i = 0; i < 3; ++i) text = f.Poll(seconds(60));
  EXPECT_EQ(
      Sample(
          text,
          R"(ncclscope_infiniband_finding{device="mlx5_0",port="1",finding="link_down",severity="critical"})"),
      1);

  // A degraded link: ACTIVE at half width.
  f.tree.SetPortAttribute("mlx5_0", 2, "rate", "200 Gb/sec (2X NDR)");
  text = f.Poll();
  EXPECT_EQ(
      Sample(
          text,
          R"(ncclscope_infiniband_finding{device="mlx5_0",port="2",finding="rate_degraded",severity="warning"})"),
      1);
  EXPECT_EQ(Sample(text, "ncclscope_infiniband_active_ports"), 0);
}

TEST(RdmaSourceTest, RestrictedAndExcludedDevicesAndVerbsFallback) {
  Fixture f;
  SysfsTree::Hca lpf;
  lpf.name = "mlx5_4";
  lpf.pci_address = "0000:09:00.0";
  f.tree.AddMlx5Ib(lpf);
  SysfsTree::Hca skipped;
  skipped.name = "mlx5_5";
  skipped.pci_address = "0000:0a:00.0";
  f.tree.AddMlx5Ib(skipped);
  f.reader->Fail("mlx5_4/ports/1/counters/", EINVAL);
  f.reader->Fail("mlx5_0/ports/2/rate", EINVAL);
  f.verbs->devices_ = {{"mlx5_0", {{2, 4, 5, 2, 128, 1}}}};  // 4X NDR from ibv_query_port
  f.config.exclude_pci_addresses = {"^0000:0a:00\\.0$"};
  f.source.Configure(f.config);
  std::string text = f.Poll();
  EXPECT_EQ(
      Sample(
          text,
          R"(ncclscope_infiniband_port_unreadable_files{device="mlx5_4",port="1",reason="EINVAL"})"),
      2);
  text = f.Poll();
  EXPECT_EQ(Sample(text, R"(ncclscope_infiniband_port_restricted{device="mlx5_4",port="1"})"), 1);
  EXPECT_EQ(
      Sample(
          text,
          R"(ncclscope_infiniband_port_unreadable_files{device="mlx5_4",port="1",reason="restricted"})"),
      21);
  EXPECT_EQ(Sample(text, R"(ncclscope_infiniband_state_id{device="mlx5_4",port="1"})"), 4);
  EXPECT_EQ(f.reader->ReadsOf("mlx5_4/ports/1/counters/"), 2u);
  EXPECT_EQ(f.reader->ReadsOf("mlx5_5"), 0u);
  EXPECT_EQ(Sample(text, R"(ncclscope_rdma_devices{state="excluded"})"), 1);
  EXPECT_EQ(text.find(R"(device="mlx5_5")"), std::string::npos)
      << "excluded devices have no series";
  // sysfs could not read mlx5_0/2's rate; libibverbs' ibv_query_port filled it in.
  EXPECT_EQ(Sample(text, R"(ncclscope_infiniband_rate_bytes_per_second{device="mlx5_0",port="2"})"),
            50e9);
  EXPECT_EQ(
      Sample(
          text,
          R"(ncclscope_infiniband_port_info{device="mlx5_0",port="2",link_layer="InfiniBand",width="4X",speed="NDR",netdev=""})"),
      1);
  EXPECT_EQ(Sample(text, "ncclscope_rdma_verbs_devices"), 1);
}

TEST(RdmaSourceTest, DeviceVanishingKeepsTheAgentAndItsFindings) {
  Fixture f;
  f.source.Configure(f.config);
  for (int i = 0; i < 6; ++i) f.Poll();
  f.tree.RemoveDevice("mlx5_2");
  std::string text = f.Poll();
  EXPECT_TRUE(
      std::isnan(Sample(text, R"(ncclscope_infiniband_state_id{device="mlx5_2",port="1"})")));
  EXPECT_EQ(Sample(text, R"(ncclscope_rdma_devices{state="vanished"})"), 1);
  EXPECT_EQ(Sample(text, R"(ncclscope_infiniband_state_id{device="mlx5_0",port="1"})"), 4);
  for (int i = 0; i < 25; ++i) text = f.Poll();
  EXPECT_EQ(
      Sample(
          text,
          R"(ncclscope_infiniband_finding{device="mlx5_2",port="1",finding="link_down",severity="critical"})"),
      1);
  // Back (driver reload): counters start over and it is monitored again.
  f.tree.AddMlx5Roce(SysfsTree::StandardRoce(), "eth2");
  text = f.Poll();
  EXPECT_EQ(Sample(text, R"(ncclscope_rdma_devices{state="monitored"})"), 2);
  EXPECT_EQ(Sample(text, R"(ncclscope_infiniband_state_id{device="mlx5_2",port="1"})"), 4);
}

TEST(RdmaSourceTest, NoRdmaDriverMeansDownWithAReason) {
  ncclscope::testing::TempDir empty;
  auto clock = std::make_shared<platform::ManualClock>();
  RdmaSource source({nullptr, std::make_shared<CannedVerbs>(), clock});
  config::RdmaConfig config;
  config.sysfs_root = empty.path();
  source.Configure(config);
  source.PollOnce();
  const SourceStatus status = source.Status();
  EXPECT_FALSE(status.up);
  EXPECT_NE(status.reason.find("class/infiniband: No such file or directory"), std::string::npos)
      << status.reason;
  EXPECT_EQ(Sample(Exposition(source), R"(ncclscope_rdma_devices{state="monitored"})"), 0);
}

TEST(RdmaSourceTest, BackgroundPollerPublishesAndStops) {
  SysfsTree tree;
  tree.AddMlx5Ib({});
  RdmaSource source({nullptr, std::make_shared<CannedVerbs>(), nullptr});
  config::Config config;
  config.rdma.sysfs_root = tree.root();
  config.rdma.interval = config::Millis(100);
  ASSERT_TRUE(source.Start(config).up);
  double polls = 0;
  for (int i = 0; i < 100 && polls < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    polls = Sample(Exposition(source), "ncclscope_rdma_polls_total");
    if (std::isnan(polls)) polls = 0;
  }
  EXPECT_GE(polls, 3);
  config.rdma.interval = config::Seconds(3600);
  EXPECT_TRUE(source.Reconfigure(config).up);
  source.Stop();
  const double after_stop = Sample(Exposition(source), "ncclscope_rdma_polls_total");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(Sample(Exposition(source), "ncclscope_rdma_polls_total"), after_stop);
}

}  // namespace
}  // namespace ncclscope::rdma
