#include "agent/core/source.h"

namespace ncclscope {

void ErrorCounters::Add(std::string_view kind, std::uint64_t n) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = counts_.find(kind);
  if (it == counts_.end()) it = counts_.emplace(std::string(kind), 0).first;
  it->second += n;
}

std::vector<std::pair<std::string, std::uint64_t>> ErrorCounters::Snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {counts_.begin(), counts_.end()};
}

}  // namespace ncclscope
