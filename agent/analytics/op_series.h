#pragma once

// Per-operation series, per (comm, rank, func, algo, proto, size bucket): ops and message bytes
// (every completed op), the GPU-duration histogram, and the nccl-tests algorithm and bus bytes of
// the ops with GPU timing, so that over any window
//     bus bandwidth = rate(ncclscope_nccl_op_bus_bytes_total)
//                     / rate(ncclscope_nccl_op_gpu_duration_seconds_sum)
// is the time-weighted busbw of those ops (nccl-tests' number, averaged correctly).

#include <cstdint>

#include "agent/analytics/bus_bandwidth.h"
#include "agent/analytics/comm_registry.h"
#include "agent/analytics/latency_buckets.h"
#include "agent/analytics/series_table.h"
#include "agent/core/text_exposition.h"

namespace ncclscope::analytics {

class OpSeries {
 public:
  struct Stats {
    std::uint64_t ops = 0;
    std::uint64_t bytes = 0;
    LatencyHistogram gpu;  // ops with GPU timing
    double algo_bytes = 0;
    double bus_bytes = 0;
  };

  void Observe(const CommRegistry& registry, std::uint32_t comm_label,
               const ncclscope_op_record& op, const BandwidthModel& model);
  void DropLabels(const absl::flat_hash_set<std::uint32_t>& labels) { table_.DropLabels(labels); }
  void Render(metrics::TextWriter& out) const;
  std::size_t series() const { return table_.size(); }
  std::uint64_t refused() const { return table_.refused(); }

  static std::uint64_t Key(std::uint32_t comm_label, std::int32_t rank, std::uint8_t func,
                           std::uint8_t algo, std::uint8_t proto, std::uint8_t size);
  const Stats* Find(std::uint64_t key) const { return table_.Find(key); }

 private:
  SeriesTable<Stats> table_;
};

}  // namespace ncclscope::analytics
