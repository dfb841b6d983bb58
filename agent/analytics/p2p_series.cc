#include "agent/analytics/p2p_series.h"

#include "agent/analytics/size_bucket.h"

namespace ncclscope::analytics {

void P2pSeries::Observe(const CommRegistry& registry, const Comm& comm,
                        const ncclscope_op_record& op) {
  const PeerClass peer_class = registry.ClassOf(comm, op.rank, op.peer);
  const std::uint8_t size = SizeBucketIndex(op.bytes);
  const std::uint64_t key = KeyPacker()
                                .Add(comm.label, 16)
                                .Add(static_cast<std::uint32_t>(op.rank), 24)
                                .Add(op.func, 5)
                                .Add(static_cast<std::uint8_t>(peer_class), 2)
                                .Add(size, 4)
                                .key();
  Stats& s = table_.Get(key, comm.label, [&] {
    std::string labels;
    metrics::AppendLabel(labels, "comm", registry.Label(comm.label));
    labels += ',';
    metrics::AppendLabel(labels, "rank", std::to_string(op.rank));
    labels += ',';
    metrics::AppendLabel(labels, "func", ncclscope_func_name(op.func));
    labels += ',';
    metrics::AppendLabel(labels, "peer_class", PeerClassName(peer_class));
    labels += ',';
    metrics::AppendLabel(labels, "size", SizeBucketLabel(size));
    return labels;
  });
  ++s.ops;
  AddSat(s.bytes, op.bytes);
  if ((op.flags & NCCLSCOPE_OP_GPU_TIMING) != 0) {
    AddSat(s.gpu_ns, op.gpu_end_ns - op.gpu_start_ns);
    s.timed_bytes += static_cast<double>(op.bytes);
  }
}

void P2pSeries::Render(metrics::TextWriter& out) const {
  const auto& rows = table_.rows();
  out.Header("ncclscope_nccl_p2p_ops_total",
             "Completed Send/Recv operations (AlltoAll, Gather and Scatter included, which NCCL "
             "runs as per-peer Send/Recv) by peer class: same_node, other_node or self.",
             "counter");
  for (const auto& row : rows)
    out.Sample("ncclscope_nccl_p2p_ops_total", row.labels, row.stats.ops);
  out.Header("ncclscope_nccl_p2p_bytes_total", "Message bytes of those operations.", "counter");
  for (const auto& row : rows) {
    out.Sample("ncclscope_nccl_p2p_bytes_total", row.labels, row.stats.bytes);
  }
  out.Header("ncclscope_nccl_p2p_gpu_seconds_total",
             "GPU time of those operations that had GPU timing.", "counter");
  for (const auto& row : rows) {
    out.Sample("ncclscope_nccl_p2p_gpu_seconds_total", row.labels,
               static_cast<double>(row.stats.gpu_ns) * 1e-9);
  }
  out.Header("ncclscope_nccl_p2p_bus_bytes_total",
             "Bytes of the operations with GPU timing (bus bytes: factor 1): divided by "
             "ncclscope_nccl_p2p_gpu_seconds_total it is the p2p bandwidth per peer class.",
             "counter");
  for (const auto& row : rows) {
    out.Sample("ncclscope_nccl_p2p_bus_bytes_total", row.labels, row.stats.timed_bytes);
  }
}

}  // namespace ncclscope::analytics
