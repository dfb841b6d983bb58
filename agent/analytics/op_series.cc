#include "agent/analytics/op_series.h"

#include "agent/analytics/analytics_metrics.h"
#include "agent/analytics/size_bucket.h"

namespace ncclscope::analytics {

std::uint64_t OpSeries::Key(std::uint32_t comm_label, std::int32_t rank, std::uint8_t func,
                            std::uint8_t algo, std::uint8_t proto, std::uint8_t size) {
  return KeyPacker()
      .Add(comm_label, 16)
      .Add(static_cast<std::uint32_t>(rank), 24)
      .Add(func, 5)
      .Add(algo, 4)
      .Add(proto, 3)
      .Add(size, 4)
      .key();
}

void OpSeries::SetHistograms(bool per_rank, bool p2p) {
  if (per_rank == rank_histograms_ && p2p == p2p_histograms_) return;
  rank_histograms_ = per_rank;
  p2p_histograms_ = p2p;
  histograms_ = {};
}

namespace {

// The label text of a row; size class NCCLSCOPE_SIZE_CLASS_OVERFLOW (a communicator's count keys
// ran out, ncclscope_ring.h) is "other".
std::string RowLabels(const CommRegistry& registry, std::uint32_t comm_label, bool with_rank,
                      std::int32_t rank, std::uint8_t func, std::uint8_t algo, std::uint8_t proto,
                      std::uint8_t size) {
  std::string text;
  metrics::AppendLabel(text, "comm", registry.Label(comm_label));
  if (with_rank) {
    text += ',';
    metrics::AppendLabel(text, "rank", std::to_string(rank));
  }
  text += ',';
  metrics::AppendLabel(text, "func", ncclscope_func_name(func));
  text += ',';
  metrics::AppendLabel(text, "algo", ncclscope_algo_name(algo));
  text += ',';
  metrics::AppendLabel(text, "proto", ncclscope_proto_name(proto));
  text += ',';
  metrics::AppendLabel(text, "size",
                       size == NCCLSCOPE_SIZE_CLASS_OVERFLOW ? "other" : SizeBucketLabel(size));
  return text;
}

}  // namespace

void OpSeries::AddExact(const CommRegistry& registry, std::uint32_t comm_label, std::int32_t rank,
                        std::uint32_t count_key, std::uint64_t ops, std::uint64_t bytes) {
  const auto func = static_cast<std::uint8_t>(count_key & 0x1F);
  const auto algo = static_cast<std::uint8_t>(count_key >> 5 & 0xF);
  const auto proto = static_cast<std::uint8_t>(count_key >> 9 & 0x7);
  const auto size = static_cast<std::uint8_t>(count_key >> 12 & 0xF);
  Stats& s = table_.Get(Key(comm_label, rank, func, algo, proto, size), comm_label, [&] {
    return RowLabels(registry, comm_label, true, rank, func, algo, proto, size);
  });
  AddSat(s.ops, ops);
  AddSat(s.bytes, bytes);
}

void OpSeries::Observe(const CommRegistry& registry, std::uint32_t comm_label,
                       const ncclscope_op_record& op, const BandwidthModel& model) {
  const std::uint8_t size = SizeBucketIndex(op.bytes);
  const auto labels = [&](bool with_rank) {
    return RowLabels(registry, comm_label, with_rank, op.rank, op.func, op.algo, op.proto, size);
  };
  Stats& s = table_.Get(Key(comm_label, op.rank, op.func, op.algo, op.proto, size), comm_label,
                        [&] { return labels(true); });
  // Each record stands for `weight` ops (plugin.record_one_in): the sums are of all ops.
  const std::uint32_t weight = ncclscope_record_weight(op.weight);
  if ((op.flags & NCCLSCOPE_OP_COUNTED) == 0) {
    AddSat(s.ops, weight);
    AddWeighted(s.bytes, op.bytes, weight);
  }
  if ((op.flags & NCCLSCOPE_OP_GPU_TIMING) == 0) return;
  const std::uint64_t ns = op.gpu_end_ns - op.gpu_start_ns;
  AddSat(s.timed, weight);
  AddWeighted(s.gpu_ns, ns, weight);
  s.algo_bytes += model.algo_bytes * weight;
  s.bus_bytes += model.bus_bytes() * weight;
  if (op.kind == NCCLSCOPE_KIND_P2P && !p2p_histograms_) return;
  // Rank -1 (all ones in its 24 bits) is the node's row of the collective.
  const std::int32_t rank = rank_histograms_ ? op.rank : -1;
  histograms_
      .Get(Key(comm_label, rank, op.func, op.algo, op.proto, size), comm_label,
           [&] { return labels(rank_histograms_); })
      .Observe(ns, weight);
}

void OpSeries::Render(metrics::TextWriter& out) const {
  const auto& rows = table_.rows();
  out.Rows(kNcclOpsTotal, rows, [&](const auto& row) { return row.stats.ops; });
  out.Rows(kNcclOpBytesTotal, rows, [&](const auto& row) { return row.stats.bytes; });
  out.Rows(kNcclOpsTimedTotal, rows, [&](const auto& row) { return row.stats.timed; });
  out.Rows(kNcclOpGpuSecondsTotal, rows,
           [&](const auto& row) { return static_cast<double>(row.stats.gpu_ns) * 1e-9; });
  out.Header(kNcclOpGpuDurationSeconds);
  for (const auto& row : histograms_.rows()) {
    out.Histogram(kNcclOpGpuDurationSeconds, row.labels, LatencyBounds(), row.stats.counts,
                  static_cast<double>(row.stats.sum_ns) * 1e-9);
  }
  out.Rows(kNcclOpAlgoBytesTotal, rows, [&](const auto& row) { return row.stats.algo_bytes; });
  out.Rows(kNcclOpBusBytesTotal, rows, [&](const auto& row) { return row.stats.bus_bytes; });
}

}  // namespace ncclscope::analytics
