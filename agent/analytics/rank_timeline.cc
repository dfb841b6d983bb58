#include "agent/analytics/rank_timeline.h"

#include <algorithm>

namespace ncclscope::analytics {

void RankTimeline::Observe(const CommRegistry& registry, std::uint32_t comm_label,
                           const ncclscope_op_record& op) {
  const std::uint64_t key =
      KeyPacker().Add(comm_label, 16).Add(static_cast<std::uint32_t>(op.rank), 24).key();
  Stats& s = table_.Get(key, comm_label, [&] {
    std::string labels;
    metrics::AppendLabel(labels, "comm", registry.Label(comm_label));
    labels += ',';
    metrics::AppendLabel(labels, "rank", std::to_string(op.rank));
    return labels;
  });
  if ((op.flags & NCCLSCOPE_OP_GPU_TIMING) == 0 || op.gpu_end_ns < op.gpu_start_ns) {
    s.last_end_ns = 0;  // the stretch of timed ops ends: what follows is not known to be a gap
    return;
  }
  const std::uint64_t start = op.gpu_start_ns;
  const std::uint64_t end = op.gpu_end_ns;
  if (s.last_end_ns == 0) {
    AddSat(s.inside_ns, end - start);
    s.last_end_ns = end;
    return;
  }
  if (start >= s.last_end_ns) {
    AddSat(s.between_ns, start - s.last_end_ns);
    AddSat(s.inside_ns, end - start);
  } else if (end > s.last_end_ns) {
    AddSat(s.inside_ns, end - s.last_end_ns);  // overlaps the previous op: only the part after it
  }
  // An op that ended before the previous one (overlapping, reported later) adds nothing.
  s.last_end_ns = std::max(s.last_end_ns, end);
}

void RankTimeline::Render(metrics::TextWriter& out) const {
  const auto& rows = table_.rows();
  out.Header("ncclscope_nccl_rank_inside_seconds_total",
             "GPU time the rank spent inside the communicator's operations with GPU timing, "
             "overlapping operations counted once: the communication side of the rank's "
             "timeline.",
             "counter");
  for (const auto& row : rows) {
    out.Sample("ncclscope_nccl_rank_inside_seconds_total", row.labels,
               static_cast<double>(row.stats.inside_ns) * 1e-9);
  }
  out.Header("ncclscope_nccl_rank_between_seconds_total",
             "GPU time between consecutive timed operations of the communicator on the rank (end "
             "of one to start of the next; not across an untimed operation): the compute side, "
             "time the GPU was not in this communicator's NCCL kernels.",
             "counter");
  for (const auto& row : rows) {
    out.Sample("ncclscope_nccl_rank_between_seconds_total", row.labels,
               static_cast<double>(row.stats.between_ns) * 1e-9);
  }
}

}  // namespace ncclscope::analytics
