// The fabric sources through the real agent binary: rdma.sysfs_root pointing at a fixture tree
// written here, nvlink.library at the fake libnvidia-ml.so.1, /metrics checked with promtool and
// against docs/metrics.md, and changes over time (a flapping port, a vanished device, an NVLink
// going down, a reload with a new device filter) seen through scrapes.

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cmath>
#include <functional>

#include "tests/support/agent_process.h"
#include "tests/support/fake_nvml.h"
#include "tests/support/metrics_doc.h"
#include "tests/support/sysfs_tree.h"
#include "tests/support/wait_for.h"

namespace ncclscope::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Scrapes until `pred` holds on the body (or 15 s pass); returns the last body.
std::string ScrapeUntil(const AgentProcess& agent,
                        const std::function<bool(const std::string&)>& pred) {
  std::string body;
  WaitFor(
      [&] {
        body = agent.Get("/metrics").body;
        return pred(body);
      },
      seconds(15));
  return body;
}

bool Has(const std::string& body, const std::string& series, double value) {
  return SampleValue(body, series) == value;
}

void ExpectCleanScrape(const std::string& body) {
  const RunResult lint = RunCommand({NCCLSCOPE_PROMTOOL, "check", "metrics"}, body);
  EXPECT_EQ(lint.exit_code, 0) << lint.output;
  EXPECT_EQ(lint.output, "") << "promtool lint findings:\n" << lint.output;
  EXPECT_EQ(UndocumentedMetrics(body), std::vector<std::string>{}) << "add them to docs/metrics.md";
}

struct Node {
  SysfsTree tree;
  TempDir nvml_dir;
  std::string nvml_state = nvml_dir.path() + "/nvml-state";

  Node() {
    tree.AddStandardNode();
    tree.SetCounter("mlx5_0", 1, "counters", "port_xmit_wait", 4294967295u);   // saturated
    tree.BreakFile("mlx5_0", 1, "counters/VL15_dropped");                      // read fails
    tree.SetCounter("mlx5_2", 1, "hw_counters", "vport_rx_dropped_thing", 5);  // not catalogued
    SysfsTree::Hca iwarp;  // counters all "N/A (no PMA)"
    iwarp.name = "i40iw0";
    iwarp.pci_address = "0000:06:00.0";
    tree.AddNoPmaPort(iwarp);
    SysfsTree::Hca excluded;  // its counter files are directories: any read of them would fail
    excluded.name = "mlx5_9";
    excluded.pci_address = "0000:07:00.0";
    tree.AddMlx5Ib(excluded);
    tree.BreakFile("mlx5_9", 1, "counters/port_xmit_data");
    WriteFakeNvmlState(nvml_state, Nvml(1));
  }

  static std::string Nvml(int link1_state) {
    return "gpu 0 GPU-11111111-2222-3333-4444-555555555555 00000000:03:00.0 NVIDIA_H100_80GB_HBM3 "
           "4\n"
           "state 0 1 " +
           std::to_string(link1_state) +
           "\n"
           "error 0 1 2 7\n"
           "field 0 0 138 1000\nfield 0 0 139 2000\nfield 0 all 138 1000\n"
           "gpu 1 GPU-bbbbbbbb-0000-0000-0000-000000000000 00000000:1B:00.0 NVIDIA_B200 2 "
           "blackwell\n"
           "field 1 0 202 500\nfield 1 0 221 3\nfield 1 0 220 783\n";
  }

  std::string Config(const std::string& extra_rdma = "") const {
    return "rdma:\n  sysfs_root: " + tree.root() +
           "\n  interval: 100ms\n  unknown_hw_counters: true\n  exclude_devices: [\"^mlx5_9$\"]\n"
           "  expected:\n    ports: 2\n"
           "    rate_gbps: 400\n  link:\n    down_after: 1s\n    flap_min_down: 0s\n"
           "    flap_episodes: 2\n    flap_window: 5m\n" +
           extra_rdma + "nvlink:\n  library: " + NCCLSCOPE_FAKE_NVML +
           "\n  interval: 100ms\n  down_after: 0s\n  expected_links: 4\n  per_link_metrics: true\n"
           // Not under test here, and a reload restarts it: detaching the uprobes it attached to
           // every NCCL and verbs process on the machine (other tests' too) can take seconds.
           "ebpf:\n  enabled: false\n";
  }
};

TEST(FabricAgentTest, FabricMetricsThroughTheAgentBinary) {
  Node node;
  AgentProcess agent(node.Config(), {}, {"FAKE_NVML_STATE=" + node.nvml_state});
  ASSERT_TRUE(agent.ok()) << agent.startup_log();
  const std::string body = ScrapeUntil(agent, [](const std::string& b) {
    return b.find("ncclscope_infiniband_state_id{") != std::string::npos &&
           b.find("ncclscope_nvlink_link_state{") != std::string::npos;
  });
  ExpectCleanScrape(body);
  EXPECT_EQ(SampleValue(body, R"(ncclscope_source_up{source="rdma"})"), 1)
      << agent.process().Stderr();
  EXPECT_EQ(SampleValue(body, R"(ncclscope_source_up{source="nvlink"})"), 1);

  // InfiniBand: bytes (x4), state, rate, saturation, the failing file, the affinity.
  EXPECT_EQ(
      SampleValue(
          body,
          R"(ncclscope_infiniband_port_data_transmitted_bytes_total{device="mlx5_0",port="1"})"),
      2880761508848.0 * 4);
  EXPECT_EQ(SampleValue(body, R"(ncclscope_infiniband_state_id{device="mlx5_0",port="2"})"), 4);
  EXPECT_EQ(
      SampleValue(body, R"(ncclscope_infiniband_rate_bytes_per_second{device="mlx5_0",port="1"})"),
      50e9);
  EXPECT_EQ(
      SampleValue(
          body,
          R"(ncclscope_infiniband_port_saturated{device="mlx5_0",port="1",counter="port_xmit_wait"})"),
      1);
  EXPECT_EQ(
      SampleValue(
          body,
          R"(ncclscope_infiniband_port_unreadable_files{device="mlx5_0",port="1",reason="EISDIR"})"),
      1);
  EXPECT_EQ(
      SampleValue(
          body,
          R"(ncclscope_gpu_nic_affinity_info{gpu_bus_id="0000:03:00.0",device="mlx5_0",port="1",numa_node="0",gpu_numa_node="0",relation="PIX",pci_distance="4"})"),
      1);
  EXPECT_EQ(SampleValue(body, "ncclscope_infiniband_active_ports"), 2);
  // RoCE: netdev label, congestion counters.
  EXPECT_EQ(
      SampleValue(
          body,
          R"(ncclscope_infiniband_port_info{device="mlx5_2",port="1",link_layer="Ethernet",width="4X",speed="HDR",netdev="eth2"})"),
      1);
  EXPECT_EQ(
      SampleValue(body,
                  R"(ncclscope_infiniband_rp_cnp_packets_handled_total{device="mlx5_2",port="1"})"),
      12);
  EXPECT_EQ(
      SampleValue(
          body,
          R"(ncclscope_infiniband_hw_counters_total{device="mlx5_2",port="1",counter="vport_rx_dropped_thing"})"),
      5);
  // iWARP: N/A (no PMA) is no sample, not zero; the port itself is there.
  EXPECT_TRUE(std::isnan(SampleValue(
      body,
      R"(ncclscope_infiniband_port_data_transmitted_bytes_total{device="i40iw0",port="1"})")));
  EXPECT_EQ(
      SampleValue(
          body,
          R"(ncclscope_infiniband_port_unreadable_files{device="i40iw0",port="1",reason="no_pma"})"),
      1);
  // Excluded: nothing at all.
  EXPECT_EQ(body.find(R"(device="mlx5_9")"), std::string::npos);
  EXPECT_EQ(SampleValue(body, R"(ncclscope_rdma_devices{state="excluded"})"), 1);
  // The broken file is a lasting failure, not a transient read error.
  EXPECT_TRUE(
      std::isnan(SampleValue(body, R"(ncclscope_source_errors_total{source="rdma",kind="read"})")));

  // NVLink: Hopper and Blackwell, joinable on gpu_bus_id with the affinity.
  const std::string hopper = R"(gpu="0",UUID="GPU-11111111-2222-3333-4444-555555555555")";
  EXPECT_EQ(SampleValue(body, "ncclscope_nvml_available"), 1);
  EXPECT_EQ(
      SampleValue(
          body,
          "ncclscope_nvlink_gpu_info{" + hopper +
              R"(,pci_bus_id="00000000:03:00.0",model_name="NVIDIA H100 80GB HBM3",gpu_bus_id="0000:03:00.0"})"),
      1);
  EXPECT_EQ(SampleValue(body, "ncclscope_nvlink_data_transmitted_bytes_total{" + hopper +
                                  R"(,nvlink="0"})"),
            1024000);
  EXPECT_EQ(
      SampleValue(body, "ncclscope_nvlink_crc_flit_errors_total{" + hopper + R"(,nvlink="1"})"), 7);
  EXPECT_EQ(
      SampleValue(
          body,
          R"(ncclscope_nvlink_count_transmitted_bytes_total{gpu="1",UUID="GPU-bbbbbbbb-0000-0000-0000-000000000000",nvlink="0"})"),
      500);
  // Mantissa x 10^-exponent is computed, not a literal: equal to the last bit or two (the
  // exposition prints the shortest text that round-trips the computed value).
  EXPECT_DOUBLE_EQ(
      SampleValue(
          body,
          R"(ncclscope_nvlink_effective_ber{gpu="1",UUID="GPU-bbbbbbbb-0000-0000-0000-000000000000",nvlink="0"})"),
      3e-15);
}

TEST(FabricAgentTest, FlapsVanishedDevicesNvlinkDownAndReload) {
  Node node;
  AgentProcess agent(node.Config(), {}, {"FAKE_NVML_STATE=" + node.nvml_state});
  ASSERT_TRUE(agent.ok()) << agent.startup_log();
  const std::string port2 = R"(device="mlx5_0",port="2")";
  ScrapeUntil(agent, [&](const std::string& b) {
    return Has(b, "ncclscope_infiniband_state_id{" + port2 + "}", 4);
  });

  // Counters cleared (perfquery -R): counted, and the exported value restarts.
  node.tree.SetCounter("mlx5_0", 1, "counters", "symbol_error", 900);
  ScrapeUntil(agent, [](const std::string& b) {
    return Has(b, R"(ncclscope_infiniband_symbol_error_total{device="mlx5_0",port="1"})", 900);
  });
  node.tree.SetCounter("mlx5_0", 1, "counters", "symbol_error", 1);
  std::string cleared = ScrapeUntil(agent, [](const std::string& b) {
    return Has(
        b,
        R"(ncclscope_infiniband_port_clears_total{device="mlx5_0",port="1",counter="symbol_error"})",
        1);
  });
  EXPECT_EQ(
      SampleValue(cleared, R"(ncclscope_infiniband_symbol_error_total{device="mlx5_0",port="1"})"),
      1);
  ExpectCleanScrape(cleared);

  // Port 2 flaps twice: down, then back up, as seen by polling.
  for (int i = 0; i < 2; ++i) {
    node.tree.SetPortAttribute("mlx5_0", 2, "state", "1: DOWN");
    ScrapeUntil(agent, [&](const std::string& b) {
      return Has(b, "ncclscope_infiniband_state_id{" + port2 + "}", 1);
    });
    node.tree.SetPortAttribute("mlx5_0", 2, "state", "4: ACTIVE");
    ScrapeUntil(agent, [&](const std::string& b) {
      return Has(b, "ncclscope_infiniband_state_id{" + port2 + "}", 4);
    });
  }
  std::string body = ScrapeUntil(agent, [&](const std::string& b) {
    return Has(b,
               "ncclscope_infiniband_finding{" + port2 +
                   R"(,finding="link_flapping",severity="critical"})",
               1);
  });
  EXPECT_EQ(SampleValue(body, "ncclscope_infiniband_finding{" + port2 +
                                  R"(,finding="link_flapping",severity="critical"})"),
            1);
  EXPECT_EQ(SampleValue(body, "ncclscope_infiniband_port_state_transitions_total{" + port2 +
                                  R"(,from="active",to="down"})"),
            2);
  ExpectCleanScrape(body);

  // A device falls off the bus: the agent runs on, and its link goes down after down_after.
  node.tree.RemoveDevice("mlx5_2");
  body = ScrapeUntil(agent, [](const std::string& b) {
    return Has(
        b,
        R"(ncclscope_infiniband_finding{device="mlx5_2",port="1",finding="link_down",severity="critical"})",
        1);
  });
  EXPECT_EQ(SampleValue(body, R"(ncclscope_rdma_devices{state="vanished"})"), 1);
  EXPECT_TRUE(
      std::isnan(SampleValue(body, R"(ncclscope_infiniband_state_id{device="mlx5_2",port="1"})")));
  EXPECT_EQ(SampleValue(body, R"(ncclscope_infiniband_state_id{device="mlx5_0",port="1"})"), 4);

  // An NVLink goes down.
  WriteFakeNvmlState(node.nvml_state, Node::Nvml(0));
  const std::string link1 =
      R"({gpu="0",UUID="GPU-11111111-2222-3333-4444-555555555555",nvlink="1"})";
  body = ScrapeUntil(agent, [&](const std::string& b) {
    return Has(b, "ncclscope_nvlink_link_state" + link1, 0);
  });
  EXPECT_EQ(SampleValue(body, "ncclscope_nvlink_link_state" + link1), 0);
  EXPECT_EQ(
      SampleValue(
          body,
          R"(ncclscope_nvlink_finding{gpu="0",UUID="GPU-11111111-2222-3333-4444-555555555555",nvlink="",finding="links_below_expected",severity="critical"})"),
      1);
  ExpectCleanScrape(body);

  // Reload with mlx5_0 excluded too: its series go, the agent stays up.
  const std::string config = node.Config();
  const std::string excluded =
      std::string(config).replace(config.find("\"^mlx5_9$\""), 10, "\"^mlx5_9$\", \"^mlx5_0$\"");
  agent.dir().WriteFile("ncclscope.yaml", excluded);
  agent.process().Signal(SIGHUP);
  ASSERT_TRUE(agent.process().WaitForStderr("reload succeeded", seconds(10)))
      << agent.process().Stderr();
  body = ScrapeUntil(agent, [](const std::string& b) {
    return b.find(R"(ncclscope_infiniband_state_id{device="mlx5_0")") == std::string::npos &&
           Has(b, R"(ncclscope_rdma_devices{state="excluded"})", 2);
  });
  EXPECT_EQ(body.find(R"(ncclscope_infiniband_state_id{device="mlx5_0")"), std::string::npos);
  EXPECT_TRUE(agent.process().Running());
}

TEST(FabricAgentTest, RunsOnWithoutRdmaDevicesOrNvml) {
  TempDir empty;
  AgentProcess agent("rdma:\n  sysfs_root: " + empty.path() +
                     "\nnvlink:\n  library: " + empty.path() + "/libnvidia-ml.so.1\n");
  ASSERT_TRUE(agent.ok()) << agent.startup_log();
  const std::string body = ScrapeUntil(agent, [](const std::string& b) {
    return b.find("ncclscope_nvml_available 0") != std::string::npos &&
           b.find("ncclscope_rdma_polls_total") != std::string::npos;
  });
  EXPECT_EQ(SampleValue(body, R"(ncclscope_source_up{source="rdma"})"), 0);
  EXPECT_EQ(SampleValue(body, R"(ncclscope_source_up{source="nvlink"})"), 0);
  EXPECT_EQ(SampleValue(body, "ncclscope_nvml_available"), 0);
  ExpectCleanScrape(body);
  const HttpResponse health = agent.Get("/healthz");
  EXPECT_EQ(health.status, 200);
  EXPECT_NE(health.body.find("source rdma: down (no RDMA devices: " + empty.path() +
                             "/class/infiniband: No such file or directory)"),
            std::string::npos)
      << health.body;
  EXPECT_NE(health.body.find("source nvlink: down (NVML not available: " + empty.path() +
                             "/libnvidia-ml.so.1: cannot open shared object file"),
            std::string::npos)
      << health.body;
}

}  // namespace
}  // namespace ncclscope::testing
