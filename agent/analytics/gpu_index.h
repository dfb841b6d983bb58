#pragma once

// The `gpu` label dcgm-exporter puts on a GPU: its index in NVML's enumeration, which orders the
// GPUs by PCI address (what nvidia-smi shows). Without NVML, the same order is the sorted list of
// PCI functions bound to the nvidia driver in sysfs (<sysfs>/bus/pci/drivers/nvidia/). The plugin
// gives each rank's PCI bus id (from the CUDA driver); this maps it to that index. Re-read at most
// every 60 s, and only on a miss.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace ncclscope::analytics {

// (domain, bus, device, function) from "0000:3b:00.0" or NVML's "00000000:3B:00.0".
std::optional<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t, std::uint32_t>>
ParsePciAddress(const std::string& text);

// The same address as dcgm-exporter's `pci_bus_id` label spells it, which is NVML's busId:
// an 8-digit domain and upper-case hex ("00000000:3B:00.0"). The CUDA driver gives
// "0000:3b:00.0"; a join on pci_bus_id with DCGM's series needs this form. Text that is not a PCI
// address is returned unchanged.
std::string DcgmPciBusId(const std::string& text);

class GpuIndex {
 public:
  explicit GpuIndex(std::string sysfs_root) : sysfs_root_(std::move(sysfs_root)) {}
  void SetRoot(const std::string& sysfs_root);

  // The NVML-order index of the GPU at `pci_bus_id`, or nullopt when unknown.
  std::optional<int> Lookup(const std::string& pci_bus_id);

 private:
  void Refresh();
  std::string sysfs_root_;
  std::vector<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t, std::uint32_t>> gpus_;
  std::chrono::steady_clock::time_point last_read_{};
  bool read_ = false;
};

}  // namespace ncclscope::analytics
