#include "tests/support/sysfs_tree.h"

#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace ncclscope::testing {
namespace fs = std::filesystem;

std::string SysfsTree::Write(const std::string& relative, const std::string& content) const {
  // In place, keeping the inode, as a sysfs attribute changes its value: the agent keeps counter
  // files open and preads them, so a replaced file (rename) would never be seen.
  const fs::path full = fs::path(root()) / relative;
  fs::create_directories(full.parent_path());
  std::ofstream out(full, std::ios::binary | std::ios::trunc);
  out << content;
  return full.string();
}

void SysfsTree::Symlink(const std::string& target, const std::string& link_relative) const {
  const fs::path link = fs::path(root()) / link_relative;
  fs::create_directories(link.parent_path());
  std::error_code ec;
  fs::remove(link, ec);
  fs::create_symlink(target, link);
}

std::string SysfsTree::DevicePath(const std::string& device) const {
  auto it = device_dirs_.find(device);
  if (it == device_dirs_.end()) throw std::runtime_error("no device " + device);
  return root() + "/" + it->second;
}

std::string SysfsTree::PortPath(const std::string& device, std::uint32_t port) const {
  return DevicePath(device) + "/ports/" + std::to_string(port);
}

void SysfsTree::AddDevice(const Hca& hca) {
  const std::string function_dir = "devices/" + hca.pci_parent + "/" + hca.pci_address;
  const std::string device_dir = function_dir + "/infiniband/" + hca.name;
  Write(function_dir + "/vendor", "0x15b3\n");
  Write(function_dir + "/class", "0x020700\n");
  Write(function_dir + "/numa_node", std::to_string(hca.numa_node) + "\n");
  Write(device_dir + "/fw_ver", hca.fw_ver + "\n");
  Write(device_dir + "/board_id", hca.board_id + "\n");
  Write(device_dir + "/hca_type", hca.hca_type + "\n");
  Write(device_dir + "/node_guid", hca.node_guid + "\n");
  Symlink("../../../" + hca.pci_address, device_dir + "/device");
  Symlink("../../" + device_dir, "class/infiniband/" + hca.name);
  int depth = 3;  // "bus/pci/devices" -> root
  std::string up;
  for (int i = 0; i < depth; ++i) up += "../";
  Symlink(up + function_dir, "bus/pci/devices/" + hca.pci_address);
  device_dirs_[hca.name] = device_dir;
}

void SysfsTree::AddPort(const std::string& device, const Port& port) {
  const std::string base = fs::relative(PortPath(device, port.number), root()).string();
  Write(base + "/state", port.state + "\n");
  Write(base + "/phys_state", port.phys_state + "\n");
  Write(base + "/rate", port.rate + "\n");
  Write(base + "/link_layer", port.link_layer + "\n");
  Write(base + "/lid", port.link_layer == "Ethernet" ? "0x0\n" : "0x1a\n");
}

void SysfsTree::SetCounters(const std::string& device, std::uint32_t port, const std::string& group,
                            const Counters& counters) {
  for (const auto& [name, text] : counters) SetCounter(device, port, group, name, text);
}

void SysfsTree::SetCounter(const std::string& device, std::uint32_t port, const std::string& group,
                           const std::string& name, const std::string& text) {
  const std::string base = fs::relative(PortPath(device, port), root()).string();
  Write(base + "/" + group + "/" + name, text + "\n");
}

void SysfsTree::SetPortAttribute(const std::string& device, std::uint32_t port,
                                 const std::string& name, const std::string& text) {
  const std::string base = fs::relative(PortPath(device, port), root()).string();
  Write(base + "/" + name, text + "\n");
}

void SysfsTree::AddNetdev(const std::string& device, std::uint32_t port,
                          const std::string& ifname) {
  const std::string device_dir = fs::relative(DevicePath(device), root()).string();
  const std::string function_dir = fs::path(device_dir).parent_path().parent_path().string();
  Write(function_dir + "/net/" + ifname + "/dev_port", std::to_string(port - 1) + "\n");
  Write(device_dir + "/ports/" + std::to_string(port) + "/gid_attrs/ndevs/0", ifname + "\n");
}

void SysfsTree::RemoveDevice(const std::string& device) {
  const std::string path = DevicePath(device);
  std::error_code ec;
  fs::remove(fs::path(root()) / "class/infiniband" / device, ec);
  fs::remove_all(path, ec);
}

void SysfsTree::BreakFile(const std::string& device, std::uint32_t port,
                          const std::string& relative) {
  const fs::path path = fs::path(PortPath(device, port)) / relative;
  std::error_code ec;
  fs::remove(path, ec);
  fs::create_directories(path);
}

void SysfsTree::AddGpu(const std::string& pci_parent, const std::string& pci_address,
                       int numa_node) {
  const std::string function_dir = "devices/" + pci_parent + "/" + pci_address;
  Write(function_dir + "/vendor", "0x10de\n");
  Write(function_dir + "/class", "0x030200\n");
  Write(function_dir + "/numa_node", std::to_string(numa_node) + "\n");
  Symlink("../../../" + function_dir, "bus/pci/devices/" + pci_address);
}

SysfsTree::Counters SysfsTree::Mlx5PmaCounters() {
  return {
      {"VL15_dropped", "0"},
      {"excessive_buffer_overrun_errors", "0"},
      {"link_downed", "0"},
      {"link_error_recovery", "0"},
      {"local_link_integrity_errors", "0"},
      {"multicast_rcv_packets", "0"},
      {"multicast_xmit_packets", "0"},
      {"port_rcv_constraint_errors", "0"},
      {"port_rcv_data", "18126345378"},
      {"port_rcv_errors", "0"},
      {"port_rcv_packets", "541889824"},
      {"port_rcv_remote_physical_errors", "0"},
      {"port_rcv_switch_relay_errors", "0"},
      {"port_xmit_constraint_errors", "0"},
      {"port_xmit_data", "2880761508848"},
      {"port_xmit_discards", "0"},
      {"port_xmit_packets", "10907922116"},
      {"port_xmit_wait", "0"},
      {"symbol_error", "0"},
      {"unicast_rcv_packets", "541889824"},
      {"unicast_xmit_packets", "10907922116"},
  };
}

SysfsTree::Counters SysfsTree::Mlx5HwCounters() {
  return {
      {"duplicate_request", "41"},
      {"implied_nak_seq_err", "0"},
      {"lifespan", "10"},
      {"local_ack_timeout_err", "131"},
      {"np_cnp_sent", "7"},
      {"np_ecn_marked_roce_packets", "7"},
      {"out_of_buffer", "0"},
      {"out_of_sequence", "1"},
      {"packet_seq_err", "1"},
      {"req_cqe_error", "3481"},
      {"req_cqe_flush_error", "80"},
      {"req_remote_access_errors", "0"},
      {"req_remote_invalid_request", "0"},
      {"req_rnr_retries_exceeded", "0"},
      {"req_transport_retries_exceeded", "0"},
      {"resp_cqe_error", "8109"},
      {"resp_cqe_flush_error", "4708"},
      {"resp_local_length_error", "0"},
      {"resp_remote_access_errors", "0"},
      {"rnr_nak_retry_err", "0"},
      {"roce_adp_retrans", "99"},
      {"roce_adp_retrans_to", "4"},
      {"roce_slow_restart", "0"},
      {"roce_slow_restart_cnps", "131"},
      {"roce_slow_restart_trans", "0"},
      {"rp_cnp_handled", "12"},
      {"rp_cnp_ignored", "0"},
      {"rx_atomic_requests", "0"},
      {"rx_dct_connect", "0"},
      {"rx_icrc_encapsulated", "0"},
      {"rx_read_requests", "175528982"},
      {"rx_write_requests", "742114"},
  };
}

void SysfsTree::AddMlx5Ib(const Hca& hca, std::uint32_t ports) {
  AddDevice(hca);
  for (std::uint32_t n = 1; n <= ports; ++n) {
    Port port;
    port.number = n;
    AddPort(hca.name, port);
    SetCounters(hca.name, n, "counters", Mlx5PmaCounters());
  }
}

void SysfsTree::AddMlx5Roce(const Hca& hca, const std::string& ifname) {
  AddDevice(hca);
  Port port;
  port.rate = "200 Gb/sec (4X HDR)";
  port.link_layer = "Ethernet";
  AddPort(hca.name, port);
  SetCounters(hca.name, 1, "counters", Mlx5PmaCounters());
  SetCounters(hca.name, 1, "hw_counters", Mlx5HwCounters());
  AddNetdev(hca.name, 1, ifname);
}

void SysfsTree::AddNoPmaPort(const Hca& hca) {
  AddDevice(hca);
  Port port;
  port.rate = "10 Gb/sec (4X)";
  AddPort(hca.name, port);
  SetCounter(hca.name, 1, "counters", "port_xmit_data", "N/A (no PMA)");
}

void SysfsTree::AddStandardNode() {
  const std::string sw = kSwitch;
  AddGpu(sw + "/0000:02:00.0", "0000:03:00.0", 0);
  Hca ib;
  ib.pci_parent = sw + "/0000:02:01.0";
  ib.pci_address = "0000:04:00.0";
  AddMlx5Ib(ib, 2);
  AddMlx5Roce(StandardRoce(), "eth2");
}

SysfsTree::Hca SysfsTree::StandardRoce() {
  Hca roce;
  roce.name = "mlx5_2";
  roce.pci_parent = "pci0000:80/0000:80:01.0";
  roce.pci_address = "0000:81:00.0";
  roce.numa_node = 1;
  return roce;
}

}  // namespace ncclscope::testing
