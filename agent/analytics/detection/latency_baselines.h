#pragma once

// Latency against its baseline, per rank: every collective with GPU timing is divided by the
// usual P99 latency of its stable key (baseline_store.h: the communicator's name, size, nodes,
// rank, function, algorithm, protocol, size bucket) and counted in a histogram of that ratio per
// (comm, rank, func). Its buckets sit where the decisions are (1, 1.5, 2, 2.5, 3, 5): a bound at 2
// makes `histogram_quantile(0.99, ...) > 2` tell "P99 over twice its baseline" exactly (it is
// "under 99 % of the ops at or below 2x"), which the op series' 4x-wide latency buckets cannot;
// the others place the P99 in the alert's summary and on the dashboard, finest between 2 and 3.
// The mean (the drift rule) reads _sum/_count. 9 series per (comm, rank, func); 0.5, 0.8, 1.25
// and 10 were dropped (96 series on the simulated 8-GPU node, docs/metrics.md "Cost"): no rule
// reads them.
//
// Learning, per key: windows of at least kMinWindowOps ops and kMinWindow; a window's P99 (from a
// reservoir sample of kReservoir durations) moves the baseline in log space with weight
// 1/(windows+1), at least 1/kTauWindows (a time constant of about an hour of windows). A window
// more than kAnomaly x away from the baseline (after the first kWarmupWindows) does not move it —
// a fault must not become the norm — unless kRelearnWindows such windows come in a row (6 h: a
// lasting change of hardware or software), when its P99 becomes the baseline. Keys of a new
// communicator name have no baseline for their first window; their ops are counted as
// unbaselined. The store is read from detection.state_dir at start and written back every
// kSaveEvery while it changes, and when the agent stops.

#include <absl/container/flat_hash_map.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "agent/analytics/comm_registry.h"
#include "agent/analytics/detection/baseline_store.h"
#include "agent/analytics/series_table.h"
#include "agent/core/text_exposition.h"

namespace ncclscope::analytics::detection {

class LatencyBaselines {
 public:
  static constexpr std::size_t kReservoir = 256;
  static constexpr std::uint64_t kMinWindowOps = 64;
  static constexpr Clock::duration kMinWindow = std::chrono::seconds(10);
  static constexpr std::uint32_t kWarmupWindows = 3;
  static constexpr std::uint32_t kTauWindows = 360;
  static constexpr double kAnomaly = 1.5;
  static constexpr std::uint32_t kRelearnWindows = 2160;
  static constexpr Clock::duration kSaveEvery = std::chrono::seconds(60);
  static constexpr const char* kFileName = "latency-baselines.v1";

  LatencyBaselines();
  ~LatencyBaselines();
  LatencyBaselines(const LatencyBaselines&) = delete;
  LatencyBaselines& operator=(const LatencyBaselines&) = delete;

  // Reads the store of `state_dir` (empty: memory only) when it differs from the current one,
  // after saving the current one.
  void Configure(const std::string& state_dir, std::size_t max_keys, std::int64_t now_s);
  // A completed collective of a local rank.
  void OnOp(const CommRegistry& registry, const Comm& comm, const LocalRank& local,
            const ncclscope_op_record& op, Clock::time_point now);
  // Closes the windows that are due and saves the store when it is time.
  void EndPass(Clock::time_point now, std::int64_t now_s);
  // Writes the store now (when there is a state directory and something changed).
  void Save();

  void DropLabels(const absl::flat_hash_set<std::uint32_t>& labels);
  void Render(metrics::TextWriter& out) const;
  std::size_t series() const { return ratios_.size(); }
  const BaselineStore& store() const { return store_; }
  // The baseline P99 (seconds) a key's ops are compared with now, 0 when none.
  double BaselineOf(std::uint32_t comm_label, std::int32_t rank, std::uint8_t func,
                    std::uint8_t algo, std::uint8_t proto, std::uint8_t size) const;

  // The ratio histogram's bounds (the bound at 2 makes the rules' "P99 over 2" exact; none at 1:
  // docs/metrics.md, "Cost"), and its buckets with +Inf.
  static constexpr std::array<double, 5> kRatioBounds = {1.5, 2, 2.5, 3, 5};
  static constexpr std::size_t kRatioBuckets = kRatioBounds.size() + 1;
  static const metrics::HistogramBounds& RatioBounds();

 private:
  struct Learner {
    BaselineKey key;
    double p99_s = 0;  // the baseline now (0: none yet)
    std::vector<std::uint64_t> reservoir;
    std::uint64_t window_ops = 0;
    Clock::time_point window_start{};
    std::uint64_t random = 0x9e3779b97f4a7c15ull;
  };
  struct Ratio {
    std::uint64_t counts[kRatioBuckets] = {};
    double sum = 0;
  };
  void CloseWindow(Learner& learner, std::int64_t now_s);
  std::string Path() const;

  std::string state_dir_;
  BaselineStore store_{4096};
  SeriesTable<Learner> learners_;
  SeriesTable<Ratio> ratios_;
  bool dirty_ = false;
  Clock::time_point last_save_{};
  Clock::time_point last_sweep_{};
  std::int64_t now_s_ = 0;
  std::uint64_t loaded_ = 0;
  std::uint64_t unbaselined_ = 0;
  std::uint64_t load_errors_[3] = {};  // unreadable, too_large, corrupt
  std::uint64_t save_errors_ = 0;
};

}  // namespace ncclscope::analytics::detection
