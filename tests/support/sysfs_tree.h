#pragma once

// A fake sysfs tree with the shape of the real one, written by tests: RDMA devices under
// class/infiniband (symlinks into devices/pci..., a `device` link to the PCI function), their
// ports and counter directories, netdevs, and GPUs under bus/pci/devices, so the fabric sources
// run their real file-reading code against it (rdma.sysfs_root). Everything lives in a TempDir.
//
// Shape (as on a host):
//   devices/pci0000:00/0000:00:01.0/0000:05:00.0/{vendor,class,numa_node,net/ib0/dev_port}
//   devices/pci0000:00/0000:00:01.0/0000:05:00.0/infiniband/mlx5_0/{fw_ver,...,device->,ports/1/...}
//   class/infiniband/mlx5_0 -> ../../devices/pci0000:00/0000:00:01.0/0000:05:00.0/infiniband/mlx5_0
//   bus/pci/devices/0000:05:00.0 -> ../../../devices/pci0000:00/0000:00:01.0/0000:05:00.0

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/temp_dir.h"

namespace ncclscope::testing {

class SysfsTree {
 public:
  struct Hca {
    std::string name = "mlx5_0";
    // PCI position: host bridge and bridges above the function, then the function itself.
    std::string pci_parent = "pci0000:00/0000:00:01.0";
    std::string pci_address = "0000:05:00.0";
    int numa_node = 0;
    std::string board_id = "MT_0000000838";
    std::string fw_ver = "28.39.1002";
    std::string hca_type = "MT4129";
    std::string node_guid = "a088:c203:0012:3456";
  };
  struct Port {
    std::uint32_t number = 1;
    std::string state = "4: ACTIVE";
    std::string phys_state = "5: LinkUp";
    std::string rate = "400 Gb/sec (4X NDR)";
    std::string link_layer = "InfiniBand";
  };
  using Counters = std::vector<std::pair<std::string, std::string>>;  // file -> text

  SysfsTree() = default;
  const std::string& root() const { return dir_.path(); }

  void AddDevice(const Hca& hca);
  void AddPort(const std::string& device, const Port& port);
  // Writes (or rewrites, in place) files of a port's group ("counters", "hw_counters",
  // "counters_ext").
  void SetCounters(const std::string& device, std::uint32_t port, const std::string& group,
                   const Counters& counters);
  void SetCounter(const std::string& device, std::uint32_t port, const std::string& group,
                  const std::string& name, const std::string& text);
  void SetCounter(const std::string& device, std::uint32_t port, const std::string& group,
                  const std::string& name, std::uint64_t value) {
    SetCounter(device, port, group, name, std::to_string(value));
  }
  // Rewrites a port attribute file (state, phys_state, rate, link_layer).
  void SetPortAttribute(const std::string& device, std::uint32_t port, const std::string& name,
                        const std::string& text);
  // A netdev of the device's PCI function (dev_port = port number - 1), and for RoCE the GID
  // table's netdev.
  void AddNetdev(const std::string& device, std::uint32_t port, const std::string& ifname);
  // Removes the device (its directory and class link), as when a NIC falls off the bus.
  void RemoveDevice(const std::string& device);
  // Replaces a file by a directory: read() then fails with EISDIR, the closest a plain tree gets
  // to a sysfs attribute whose read fails.
  void BreakFile(const std::string& device, std::uint32_t port, const std::string& relative);

  // An NVIDIA GPU (vendor 0x10de, 3D controller) at `pci_parent`/`pci_address`.
  void AddGpu(const std::string& pci_parent, const std::string& pci_address, int numa_node);

  std::string DevicePath(const std::string& device) const;
  std::string PortPath(const std::string& device, std::uint32_t port) const;

  // The counter files of an mlx5 IB port (PortCounters + Extended), with plausible values.
  static Counters Mlx5PmaCounters();
  // mlx5 hw_counters of a RoCE port: Q counters, congestion counters, lifespan.
  static Counters Mlx5HwCounters();

  // Convenience: an mlx5 InfiniBand HCA with `ports` NDR ports and PMA counters.
  void AddMlx5Ib(const Hca& hca, std::uint32_t ports = 1);
  // Convenience: an mlx5 RoCE (Ethernet link layer) port with hw_counters and netdev `ifname`.
  void AddMlx5Roce(const Hca& hca, const std::string& ifname);
  // A device without PMA (an iWARP NIC, say) with one 10 Gb/sec port: its port_xmit_data reads
  // "N/A (no PMA)".
  void AddNoPmaPort(const Hca& hca);

  // The node the fabric tests start from. Socket 0: a PCIe switch (kSwitch) holding GPU
  // 0000:03:00.0 and mlx5_0 at 0000:04:00.0 with two NDR InfiniBand ports; socket 1: mlx5_2
  // (StandardRoce()), a RoCE port with hw_counters and netdev eth2.
  static constexpr const char* kSwitch = "pci0000:00/0000:00:01.0/0000:01:00.0";
  void AddStandardNode();
  // mlx5_2 of the standard node: at 0000:81:00.0 under root complex pci0000:80, NUMA node 1.
  static Hca StandardRoce();

 private:
  std::string Write(const std::string& relative, const std::string& content) const;
  void Symlink(const std::string& target, const std::string& link_relative) const;

  TempDir dir_;
  std::map<std::string, std::string> device_dirs_;  // name -> path relative to root
};

}  // namespace ncclscope::testing
