#include "rdma/verbs/verbs_inventory.h"

#include <infiniband/verbs.h>

#include <cerrno>
#include <cstring>

namespace ncclscope::rdma::verbs {
namespace {

// Width code -> (label, lanes).
struct WidthCode {
  std::uint8_t code;
  const char* label;
  int lanes;
};
constexpr WidthCode kWidths[] = {
    {1, "1X", 1}, {2, "4X", 4}, {4, "8X", 8}, {8, "12X", 12}, {16, "2X", 2}};

// Speed code -> (label, Gb/s per lane as the kernel prints rates).
struct SpeedCode {
  std::uint32_t code;
  const char* label;
  double lane_gbps;
};
constexpr SpeedCode kSpeeds[] = {{1, "SDR", 2.5},  {2, "DDR", 5},     {4, "QDR", 10},
                                 {8, "FDR10", 10}, {16, "FDR", 14},   {32, "EDR", 25},
                                 {64, "HDR", 50},  {128, "NDR", 100}, {256, "XDR", 200}};

}  // namespace

int LibibverbsApi::ListDevices(std::vector<DeviceAttr>* devices) {
  devices->clear();
  int count = 0;
  errno = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (list == nullptr) return errno != 0 ? errno : ENOSYS;
  for (int i = 0; i < count; ++i) {
    ibv_context* context = ibv_open_device(list[i]);
    if (context == nullptr) continue;  // no uverbs node in this container, or no provider
    DeviceAttr device;
    device.name = ibv_get_device_name(list[i]);
    ibv_device_attr device_attr{};
    if (ibv_query_device(context, &device_attr) == 0) {
      for (std::uint32_t port = 1; port <= device_attr.phys_port_cnt; ++port) {
        ibv_port_attr attr{};  // zeroed, as the verbs.h ibv_query_port macro expects
        if (ibv_query_port(context, static_cast<std::uint8_t>(port), &attr) != 0) continue;
        PortAttr out;
        out.port = port;
        out.state = attr.state;
        out.phys_state = attr.phys_state;
        out.active_width = attr.active_width;
        out.active_speed = attr.active_speed;
        out.link_layer = attr.link_layer;
        device.ports.push_back(out);
      }
    }
    ibv_close_device(context);
    devices->push_back(std::move(device));
  }
  ibv_free_device_list(list);
  return 0;
}

Port Decode(const PortAttr& attr) {
  Port port;
  port.state = attr.state;
  port.phys_state = attr.phys_state;
  int lanes = 0;
  for (const WidthCode& width : kWidths) {
    if (width.code == attr.active_width) {
      port.width = width.label;
      lanes = width.lanes;
    }
  }
  for (const SpeedCode& speed : kSpeeds) {
    if (speed.code == attr.active_speed) {
      port.speed = speed.label;
      port.gbps = lanes * speed.lane_gbps;
    }
  }
  switch (attr.link_layer) {
    case 1:
      port.link_layer = "InfiniBand";
      break;
    case 2:
      port.link_layer = "Ethernet";
      break;
    default:
      port.link_layer = "Unknown";
      break;
  }
  return port;
}

void VerbsInventory::Refresh(VerbsApi& api) {
  std::vector<DeviceAttr> devices;
  error_ = api.ListDevices(&devices);
  ports_.clear();
  devices_.clear();
  for (const DeviceAttr& device : devices) {
    devices_.push_back(device.name);
    for (const PortAttr& attr : device.ports)
      ports_.push_back({device.name, attr.port, Decode(attr)});
  }
}

const Port* VerbsInventory::Find(const std::string& device, std::uint32_t port) const {
  for (const Entry& entry : ports_) {
    if (entry.device == device && entry.port == port) return &entry.attr;
  }
  return nullptr;
}

}  // namespace ncclscope::rdma::verbs
