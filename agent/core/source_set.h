#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "agent/core/source.h"

namespace ncclscope {

// The agent's sources and, for each, whether it runs and how its last scrape went. The set is
// fixed at start-up; config reloads only start, reconfigure or stop its members.
class SourceSet {
 public:
  struct Entry {
    std::shared_ptr<Source> source;
    std::atomic<bool> running{false};
    std::atomic<bool> enabled{false};
    SourceStatus start_status;  // guarded by SourceSet::status_mutex_
    std::atomic<double> last_collect_seconds{0};
  };

  explicit SourceSet(std::vector<std::shared_ptr<Source>> sources);

  // Brings every source in line with `config`: starts enabled ones that are stopped, reconfigures
  // running ones, stops disabled ones. Never throws.
  void Apply(const config::Config& config);
  void StopAll();

  // Health of one entry: the start result while that is Down, else the source's own status.
  SourceStatus StatusOf(const Entry& entry) const;

  std::vector<std::unique_ptr<Entry>>& entries() { return entries_; }
  const std::vector<std::unique_ptr<Entry>>& entries() const { return entries_; }

 private:
  void SetStartStatus(Entry& entry, SourceStatus status);

  std::mutex lifecycle_mutex_;       // serializes Apply() and StopAll()
  mutable std::mutex status_mutex_;  // guards Entry::start_status; never held across a call out
  std::vector<std::unique_ptr<Entry>> entries_;
};

}  // namespace ncclscope
