#include "agent/analytics/label_cap.h"

namespace ncclscope::analytics {

std::uint32_t LabelCap::Admit(std::uint64_t key) {
  if (auto it = index_.find(key); it != index_.end()) return it->second;
  if (index_.size() >= limit_) {
    if (refused_.size() < kRememberedRefusals) {
      if (refused_.insert(key).second) ++overflowed_;
    } else if (!refused_.contains(key)) {
      ++overflowed_;  // memory of refusals is full: count each one
    }
    return kOverflow;
  }
  std::uint32_t index = 0;
  if (!free_.empty()) {
    index = free_.back();
    free_.pop_back();
  } else {
    index = next_++;
  }
  index_.emplace(key, index);
  refused_.erase(key);
  return index;
}

std::optional<std::uint32_t> LabelCap::Find(std::uint64_t key) const {
  if (auto it = index_.find(key); it != index_.end()) return it->second;
  return std::nullopt;
}

void LabelCap::Release(std::uint64_t key) {
  auto it = index_.find(key);
  if (it == index_.end()) return;
  free_.push_back(it->second);
  index_.erase(it);
}

}  // namespace ncclscope::analytics
