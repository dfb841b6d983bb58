#pragma once

// A BPF map seen from user space as what it holds: keys and values of fixed types, walked, read
// and deleted. With bpf_objects.cc (loading, the event ring), call_counts.cc (the count slots) and
// attach/ (links), the only place the eBPF source calls libbpf; the rest sees these typed maps and
// plain structs.

#include <bpf/bpf.h>

#include <cstddef>
#include <optional>

namespace ncclscope::ebpf {

// The most entries a walk visits: above the walked maps' max_entries (NCCLSCOPE_MAX_PROC_OPS,
// 16384, in ncclscope/bpf_intf.h). Entries deleted while walking can restart bpf_map_get_next_key
// from the first key; the bound ends such a walk.
inline constexpr std::size_t kMapWalkBound = std::size_t{1} << 16;

template <typename Key, typename Value>
class BpfMap {
 public:
  explicit BpfMap(int fd) : fd_(fd) {}

  // Calls visit(key, value) for each entry whose value could be read (an entry deleted meanwhile
  // is skipped), at most `bound` entries.
  template <typename Visit>
  void ForEach(Visit&& visit, std::size_t bound = kMapWalkBound) const {
    Key key{};
    Key next{};
    const void* previous = nullptr;
    for (std::size_t n = 0; n < bound && bpf_map_get_next_key(fd_, previous, &next) == 0; ++n) {
      Value value{};
      if (bpf_map_lookup_elem(fd_, &next, &value) == 0) visit(next, value);
      key = next;
      previous = &key;
    }
  }

  std::optional<Value> Lookup(const Key& key) const {
    Value value{};
    if (bpf_map_lookup_elem(fd_, &key, &value) != 0) return std::nullopt;
    return value;
  }

  // Gone already is fine: the entry is not there either way.
  void Delete(const Key& key) const { bpf_map_delete_elem(fd_, &key); }

  int fd() const { return fd_; }

 private:
  int fd_;
};

}  // namespace ncclscope::ebpf
