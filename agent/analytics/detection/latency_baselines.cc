#include "agent/analytics/detection/latency_baselines.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "agent/analytics/detection/detection_metrics.h"
#include "agent/analytics/op_series.h"
#include "agent/analytics/size_bucket.h"
#include "agent/core/log.h"
#include "platform/errno_text.h"

namespace ncclscope::analytics::detection {
namespace {

std::uint64_t RatioKey(std::uint32_t comm_label, std::int32_t rank, std::uint8_t func) {
  return KeyPacker()
      .Add(comm_label, 16)
      .Add(static_cast<std::uint32_t>(rank), 32)
      .Add(func, 8)
      .key();
}

std::uint64_t Next(std::uint64_t& state) {  // xorshift64*: reservoir sampling needs no quality
  state ^= state >> 12;
  state ^= state << 25;
  state ^= state >> 27;
  return state * 0x2545F4914F6CDD1Dull;
}

enum LoadError { kUnreadable = 0, kTooLarge = 1, kCorrupt = 2 };

}  // namespace

const metrics::HistogramBounds& LatencyBaselines::RatioBounds() {
  static const metrics::HistogramBounds bounds({kRatioBounds.begin(), kRatioBounds.end()});
  return bounds;
}

LatencyBaselines::LatencyBaselines() = default;

LatencyBaselines::~LatencyBaselines() { Save(); }

std::string LatencyBaselines::Path() const { return state_dir_ + "/" + kFileName; }

void LatencyBaselines::Configure(const std::string& state_dir, std::size_t max_keys,
                                 std::int64_t now_s) {
  store_.SetMaxKeys(max_keys);
  now_s_ = now_s;
  if (state_dir == state_dir_ && last_save_ != Clock::time_point{}) return;
  if (state_dir != state_dir_) Save();
  state_dir_ = state_dir;
  last_save_ = Clock::now();
  if (state_dir_.empty()) return;
  if (::mkdir(state_dir_.c_str(), 0755) != 0 && errno != EEXIST) {
    ++load_errors_[kUnreadable];
    NCCLSCOPE_LOG(kWarn, "detection")
        << "cannot create detection.state_dir " << state_dir_ << ": "
        << platform::ErrnoText(errno).c_str() << "; latency baselines are kept in memory only";
    return;
  }
  std::string error;
  switch (store_.Load(Path(), now_s, &error)) {
    case BaselineStore::LoadStatus::kLoaded:
      loaded_ = store_.size();
      NCCLSCOPE_LOG(kInfo, "detection")
          << "read " << loaded_ << " latency baselines from " << Path();
      break;
    case BaselineStore::LoadStatus::kMissing:
      break;
    case BaselineStore::LoadStatus::kUnreadable:
      ++load_errors_[kUnreadable];
      NCCLSCOPE_LOG(kWarn, "detection") << error << "; starting with no latency baselines";
      break;
    case BaselineStore::LoadStatus::kTooLarge:
      ++load_errors_[kTooLarge];
      NCCLSCOPE_LOG(kWarn, "detection") << error << "; starting with no latency baselines";
      break;
    case BaselineStore::LoadStatus::kCorrupt:
      ++load_errors_[kCorrupt];
      NCCLSCOPE_LOG(kWarn, "detection")
          << "corrupt baseline file " << error
          << "; starting with no latency baselines (the file is replaced at the next save)";
      break;
  }
  // Learners keep the baselines they compare with: read them again from the new store.
  for (const auto& row : learners_.rows()) {
    Learner& l = *learners_.FindMutable(row.key);
    const BaselineEntry* e = store_.Find(l.key);
    l.p99_s = e != nullptr ? e->p99_s : 0;
  }
}

void LatencyBaselines::OnOp(const CommRegistry& registry, const Comm& comm, const LocalRank& local,
                            const ncclscope_op_record& op, Clock::time_point now) {
  if ((op.flags & NCCLSCOPE_OP_GPU_TIMING) == 0 || op.gpu_end_ns < op.gpu_start_ns) return;
  if (comm.nranks <= 0 || comm.nnodes <= 0 || op.rank < 0 || op.rank >= comm.nranks) return;
  const std::uint8_t size = SizeBucketIndex(op.bytes);
  const auto func = static_cast<std::uint8_t>(op.func);
  // Learners are keyed like the op series: one per (comm, rank, func, algo, proto, size).
  const std::uint64_t key = OpSeries::Key(comm.label, op.rank, func, op.algo, op.proto, size);
  Learner& l = learners_.Get(key, comm.label, [] { return std::string(); });
  if (l.window_start == Clock::time_point{}) {
    // The stable key: the framework's name for the group, else the job's, never the commHash.
    l.key.comm_name = !comm.name.empty()      ? comm.name
                      : !local.job_id.empty() ? "job:" + local.job_id
                                              : std::string();
    if (l.key.comm_name.size() > BaselineStore::kMaxCommNameBytes) {
      l.key.comm_name.resize(BaselineStore::kMaxCommNameBytes);
    }
    l.key.nranks = comm.nranks;
    l.key.nnodes = comm.nnodes;
    l.key.rank = op.rank;
    l.key.func = func;
    l.key.algo = op.algo;
    l.key.proto = op.proto;
    l.key.size = size;
    l.window_start = now;
    l.random ^= key | 1;
    const BaselineEntry* e = store_.Find(l.key);
    l.p99_s = e != nullptr ? e->p99_s : 0;
    l.reservoir.reserve(kReservoir);
  }
  const std::uint64_t ns = op.gpu_end_ns - op.gpu_start_ns;
  ++l.window_ops;
  if (l.reservoir.size() < kReservoir) {
    l.reservoir.push_back(ns);
  } else {
    const std::uint64_t slot = Next(l.random) % l.window_ops;
    if (slot < kReservoir) l.reservoir[slot] = ns;
  }
  if (l.p99_s <= 0) {
    ++unbaselined_;
    return;
  }
  Ratio& r = ratios_.Get(RatioKey(comm.label, op.rank, func), comm.label, [&] {
    std::string labels = CommRankLabels(registry.Label(comm.label), op.rank);
    labels += ',';
    metrics::AppendLabel(labels, "func", ncclscope_func_name(func));
    return labels;
  });
  const double ratio = static_cast<double>(ns) * 1e-9 / l.p99_s;
  const auto bucket = static_cast<std::size_t>(
      std::lower_bound(kRatioBounds.begin(), kRatioBounds.end(), ratio) - kRatioBounds.begin());
  ++r.counts[bucket];
  r.sum += ratio;
}

void LatencyBaselines::CloseWindow(Learner& l, std::int64_t now_s) {
  const std::size_t n = l.reservoir.size();
  const std::size_t index = std::min(n - 1, static_cast<std::size_t>(std::ceil(0.99 * n)) - 1);
  std::nth_element(l.reservoir.begin(), l.reservoir.begin() + static_cast<std::ptrdiff_t>(index),
                   l.reservoir.end());
  const double w = static_cast<double>(l.reservoir[index]) * 1e-9;
  l.reservoir.clear();
  l.window_ops = 0;
  if (w <= 0) return;
  BaselineEntry& e = store_.Get(l.key);
  if (e.windows == 0 || e.p99_s <= 0) {
    e.p99_s = w;
    e.windows = 1;
    e.anomalous = 0;
  } else {
    const double ratio = w / e.p99_s;
    const bool usual = ratio <= kAnomaly && ratio >= 1 / kAnomaly;
    if (usual || e.windows < kWarmupWindows) {
      const double alpha = std::max(1.0 / (e.windows + 1.0), 1.0 / kTauWindows);
      e.p99_s = std::exp((1 - alpha) * std::log(e.p99_s) + alpha * std::log(w));
      e.anomalous = 0;
      if (e.windows < UINT32_MAX) ++e.windows;
    } else if (++e.anomalous >= kRelearnWindows) {
      e.p99_s = w;  // a lasting change: the new level is the norm now
      e.anomalous = 0;
    }
  }
  e.last_seen_s = now_s;
  l.p99_s = e.p99_s;
  dirty_ = true;
}

void LatencyBaselines::EndPass(Clock::time_point now, std::int64_t now_s) {
  now_s_ = now_s;
  if (now - last_sweep_ >= std::chrono::seconds(1)) {
    last_sweep_ = now;
    for (const auto& row : learners_.rows()) {
      Learner& l = *learners_.FindMutable(row.key);
      if (l.window_ops >= kMinWindowOps && now - l.window_start >= kMinWindow) {
        CloseWindow(l, now_s);
        l.window_start = now;
      }
    }
  }
  if (dirty_ && !state_dir_.empty() && now - last_save_ >= kSaveEvery) {
    last_save_ = now;
    Save();
  }
}

void LatencyBaselines::Save() {
  if (!dirty_ || state_dir_.empty()) return;
  std::string error;
  if (store_.Save(Path(), &error)) {
    dirty_ = false;
  } else {
    ++save_errors_;
    NCCLSCOPE_LOG(kWarn, "detection") << "cannot save latency baselines: " << error;
  }
}

void LatencyBaselines::DropLabels(const absl::flat_hash_set<std::uint32_t>& labels) {
  learners_.DropLabels(labels);  // their baselines stay in the store, under their stable keys
  ratios_.DropLabels(labels);
}

double LatencyBaselines::BaselineOf(std::uint32_t comm_label, std::int32_t rank, std::uint8_t func,
                                    std::uint8_t algo, std::uint8_t proto,
                                    std::uint8_t size) const {
  const Learner* l = learners_.Find(OpSeries::Key(comm_label, rank, func, algo, proto, size));
  return l != nullptr ? l->p99_s : 0;
}

void LatencyBaselines::Render(metrics::TextWriter& out) const {
  out.Header(kNcclOpLatencyBaselineRatio);
  for (const auto& row : ratios_.rows()) {
    out.Histogram(kNcclOpLatencyBaselineRatio, row.labels, RatioBounds(), row.stats.counts,
                  row.stats.sum);
  }
  out.Header(kNcclOpLatencyUnbaselinedTotal);
  out.Sample(kNcclOpLatencyUnbaselinedTotal, "", unbaselined_);
  out.Header(kNcclBaselines);
  out.Sample(kNcclBaselines, "", static_cast<std::uint64_t>(store_.size()));
  out.Header(kNcclBaselinesLoaded);
  out.Sample(kNcclBaselinesLoaded, "", loaded_);
  out.Header(kNcclBaselineEvictionsTotal);
  out.Sample(kNcclBaselineEvictionsTotal, "", store_.evictions());
  out.Header(kNcclBaselineStoreErrorsTotal);
  out.Sample(kNcclBaselineStoreErrorsTotal, R"(op="load",reason="unreadable")",
             load_errors_[kUnreadable]);
  out.Sample(kNcclBaselineStoreErrorsTotal, R"(op="load",reason="too_large")",
             load_errors_[kTooLarge]);
  out.Sample(kNcclBaselineStoreErrorsTotal, R"(op="load",reason="corrupt")",
             load_errors_[kCorrupt]);
  out.Sample(kNcclBaselineStoreErrorsTotal, R"(op="save",reason="write")", save_errors_);
}

}  // namespace ncclscope::analytics::detection
