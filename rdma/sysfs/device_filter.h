#pragma once

// Which RDMA devices the agent may read. Applied to the device *name* (a directory entry of
// class/infiniband) and to its PCI address (the target of the `device` symlink) before any
// attribute or counter file of the device is opened: on restricted PFs every counter read is a
// failing firmware command that floods dmesg (node_exporter #3434, #3823; gpud #1164).

#include <regex>
#include <string>
#include <vector>

namespace ncclscope::rdma::sysfs {

class DeviceFilter {
 public:
  DeviceFilter() = default;
  // Patterns are ECMAScript regexes (already validated by the config checks); search semantics,
  // so "mlx5_1" matches "mlx5_10" unless anchored.
  DeviceFilter(const std::vector<std::string>& include, const std::vector<std::string>& exclude,
               const std::vector<std::string>& exclude_pci);

  // Whether the name alone admits the device (include list, exclude list).
  bool AcceptsName(const std::string& name) const;
  // Whether a PCI address filter exists (then the device symlink must be resolved first).
  bool HasPciFilter() const { return !exclude_pci_.empty(); }
  bool AcceptsPci(const std::string& pci_address) const;

 private:
  std::vector<std::regex> include_;
  std::vector<std::regex> exclude_;
  std::vector<std::regex> exclude_pci_;
};

}  // namespace ncclscope::rdma::sysfs
