#include "agent/analytics/op_series.h"

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

void OpSeries::Observe(const CommRegistry& registry, std::uint32_t comm_label,
                       const ncclscope_op_record& op, const BandwidthModel& model) {
  const std::uint8_t size = SizeBucketIndex(op.bytes);
  const auto labels = [&](bool with_rank) {
    std::string text;
    metrics::AppendLabel(text, "comm", registry.Label(comm_label));
    if (with_rank) {
      text += ',';
      metrics::AppendLabel(text, "rank", std::to_string(op.rank));
    }
    text += ',';
    metrics::AppendLabel(text, "func", ncclscope_func_name(op.func));
    text += ',';
    metrics::AppendLabel(text, "algo", ncclscope_algo_name(op.algo));
    text += ',';
    metrics::AppendLabel(text, "proto", ncclscope_proto_name(op.proto));
    text += ',';
    metrics::AppendLabel(text, "size", SizeBucketLabel(size));
    return text;
  };
  Stats& s = table_.Get(Key(comm_label, op.rank, op.func, op.algo, op.proto, size), comm_label,
                        [&] { return labels(true); });
  ++s.ops;
  AddSat(s.bytes, op.bytes);
  if ((op.flags & NCCLSCOPE_OP_GPU_TIMING) == 0) return;
  const std::uint64_t ns = op.gpu_end_ns - op.gpu_start_ns;
  ++s.timed;
  AddSat(s.gpu_ns, ns);
  s.algo_bytes += model.algo_bytes;
  s.bus_bytes += model.bus_bytes();
  if (op.kind == NCCLSCOPE_KIND_P2P && !p2p_histograms_) return;
  // Rank -1 (all ones in its 24 bits) is the node's row of the collective.
  const std::int32_t rank = rank_histograms_ ? op.rank : -1;
  histograms_
      .Get(Key(comm_label, rank, op.func, op.algo, op.proto, size), comm_label,
           [&] { return labels(rank_histograms_); })
      .Observe(ns);
}

void OpSeries::Render(metrics::TextWriter& out) const {
  const auto& rows = table_.rows();
  out.Header("ncclscope_nccl_ops_total",
             "Completed NCCL operations recorded by the profiler plugin, by communicator, rank, "
             "function, algorithm, protocol and message-size bucket.",
             "counter");
  for (const auto& row : rows) out.Sample("ncclscope_nccl_ops_total", row.labels, row.stats.ops);
  out.Header("ncclscope_nccl_op_bytes_total",
             "Message bytes of the completed operations (count x datatype size, per rank).",
             "counter");
  for (const auto& row : rows) {
    out.Sample("ncclscope_nccl_op_bytes_total", row.labels, row.stats.bytes);
  }
  out.Header("ncclscope_nccl_ops_timed_total",
             "Completed operations with GPU timing (KernelCh timestamps; see the kernel duty "
             "cycle).",
             "counter");
  for (const auto& row : rows) {
    out.Sample("ncclscope_nccl_ops_timed_total", row.labels, row.stats.timed);
  }
  out.Header("ncclscope_nccl_op_gpu_seconds_total",
             "GPU execution time of the timed operations (latest channel end minus earliest "
             "channel start): over ncclscope_nccl_ops_timed_total the rank's mean time inside.",
             "counter");
  for (const auto& row : rows) {
    out.Sample("ncclscope_nccl_op_gpu_seconds_total", row.labels,
               static_cast<double>(row.stats.gpu_ns) * 1e-9);
  }
  out.Header("ncclscope_nccl_op_gpu_duration_seconds",
             "GPU execution time of completed operations with GPU timing, the node's ranks of "
             "the communicator together (per rank with plugin.rank_histograms); collectives, and "
             "Send/Recv with plugin.p2p_histograms.",
             "histogram");
  for (const auto& row : histograms_.rows()) {
    out.Histogram("ncclscope_nccl_op_gpu_duration_seconds", row.labels, LatencyBounds(),
                  row.stats.counts, static_cast<double>(row.stats.sum_ns) * 1e-9);
  }
  out.Header("ncclscope_nccl_op_algo_bytes_total",
             "nccl-tests algorithm bytes (S) of the operations with GPU timing: divided by their "
             "GPU time (ncclscope_nccl_op_gpu_seconds_total) it is the algorithm bandwidth.",
             "counter");
  for (const auto& row : rows) {
    out.Sample("ncclscope_nccl_op_algo_bytes_total", row.labels, row.stats.algo_bytes);
  }
  out.Header("ncclscope_nccl_op_bus_bytes_total",
             "nccl-tests bus bytes (S x the function's factor for nranks) of the operations with "
             "GPU timing: divided by their GPU time it is the bus bandwidth.",
             "counter");
  for (const auto& row : rows) {
    out.Sample("ncclscope_nccl_op_bus_bytes_total", row.labels, row.stats.bus_bytes);
  }
}

}  // namespace ncclscope::analytics
