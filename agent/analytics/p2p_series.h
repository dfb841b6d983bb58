#pragma once

// Point-to-point operations by where the peer is: the same node (NVLink, PCIe P2P or shared
// memory) or another node (the network), per (comm, rank, func, peer class, size bucket). AlltoAll,
// Gather and Scatter arrive from NCCL as per-peer Send/Recv, so this is also how their traffic
// splits between intra- and inter-node. Bandwidth = bus bytes / GPU seconds (ops with GPU timing).

#include <cstdint>

#include "agent/analytics/comm_registry.h"
#include "agent/analytics/series_table.h"
#include "agent/core/text_exposition.h"

namespace ncclscope::analytics {

class P2pSeries {
 public:
  struct Stats {
    std::uint64_t ops = 0;
    std::uint64_t bytes = 0;
    std::uint64_t gpu_ns = 0;  // ops with GPU timing
    double timed_bytes = 0;    // their bytes (busbw factor 1)
  };

  void Observe(const CommRegistry& registry, const Comm& comm, const ncclscope_op_record& op);
  void DropLabels(const absl::flat_hash_set<std::uint32_t>& labels) { table_.DropLabels(labels); }
  void Render(metrics::TextWriter& out) const;
  std::size_t series() const { return table_.size(); }
  std::uint64_t refused() const { return table_.refused(); }

 private:
  SeriesTable<Stats> table_;
};

}  // namespace ncclscope::analytics
