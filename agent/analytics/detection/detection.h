#pragma once

// The detectors over the NCCL analytics' data (docs/analytics.md, "Detection"), behind one
// interface that nccl_analytics.cc feeds:
//   gpu_timeline        compute vs communication per rank (the cross-node straggler signal)
//   straggler_detector  the node's CUSUM over the cost of each last arriver (findings)
//   latency_baselines   latency against its stable-key baseline (baseline_store: state_dir)
// The cross-node statistics (median / MAD over a communicator's ranks) are Prometheus recording
// rules over these series (deploy/prometheus/rules/ncclscope-nccl.yaml).

#include <cstdint>

#include "agent/analytics/comm_registry.h"
#include "agent/analytics/detection/detection_settings.h"
#include "agent/analytics/detection/gpu_timeline.h"
#include "agent/analytics/detection/latency_baselines.h"
#include "agent/analytics/detection/straggler_detector.h"
#include "agent/core/text_exposition.h"

namespace ncclscope::analytics::detection {

class Detection {
 public:
  explicit Detection(const DetectionSettings& settings = {});
  void Configure(const DetectionSettings& settings);

  // A completed operation of a local rank (collective or p2p).
  void OnOp(const CommRegistry& registry, const Comm& comm, const LocalRank& local,
            const ncclscope_op_record& op, Clock::time_point now);
  // A collective matched across the node's ranks (ArrivalMatcher's observer).
  void OnMatched(const CommRegistry& registry, std::uint32_t comm_label, std::int32_t last_rank,
                 std::uint64_t delay_ns, std::uint32_t weight = 1);
  void EndPass(const CommRegistry& registry, Clock::time_point now);

  void DropLabels(const absl::flat_hash_set<std::uint32_t>& labels);
  void Render(metrics::TextWriter& out) const;
  std::size_t series() const {
    return timeline_.series() + stragglers_.series() + baselines_.series();
  }

  const GpuTimeline& timeline() const { return timeline_; }
  const StragglerDetector& stragglers() const { return stragglers_; }
  const LatencyBaselines& baselines() const { return baselines_; }
  LatencyBaselines& baselines() { return baselines_; }

 private:
  DetectionSettings settings_;
  GpuTimeline timeline_;
  StragglerDetector stragglers_;
  LatencyBaselines baselines_;
};

}  // namespace ncclscope::analytics::detection
