#pragma once

// The plugin's exact operation counts (its ring's count table, plugin/ring/ncclscope_ring.h):
// running totals per communicator rank and key (function, algorithm, protocol, size class), read
// every pass, turned into increments of ncclscope_nccl_ops_total and ncclscope_nccl_op_bytes_total
// (OpSeries rows). The plugin counts every op whatever sampling records, so the ops it counted
// (their records carry NCCLSCOPE_OP_COUNTED) add to these two families from here alone, exactly;
// every other op family is estimated from the (possibly sampled) op records.
//
// A source is a comm slot of a ring. When the slot's communicator changes (its id, context or
// rank: the slot was reused), or a total goes down (a reset the agent did not see as one), the
// new totals are the increment. Sources are kept while their ring is held and until their
// communicator's series are dropped.

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "agent/analytics/comm_registry.h"
#include "agent/analytics/op_series.h"
#include "agent/profiler/record_sink.h"

namespace ncclscope::analytics {

class ExactCounts {
 public:
  // `comm` is the counts' communicator (already admitted for their rank).
  void Observe(const CommRegistry& registry, std::uint32_t ring_id, const Comm& comm,
               const profiler::OpCounts& counts, OpSeries& ops);
  void DropLabels(const absl::flat_hash_set<std::uint32_t>& labels);
  // The rings the reader still holds: the others' sources go (their last totals were read).
  void KeepRings(const std::vector<std::uint32_t>& ring_ids);
  std::size_t sources() const { return sources_.size(); }

 private:
  struct Totals {
    std::uint64_t ops = 0;
    std::uint64_t bytes = 0;
  };
  struct Source {
    std::uint64_t comm_id = 0;
    std::uint64_t context = 0;
    std::int32_t rank = -1;
    std::uint32_t comm_label = 0;
    absl::flat_hash_map<std::uint32_t, Totals> last;  // by count key
  };
  using Key = std::pair<std::uint32_t, std::uint32_t>;  // ring, comm slot
  absl::flat_hash_map<Key, Source> sources_;
};

}  // namespace ncclscope::analytics
