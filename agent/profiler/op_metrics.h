#pragma once

// Aggregates plugin records into Prometheus series at a bounded cardinality:
//   ops, bytes and a GPU-duration histogram per (comm, rank, func, algo, proto, size bucket);
//   network bytes, ops and step-state time per (comm, rank, direction[, state]);
// At most `max_comms` communicator ids get their own `comm` label; records of further
// communicators are aggregated under comm="other" and each such id is counted once. A
// communicator's series are dropped `retention` after its last record once no live ring has it.
// Thread-safe: the reader thread feeds records, scrapes render.

#include <prometheus/metric_family.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "agent/profiler/record_sink.h"

namespace ncclscope::profiler {

// Message-size bucket label for `bytes` ("0-1KiB", "1KiB-4KiB", ..., "256MiB-1GiB", "1GiB+").
std::string SizeBucket(std::uint64_t bytes);
// Upper bounds (seconds) of the GPU-duration histogram.
const std::vector<double>& DurationBuckets();
// "0x" + 16 hex digits.
std::string CommLabel(std::uint64_t comm_id);

class OpMetrics : public RecordSink {
 public:
  using Clock = std::chrono::steady_clock;

  OpMetrics(std::size_t max_comms, Clock::duration retention);

  void SetLimits(std::size_t max_comms, Clock::duration retention);

  void OnCommInit(const RingOrigin& origin, const ncclscope_comm_init_record& record) override;
  void OnCommFinalize(const RingOrigin& origin,
                      const ncclscope_comm_finalize_record& record) override;
  void OnOp(const RingOrigin& origin, const OpView& op) override;
  void OnProxyOp(const RingOrigin& origin, const ncclscope_proxy_op_record& record) override;

  // The `comm` label for a communicator id (admitting it under the cap, like a record would).
  std::string LabelFor(std::uint64_t comm_id);

  // Forgets communicators idle past the retention that no live ring lists any more.
  void Expire(const std::set<std::uint64_t>& live_comm_ids, Clock::time_point now);

  // Renders every family (appended to `out`).
  void Render(std::vector<prometheus::MetricFamily>& out) const;

  // For tests: ops counted under one exact label set, or 0.
  std::uint64_t OpsFor(const std::string& comm, int rank, const std::string& func,
                       const std::string& algo, const std::string& proto,
                       const std::string& size) const;

 private:
  struct OpKey {
    std::string comm;
    std::int32_t rank;
    std::uint8_t func, algo, proto, size;
    bool operator<(const OpKey& o) const {
      return std::tie(comm, rank, func, algo, proto, size) <
             std::tie(o.comm, o.rank, o.func, o.algo, o.proto, o.size);
    }
  };
  struct OpStats {
    std::uint64_t ops = 0;
    std::uint64_t bytes = 0;
    std::vector<std::uint64_t> duration_counts;  // DurationBuckets().size() + 1
    double duration_sum = 0;
  };
  struct NetKey {
    std::string comm;
    std::int32_t rank;
    std::uint8_t is_send;
    bool operator<(const NetKey& o) const {
      return std::tie(comm, rank, is_send) < std::tie(o.comm, o.rank, o.is_send);
    }
  };
  struct NetStats {
    std::uint64_t ops = 0;
    std::uint64_t bytes = 0;
    std::uint64_t state_ns[NCCLSCOPE_STEP_STATE_COUNT] = {};
  };
  // Label for a comm id, admitting it under the cap; refreshes its last-seen time.
  std::string AdmitLocked(std::uint64_t comm_id);

  mutable std::mutex mutex_;
  std::size_t max_comms_;
  Clock::duration retention_;
  std::map<std::uint64_t, Clock::time_point> comms_;  // admitted ids -> last record
  std::set<std::uint64_t> overflowed_;                // ids counted under "other"
  std::uint64_t overflow_total_ = 0;
  std::map<OpKey, OpStats> ops_;
  std::map<NetKey, NetStats> net_;
};

}  // namespace ncclscope::profiler
