#include "agent/analytics/detection/straggler_detector.h"

#include <algorithm>

#include "agent/analytics/detection/detection_metrics.h"

namespace ncclscope::analytics::detection {
namespace {

std::uint64_t RankKey(std::uint32_t comm_label, std::int32_t rank) {
  return KeyPacker().Add(comm_label, 16).Add(static_cast<std::uint32_t>(rank), 32).key();
}

}  // namespace

void StragglerDetector::SetLimits(double min_cost, double threshold_s) {
  allowance_ = min_cost / 2;
  threshold_s_ = threshold_s;
}

void StragglerDetector::OnMatched(const CommRegistry& registry, std::uint32_t comm_label,
                                  std::int32_t last_rank, std::uint64_t delay_ns,
                                  std::uint32_t weight) {
  RankState& s = ranks_.Get(RankKey(comm_label, last_rank), comm_label,
                            [&] { return CommRankLabels(registry.Label(comm_label), last_rank); });
  s.window_delay_s += static_cast<double>(delay_ns) * 1e-9 * weight;  // plugin.record_one_in
  ++matched_in_window_[comm_label];
}

void StragglerDetector::EndPass(Clock::time_point now,
                                const absl::flat_hash_set<std::uint32_t>& live) {
  for (const auto& row : ranks_.rows()) {
    if (live.contains(row.comm_label)) continue;
    RankState& s = *ranks_.FindMutable(row.key);
    s.cusum_s = 0;
    s.window_delay_s = 0;
    s.finding = false;
  }
  if (window_start_ == Clock::time_point{}) window_start_ = now;
  const Clock::duration elapsed = now - window_start_;
  if (elapsed < kWindow) return;
  const double seconds = std::chrono::duration<double>(elapsed).count();
  const double cap = 2 * threshold_s_;
  for (const auto& row : ranks_.rows()) {
    RankState& s = *ranks_.FindMutable(row.key);
    auto matched = matched_in_window_.find(row.comm_label);
    if (matched == matched_in_window_.end() || matched->second == 0) continue;  // frozen
    const double cost = s.window_delay_s / seconds;
    s.cusum_s = std::clamp(s.cusum_s + cost - allowance_, 0.0, cap);
    s.window_delay_s = 0;
    if (!s.finding && s.cusum_s >= threshold_s_) {
      s.finding = true;
      ++s.alarms;
    } else if (s.finding && s.cusum_s < threshold_s_ / 2) {
      s.finding = false;
    }
  }
  matched_in_window_.clear();
  window_start_ = now;
}

void StragglerDetector::DropLabels(const absl::flat_hash_set<std::uint32_t>& labels) {
  ranks_.DropLabels(labels);
  for (const std::uint32_t label : labels) matched_in_window_.erase(label);
}

const StragglerDetector::RankState* StragglerDetector::Find(std::uint32_t comm_label,
                                                            std::int32_t rank) const {
  return ranks_.Find(RankKey(comm_label, rank));
}

void StragglerDetector::Render(metrics::TextWriter& out) const {
  const auto& rows = ranks_.rows();
  out.Header(kNcclStragglerCusumSeconds);
  // Only ranks with something accumulated, as the findings: a healthy node's ranks are at 0 and
  // would be a series each (docs/metrics.md, "Cost").
  for (const auto& row : rows) {
    if (row.stats.cusum_s <= 0) continue;
    out.Sample(kNcclStragglerCusumSeconds, row.labels, row.stats.cusum_s);
  }
  out.Header(kNcclRankFinding);
  for (const auto& row : rows) {
    if (!row.stats.finding) continue;
    out.Sample(kNcclRankFinding, row.labels, R"(finding="straggler",severity="warning")", 1.0);
  }
  out.Header(kNcclStragglerAlarmsTotal);
  for (const auto& row : rows) {
    if (row.stats.alarms == 0) continue;
    out.Sample(kNcclStragglerAlarmsTotal, row.labels, row.stats.alarms);
  }
}

}  // namespace ncclscope::analytics::detection
