#include "agent/analytics/gpu_index.h"

#include <dirent.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>

namespace ncclscope::analytics {
namespace {

bool HexField(const std::string& text, std::size_t begin, std::size_t end, std::uint32_t* out) {
  if (begin >= end || end - begin > 8) return false;
  std::uint32_t value = 0;
  for (std::size_t i = begin; i < end; ++i) {
    const char c = text[i];
    std::uint32_t digit = 0;
    if (c >= '0' && c <= '9') {
      digit = static_cast<std::uint32_t>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      digit = static_cast<std::uint32_t>(c - 'a' + 10);
    } else if (c >= 'A' && c <= 'F') {
      digit = static_cast<std::uint32_t>(c - 'A' + 10);
    } else {
      return false;
    }
    value = value * 16 + digit;
  }
  *out = value;
  return true;
}

}  // namespace

std::optional<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t, std::uint32_t>>
ParsePciAddress(const std::string& text) {
  // DOMAIN:BUS:DEVICE.FUNCTION
  const std::size_t c1 = text.find(':');
  const std::size_t c2 = c1 == std::string::npos ? c1 : text.find(':', c1 + 1);
  const std::size_t dot = c2 == std::string::npos ? c2 : text.find('.', c2 + 1);
  if (dot == std::string::npos) return std::nullopt;
  std::uint32_t domain = 0;
  std::uint32_t bus = 0;
  std::uint32_t device = 0;
  std::uint32_t function = 0;
  if (!HexField(text, 0, c1, &domain) || !HexField(text, c1 + 1, c2, &bus) ||
      !HexField(text, c2 + 1, dot, &device) || !HexField(text, dot + 1, text.size(), &function)) {
    return std::nullopt;
  }
  return std::make_tuple(domain, bus, device, function);
}

std::string DcgmPciBusId(const std::string& text) {
  const auto address = ParsePciAddress(text);
  if (!address) return text;
  const auto [domain, bus, device, function] = *address;
  std::array<char, 32> out{};
  std::snprintf(out.data(), out.size(), "%08X:%02X:%02X.%X", domain, bus, device, function);
  return out.data();
}

void GpuIndex::SetRoot(const std::string& sysfs_root) {
  if (sysfs_root == sysfs_root_) return;
  sysfs_root_ = sysfs_root;
  read_ = false;
}

void GpuIndex::Refresh() {
  gpus_.clear();
  const std::string dir = sysfs_root_ + "/bus/pci/drivers/nvidia";
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* entry = ::readdir(d)) {
      if (auto address = ParsePciAddress(entry->d_name)) gpus_.push_back(*address);
    }
    ::closedir(d);
  }
  std::sort(gpus_.begin(), gpus_.end());
  last_read_ = std::chrono::steady_clock::now();
  read_ = true;
}

std::optional<int> GpuIndex::Lookup(const std::string& pci_bus_id) {
  const auto address = ParsePciAddress(pci_bus_id);
  if (!address) return std::nullopt;
  auto find = [&]() -> std::optional<int> {
    auto it = std::lower_bound(gpus_.begin(), gpus_.end(), *address);
    if (it == gpus_.end() || *it != *address) return std::nullopt;
    return static_cast<int>(it - gpus_.begin());
  };
  if (!read_) Refresh();
  if (auto index = find()) return index;
  if (std::chrono::steady_clock::now() - last_read_ > std::chrono::seconds(60)) {
    Refresh();
    return find();
  }
  return std::nullopt;
}

}  // namespace ncclscope::analytics
