#pragma once

// Compute vs communication per communicator rank: on the rank's GPU timeline of the
// communicator's ops with GPU timing, the time inside them (overlapping ops, e.g. the Send and
// Recv of one group, counted once) and the time between the end of one and the start of the next
// (the GPU was not in this communicator's NCCL kernels: compute, another communicator, the host).
// Over a window,
//     communication share = rate(inside) / (rate(inside) + rate(between))
// of the stretches the ops were timed. A gap is only counted between two timed ops in a row: an op
// without GPU timing (kernel tracing off for the duty cycle) ends the stretch, so sampled-out time
// is neither. One row per (comm, rank), the labels of the other per-rank series.

#include <cstdint>

#include "agent/analytics/comm_registry.h"
#include "agent/analytics/series_table.h"
#include "agent/core/text_exposition.h"

namespace ncclscope::analytics {

class RankTimeline {
 public:
  struct Stats {
    std::uint64_t inside_ns = 0;
    std::uint64_t between_ns = 0;
    std::uint64_t last_end_ns = 0;  // of the latest timed op of the stretch; 0: no stretch
  };

  void Observe(const CommRegistry& registry, std::uint32_t comm_label,
               const ncclscope_op_record& op);
  void DropLabels(const absl::flat_hash_set<std::uint32_t>& labels) { table_.DropLabels(labels); }
  void Render(metrics::TextWriter& out) const;
  std::size_t series() const { return table_.size(); }
  std::uint64_t refused() const { return table_.refused(); }

 private:
  SeriesTable<Stats> table_;
};

}  // namespace ncclscope::analytics
