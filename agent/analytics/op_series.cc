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

void OpSeries::Observe(const CommRegistry& registry, std::uint32_t comm_label,
                       const ncclscope_op_record& op, const BandwidthModel& model) {
  const std::uint8_t size = SizeBucketIndex(op.bytes);
  Stats& s =
      table_.Get(Key(comm_label, op.rank, op.func, op.algo, op.proto, size), comm_label, [&] {
        std::string labels;
        metrics::AppendLabel(labels, "comm", registry.Label(comm_label));
        labels += ',';
        metrics::AppendLabel(labels, "rank", std::to_string(op.rank));
        labels += ',';
        metrics::AppendLabel(labels, "func", ncclscope_func_name(op.func));
        labels += ',';
        metrics::AppendLabel(labels, "algo", ncclscope_algo_name(op.algo));
        labels += ',';
        metrics::AppendLabel(labels, "proto", ncclscope_proto_name(op.proto));
        labels += ',';
        metrics::AppendLabel(labels, "size", SizeBucketLabel(size));
        return labels;
      });
  ++s.ops;
  AddSat(s.bytes, op.bytes);
  if ((op.flags & NCCLSCOPE_OP_GPU_TIMING) != 0) {
    s.gpu.Observe(op.gpu_end_ns - op.gpu_start_ns);
    s.algo_bytes += model.algo_bytes;
    s.bus_bytes += model.bus_bytes();
  }
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
  out.Header("ncclscope_nccl_op_gpu_duration_seconds",
             "GPU execution time of completed operations (latest channel end minus earliest "
             "channel start, from KernelCh timestamps); only operations with GPU timing.",
             "histogram");
  for (const auto& row : rows) {
    out.Histogram("ncclscope_nccl_op_gpu_duration_seconds", row.labels, LatencyBounds(),
                  row.stats.gpu.counts, static_cast<double>(row.stats.gpu.sum_ns) * 1e-9);
  }
  out.Header("ncclscope_nccl_op_algo_bytes_total",
             "nccl-tests algorithm bytes (S) of the operations with GPU timing: divided by the GPU "
             "time (the duration histogram's _sum) it is the algorithm bandwidth.",
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
