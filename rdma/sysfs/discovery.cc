#include "rdma/sysfs/discovery.h"

#include <algorithm>
#include <cerrno>
#include <charconv>

#include "rdma/sysfs/attributes.h"

namespace ncclscope::rdma::sysfs {
namespace {

// Limits on what one device may contribute: a broken tree must not make the agent allocate or
// read without bound.
constexpr std::size_t kMaxPortsPerDevice = 64;
constexpr std::size_t kMaxFilesPerGroup = 512;

std::string ReadText(FileReader& reader, const std::string& path) {
  std::string text;
  if (reader.Read(path, &text) != 0) return "";
  return std::string(Trim(text));
}

std::string Basename(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool ParsePortNumber(const std::string& name, std::uint32_t* out) {
  auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), *out);
  return ec == std::errc() && ptr == name.data() + name.size();
}

void ListGroup(FileReader& reader, const std::string& port_path, CounterGroup group,
               std::vector<CounterFile>* files) {
  const std::string dir = port_path + "/" + std::string(GroupDir(group));
  std::vector<std::string> names;
  if (reader.List(dir, &names) != 0) return;  // absent groups are normal (no hw_counters on mlx4)
  if (names.size() > kMaxFilesPerGroup) names.resize(kMaxFilesPerGroup);
  for (std::string& name : names) {
    CounterFile file;
    file.group = group;
    file.path = dir;
    file.path += '/';
    file.path += name;
    file.key = GroupDir(group);
    file.key += '/';
    file.key += name;
    file.name = std::move(name);
    files->push_back(std::move(file));
  }
}

// The network interface of a port: for RoCE the GID table's netdev (works for bonds too), else
// the PCI function's netdev whose dev_port matches the port (IPoIB, multi-port functions).
std::string FindNetdev(FileReader& reader, const DeviceLayout& device, const PortLayout& port) {
  if (port.link_layer == "Ethernet") {
    std::string ndev = ReadText(reader, port.path + "/gid_attrs/ndevs/0");
    if (!ndev.empty()) return ndev;
  }
  std::vector<std::string> netdevs;
  if (reader.List(device.path + "/device/net", &netdevs) != 0 || netdevs.empty()) return "";
  if (netdevs.size() == 1) return netdevs.front();
  for (const std::string& netdev : netdevs) {
    const std::string dev_port =
        ReadText(reader, device.path + "/device/net/" + netdev + "/dev_port");
    std::uint32_t index = 0;
    if (ParsePortNumber(dev_port, &index) && index + 1 == port.number) return netdev;
  }
  return "";
}

}  // namespace

std::string_view GroupDir(CounterGroup group) {
  switch (group) {
    case CounterGroup::kCounters:
      return "counters";
    case CounterGroup::kCountersExt:
      return "counters_ext";
    case CounterGroup::kHwCounters:
      return "hw_counters";
  }
  return "counters";
}

std::string ClassDir(const std::string& root) {
  return (root == "/" ? std::string() : root) + "/class/infiniband";
}

int ListDeviceNames(FileReader& reader, const std::string& root, std::vector<std::string>* names) {
  return reader.List(ClassDir(root), names);
}

Discovery Discover(FileReader& reader, const DeviceFilter& filter,
                   const DiscoveryOptions& options) {
  Discovery result;
  std::vector<std::string> names;
  result.list_error = ListDeviceNames(reader, options.root, &names);
  result.class_dir_present = result.list_error == 0;
  if (!result.class_dir_present) return result;

  for (const std::string& name : names) {
    if (!filter.AcceptsName(name)) {
      result.excluded.push_back(name);
      continue;
    }
    DeviceLayout device;
    device.name = name;
    device.path = ClassDir(options.root) + "/" + name;
    // The device symlink is resolved without reading any attribute, so the PCI filter also runs
    // before the device's files are touched.
    std::string target;
    if (reader.ReadLink(device.path + "/device", &target) == 0) {
      device.pci_address = Basename(target);
    }
    if (filter.HasPciFilter() && !device.pci_address.empty() &&
        !filter.AcceptsPci(device.pci_address)) {
      result.excluded.push_back(name);
      continue;
    }
    if (!reader.Exists(device.path)) {
      result.vanished.push_back(name);
      continue;
    }
    device.firmware_version = ReadText(reader, device.path + "/fw_ver");
    device.board_id = ReadText(reader, device.path + "/board_id");
    device.hca_type = ReadText(reader, device.path + "/hca_type");
    device.node_guid = ReadText(reader, device.path + "/node_guid");
    const std::string numa = ReadText(reader, device.path + "/device/numa_node");
    if (!numa.empty()) {
      int node = -1;
      auto [ptr, ec] = std::from_chars(numa.data(), numa.data() + numa.size(), node);
      if (ec == std::errc() && ptr == numa.data() + numa.size()) device.numa_node = node;
    }

    std::vector<std::string> port_names;
    if (reader.List(device.path + "/ports", &port_names) != 0) {
      if (!reader.Exists(device.path)) {
        result.vanished.push_back(name);
        continue;
      }
    }
    for (const std::string& port_name : port_names) {
      PortLayout port;
      if (!ParsePortNumber(port_name, &port.number)) continue;
      if (device.ports.size() >= kMaxPortsPerDevice) break;
      port.path = device.path + "/ports/" + port_name;
      port.link_layer = ReadText(reader, port.path + "/link_layer");
      port.netdev = FindNetdev(reader, device, port);
      ListGroup(reader, port.path, CounterGroup::kCounters, &port.files);
      ListGroup(reader, port.path, CounterGroup::kCountersExt, &port.files);
      if (options.hw_counters) ListGroup(reader, port.path, CounterGroup::kHwCounters, &port.files);
      device.ports.push_back(std::move(port));
    }
    std::sort(device.ports.begin(), device.ports.end(),
              [](const PortLayout& a, const PortLayout& b) { return a.number < b.number; });
    result.devices.push_back(std::move(device));
  }
  return result;
}

}  // namespace ncclscope::rdma::sysfs
