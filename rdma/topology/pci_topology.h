#pragma once

// GPU <-> NIC affinity from the PCIe tree in sysfs, in the vocabulary of `nvidia-smi topo -m` and
// NCCL's topology (NCCL picks, for each GPU, the NIC with the shortest path):
//   PIX  both behind the same PCIe switch (at most one switch between them)
//   PXB  behind the same root port through several switches
//   PHB  under the same PCIe host bridge (root complex), through the CPU's root ports
//   NODE different host bridges on the same NUMA node
//   SYS  different NUMA nodes (through the inter-socket link)
// The tree is read from the resolved paths of the device links, e.g.
//   <root>/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:05:00.0
// Only symlinks and the PCI class/vendor/numa_node attributes are read: nothing reaches an HCA's
// firmware, and excluded RDMA devices are never looked at (callers pass included ones only).

#include <string>
#include <vector>

namespace ncclscope::rdma::topology {

struct PciNode {
  std::string address;            // "0000:05:00.0"
  std::vector<std::string> path;  // host bridge ("pci0000:00") then each bridge, then address
  int numa_node = -1;
};

// Resolves a sysfs device link (e.g. <root>/class/infiniband/mlx5_0/device or
// <root>/bus/pci/devices/0000:05:00.0) into its place in the PCIe tree. False if it is not a PCI
// device path.
bool ResolvePci(const std::string& link, PciNode* out);

// NVIDIA GPUs (vendor 0x10de, display or 3D controller class) under <root>/bus/pci/devices.
std::vector<PciNode> FindGpus(const std::string& sysfs_root);

struct Affinity {
  std::string relation;  // PIX, PXB, PHB, NODE, SYS
  int distance = 0;      // hops between the two devices in the tree (through the CPU if apart)
};
Affinity Relate(const PciNode& a, const PciNode& b);

}  // namespace ncclscope::rdma::topology
