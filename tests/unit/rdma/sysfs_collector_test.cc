// The sysfs reading path against fixture trees written by the tests: an mlx5 InfiniBand HCA, a
// RoCE port with hw_counters, a restricted port, N/A (no PMA) files, excluded devices, files that
// fail, a FIFO, and devices vanishing between and during reads.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <string>

#include "rdma/sysfs/collector.h"
#include "tests/support/sysfs_tree.h"
#include "tests/unit/rdma/fault_reader.h"

namespace ncclscope::rdma::sysfs {
namespace {

using ncclscope::testing::SysfsTree;
using rdma::testing::FaultReader;
using Clock = SysfsCollector::Clock;

constexpr Clock::time_point kT0 = Clock::time_point{} + std::chrono::hours(1);

std::optional<std::uint64_t> Value(const Snapshot& snapshot, const std::string& device,
                                   std::uint32_t port, const std::string& key) {
  for (const DeviceReading& d : snapshot.devices) {
    if (d.layout->name != device) continue;
    for (std::size_t p = 0; p < d.ports.size(); ++p) {
      if (d.layout->ports[p].number != port) continue;
      const PortLayout& layout = d.layout->ports[p];
      for (std::size_t f = 0; f < layout.files.size(); ++f) {
        if (layout.files[f].key == key) return d.ports[p].values[f];
      }
    }
  }
  return std::nullopt;
}

const PortReading* Reading(const Snapshot& snapshot, const std::string& device,
                           std::uint32_t port) {
  for (const DeviceReading& d : snapshot.devices) {
    if (d.layout->name != device) continue;
    for (std::size_t p = 0; p < d.ports.size(); ++p) {
      if (d.layout->ports[p].number == port) return &d.ports[p];
    }
  }
  return nullptr;
}

SysfsCollector Make(FileReader* reader, const SysfsTree& tree, DeviceFilter filter = {},
                    bool hw_counters = true) {
  DiscoveryOptions options;
  options.root = tree.root();
  options.hw_counters = hw_counters;
  return SysfsCollector(reader, std::move(filter), options);
}

TEST(SysfsCollectorTest, ReadsAnMlx5InfinibandHca) {
  SysfsTree tree;
  SysfsTree::Hca hca;
  tree.AddMlx5Ib(hca, 2);
  PosixFileReader reader;
  SysfsCollector collector = Make(&reader, tree);
  const Snapshot snapshot = collector.Poll(kT0);
  ASSERT_TRUE(snapshot.class_dir_present);
  ASSERT_EQ(snapshot.devices.size(), 1u);
  const DeviceLayout& device = *snapshot.devices[0].layout;
  EXPECT_EQ(device.name, "mlx5_0");
  EXPECT_EQ(device.firmware_version, "28.39.1002");
  EXPECT_EQ(device.hca_type, "MT4129");
  EXPECT_EQ(device.board_id, "MT_0000000838");
  EXPECT_EQ(device.node_guid, "a088:c203:0012:3456");
  EXPECT_EQ(device.pci_address, "0000:05:00.0");
  EXPECT_EQ(device.numa_node, 0);
  ASSERT_EQ(device.ports.size(), 2u);
  EXPECT_EQ(device.ports[0].link_layer, "InfiniBand");
  EXPECT_EQ(device.ports[0].files.size(), SysfsTree::Mlx5PmaCounters().size());

  const PortReading* port = Reading(snapshot, "mlx5_0", 1);
  ASSERT_NE(port, nullptr);
  ASSERT_TRUE(port->state);
  EXPECT_EQ(port->state->id, 4);
  ASSERT_TRUE(port->phys_state);
  EXPECT_EQ(port->phys_state->name, "LinkUp");
  ASSERT_TRUE(port->rate);
  EXPECT_DOUBLE_EQ(port->rate->gbps, 400);
  EXPECT_EQ(Value(snapshot, "mlx5_0", 1, "counters/port_xmit_data"), 2880761508848u);
  EXPECT_EQ(Value(snapshot, "mlx5_0", 2, "counters/symbol_error"), 0u);
  EXPECT_TRUE(port->unreadable.empty());
  EXPECT_EQ(snapshot.problems.parse_errors, 0u);
  EXPECT_EQ(snapshot.problems.read_errors, 0u);
}

TEST(SysfsCollectorTest, RocePortWithHwCountersAndNetdev) {
  SysfsTree tree;
  SysfsTree::Hca hca;
  hca.name = "mlx5_2";
  tree.AddMlx5Roce(hca, "eth2");
  PosixFileReader reader;
  SysfsCollector with_hw = Make(&reader, tree);
  const Snapshot snapshot = with_hw.Poll(kT0);
  ASSERT_EQ(snapshot.devices.size(), 1u);
  const PortLayout& port = snapshot.devices[0].layout->ports[0];
  EXPECT_EQ(port.link_layer, "Ethernet");
  EXPECT_EQ(port.netdev, "eth2");
  EXPECT_EQ(Value(snapshot, "mlx5_2", 1, "hw_counters/np_ecn_marked_roce_packets"), 7u);
  EXPECT_EQ(Value(snapshot, "mlx5_2", 1, "hw_counters/rx_read_requests"), 175528982u);

  // With hw_counters off the directory is not even listed.
  FaultReader spy;
  SysfsCollector without_hw = Make(&spy, tree, {}, /*hw_counters=*/false);
  const Snapshot plain = without_hw.Poll(kT0);
  EXPECT_FALSE(Value(plain, "mlx5_2", 1, "hw_counters/out_of_buffer"));
  EXPECT_FALSE(spy.Touched("hw_counters"));
  EXPECT_EQ(Value(plain, "mlx5_2", 1, "counters/port_rcv_data"), 18126345378u);
}

TEST(SysfsCollectorTest, RestrictedPortCostsTwoReadsThenIsSkipped) {
  SysfsTree tree;
  SysfsTree::Hca lpf;
  lpf.name = "mlx5_4";
  tree.AddMlx5Ib(lpf);
  SysfsTree::Hca healthy;
  healthy.name = "mlx5_5";
  healthy.pci_address = "0000:06:00.0";
  tree.AddMlx5Ib(healthy);
  FaultReader reader;
  reader.Fail("mlx5_4/ports/1/counters/", EINVAL);  // every PMA read: ACCESS_REG fails
  SysfsCollector collector = Make(&reader, tree);

  const Snapshot first = collector.Poll(kT0);
  EXPECT_EQ(reader.ReadsOf("mlx5_4/ports/1/counters/"), 2u);
  const PortReading* lpf_port = Reading(first, "mlx5_4", 1);
  ASSERT_NE(lpf_port, nullptr);
  EXPECT_TRUE(lpf_port->restricted);
  EXPECT_EQ(lpf_port->unreadable.at("EINVAL"), 2u);
  EXPECT_EQ(lpf_port->unreadable.at("restricted"), SysfsTree::Mlx5PmaCounters().size() - 2);
  // The port's state still reads; the other device is untouched by the failure.
  ASSERT_TRUE(lpf_port->state);
  EXPECT_EQ(Value(first, "mlx5_5", 1, "counters/port_xmit_data"), 2880761508848u);
  // EINVAL is a lasting property of the file, not a transient read error.
  EXPECT_EQ(first.problems.read_errors, 0u);

  for (int i = 1; i <= 3; ++i) collector.Poll(kT0 + std::chrono::seconds(10 * i));
  EXPECT_EQ(reader.ReadsOf("mlx5_4/ports/1/counters/"), 2u) << "restricted counters re-read";
}

TEST(SysfsCollectorTest, OneFailingFileFailsAloneAndIsRemembered) {
  SysfsTree tree;
  tree.AddMlx5Ib({});
  FaultReader reader;
  reader.Fail("counters/symbol_error", EINVAL);  // a port that does give other counters
  reader.Fail("counters/VL15_dropped", EOPNOTSUPP);
  reader.Fail("counters/port_rcv_errors", EIO);  // transient: retried
  SysfsCollector collector = Make(&reader, tree);
  const Snapshot first = collector.Poll(kT0);
  const PortReading* port = Reading(first, "mlx5_0", 1);
  ASSERT_NE(port, nullptr);
  EXPECT_FALSE(port->restricted);
  EXPECT_FALSE(Value(first, "mlx5_0", 1, "counters/symbol_error"));
  EXPECT_EQ(Value(first, "mlx5_0", 1, "counters/link_downed"), 0u);
  EXPECT_EQ(port->unreadable.at("EINVAL"), 1u);
  EXPECT_EQ(port->unreadable.at("EOPNOTSUPP"), 1u);
  EXPECT_EQ(port->unreadable.at("EIO"), 1u);
  EXPECT_EQ(first.problems.read_errors, 1u);

  const Snapshot second = collector.Poll(kT0 + std::chrono::seconds(10));
  EXPECT_EQ(reader.ReadsOf("counters/symbol_error"), 1u);
  EXPECT_EQ(reader.ReadsOf("counters/VL15_dropped"), 1u);
  EXPECT_EQ(reader.ReadsOf("counters/port_rcv_errors"), 2u);
  EXPECT_EQ(Reading(second, "mlx5_0", 1)->unreadable.at("EINVAL"), 1u);  // still reported

  // A config reload forgets what was remembered: the files are tried again.
  reader.ClearFaults();
  collector.ForgetFailures();
  const Snapshot third = collector.Poll(kT0 + std::chrono::seconds(20));
  EXPECT_EQ(Value(third, "mlx5_0", 1, "counters/symbol_error"), 0u);
  EXPECT_TRUE(Reading(third, "mlx5_0", 1)->unreadable.empty());
}

TEST(SysfsCollectorTest, NoPmaValuesAreAbsentNotZero) {
  SysfsTree tree;
  SysfsTree::Hca iwarp;
  iwarp.name = "i40iw0";
  tree.AddNoPmaPort(iwarp);
  tree.SetCounter("i40iw0", 1, "counters", "symbol_error", "N/A (no PMA)");
  tree.SetCounter("i40iw0", 1, "counters", "link_downed", "garbage");
  PosixFileReader reader;
  SysfsCollector collector = Make(&reader, tree);
  const Snapshot snapshot = collector.Poll(kT0);
  const PortReading* reading = Reading(snapshot, "i40iw0", 1);
  ASSERT_NE(reading, nullptr);
  EXPECT_FALSE(Value(snapshot, "i40iw0", 1, "counters/port_xmit_data"));
  EXPECT_EQ(reading->unreadable.at("no_pma"), 2u);
  EXPECT_EQ(reading->unreadable.at("malformed"), 1u);
  EXPECT_EQ(snapshot.problems.parse_errors, 1u);
  ASSERT_TRUE(reading->state);  // the port itself still reads
}

TEST(SysfsCollectorTest, ExcludedDevicesAreNeverTouched) {
  SysfsTree tree;
  for (int i = 0; i < 4; ++i) {
    SysfsTree::Hca hca;
    hca.name = "mlx5_" + std::to_string(i);
    hca.pci_address = "0000:0" + std::to_string(5 + i) + ":00.0";
    tree.AddMlx5Ib(hca);
  }
  FaultReader reader;
  // By name (mlx5_1), by include list (mlx5_3 is not in it), by PCI address (mlx5_2).
  DeviceFilter filter({"^mlx5_[012]$"}, {"^mlx5_1$"}, {"^0000:07:00\\.0$"});
  SysfsCollector collector = Make(&reader, tree, filter);
  for (int i = 0; i < 3; ++i) {
    const Snapshot snapshot = collector.Poll(kT0 + std::chrono::seconds(10 * i));
    ASSERT_EQ(snapshot.devices.size(), 1u);
    EXPECT_EQ(snapshot.devices[0].layout->name, "mlx5_0");
    EXPECT_EQ(snapshot.excluded, (std::vector<std::string>{"mlx5_1", "mlx5_2", "mlx5_3"}));
  }
  // Name-excluded devices: not a single access. The PCI-excluded one: only its device symlink.
  EXPECT_FALSE(reader.Touched("mlx5_1"));
  EXPECT_FALSE(reader.Touched("mlx5_3"));
  EXPECT_EQ(reader.ReadsOf("mlx5_2"), 0u);
  for (const std::string& path : reader.lists) EXPECT_EQ(path.find("mlx5_2"), std::string::npos);
  for (const std::string& path : reader.links) {
    if (path.find("mlx5_2") != std::string::npos) {
      EXPECT_EQ(path, tree.root() + "/class/infiniband/mlx5_2/device");
    }
  }
}

TEST(SysfsCollectorTest, DeviceVanishingBetweenPollsAndComingBack) {
  SysfsTree tree;
  SysfsTree::Hca a;
  tree.AddMlx5Ib(a);
  SysfsTree::Hca b;
  b.name = "mlx5_1";
  b.pci_address = "0000:06:00.0";
  tree.AddMlx5Ib(b);
  PosixFileReader reader;
  SysfsCollector collector = Make(&reader, tree);
  ASSERT_EQ(collector.Poll(kT0).devices.size(), 2u);

  tree.RemoveDevice("mlx5_1");
  const Snapshot gone = collector.Poll(kT0 + std::chrono::seconds(10));
  ASSERT_EQ(gone.devices.size(), 1u);
  EXPECT_EQ(gone.devices[0].layout->name, "mlx5_0");
  EXPECT_TRUE(gone.rediscovered);

  tree.AddMlx5Ib(b);
  const Snapshot back = collector.Poll(kT0 + std::chrono::seconds(20));
  EXPECT_EQ(back.devices.size(), 2u);
}

TEST(SysfsCollectorTest, DeviceVanishingMidReadIsSurvived) {
  SysfsTree tree;
  SysfsTree::Hca a;
  tree.AddMlx5Ib(a, 2);
  SysfsTree::Hca b;
  b.name = "mlx5_1";
  b.pci_address = "0000:06:00.0";
  tree.AddMlx5Ib(b);
  FaultReader reader;
  SysfsCollector collector = Make(&reader, tree);
  ASSERT_EQ(collector.Poll(kT0).devices.size(), 2u);
  const std::size_t port2_reads = reader.ReadsOf("mlx5_0/ports/2");

  // mlx5_0 disappears while its first port's counters are being read. Its files are open in
  // the reader: kernfs then fails their reads with ENODEV, which a plain tree cannot, so the
  // reader is told to.
  bool removed = false;
  reader.before_read = [&](const std::string& path) {
    if (!removed && path.find("mlx5_0/ports/1/counters/port_xmit_data") != std::string::npos) {
      tree.RemoveDevice("mlx5_0");
      reader.Fail("/mlx5_0/", ENODEV);
      removed = true;
    }
  };
  const Snapshot during = collector.Poll(kT0 + std::chrono::seconds(10));
  ASSERT_TRUE(removed);
  EXPECT_EQ(during.vanished, std::vector<std::string>{"mlx5_0"});
  ASSERT_EQ(during.devices.size(), 1u);
  EXPECT_EQ(during.devices[0].layout->name, "mlx5_1");
  EXPECT_EQ(reader.ReadsOf("mlx5_0/ports/2"), port2_reads) << "reading went on after the vanish";
  EXPECT_EQ(during.problems.read_errors, 0u);

  reader.ClearFaults();
  const Snapshot after = collector.Poll(kT0 + std::chrono::seconds(20));
  ASSERT_EQ(after.devices.size(), 1u);
  EXPECT_TRUE(after.vanished.empty());
}

TEST(SysfsCollectorTest, AllDevicesGoneAndClassDirectoryMissing) {
  SysfsTree tree;
  tree.AddMlx5Ib({});
  PosixFileReader reader;
  SysfsCollector collector = Make(&reader, tree);
  ASSERT_EQ(collector.Poll(kT0).devices.size(), 1u);
  std::filesystem::remove_all(tree.root() + "/class");
  const Snapshot snapshot = collector.Poll(kT0 + std::chrono::seconds(10));
  EXPECT_FALSE(snapshot.class_dir_present);
  EXPECT_EQ(snapshot.list_error, ENOENT);
  EXPECT_EQ(snapshot.vanished, std::vector<std::string>{"mlx5_0"});

  SysfsTree empty;  // no RDMA driver at all
  SysfsCollector none = Make(&reader, empty);
  EXPECT_FALSE(none.Poll(kT0).class_dir_present);
}

TEST(SysfsCollectorTest, HostileFilesAreBounded) {
  SysfsTree tree;
  tree.AddMlx5Ib({});
  // A FIFO with no writer where a counter should be: a blocking open would hang the poller.
  const std::string fifo = tree.PortPath("mlx5_0", 1) + "/counters/symbol_error";
  std::filesystem::remove(fifo);
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  // A huge file: only the first page is read, and it does not parse.
  tree.SetCounter("mlx5_0", 1, "counters", "link_downed", std::string(1 << 20, '7'));
  // A directory where a file should be.
  tree.BreakFile("mlx5_0", 1, "counters/VL15_dropped");
  PosixFileReader reader;
  SysfsCollector collector = Make(&reader, tree);
  const auto start = std::chrono::steady_clock::now();
  const Snapshot snapshot = collector.Poll(kT0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  const PortReading* port = Reading(snapshot, "mlx5_0", 1);
  ASSERT_NE(port, nullptr);
  EXPECT_FALSE(Value(snapshot, "mlx5_0", 1, "counters/symbol_error"));
  EXPECT_FALSE(Value(snapshot, "mlx5_0", 1, "counters/link_downed"));
  EXPECT_EQ(port->unreadable.at("EISDIR"), 1u);
  EXPECT_EQ(port->unreadable.at("malformed"), 2u);  // empty FIFO and the oversized number
  EXPECT_EQ(Value(snapshot, "mlx5_0", 1, "counters/port_xmit_data"), 2880761508848u);
}

TEST(SysfsCollectorTest, PortAttributesThatFailAreRemembered) {
  // MANA: reading `rate` fails with EINVAL (node_exporter #3810); the port must still be read.
  SysfsTree tree;
  SysfsTree::Hca mana;
  mana.name = "mana_0";
  tree.AddMlx5Ib(mana);
  FaultReader reader;
  reader.Fail("mana_0/ports/1/rate", EINVAL);
  SysfsCollector collector = Make(&reader, tree);
  collector.Poll(kT0);
  const Snapshot second = collector.Poll(kT0 + std::chrono::seconds(10));
  const PortReading* port = Reading(second, "mana_0", 1);
  ASSERT_NE(port, nullptr);
  EXPECT_FALSE(port->rate);
  ASSERT_TRUE(port->state);
  EXPECT_EQ(reader.ReadsOf("mana_0/ports/1/rate"), 1u);
  EXPECT_EQ(Value(second, "mana_0", 1, "counters/port_xmit_data"), 2880761508848u);
}

TEST(SysfsCollectorTest, NewCounterFilesAppearAfterRediscovery) {
  SysfsTree tree;
  tree.AddMlx5Ib({});
  PosixFileReader reader;
  SysfsCollector collector = Make(&reader, tree);
  collector.Poll(kT0);
  // `rdma statistic set link mlx5_0/1 optional-counters cc_rx_ce_pkts` creates a file.
  tree.SetCounter("mlx5_0", 1, "hw_counters", "cc_rx_ce_pkts", 5);
  EXPECT_FALSE(Value(collector.Poll(kT0 + std::chrono::seconds(10)), "mlx5_0", 1,
                     "hw_counters/cc_rx_ce_pkts"));
  const Snapshot later =
      collector.Poll(kT0 + SysfsCollector::kRediscoverEvery + std::chrono::seconds(10));
  EXPECT_TRUE(later.rediscovered);
  EXPECT_EQ(Value(later, "mlx5_0", 1, "hw_counters/cc_rx_ce_pkts"), 5u);
}

}  // namespace
}  // namespace ncclscope::rdma::sysfs
