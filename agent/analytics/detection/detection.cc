#include "agent/analytics/detection/detection.h"

#include <chrono>

#include "platform/clock.h"

namespace ncclscope::analytics::detection {
namespace {

std::int64_t WallSeconds() {
  return static_cast<std::int64_t>(platform::RealtimeNs() / 1'000'000'000);
}

}  // namespace

Detection::Detection(const DetectionSettings& settings) { Configure(settings); }

void Detection::Configure(const DetectionSettings& settings) {
  settings_ = settings;
  stragglers_.SetLimits(settings.straggler_min_cost, settings.straggler_threshold_s);
  baselines_.Configure(settings.state_dir, settings.baseline_max_keys, WallSeconds());
}

void Detection::OnOp(const CommRegistry& registry, const Comm& comm, const LocalRank& local,
                     const ncclscope_op_record& op, Clock::time_point now) {
  timeline_.OnOp(comm, local, op);
  if (op.kind == NCCLSCOPE_KIND_COLL && IsCollectiveFunc(op.func)) {
    baselines_.OnOp(registry, comm, local, op, now);
  }
}

void Detection::OnMatched(const CommRegistry& registry, std::uint32_t comm_label,
                          std::int32_t last_rank, std::uint64_t delay_ns, std::uint32_t weight) {
  stragglers_.OnMatched(registry, comm_label, last_rank, delay_ns, weight);
}

void Detection::EndPass(const CommRegistry& registry, Clock::time_point now) {
  timeline_.EndPass(registry, now, std::chrono::minutes(10));
  // A job's end ends its findings: a communicator no live ring lists any more has no straggler.
  absl::flat_hash_set<std::uint32_t> live;
  registry.ForEach([&](const Comm& comm) {
    if (comm.live) live.insert(comm.label);
  });
  stragglers_.EndPass(now, live);
  baselines_.EndPass(now, WallSeconds());
}

void Detection::DropLabels(const absl::flat_hash_set<std::uint32_t>& labels) {
  timeline_.DropLabels(labels);
  stragglers_.DropLabels(labels);
  baselines_.DropLabels(labels);
}

void Detection::Render(metrics::TextWriter& out) const {
  timeline_.Render(out);
  stragglers_.Render(out);
  baselines_.Render(out);
}

}  // namespace ncclscope::analytics::detection
