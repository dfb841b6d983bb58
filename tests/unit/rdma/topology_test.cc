// GPU <-> NIC affinity from a PCIe tree written like the host's: two sockets, PCIe switches with
// a GPU and a NIC each (the DGX layout), and a NIC straight on a root port.

#include <gtest/gtest.h>

#include "rdma/topology/pci_topology.h"
#include "tests/support/sysfs_tree.h"

namespace ncclscope::rdma::topology {
namespace {

using ncclscope::testing::SysfsTree;

// Socket 0: root complex pci0000:00 with a switch (upstream 0000:01:00.0, downstream ports
// 0000:02:00.0 and 0000:02:01.0) holding GPU 0000:03:00.0 and NIC mlx5_0 at 0000:04:00.0; a
// second switch on another root port with GPU 0000:13:00.0; a two-level switch with NIC mlx5_1.
// Socket 1: root complex pci0000:80 (NUMA 1) with NIC mlx5_2; a third root complex pci0000:40
// on NUMA 0 with NIC mlx5_3.
void BuildTree(SysfsTree& tree) {
  const std::string sw0 = "pci0000:00/0000:00:01.0/0000:01:00.0";
  tree.AddGpu(sw0 + "/0000:02:00.0", "0000:03:00.0", 0);
  SysfsTree::Hca nic0;
  nic0.name = "mlx5_0";
  nic0.pci_parent = sw0 + "/0000:02:01.0";
  nic0.pci_address = "0000:04:00.0";
  tree.AddMlx5Ib(nic0);
  tree.AddGpu("pci0000:00/0000:00:02.0/0000:11:00.0/0000:12:00.0", "0000:13:00.0", 0);
  SysfsTree::Hca nic1;
  nic1.name = "mlx5_1";
  nic1.pci_parent = sw0 + "/0000:02:02.0/0000:05:00.0/0000:06:00.0";
  nic1.pci_address = "0000:07:00.0";
  tree.AddMlx5Ib(nic1);
  SysfsTree::Hca nic2;
  nic2.name = "mlx5_2";
  nic2.pci_parent = "pci0000:80/0000:80:01.0";
  nic2.pci_address = "0000:81:00.0";
  nic2.numa_node = 1;
  tree.AddMlx5Ib(nic2);
  SysfsTree::Hca nic3;
  nic3.name = "mlx5_3";
  nic3.pci_parent = "pci0000:40/0000:40:01.0";
  nic3.pci_address = "0000:41:00.0";
  tree.AddMlx5Ib(nic3);
}

PciNode Nic(const SysfsTree& tree, const std::string& name) {
  PciNode node;
  EXPECT_TRUE(ResolvePci(tree.root() + "/class/infiniband/" + name + "/device", &node)) << name;
  return node;
}

TEST(TopologyTest, FindsGpusAndResolvesNics) {
  SysfsTree tree;
  BuildTree(tree);
  const std::vector<PciNode> gpus = FindGpus(tree.root());
  ASSERT_EQ(gpus.size(), 2u);  // the NICs (vendor 0x15b3) are not GPUs
  EXPECT_EQ(gpus[0].address, "0000:03:00.0");
  EXPECT_EQ(gpus[0].path, (std::vector<std::string>{"pci0000:00", "0000:00:01.0", "0000:01:00.0",
                                                    "0000:02:00.0", "0000:03:00.0"}));
  EXPECT_EQ(gpus[0].numa_node, 0);
  const PciNode nic = Nic(tree, "mlx5_0");
  EXPECT_EQ(nic.address, "0000:04:00.0");
  EXPECT_EQ(Nic(tree, "mlx5_2").numa_node, 1);
}

TEST(TopologyTest, RelationsAsNvidiaSmiTopo) {
  SysfsTree tree;
  BuildTree(tree);
  const std::vector<PciNode> gpus = FindGpus(tree.root());
  ASSERT_EQ(gpus.size(), 2u);
  const PciNode& gpu0 = gpus[0];
  const PciNode& gpu1 = gpus[1];

  Affinity same_switch = Relate(gpu0, Nic(tree, "mlx5_0"));
  EXPECT_EQ(same_switch.relation, "PIX");
  EXPECT_EQ(same_switch.distance, 4);  // GPU-down-up-down-NIC
  Affinity deeper = Relate(gpu0, Nic(tree, "mlx5_1"));
  EXPECT_EQ(deeper.relation, "PXB");
  Affinity across_root_ports = Relate(gpu1, Nic(tree, "mlx5_0"));
  EXPECT_EQ(across_root_ports.relation, "PHB");
  EXPECT_EQ(Relate(gpu0, Nic(tree, "mlx5_3")).relation, "NODE");
  EXPECT_EQ(Relate(gpu0, Nic(tree, "mlx5_2")).relation, "SYS");
  EXPECT_GT(Relate(gpu0, Nic(tree, "mlx5_2")).distance, deeper.distance);
}

TEST(TopologyTest, NonPciAndMissingPathsAreRejected) {
  SysfsTree tree;
  PciNode node;
  EXPECT_FALSE(ResolvePci(tree.root() + "/class/infiniband/none/device", &node));
  EXPECT_FALSE(ResolvePci(tree.root(), &node));
  EXPECT_TRUE(FindGpus(tree.root() + "/nonexistent").empty());
}

}  // namespace
}  // namespace ncclscope::rdma::topology
