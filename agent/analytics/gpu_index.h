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
