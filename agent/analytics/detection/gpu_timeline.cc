#include "agent/analytics/detection/gpu_timeline.h"

#include <absl/hash/hash.h>

#include <algorithm>

#include "agent/analytics/detection/detection_metrics.h"

namespace ncclscope::analytics::detection {
namespace {

std::uint64_t RankKey(std::uint32_t comm_label, std::int32_t rank) {
  return KeyPacker().Add(comm_label, 16).Add(static_cast<std::uint32_t>(rank), 32).key();
}

}  // namespace

// A process instance is its ring file (pids repeat across pods' namespaces); its GPU is the CUDA
// device the communicator was created on. The ring's name is hashed once, when it is set (hashing
// the string for every op was ~1.5 % of the agent's samples, docs/benchmarks.md "NCCL analytics").
std::uint64_t GpuTimeline::GpuKey(const LocalRank& rank) {
  return absl::HashOf(rank.ring_hash, rank.pid, rank.cuda_device);
}

void GpuTimeline::OnOp(const Comm& comm, const LocalRank& rank, const ncclscope_op_record& op) {
  Pending p;
  p.timed = (op.flags & NCCLSCOPE_OP_GPU_TIMING) != 0 && op.gpu_end_ns >= op.gpu_start_ns;
  p.start_ns = op.gpu_start_ns;
  p.end_ns = op.gpu_end_ns;
  p.order_ns = p.timed ? op.gpu_start_ns : op.enqueue_ns;
  p.weight = ncclscope_record_weight(op.weight);
  p.comm_label = comm.label;
  p.rank = op.rank;
  const std::uint64_t key = GpuKey(rank);
  if (last_gpu_ == nullptr || key != last_key_) {
    last_gpu_ = &gpus_[key];
    last_key_ = key;
  }
  last_gpu_->pass.push_back(p);
}

void GpuTimeline::EndPass(const CommRegistry& registry, Clock::time_point now,
                          Clock::duration idle) {
  last_gpu_ = nullptr;
  for (auto it = gpus_.begin(); it != gpus_.end();) {
    Gpu& gpu = it->second;
    if (gpu.pass.empty()) {
      if (now - gpu.last_seen > idle) {
        gpus_.erase(it++);
      } else {
        ++it;
      }
      continue;
    }
    gpu.last_seen = now;
    // A GPU's ops usually come from one lane of one process, already in start order: the check
    // is one read of each, the sort (when needed) several.
    auto by_start = [](const Pending& a, const Pending& b) { return a.order_ns < b.order_ns; };
    if (!std::is_sorted(gpu.pass.begin(), gpu.pass.end(), by_start)) {
      std::sort(gpu.pass.begin(), gpu.pass.end(), by_start);
    }
    // Consecutive ops of a GPU are mostly one rank's: its row is looked up once per run. The
    // pointer is replaced by every Get() (which may move the rows), never used after one.
    std::uint64_t row_key = 0;
    Stats* row = nullptr;
    for (const Pending& p : gpu.pass) {
      if (!p.timed) {
        gpu.last_timed = false;  // its interval is unknown: the next gap is not measurable
        continue;
      }
      const std::uint64_t key = RankKey(p.comm_label, p.rank);
      if (row == nullptr || key != row_key) {
        row_key = key;
        row = &table_.Get(key, p.comm_label,
                          [&] { return CommRankLabels(registry.Label(p.comm_label), p.rank); });
      }
      Stats& s = *row;
      if (gpu.busy_until_ns == 0 || p.start_ns >= gpu.busy_until_ns) {
        const std::uint64_t gap = gpu.busy_until_ns == 0 ? 0 : p.start_ns - gpu.busy_until_ns;
        const std::uint64_t own = p.end_ns - p.start_ns;
        if (gpu.busy_until_ns != 0 && gpu.last_timed && gap <= kMaxGapNs) {
          // gap - (weight - 1) x own: what the unrecorded operations did not take (see above).
          constexpr std::uint64_t kCap = std::uint64_t{1} << 61;  // far beyond any real time
          const std::uint64_t others =
              p.weight <= 1 ? 0 : (own > kCap / (p.weight - 1) ? kCap : own * (p.weight - 1));
          gpu.compute_debt_ns +=
              static_cast<std::int64_t>(std::min(gap, kCap)) - static_cast<std::int64_t>(others);
          if (gpu.compute_debt_ns > 0) {
            const auto compute = static_cast<std::uint64_t>(gpu.compute_debt_ns);
            if (compute < kPauseNs) {
              AddSat(s.compute_ns, compute);
            } else if (s.paused) {
              AddSat(s.compute_ns, compute);
              AddSat(s.pause_ns, compute);
            } else {
              // The rank's first pause starts its pause series, at 0, and is counted nowhere: a
              // series' first value is no increase to rate(), so counted in both the compute
              // would jump where the pause does not, which is what the verdict must not see.
              s.paused = true;
            }
            gpu.compute_debt_ns = 0;
          }
        } else {
          gpu.compute_debt_ns = 0;  // nothing measurable to carry it across
        }
        AddWeighted(s.communication_ns, own, p.weight);
        gpu.busy_until_ns = p.end_ns;
      } else if (p.end_ns > gpu.busy_until_ns) {
        // Overlaps the latest operation (another stream): only the part after it is new.
        AddWeighted(s.communication_ns, p.end_ns - gpu.busy_until_ns, p.weight);
        gpu.busy_until_ns = p.end_ns;
      }
      gpu.last_timed = true;
    }
    gpu.pass.clear();
    ++it;
  }
}

const GpuTimeline::Stats* GpuTimeline::Find(std::uint32_t comm_label, std::int32_t rank) const {
  return table_.Find(RankKey(comm_label, rank));
}

void GpuTimeline::Render(metrics::TextWriter& out) const {
  const auto& rows = table_.rows();
  out.Rows(kNcclRankComputeSecondsTotal, rows,
           [&](const auto& row) { return static_cast<double>(row.stats.compute_ns) * 1e-9; });
  // Only the ranks that paused (most never do): a series each would cost every node 24 of its
  // 1,500 (docs/metrics.md, "Cost"); the rules take a missing one as no pause.
  out.Header(kNcclRankPauseSecondsTotal);
  for (const auto& row : rows) {
    if (row.stats.paused) {
      out.Sample(kNcclRankPauseSecondsTotal, row.labels,
                 static_cast<double>(row.stats.pause_ns) * 1e-9);
    }
  }
  out.Rows(kNcclRankCommunicationSecondsTotal, rows,
           [&](const auto& row) { return static_cast<double>(row.stats.communication_ns) * 1e-9; });
}

}  // namespace ncclscope::analytics::detection
