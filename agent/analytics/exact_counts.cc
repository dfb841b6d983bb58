#include "agent/analytics/exact_counts.h"

namespace ncclscope::analytics {

void ExactCounts::Observe(const CommRegistry& registry, std::uint32_t ring_id, const Comm& comm,
                          const ncclscope_op_counts_record& record, OpSeries& ops) {
  Source& source = sources_[Key{ring_id, record.comm_id, record.rank}];
  if (source.context != record.context || source.comm_label != comm.label) {
    source.context = record.context;  // a new communicator instance: counts start over
    source.comm_label = comm.label;
    source.last.clear();
  }
  for (std::uint32_t i = 0; i < record.n && i < NCCLSCOPE_COUNTS_PER_RECORD; ++i) {
    const ncclscope_op_count& c = record.counts[i];
    Totals& last = source.last[c.key];
    const std::uint64_t ops_delta = c.ops >= last.ops ? c.ops - last.ops : c.ops;
    const std::uint64_t bytes_delta = c.bytes >= last.bytes ? c.bytes - last.bytes : c.bytes;
    last = {c.ops, c.bytes};
    if (ops_delta == 0 && bytes_delta == 0) continue;
    ops.AddExact(registry, comm.label, record.rank, c.key, ops_delta, bytes_delta);
  }
  if (record.final_flush != 0 && record.last != 0) {
    sources_.erase(Key{ring_id, record.comm_id, record.rank});  // nothing comes after it
  }
}

void ExactCounts::DropLabels(const absl::flat_hash_set<std::uint32_t>& labels) {
  absl::erase_if(sources_,
                 [&](const auto& entry) { return labels.contains(entry.second.comm_label); });
}

}  // namespace ncclscope::analytics
