#include "agent/analytics/exact_counts.h"

namespace ncclscope::analytics {

void ExactCounts::Observe(const CommRegistry& registry, std::uint32_t ring_id, const Comm& comm,
                          const profiler::OpCounts& counts, OpSeries& ops) {
  Source& source = sources_[Key{ring_id, counts.slot}];
  if (source.comm_id != counts.comm_id || source.context != counts.context ||
      source.rank != counts.rank || source.comm_label != comm.label) {
    // The slot holds another communicator now: its counts start from 0.
    source.comm_id = counts.comm_id;
    source.context = counts.context;
    source.rank = counts.rank;
    source.comm_label = comm.label;
    source.last.clear();
  }
  for (const ncclscope_op_count& c : counts.counts) {
    Totals& last = source.last[c.key];
    const std::uint64_t ops_delta = c.ops >= last.ops ? c.ops - last.ops : c.ops;
    const std::uint64_t bytes_delta = c.bytes >= last.bytes ? c.bytes - last.bytes : c.bytes;
    last = {c.ops, c.bytes};
    if (ops_delta == 0 && bytes_delta == 0) continue;
    ops.AddExact(registry, comm.label, counts.rank, c.key, ops_delta, bytes_delta);
  }
}

void ExactCounts::DropLabels(const absl::flat_hash_set<std::uint32_t>& labels) {
  absl::erase_if(sources_,
                 [&](const auto& entry) { return labels.contains(entry.second.comm_label); });
}

void ExactCounts::KeepRings(const std::vector<std::uint32_t>& ring_ids) {
  const absl::flat_hash_set<std::uint32_t> held(ring_ids.begin(), ring_ids.end());
  absl::erase_if(sources_, [&](const auto& entry) { return !held.contains(entry.first.first); });
}

}  // namespace ncclscope::analytics
