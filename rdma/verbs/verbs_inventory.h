#pragma once

// RDMA devices and ports as libibverbs (the library NCCL uses) sees them: state, physical state,
// width, speed and link layer from ibv_query_port(). Sysfs stays the primary source (it has the
// counters; verbs has none, fabric.md 1.4); verbs fills port attributes that sysfs could not read
// (e.g. `rate` failing with EINVAL on some drivers) and tells whether the userspace provider path
// works at all. On a host without HCAs, or without /dev/infiniband in the container, it finds
// nothing and the sysfs path carries on alone.

#include <cstdint>
#include <string>
#include <vector>

namespace ncclscope::rdma::verbs {

// The raw ibv_port_attr fields we use (codes as in <infiniband/verbs.h>).
struct PortAttr {
  std::uint32_t port = 0;
  int state = 0;                   // enum ibv_port_state: 4 = ACTIVE
  int phys_state = 0;              // 5 = LinkUp
  std::uint8_t active_width = 0;   // 1 1X, 2 4X, 4 8X, 8 12X, 16 2X
  std::uint32_t active_speed = 0;  // 1 SDR ... 128 NDR, 256 XDR
  std::uint8_t link_layer = 0;     // 0 unspecified, 1 InfiniBand, 2 Ethernet
};

struct DeviceAttr {
  std::string name;
  std::vector<PortAttr> ports;
};

// The seam to libibverbs; tests supply canned devices.
class VerbsApi {
 public:
  virtual ~VerbsApi() = default;
  // Lists devices that could be opened, with their ports. Returns 0 or errno (e.g. ENOSYS when
  // the kernel has no RDMA support).
  virtual int ListDevices(std::vector<DeviceAttr>* devices) = 0;
};

// The real library: ibv_get_device_list, ibv_open_device, ibv_query_device, ibv_query_port.
class LibibverbsApi : public VerbsApi {
 public:
  int ListDevices(std::vector<DeviceAttr>* devices) override;
};

// Decoded port attributes, in the same vocabulary as sysfs (`rate` "400 Gb/sec (4X NDR)").
struct Port {
  int state = 0;
  int phys_state = 0;
  std::string width;  // "4X"
  std::string speed;  // "NDR"
  double gbps = 0;    // lanes x lane speed
  std::string link_layer;
};
Port Decode(const PortAttr& attr);

class VerbsInventory {
 public:
  void Refresh(VerbsApi& api);
  // Ports of `device`, or null when verbs does not know it.
  const Port* Find(const std::string& device, std::uint32_t port) const;
  std::size_t device_count() const { return devices_.size(); }
  int error() const { return error_; }

 private:
  struct Entry {
    std::string device;
    std::uint32_t port;
    Port attr;
  };
  std::vector<Entry> ports_;
  std::vector<std::string> devices_;
  int error_ = 0;
};

}  // namespace ncclscope::rdma::verbs
