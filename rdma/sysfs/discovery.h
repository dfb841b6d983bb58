#pragma once

// Discovery: list <root>/class/infiniband, drop excluded devices by name and PCI address (before
// any of their files is read), then read the included devices' static attributes and list their
// ports and counter directories.

#include <string>
#include <vector>

#include "rdma/sysfs/device_filter.h"
#include "rdma/sysfs/file_reader.h"
#include "rdma/sysfs/layout.h"

namespace ncclscope::rdma::sysfs {

struct DiscoveryOptions {
  std::string root = "/sys";  // sysfs mount point
  bool hw_counters = true;    // list ports/N/hw_counters too
};

struct Discovery {
  bool class_dir_present = false;  // <root>/class/infiniband exists
  int list_error = 0;              // errno listing it (ENOENT: no RDMA driver loaded)
  std::vector<DeviceLayout> devices;
  std::vector<std::string> excluded;  // names of devices the filter dropped
  std::vector<std::string> vanished;  // listed, but gone before discovery finished
};

// The directory that holds the devices: <root>/class/infiniband.
std::string ClassDir(const std::string& root);

// Names in the class directory, sorted (0 or errno). Cheap: one readdir, no device file.
int ListDeviceNames(FileReader& reader, const std::string& root, std::vector<std::string>* names);

Discovery Discover(FileReader& reader, const DeviceFilter& filter, const DiscoveryOptions& options);

}  // namespace ncclscope::rdma::sysfs
