#include "agent/analytics/kernel_details.h"

#include <string>

#include "agent/analytics/analytics_metrics.h"

namespace ncclscope::analytics {
namespace {

std::uint64_t RankKey(std::uint32_t comm_label, std::int32_t rank) {
  return KeyPacker().Add(comm_label, 16).Add(static_cast<std::uint32_t>(rank), 24).key();
}

const char* PhaseName(std::uint32_t phase) {
  static const char* const kNames[NCCLSCOPE_PHASE_COUNT] = {"initial_sync", "compute",
                                                            "final_sync"};
  return phase < NCCLSCOPE_PHASE_COUNT ? kNames[phase] : "unknown";
}

std::string RankLabels(const CommRegistry& registry, std::uint32_t comm_label,
                       const ncclscope_op_record& op) {
  std::string text = CommRankLabels(registry.Label(comm_label), op.rank);
  text += ',';
  metrics::AppendLabel(text, "func", ncclscope_func_name(op.func));
  return text;
}

}  // namespace

std::uint32_t KernelDetails::TagIndex(std::uint32_t comm_label, std::uint64_t tag) {
  auto& tags = tag_index_[comm_label];
  auto it = tags.find(tag);
  if (it != tags.end()) return it->second;
  if (tags.size() >= kMaxTagsPerComm) return 0;  // "other"
  const auto index = static_cast<std::uint32_t>(tags.size() + 1);
  tags.emplace(tag, index);
  return index;
}

void KernelDetails::Observe(const CommRegistry& registry, std::uint32_t comm_label,
                            const profiler::OpView& view) {
  const ncclscope_op_record& op = view.op;
  const std::uint32_t weight = ncclscope_record_weight(op.weight);
  if (view.n_phase_channels != 0) {
    const std::uint64_t key = KeyPacker()
                                  .Add(comm_label, 16)
                                  .Add(static_cast<std::uint32_t>(op.rank), 24)
                                  .Add(op.func, 5)
                                  .key();
    PhaseStats& s =
        phases_.Get(key, comm_label, [&] { return RankLabels(registry, comm_label, op); });
    AddSat(s.ops, weight);
    double mean[NCCLSCOPE_PHASE_COUNT] = {};
    for (std::uint32_t phase = 0; phase < NCCLSCOPE_PHASE_COUNT; ++phase) {
      std::uint64_t sum = 0;
      std::uint32_t n = 0;
      for (std::uint32_t c = 0; c < view.n_phase_channels; ++c) {
        if ((view.phases[c].present & (1u << phase)) == 0) continue;
        sum += view.phases[c].ns[phase];
        ++n;
      }
      mean[phase] = n != 0 ? static_cast<double>(sum) / n * 1e-9 : 0.0;
      s.seconds[phase] += mean[phase] * weight;
    }
    if ((op.flags & NCCLSCOPE_OP_SYMMETRIC) != 0) {
      AddSat(s.sync_ops, weight);
      s.sync_seconds += mean[0] * weight;
      SyncWait& w = sync_[RankKey(comm_label, op.rank)];
      AddSat(w.ops, weight);
      w.seconds += mean[0] * weight;
    }
  }
  if (view.user_tag != 0) {
    const std::uint32_t index = TagIndex(comm_label, view.user_tag);
    const std::uint64_t key = KeyPacker()
                                  .Add(comm_label, 16)
                                  .Add(static_cast<std::uint32_t>(op.rank), 24)
                                  .Add(op.func, 5)
                                  .Add(index, 5)
                                  .key();
    TagStats& s = tags_.Get(key, comm_label, [&] {
      std::string text = RankLabels(registry, comm_label, op);
      text += ',';
      metrics::AppendLabel(text, "user_tag",
                           index == 0 ? kOtherTag : std::to_string(view.user_tag));
      return text;
    });
    AddSat(s.ops, weight);
    if ((op.flags & NCCLSCOPE_OP_GPU_TIMING) != 0) {
      s.gpu_seconds += static_cast<double>(op.gpu_end_ns - op.gpu_start_ns) * 1e-9 * weight;
    }
  }
  if (view.kernel_variant != NCCLSCOPE_KV_NONE) {
    const std::uint64_t key = KeyPacker()
                                  .Add(comm_label, 16)
                                  .Add(static_cast<std::uint32_t>(op.rank), 24)
                                  .Add(op.func, 5)
                                  .Add(view.kernel_variant, 5)
                                  .key();
    VariantStats& s = variants_.Get(key, comm_label, [&] {
      std::string text = RankLabels(registry, comm_label, op);
      text += ',';
      metrics::AppendLabel(text, "kernel_variant",
                           ncclscope_kernel_variant_name(view.kernel_variant));
      return text;
    });
    AddSat(s.ops, weight);
  }
}

const KernelDetails::SyncWait* KernelDetails::SyncWaitOf(std::uint32_t comm_label,
                                                         std::int32_t rank) const {
  auto it = sync_.find(RankKey(comm_label, rank));
  return it == sync_.end() ? nullptr : &it->second;
}

void KernelDetails::DropLabels(const absl::flat_hash_set<std::uint32_t>& labels) {
  phases_.DropLabels(labels);
  tags_.DropLabels(labels);
  variants_.DropLabels(labels);
  for (std::uint32_t label : labels) tag_index_.erase(label);
  absl::erase_if(sync_, [&](const auto& entry) {
    return labels.contains(static_cast<std::uint32_t>(entry.first >> 24));
  });
}

void KernelDetails::Render(metrics::TextWriter& out) const {
  const auto& phases = phases_.rows();
  out.Rows(kNcclKernelPhaseOpsTotal, phases, [](const auto& row) { return row.stats.ops; });
  out.Header(kNcclKernelPhaseSecondsTotal);
  for (const auto& row : phases) {
    for (std::uint32_t phase = 0; phase < NCCLSCOPE_PHASE_COUNT; ++phase) {
      std::string labels = row.labels;
      labels += ',';
      metrics::AppendLabel(labels, "phase", PhaseName(phase));
      out.Sample(kNcclKernelPhaseSecondsTotal, labels, row.stats.seconds[phase]);
    }
  }
  out.Rows(kNcclSyncWaitOpsTotal, phases, [](const auto& row) { return row.stats.sync_ops; });
  out.Rows(kNcclSyncWaitSecondsTotal, phases,
           [](const auto& row) { return row.stats.sync_seconds; });
  const auto& tags = tags_.rows();
  out.Rows(kNcclUserTagOpsTotal, tags, [](const auto& row) { return row.stats.ops; });
  out.Rows(kNcclUserTagGpuSecondsTotal, tags,
           [](const auto& row) { return row.stats.gpu_seconds; });
  out.Rows(kNcclKernelVariantOpsTotal, variants_.rows(),
           [](const auto& row) { return row.stats.ops; });
}

}  // namespace ncclscope::analytics
