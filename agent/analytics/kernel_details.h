#pragma once

// What NCCL 2.31+ (profiler ABI v7) reports beyond the op record (plugin/ring/ncclscope_ring.h:
// OP_DETAIL, OP_PHASES), per (comm, rank, func):
//  - kernel phases: the GPU time of each phase (initial_sync, compute, final_sync), the mean over
//    the op's channels that reported it, summed over ops; and the ops that had phases;
//  - sync wait: the initial_sync of symmetric-memory kernels, the time a rank's kernel waited at
//    the opening barrier for its peers (src/device/symmetric/all_gather.cuh at 2.31.2), measured
//    on the GPU. A straggler waits least: its peers wait for it. Regular kernels report phases
//    too, but their initial_sync is the time before the work batch starts (src/device/common.h
//    :323-346), not a peer wait, so it does not count here;
//  - user tags: ops and GPU seconds per ncclCollConfig_t.userProfilerTag (how training code names
//    forward, backward and optimizer calls), the first kMaxTagsPerComm tags of a communicator each
//    a label value of their own, further ones "other";
//  - kernel variants: symmetric-memory ops per variant (AllReduce_AGxLL_R, ...).
// Every sum is weighted by the record's weight (plugin.record_one_in): estimates of all ops.

#include <absl/container/flat_hash_map.h>

#include <cstdint>

#include "agent/analytics/comm_registry.h"
#include "agent/analytics/series_table.h"
#include "agent/core/text_exposition.h"
#include "agent/profiler/record_sink.h"

namespace ncclscope::analytics {

class KernelDetails {
 public:
  // A communicator's first this many distinct tags are label values; the rest are "other".
  static constexpr std::uint32_t kMaxTagsPerComm = 16;
  static constexpr const char* kOtherTag = "other";

  void Observe(const CommRegistry& registry, std::uint32_t comm_label,
               const profiler::OpView& view);
  void DropLabels(const absl::flat_hash_set<std::uint32_t>& labels);
  void Render(metrics::TextWriter& out) const;
  std::size_t series() const { return phases_.size() + tags_.size() + variants_.size(); }
  std::uint64_t refused() const {
    return phases_.refused() + tags_.refused() + variants_.refused();
  }
  // Per rank (key: comm label << 24 | rank): the mean sync wait per op with phases so far, for
  // the detection's evidence (detection/); nullopt without symmetric ops with phases.
  struct SyncWait {
    std::uint64_t ops = 0;
    double seconds = 0;
  };
  const SyncWait* SyncWaitOf(std::uint32_t comm_label, std::int32_t rank) const;

 private:
  struct PhaseStats {
    std::uint64_t ops = 0;                       // ops with phases
    double seconds[NCCLSCOPE_PHASE_COUNT] = {};  // per phase
    std::uint64_t sync_ops = 0;                  // symmetric ops with an initial_sync
    double sync_seconds = 0;
  };
  struct TagStats {
    std::uint64_t ops = 0;
    double gpu_seconds = 0;
  };
  struct VariantStats {
    std::uint64_t ops = 0;
  };
  // The tag's label value for this communicator: its decimal value, or "other" past the cap.
  std::uint32_t TagIndex(std::uint32_t comm_label, std::uint64_t tag);

  SeriesTable<PhaseStats> phases_;
  SeriesTable<TagStats> tags_;
  SeriesTable<VariantStats> variants_;
  // Per communicator label: its tags so far (tag -> index 1..kMaxTagsPerComm).
  absl::flat_hash_map<std::uint32_t, absl::flat_hash_map<std::uint64_t, std::uint32_t>> tag_index_;
  absl::flat_hash_map<std::uint64_t, SyncWait> sync_;
};

}  // namespace ncclscope::analytics
