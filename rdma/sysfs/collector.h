#pragma once

// One poll of every included port under <root>/class/infiniband. Discovery (device list, static
// attributes, counter directory listings) is redone when the device list changes, a device
// vanishes, or every kRediscoverEvery; in between a poll lists the class directory once and reads
// only the per-port files.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rdma/sysfs/device_filter.h"
#include "rdma/sysfs/discovery.h"
#include "rdma/sysfs/file_reader.h"
#include "rdma/sysfs/layout.h"
#include "rdma/sysfs/port_reader.h"

namespace ncclscope::rdma::sysfs {

struct DeviceReading {
  const DeviceLayout* layout = nullptr;  // owned by Snapshot::layouts
  std::vector<PortReading> ports;        // aligned with layout->ports
};

struct Snapshot {
  bool class_dir_present = false;
  int list_error = 0;
  std::shared_ptr<const std::vector<DeviceLayout>> layouts;
  std::vector<DeviceReading> devices;  // devices read completely this poll
  std::vector<std::string> excluded;   // devices the filter dropped (never read)
  std::vector<std::string> vanished;   // devices that disappeared during this poll
  bool rediscovered = false;
  ReadProblems problems;
};

class SysfsCollector {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kRediscoverEvery{300};

  // `reader` must outlive the collector.
  SysfsCollector(FileReader* reader, DeviceFilter filter, DiscoveryOptions options);

  Snapshot Poll(Clock::time_point now);

  // Forgets remembered failing files (a config reload re-probes them).
  void ForgetFailures();

 private:
  void Rediscover(Clock::time_point now);

  FileReader* reader_;
  DeviceFilter filter_;
  DiscoveryOptions options_;
  Discovery discovery_;
  std::shared_ptr<const std::vector<DeviceLayout>> layouts_;
  std::vector<std::vector<PortReader>> readers_;  // aligned with *layouts_
  std::vector<std::string> listed_;               // class directory names at the last discovery
  std::vector<std::string> gone_;                 // vanished since the last discovery
  Clock::time_point last_discovery_{};
  bool need_discovery_ = true;
};

}  // namespace ncclscope::rdma::sysfs
