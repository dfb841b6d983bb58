#pragma once

// The cardinality limiter behind every capped label (`comm`, `peer`): the first `limit` distinct
// keys get a label value of their own, identified by a small index; further keys share the
// overflow value (index kOverflow) and are counted, once each, so the overflow is visible
// (ncclscope_nccl_label_overflow_total). A released key frees its index for a new one.

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace ncclscope::analytics {

class LabelCap {
 public:
  static constexpr std::uint32_t kOverflow = 0;

  explicit LabelCap(std::size_t limit) : limit_(limit) {}

  // A lower limit applies to keys admitted from now on; admitted ones keep their index.
  void SetLimit(std::size_t limit) { limit_ = limit; }
  std::size_t limit() const { return limit_; }

  // The key's index (1 .. limit), admitting it while there is room; kOverflow when full.
  std::uint32_t Admit(std::uint64_t key);
  std::optional<std::uint32_t> Find(std::uint64_t key) const;
  void Release(std::uint64_t key);
  // Release in two steps, for callers that must drop what the index labels first: Detach forgets
  // the key (its index is not handed out again), ReleaseIndex makes the index available.
  void Detach(std::uint64_t key) { index_.erase(key); }
  void ReleaseIndex(std::uint32_t index) { free_.push_back(index); }

  std::size_t admitted() const { return index_.size(); }
  // Distinct keys refused so far (exact up to kRememberedRefusals, then every refusal counts).
  std::uint64_t overflowed() const { return overflowed_; }

  // Largest index handed out so far plus one (for arrays indexed by label).
  std::uint32_t index_bound() const { return next_; }

 private:
  static constexpr std::size_t kRememberedRefusals = 65536;
  std::size_t limit_;
  absl::flat_hash_map<std::uint64_t, std::uint32_t> index_;
  std::vector<std::uint32_t> free_;
  std::uint32_t next_ = 1;
  absl::flat_hash_set<std::uint64_t> refused_;
  std::uint64_t overflowed_ = 0;
};

}  // namespace ncclscope::analytics
