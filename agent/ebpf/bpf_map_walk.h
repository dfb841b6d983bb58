#pragma once

// Walking a BPF hash map from user space, the one way the eBPF source does it (scrapes render
// from the maps, the worker folds and deletes entries of exited processes).

#include <bpf/bpf.h>

#include <cstddef>

namespace ncclscope::ebpf {

// The most entries a walk visits: above the walked maps' max_entries (MAX_PROC_OPS, 16384, in
// bpf/probes.bpf.c). Entries deleted while walking can restart bpf_map_get_next_key from the first
// key; the bound ends such a walk.
inline constexpr std::size_t kMapWalkBound = std::size_t{1} << 16;

// Calls visit(key, value) for each entry of the hash map `fd` whose value could be read.
template <typename Key, typename Value, typename Visit>
void ForEachMapEntry(int fd, Visit&& visit, std::size_t bound = kMapWalkBound) {
  Key key{};
  Key next{};
  const void* previous = nullptr;
  for (std::size_t n = 0; n < bound && bpf_map_get_next_key(fd, previous, &next) == 0; ++n) {
    Value value{};
    if (bpf_map_lookup_elem(fd, &next, &value) == 0) visit(next, value);
    key = next;
    previous = &key;
  }
}

}  // namespace ncclscope::ebpf
