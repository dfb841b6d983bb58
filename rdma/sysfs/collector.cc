#include "rdma/sysfs/collector.h"

#include <algorithm>
#include <map>
#include <utility>

namespace ncclscope::rdma::sysfs {

SysfsCollector::SysfsCollector(FileReader* reader, DeviceFilter filter, DiscoveryOptions options)
    : reader_(reader), filter_(std::move(filter)), options_(std::move(options)) {}

void SysfsCollector::ForgetFailures() {
  need_discovery_ = true;
  readers_.clear();
  gone_.clear();
}

void SysfsCollector::Rediscover(Clock::time_point now) {
  // Keep what each surviving port learned about its failing files.
  std::map<std::pair<std::string, std::uint32_t>, PortReader> previous;
  if (layouts_) {
    for (std::size_t d = 0; d < layouts_->size() && d < readers_.size(); ++d) {
      const DeviceLayout& device = (*layouts_)[d];
      if (std::find(gone_.begin(), gone_.end(), device.name) != gone_.end()) continue;
      for (std::size_t p = 0; p < device.ports.size() && p < readers_[d].size(); ++p) {
        previous.emplace(std::make_pair(device.name, device.ports[p].number), readers_[d][p]);
      }
    }
  }
  reader_->Forget();
  discovery_ = Discover(*reader_, filter_, options_);
  auto layouts = std::make_shared<std::vector<DeviceLayout>>(discovery_.devices);
  readers_.assign(layouts->size(), {});
  for (std::size_t d = 0; d < layouts->size(); ++d) {
    const DeviceLayout& device = (*layouts)[d];
    readers_[d].resize(device.ports.size());
    for (std::size_t p = 0; p < device.ports.size(); ++p) {
      auto it = previous.find({device.name, device.ports[p].number});
      if (it != previous.end()) readers_[d][p].InheritFrom(it->second);
    }
  }
  layouts_ = std::move(layouts);
  listed_.clear();
  ListDeviceNames(*reader_, options_.root, &listed_);
  gone_.clear();
  last_discovery_ = now;
  need_discovery_ = false;
}

Snapshot SysfsCollector::Poll(Clock::time_point now) {
  Snapshot snapshot;
  std::vector<std::string> names;
  snapshot.list_error = ListDeviceNames(*reader_, options_.root, &names);
  snapshot.class_dir_present = snapshot.list_error == 0;
  if (!snapshot.class_dir_present) {
    if (layouts_ && !layouts_->empty()) {
      for (const DeviceLayout& device : *layouts_) snapshot.vanished.push_back(device.name);
    }
    layouts_.reset();
    readers_.clear();
    listed_.clear();
    need_discovery_ = true;
    return snapshot;
  }
  if (need_discovery_ || !layouts_ || names != listed_ ||
      now - last_discovery_ >= kRediscoverEvery) {
    Rediscover(now);
    snapshot.rediscovered = true;
    snapshot.vanished = discovery_.vanished;
  }
  snapshot.layouts = layouts_;
  snapshot.excluded = discovery_.excluded;

  for (std::size_t d = 0; d < layouts_->size(); ++d) {
    const DeviceLayout& device = (*layouts_)[d];
    DeviceReading reading;
    reading.layout = &device;
    reading.ports.resize(device.ports.size());
    bool vanished = false;
    for (std::size_t p = 0; p < device.ports.size(); ++p) {
      if (readers_[d][p].Read(*reader_, device.ports[p], &reading.ports[p], &snapshot.problems) ==
          PortReader::Outcome::kVanished) {
        vanished = true;
        break;
      }
    }
    if (vanished) {
      snapshot.vanished.push_back(device.name);
      gone_.push_back(device.name);
      need_discovery_ = true;
      continue;
    }
    snapshot.devices.push_back(std::move(reading));
  }
  return snapshot;
}

}  // namespace ncclscope::rdma::sysfs
