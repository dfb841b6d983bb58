#include "agent/analytics/p2p_series.h"

#include "agent/analytics/analytics_metrics.h"
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
    std::string labels = CommRankLabels(registry.Label(comm.label), op.rank);
    labels += ',';
    metrics::AppendLabel(labels, "func", ncclscope_func_name(op.func));
    labels += ',';
    metrics::AppendLabel(labels, "peer_class", PeerClassName(peer_class));
    labels += ',';
    metrics::AppendLabel(labels, "size", SizeBucketLabel(size));
    return labels;
  });
  const std::uint32_t weight = ncclscope_record_weight(op.weight);  // plugin.record_one_in
  AddSat(s.ops, weight);
  AddWeighted(s.bytes, op.bytes, weight);
  if ((op.flags & NCCLSCOPE_OP_GPU_TIMING) != 0) {
    AddWeighted(s.gpu_ns, op.gpu_end_ns - op.gpu_start_ns, weight);
    s.timed_bytes += static_cast<double>(op.bytes) * weight;
  }
}

void P2pSeries::Render(metrics::TextWriter& out) const {
  const auto& rows = table_.rows();
  out.Rows(kNcclP2pOpsTotal, rows, [&](const auto& row) { return row.stats.ops; });
  out.Rows(kNcclP2pBytesTotal, rows, [&](const auto& row) { return row.stats.bytes; });
  out.Rows(kNcclP2pGpuSecondsTotal, rows,
           [&](const auto& row) { return static_cast<double>(row.stats.gpu_ns) * 1e-9; });
  out.Rows(kNcclP2pBusBytesTotal, rows, [&](const auto& row) { return row.stats.timed_bytes; });
}

}  // namespace ncclscope::analytics
