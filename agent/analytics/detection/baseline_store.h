#pragma once

// The latency baselines that outlive a job, the agent and Prometheus's windows: one entry per key
// that is stable across launches of a job — the communicator's name (the framework's group; the
// job id when it has none), nranks, nnodes, the rank, the function, algorithm, protocol and size
// bucket — never NCCL's commHash, which is new at every launch. Bounded (the least recently
// seen key goes when full) and kept as a small text file in detection.state_dir:
//
//   # ncclscope latency baselines v1
//   <comm name %-escaped> <nranks> <nnodes> <rank> <func> <algo> <proto> <size> <p99 s> <windows>
//   <anomalous> <last seen, unix s>
//   ...
//   # end <entries>
//
// A file that is not exactly that (unknown version, a bad field, a missing end line: a write cut
// short) is refused as a whole with file:line and the reason, and the store starts empty: a
// wrong baseline would be worse than none. Saving writes a temporary file and renames it over
// the old one, so a crash leaves either the old or the new file.

#include <absl/container/flat_hash_map.h>

#include <cstdint>
#include <list>
#include <string>

namespace ncclscope::analytics::detection {

struct BaselineKey {
  std::string comm_name;
  std::int32_t nranks = 0;
  std::int32_t nnodes = 0;
  std::int32_t rank = 0;
  std::uint8_t func = 0;
  std::uint8_t algo = 0;
  std::uint8_t proto = 0;
  std::uint8_t size = 0;

  bool operator==(const BaselineKey& o) const {
    return comm_name == o.comm_name && nranks == o.nranks && nnodes == o.nnodes && rank == o.rank &&
           func == o.func && algo == o.algo && proto == o.proto && size == o.size;
  }
  template <typename H>
  friend H AbslHashValue(H h, const BaselineKey& k) {
    return H::combine(std::move(h), k.comm_name, k.nranks, k.nnodes, k.rank, k.func, k.algo,
                      k.proto, k.size);
  }
};

struct BaselineEntry {
  double p99_s = 0;              // the key's usual P99 latency
  std::uint32_t windows = 0;     // learning windows folded in
  std::uint32_t anomalous = 0;   // consecutive windows far from it (a sustained change)
  std::int64_t last_seen_s = 0;  // unix time
};

class BaselineStore {
 public:
  static constexpr std::size_t kMaxCommNameBytes = 256;
  static constexpr std::size_t kMaxLineBytes = 1024;
  // Entries not seen for this long are dropped when the file is read.
  static constexpr std::int64_t kForgetAfterS = 30 * 86400;

  explicit BaselineStore(std::size_t max_keys) : max_keys_(max_keys) {}
  void SetMaxKeys(std::size_t max_keys);

  enum class LoadStatus { kLoaded, kMissing, kUnreadable, kTooLarge, kCorrupt };
  // Replaces the entries with the file's. On anything but kLoaded and kMissing, the store is
  // empty and *error says why (path:line: reason).
  LoadStatus Load(const std::string& path, std::int64_t now_s, std::string* error);
  bool Save(const std::string& path, std::string* error) const;

  // The entry of `key`, or null.
  BaselineEntry* Find(const BaselineKey& key);
  // The entry of `key`, created empty when new (evicting the least recently used when full).
  BaselineEntry& Get(const BaselineKey& key);

  std::size_t size() const { return index_.size(); }
  std::uint64_t evictions() const { return evictions_; }

  // The file format's pieces, for tests.
  static std::string EncodeName(const std::string& name);
  static bool DecodeName(const std::string& text, std::string* name);

 private:
  struct Node {
    BaselineKey key;
    BaselineEntry entry;
  };
  void Touch(std::list<Node>::iterator it);
  // Load()'s steps: one entry line; the parsed entries into the store.
  static std::string ParseEntry(std::string_view line, Node* n);
  std::string Adopt(std::vector<Node>& nodes, std::int64_t now_s);

  std::size_t max_keys_;
  std::list<Node> lru_;  // most recently used first
  absl::flat_hash_map<BaselineKey, std::list<Node>::iterator> index_;
  std::uint64_t evictions_ = 0;
};

}  // namespace ncclscope::analytics::detection
