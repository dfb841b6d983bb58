#include "rdma/topology/pci_topology.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace ncclscope::rdma::topology {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kMaxPciDevices = 4096;

std::string ReadSmall(const fs::path& path) {
  std::ifstream in(path);
  std::string text;
  std::getline(in, text);
  return text;
}

// "0000:05:00.0": domain:bus:device.function in hex.
bool IsPciAddress(const std::string& s) {
  if (s.size() != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.') return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i == 4 || i == 7 || i == 10) continue;
    if (!std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

// "pci0000:00": a host bridge (root complex) directory under /sys/devices.
bool IsHostBridge(const std::string& s) { return s.size() >= 8 && s.rfind("pci", 0) == 0; }

int ReadNumaNode(const fs::path& device_dir) {
  const std::string text = ReadSmall(device_dir / "numa_node");
  int node = -1;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), node);
  return ec == std::errc() ? node : -1;
}

unsigned ParseHex(const std::string& text) {
  std::string_view view(text);
  if (view.rfind("0x", 0) == 0) view.remove_prefix(2);
  unsigned value = 0;
  std::from_chars(view.data(), view.data() + view.size(), value, 16);
  return value;
}

}  // namespace

bool ResolvePci(const std::string& link, PciNode* out) {
  std::error_code ec;
  const fs::path real = fs::canonical(link, ec);
  if (ec) return false;
  PciNode node;
  bool in_tree = false;
  for (const fs::path& part : real) {
    const std::string name = part.string();
    if (!in_tree) {
      if (IsHostBridge(name)) {
        in_tree = true;
        node.path.push_back(name);
      }
      continue;
    }
    if (!IsPciAddress(name)) break;  // e.g. "infiniband", "net" below the function
    node.path.push_back(name);
  }
  if (!in_tree || node.path.size() < 2) return false;
  node.address = node.path.back();
  node.numa_node = ReadNumaNode(real);
  *out = std::move(node);
  return true;
}

std::vector<PciNode> FindGpus(const std::string& sysfs_root) {
  std::vector<PciNode> gpus;
  const fs::path dir = fs::path(sysfs_root) / "bus" / "pci" / "devices";
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return gpus;
  std::size_t seen = 0;
  for (const fs::directory_entry& entry : it) {
    if (++seen > kMaxPciDevices) break;
    const unsigned vendor = ParseHex(ReadSmall(entry.path() / "vendor"));
    const unsigned pci_class = ParseHex(ReadSmall(entry.path() / "class"));
    // 0x0300xx VGA-compatible, 0x0302xx 3D controller (data-center GPUs).
    const unsigned base_sub = pci_class >> 8;
    if (vendor != 0x10de || (base_sub != 0x0300 && base_sub != 0x0302)) continue;
    PciNode node;
    if (ResolvePci(entry.path().string(), &node)) gpus.push_back(std::move(node));
  }
  std::sort(gpus.begin(), gpus.end(),
            [](const PciNode& a, const PciNode& b) { return a.address < b.address; });
  return gpus;
}

Affinity Relate(const PciNode& a, const PciNode& b) {
  std::size_t common = 0;
  while (common < a.path.size() && common < b.path.size() && a.path[common] == b.path[common]) {
    ++common;
  }
  const int below_a = static_cast<int>(a.path.size() - common);
  const int below_b = static_cast<int>(b.path.size() - common);
  Affinity affinity;
  if (common == 0) {
    // Different root complexes: the path goes through the CPU(s); +2 for the two host bridges.
    affinity.distance = below_a + below_b + 2;
    affinity.relation = (a.numa_node >= 0 && a.numa_node == b.numa_node) ? "NODE" : "SYS";
    return affinity;
  }
  affinity.distance = below_a + below_b;
  if (common == 1) {
    affinity.relation = "PHB";  // only the host bridge is shared
  } else if (below_a <= 2 && below_b <= 2) {
    affinity.relation = "PIX";  // one switch: upstream port shared, one downstream port each
  } else {
    affinity.relation = "PXB";
  }
  return affinity;
}

}  // namespace ncclscope::rdma::topology
