#pragma once

// Per-operation series, per (comm, rank, func, algo, proto, size bucket): ops and message bytes
// (every completed op), and of the ops with GPU timing their count, GPU seconds and nccl-tests
// algorithm and bus bytes, so that over any window
//     bus bandwidth = rate(ncclscope_nccl_op_bus_bytes_total)
//                     / rate(ncclscope_nccl_op_gpu_seconds_total)
// is the time-weighted busbw of those ops (nccl-tests' number, averaged correctly).
// The GPU-duration histogram is per (comm, func, algo, proto, size), the node's ranks together:
// NCCL picks the same algorithm, protocol and size on every rank of a collective, and 14 buckets
// per rank were most of a node's series (640 of 4,800 on an 8-GPU node, tests/deploy/
// series_budget.mjs). Per rank with plugin.rank_histograms. Collectives only unless
// plugin.p2p_histograms: a pipeline's Send/Recv communicators are one per GPU, and their rows were
// 256 of the 304 histogram series of the simulated node; their mean time is in the counters here
// and, per peer class, in p2p_series.h.

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
    std::uint64_t timed = 0;   // ops with GPU timing
    std::uint64_t gpu_ns = 0;  // their GPU time (saturating)
    double algo_bytes = 0;
    double bus_bytes = 0;
  };

  // per_rank: the histogram rows carry the rank (plugin.rank_histograms); p2p: Send/Recv have
  // rows too (plugin.p2p_histograms). Changing either starts the histograms over (a row set of
  // one shape only).
  void SetHistograms(bool per_rank, bool p2p);
  // An op record. One the plugin counted (NCCLSCOPE_OP_COUNTED) is in the exact counts already
  // (AddExact, exact_counts.h): it adds only what is per-op detail (timing, algo and bus bytes).
  void Observe(const CommRegistry& registry, std::uint32_t comm_label,
               const ncclscope_op_record& op, const BandwidthModel& model);
  // Exact increments of ops and bytes for the row of a plugin count key (ncclscope_count_key).
  void AddExact(const CommRegistry& registry, std::uint32_t comm_label, std::int32_t rank,
                std::uint32_t count_key, std::uint64_t ops, std::uint64_t bytes);
  void DropLabels(const absl::flat_hash_set<std::uint32_t>& labels) {
    table_.DropLabels(labels);
    histograms_.DropLabels(labels);
  }
  void Render(metrics::TextWriter& out) const;
  std::size_t series() const { return table_.size(); }
  std::uint64_t refused() const { return table_.refused() + histograms_.refused(); }

  static std::uint64_t Key(std::uint32_t comm_label, std::int32_t rank, std::uint8_t func,
                           std::uint8_t algo, std::uint8_t proto, std::uint8_t size);
  const Stats* Find(std::uint64_t key) const { return table_.Find(key); }

 private:
  SeriesTable<Stats> table_;
  SeriesTable<LatencyHistogram> histograms_;
  bool rank_histograms_ = false;
  bool p2p_histograms_ = false;
};

}  // namespace ncclscope::analytics
