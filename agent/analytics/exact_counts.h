#pragma once

// The plugin's exact operation counts (OP_COUNTS records, plugin/ring/ncclscope_ring.h): running
// totals per communicator rank and key (function, algorithm, protocol, size class), turned into
// increments of ncclscope_nccl_ops_total and ncclscope_nccl_op_bytes_total (OpSeries rows). The
// plugin counts every op whatever sampling records, so for rings that say so
// (RingOrigin::exact_counts) these two families come from here alone and are exact; every other
// op family is estimated from the (possibly sampled) op records.
//
// A total that goes down is a new communicator instance (its context changed, or its process
// restarted the count): the new total is the increment. Per source (ring, communicator, rank) the
// last totals are kept until its final flush or until its communicator's series are dropped.

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>

#include <cstdint>
#include <tuple>

#include "agent/analytics/comm_registry.h"
#include "agent/analytics/op_series.h"

namespace ncclscope::analytics {

class ExactCounts {
 public:
  // `comm` is the record's communicator (already admitted for its rank).
  void Observe(const CommRegistry& registry, std::uint32_t ring_id, const Comm& comm,
               const ncclscope_op_counts_record& record, OpSeries& ops);
  void DropLabels(const absl::flat_hash_set<std::uint32_t>& labels);
  std::size_t sources() const { return sources_.size(); }

 private:
  struct Totals {
    std::uint64_t ops = 0;
    std::uint64_t bytes = 0;
  };
  struct Source {
    std::uint64_t context = 0;
    std::uint32_t comm_label = 0;
    absl::flat_hash_map<std::uint32_t, Totals> last;
  };
  using Key = std::tuple<std::uint32_t, std::uint64_t, std::int32_t>;  // ring, comm id, rank
  absl::flat_hash_map<Key, Source> sources_;
};

}  // namespace ncclscope::analytics
