#pragma once

// The calls and bytes the BPF programs count per (process, cgroup, function), seen from user
// space as one map: bpf/probes.bpf.c keeps them in two (`call_slots` names a key's slot,
// `call_counts` holds the counts at it) so that a probed call indexes an array instead of looking
// up a hash, and takes free slots from `free_slots`. This class fills that queue at load, walks
// the pairs, and frees a key's slot (its counts zeroed, its generation bumped so that a thread
// still caching it looks its op up again) when the agent has folded them into its totals.

#include <bpf/bpf.h>

#include <cstdint>

#include "agent/ebpf/bpf_map.h"
#include "ncclscope/bpf_intf.h"

namespace ncclscope::ebpf {

class CallCounts {
 public:
  CallCounts(int slots_fd, int counts_fd, int free_fd)
      : slots_(slots_fd), counts_(counts_fd), free_fd_(free_fd) {}

  // Puts every slot in the free queue: once, right after the objects load. False on an error.
  bool FillFreeSlots() const;

  // Calls visit(key, counts) for each key with a slot whose counts could be read.
  template <typename Visit>
  void ForEach(Visit&& visit) const {
    slots_.ForEach([&](const ncclscope_proc_key& key, std::uint32_t slot) {
      if (const auto counts = counts_.Lookup(slot)) visit(key, *counts);
    });
  }

  // Frees `key`'s slot for another key (gone already is fine). Only for keys of exited processes:
  // no thread can count into them meanwhile.
  void Delete(const ncclscope_proc_key& key) const;

 private:
  BpfMap<ncclscope_proc_key, std::uint32_t> slots_;
  BpfMap<std::uint32_t, ncclscope_call_counts> counts_;
  int free_fd_;
};

}  // namespace ncclscope::ebpf
