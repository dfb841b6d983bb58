#include "agent/profiler/op_metrics.h"

#include <cstdio>

#include "agent/core/metric_family.h"

namespace ncclscope::profiler {
namespace {

constexpr const char* kOther = "other";

// Size buckets: powers of 4 from 1 KiB to 1 GiB.
constexpr std::uint8_t kSizeBuckets = 12;
const char* const kSizeLabels[kSizeBuckets] = {
    "0-1KiB",    "1KiB-4KiB",  "4KiB-16KiB",  "16KiB-64KiB",  "64KiB-256KiB", "256KiB-1MiB",
    "1MiB-4MiB", "4MiB-16MiB", "16MiB-64MiB", "64MiB-256MiB", "256MiB-1GiB",  "1GiB+"};

std::uint8_t SizeIndex(std::uint64_t bytes) {
  std::uint64_t bound = 1024;
  for (std::uint8_t i = 0; i + 1 < kSizeBuckets; ++i, bound *= 4) {
    if (bytes < bound) return i;
  }
  return kSizeBuckets - 1;
}

std::size_t DurationIndex(double seconds) {
  const std::vector<double>& bounds = DurationBuckets();
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    if (seconds <= bounds[i]) return i;
  }
  return bounds.size();
}

}  // namespace

std::string SizeBucket(std::uint64_t bytes) { return kSizeLabels[SizeIndex(bytes)]; }

const std::vector<double>& DurationBuckets() {
  // 1 us to ~16.8 s in steps of 4: small-message latency and multi-second stalls both resolve.
  static const std::vector<double> bounds = [] {
    std::vector<double> b;
    double v = 1e-6;
    for (int i = 0; i < 13; ++i, v *= 4) b.push_back(v);
    return b;
  }();
  return bounds;
}

std::string CommLabel(std::uint64_t comm_id) {
  char text[24];
  std::snprintf(text, sizeof(text), "0x%016llx", static_cast<unsigned long long>(comm_id));
  return text;
}

OpMetrics::OpMetrics(std::size_t max_comms, Clock::duration retention)
    : max_comms_(max_comms), retention_(retention) {}

void OpMetrics::SetLimits(std::size_t max_comms, Clock::duration retention) {
  std::lock_guard<std::mutex> lock(mutex_);
  max_comms_ = max_comms;
  retention_ = retention;
}

std::string OpMetrics::AdmitLocked(std::uint64_t comm_id) {
  const auto now = Clock::now();
  auto it = comms_.find(comm_id);
  if (it != comms_.end()) {
    it->second = now;
    return CommLabel(comm_id);
  }
  if (comms_.size() < max_comms_) {
    comms_.emplace(comm_id, now);
    return CommLabel(comm_id);
  }
  if (overflowed_.insert(comm_id).second) ++overflow_total_;
  return kOther;
}

std::string OpMetrics::LabelFor(std::uint64_t comm_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  return AdmitLocked(comm_id);
}

void OpMetrics::OnCommInit(const RingOrigin& /*origin*/, const ncclscope_comm_init_record& record) {
  std::lock_guard<std::mutex> lock(mutex_);
  AdmitLocked(record.comm_id);
}

void OpMetrics::OnCommFinalize(const RingOrigin& /*origin*/,
                               const ncclscope_comm_finalize_record& /*record*/) {}

void OpMetrics::OnOp(const RingOrigin& /*origin*/, const OpView& view) {
  const ncclscope_op_record& op = view.op;
  std::lock_guard<std::mutex> lock(mutex_);
  OpKey key{AdmitLocked(op.comm_id), op.rank, op.func, op.algo, op.proto, SizeIndex(op.bytes)};
  OpStats& stats = ops_[key];
  if (stats.duration_counts.empty()) stats.duration_counts.assign(DurationBuckets().size() + 1, 0);
  ++stats.ops;
  stats.bytes += op.bytes;
  if ((op.flags & NCCLSCOPE_OP_GPU_TIMING) != 0) {
    const double seconds = static_cast<double>(op.gpu_end_ns - op.gpu_start_ns) * 1e-9;
    ++stats.duration_counts[DurationIndex(seconds)];
    stats.duration_sum += seconds;
  }
}

void OpMetrics::OnProxyOp(const RingOrigin& /*origin*/, const ncclscope_proxy_op_record& record) {
  std::lock_guard<std::mutex> lock(mutex_);
  // PXN ops raised for another process carry no communicator id of ours.
  const std::string comm = record.comm_id != 0 ? AdmitLocked(record.comm_id) : "unknown";
  NetStats& stats = net_[NetKey{comm, record.rank, record.is_send}];
  ++stats.ops;
  stats.bytes += record.bytes;
  for (std::uint32_t i = 0; i < NCCLSCOPE_STEP_STATE_COUNT; ++i) {
    stats.state_ns[i] += record.state_ns[i];
  }
}

void OpMetrics::Expire(const std::set<std::uint64_t>& live_comm_ids, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::set<std::string> dropped;
  for (auto it = comms_.begin(); it != comms_.end();) {
    if (live_comm_ids.count(it->first) == 0 && now - it->second > retention_) {
      dropped.insert(CommLabel(it->first));
      it = comms_.erase(it);
    } else {
      ++it;
    }
  }
  if (dropped.empty()) return;
  for (auto it = ops_.begin(); it != ops_.end();) {
    it = dropped.count(it->first.comm) != 0 ? ops_.erase(it) : std::next(it);
  }
  for (auto it = net_.begin(); it != net_.end();) {
    it = dropped.count(it->first.comm) != 0 ? net_.erase(it) : std::next(it);
  }
}

void OpMetrics::Render(std::vector<prometheus::MetricFamily>& out) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto ops = metrics::Counter(
      "ncclscope_nccl_ops_total",
      "Completed NCCL operations recorded by the profiler plugin, by communicator, rank, "
      "function, algorithm, protocol and message-size bucket.");
  auto bytes = metrics::Counter(
      "ncclscope_nccl_op_bytes_total",
      "Message bytes of the completed operations (count x datatype size, per rank).");
  auto durations = metrics::Histogram(
      "ncclscope_nccl_op_gpu_duration_seconds",
      "GPU execution time of completed operations (latest channel end minus earliest channel "
      "start, from KernelCh timestamps); only operations with GPU timing.");
  for (const auto& [key, stats] : ops_) {
    metrics::Labels labels = {{"comm", key.comm},
                              {"rank", std::to_string(key.rank)},
                              {"func", ncclscope_func_name(key.func)},
                              {"algo", ncclscope_algo_name(key.algo)},
                              {"proto", ncclscope_proto_name(key.proto)},
                              {"size", kSizeLabels[key.size]}};
    metrics::Add(ops, labels, static_cast<double>(stats.ops));
    metrics::Add(bytes, labels, static_cast<double>(stats.bytes));
    metrics::AddHistogram(durations, std::move(labels), DurationBuckets(), stats.duration_counts,
                          stats.duration_sum);
  }
  out.push_back(std::move(ops));
  out.push_back(std::move(bytes));
  out.push_back(std::move(durations));

  auto net_ops = metrics::Counter(
      "ncclscope_nccl_network_ops_total",
      "Network proxy operations (one channel, one peer, one direction) recorded while ProxyOp "
      "events were on.");
  auto net_bytes = metrics::Counter("ncclscope_nccl_network_bytes_total",
                                    "Bytes the network proxy operations transferred.");
  auto net_states = metrics::Counter(
      "ncclscope_nccl_network_step_state_seconds_total",
      "Time network steps spent in each state (send_gpu_wait, send_peer_wait, send_wait, "
      "recv_wait, recv_flush_wait, recv_gpu_wait), summed over steps.");
  for (const auto& [key, stats] : net_) {
    metrics::Labels labels = {{"comm", key.comm},
                              {"rank", std::to_string(key.rank)},
                              {"direction", key.is_send != 0 ? "send" : "recv"}};
    metrics::Add(net_ops, labels, static_cast<double>(stats.ops));
    metrics::Add(net_bytes, labels, static_cast<double>(stats.bytes));
    for (std::uint32_t i = 0; i < NCCLSCOPE_STEP_STATE_COUNT; ++i) {
      // A send step has no recv states and vice versa: skip the ones that cannot occur.
      const bool send_state = i <= NCCLSCOPE_STEP_SEND_WAIT;
      if (send_state != (key.is_send != 0)) continue;
      metrics::Labels with_state = labels;
      with_state.push_back({"state", ncclscope_step_state_name(i)});
      metrics::Add(net_states, std::move(with_state),
                   static_cast<double>(stats.state_ns[i]) * 1e-9);
    }
  }
  out.push_back(std::move(net_ops));
  out.push_back(std::move(net_bytes));
  out.push_back(std::move(net_states));

  auto comms =
      metrics::Gauge("ncclscope_nccl_comms",
                     "Communicators with their own comm label (at most plugin.max_comms).");
  metrics::Add(comms, {}, static_cast<double>(comms_.size()));
  out.push_back(std::move(comms));
  auto over = metrics::Counter(
      "ncclscope_nccl_comms_over_limit_total",
      "Communicators beyond plugin.max_comms, whose records are aggregated under comm=\"other\".");
  metrics::Add(over, {}, static_cast<double>(overflow_total_));
  out.push_back(std::move(over));
}

std::uint64_t OpMetrics::OpsFor(const std::string& comm, int rank, const std::string& func,
                                const std::string& algo, const std::string& proto,
                                const std::string& size) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [key, stats] : ops_) {
    if (key.comm == comm && key.rank == rank && func == ncclscope_func_name(key.func) &&
        algo == ncclscope_algo_name(key.algo) && proto == ncclscope_proto_name(key.proto) &&
        size == kSizeLabels[key.size]) {
      return stats.ops;
    }
  }
  return 0;
}

}  // namespace ncclscope::profiler
