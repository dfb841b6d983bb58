#pragma once

// What discovery found under <sysfs_root>/class/infiniband: devices, their ports and the counter
// files each port has. Read once per discovery (not per poll): these are directory listings and
// static attributes, so a poll only opens the files it needs.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ncclscope::rdma::sysfs {

// The three counter directories of a port.
enum class CounterGroup : std::uint8_t {
  kCounters,     // ports/N/counters: IBA PortCounters(+Extended), one PMA MAD per read
  kCountersExt,  // ports/N/counters_ext: pre-4.5 kernels' 64-bit data counters
  kHwCounters,   // ports/N/hw_counters: driver counters (mlx5 Q, congestion)
};
std::string_view GroupDir(CounterGroup group);

struct CounterFile {
  CounterGroup group = CounterGroup::kCounters;
  std::string name;  // file name, e.g. "port_xmit_data"
  std::string path;  // full path
  std::string key;   // "counters/port_xmit_data": unique within the port
};

struct PortLayout {
  std::uint32_t number = 0;
  std::string path;        // <root>/class/infiniband/<dev>/ports/<n>
  std::string link_layer;  // "InfiniBand", "Ethernet", "Unknown"; empty if unreadable
  std::string netdev;      // RoCE/IPoIB interface, empty if none found
  std::vector<CounterFile> files;
};

struct DeviceLayout {
  std::string name;
  std::string path;         // <root>/class/infiniband/<dev>
  std::string pci_address;  // "0000:05:00.0", empty if the device link is missing
  std::string board_id, firmware_version, hca_type, node_guid;
  int numa_node = -1;
  std::vector<PortLayout> ports;
};

}  // namespace ncclscope::rdma::sysfs
