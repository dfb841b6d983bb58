#include "agent/ebpf/call_counts.h"

namespace ncclscope::ebpf {

bool CallCounts::FillFreeSlots() const {
  for (std::uint32_t slot = 0; slot < NCCLSCOPE_MAX_PROC_OPS; ++slot) {
    if (bpf_map_update_elem(free_fd_, nullptr, &slot, BPF_ANY) != 0) return false;
  }
  return true;
}

void CallCounts::Delete(const ncclscope_proc_key& key) const {
  const auto slot = slots_.Lookup(key);
  if (!slot) return;
  slots_.Delete(key);
  ncclscope_call_counts cleared{};
  if (const auto counts = counts_.Lookup(*slot)) cleared.generation = counts->generation + 1;
  std::uint32_t index = *slot;
  if (bpf_map_update_elem(counts_.fd(), &index, &cleared, BPF_ANY) != 0) return;  // kept out
  bpf_map_update_elem(free_fd_, nullptr, &index, BPF_ANY);
}

}  // namespace ncclscope::ebpf
