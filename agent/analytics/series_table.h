#pragma once

// Storage for one group of series: rows keyed by a packed integer (the label values as small
// codes), each with its label text built once when the row is created, so that the hot path is
// one hash lookup and a scrape is a walk over a vector (rows stay in creation order). Rows of
// communicators whose label was freed are dropped with DropLabels().

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ncclscope::analytics {

// a += b, stopping at UINT64_MAX: a pod's counters must not wrap a series back to small values.
inline void AddSat(std::uint64_t& a, std::uint64_t b) {
  a = b > UINT64_MAX - a ? UINT64_MAX : a + b;
}

// a += b x weight (a record's weight: the ops it stands for under plugin.record_one_in),
// saturating like AddSat.
inline void AddWeighted(std::uint64_t& a, std::uint64_t b, std::uint32_t weight) {
  AddSat(a, b > UINT64_MAX / weight ? UINT64_MAX : b * weight);
}

// At most kMaxRows rows per table, whatever the records say (label values come from pods): a row
// asked for beyond is not created; its updates go to a scratch row that is never rendered, and
// are counted in refused().
template <typename Stats>
class SeriesTable {
 public:
  static constexpr std::size_t kMaxRows = 16384;

  struct Row {
    std::uint64_t key = 0;
    std::uint32_t comm_label = 0;
    std::string labels;  // `comm="..",rank=".."...`, see metrics::AppendLabel
    Stats stats{};
  };

  // The row of `key`, created with make_labels() as its label text when new.
  template <typename MakeLabels>
  Stats& Get(std::uint64_t key, std::uint32_t comm_label, MakeLabels&& make_labels) {
    if (rows_.size() >= kMaxRows) {
      auto found = index_.find(key);
      if (found != index_.end()) return rows_[found->second].stats;
      ++refused_;
      overflow_ = Stats{};
      return overflow_;
    }
    auto [it, inserted] = index_.try_emplace(key, static_cast<std::uint32_t>(rows_.size()));
    if (inserted) {
      Row& row = rows_.emplace_back();
      row.key = key;
      row.comm_label = comm_label;
      row.labels = make_labels();
    }
    return rows_[it->second].stats;
  }

  const Stats* Find(std::uint64_t key) const {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &rows_[it->second].stats;
  }
  Stats* FindMutable(std::uint64_t key) {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &rows_[it->second].stats;
  }

  void DropLabels(const absl::flat_hash_set<std::uint32_t>& labels) {
    if (labels.empty()) return;
    std::vector<Row> kept;
    kept.reserve(rows_.size());
    for (Row& row : rows_) {
      if (!labels.contains(row.comm_label)) kept.push_back(std::move(row));
    }
    rows_ = std::move(kept);
    index_.clear();
    for (std::size_t i = 0; i < rows_.size(); ++i) {
      index_.emplace(rows_[i].key, static_cast<std::uint32_t>(i));
    }
  }

  const std::vector<Row>& rows() const { return rows_; }
  std::size_t size() const { return rows_.size(); }
  std::uint64_t refused() const { return refused_; }

 private:
  absl::flat_hash_map<std::uint64_t, std::uint32_t> index_;
  std::vector<Row> rows_;
  Stats overflow_{};
  std::uint64_t refused_ = 0;
};

// Packs label codes into a key: Pack(a, 16) then Pack(b, 24) ... (most significant first).
class KeyPacker {
 public:
  KeyPacker& Add(std::uint64_t value, unsigned bits) {
    key_ = (key_ << bits) | (value & ((std::uint64_t{1} << bits) - 1));
    return *this;
  }
  std::uint64_t key() const { return key_; }

 private:
  std::uint64_t key_ = 0;
};

}  // namespace ncclscope::analytics
