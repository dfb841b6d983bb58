#pragma once

// Compute vs communication per rank. A GPU is either inside an NCCL operation of one of its
// communicators or outside all of them: computing (or idle). From the GPU start/end of every
// completed operation with kernel timing, per local GPU (process and CUDA device):
//   communication  the union of its operations' GPU intervals (time overlapped by operations of
//                  two communicators counts once, for the one that started first)
//   compute        each gap between the end of the GPU's latest earlier operation and the start
//                  of the next one (the GPU was not in NCCL), counted for the operation that
//                  ends it
//   pause          of that, the gaps of kPauseNs or more; a rank's first pause is counted in
//                  neither (it starts the rank's pause series, at 0: see EndPass)
// both attributed to the (comm, rank) of the operation, so that the sums over a rank's
// communicators are its GPU's totals and one communicator's ranks compare like for like: a
// straggler computes longer before the collectives its peers wait in, its peers' compute does
// not change (their waiting is inside NCCL). That is the clock-free cross-node straggler signal
// (straggler.md §3, "our equivalent of the compute score"); compute / (compute + communication)
// is the rank's compute share of an iteration.
//
// What it cannot know: a gap is counted only between two timed operations (plugin.kernel_duty_cycle
// < 1 leaves gaps across untimed ones out), gaps over kMaxGapNs (a job between phases) are left
// out, and records are folded in the order the agent reads them, sorted by GPU start within one
// pass: an operation that started before the latest one folded but was read a pass later adds
// only the part after it (a rare overlap of long operations on several streams).
//
// With plugin.record_one_in = N > 1 a record stands for N operations (its weight) and the gap
// before it holds, besides compute, the GPU time of the ~N-1 operations left unrecorded since
// the previous record. Communication is then N x the record's time, and compute the gap less
// (N-1) x the record's time: active time (gap plus the record's own time) less estimated
// communication, the same quantity as above when N = 1. The per-record difference can be
// negative (a long operation recorded after a short gap); it is carried per GPU and counted once
// positive, so the counter stays monotonic and unbiased over many records (its error is at most
// one record's N x duration, and it is reset at a gap that cannot be measured).

#include <absl/container/flat_hash_map.h>

#include <cstdint>
#include <vector>

#include "agent/analytics/comm_registry.h"
#include "agent/analytics/series_table.h"
#include "agent/core/text_exposition.h"

namespace ncclscope::analytics::detection {

class GpuTimeline {
 public:
  static constexpr std::uint64_t kMaxGapNs = 60'000'000'000;
  // A gap whose compute is this long or longer is also a pause (a checkpoint, an evaluation, a
  // host stall). Its whole length reaches the counters at once, when it ends, and each node's
  // agent is scraped at its own time: over the 30 s the slow-rank verdict compares, a pause
  // every rank took shows on the node scraped first as a second or more of compute the others
  // do not have yet (the fault benchmark's 8 s pauses named healthy GPUs 32 times). So the
  // verdict compares compute without pauses over 30 s, and pauses over 5 minutes, where a
  // scrape's skew is small (deploy/prometheus/rules/ncclscope-nccl.yaml). A second: a gap of
  // 1.25 s moves a 30 s rate by 5 % of the time, the verdict's threshold.
  static constexpr std::uint64_t kPauseNs = 1'000'000'000;
  struct Stats {
    std::uint64_t compute_ns = 0;
    std::uint64_t pause_ns = 0;  // the part of compute_ns in gaps of kPauseNs or more
    bool paused = false;         // a first pause was seen: the pause series exists
    std::uint64_t communication_ns = 0;
  };

  // A completed operation (collective or p2p, timed or not) of a local rank.
  void OnOp(const Comm& comm, const LocalRank& rank, const ncclscope_op_record& op);
  // Folds the pass's operations, GPU by GPU in start order; forgets GPUs idle for `idle`.
  void EndPass(const CommRegistry& registry, Clock::time_point now, Clock::duration idle);

  void DropLabels(const absl::flat_hash_set<std::uint32_t>& labels) { table_.DropLabels(labels); }
  void Render(metrics::TextWriter& out) const;
  const Stats* Find(std::uint32_t comm_label, std::int32_t rank) const;
  std::size_t series() const { return table_.size(); }
  std::size_t gpus() const { return gpus_.size(); }

 private:
  struct Pending {
    std::uint64_t order_ns = 0;  // GPU start when timed, else host enqueue
    std::uint64_t start_ns = 0;
    std::uint64_t end_ns = 0;
    bool timed = false;
    std::uint32_t weight = 1;  // the operations the record stands for (plugin.record_one_in)
    std::uint32_t comm_label = 0;
    std::int32_t rank = 0;
  };
  struct Gpu {
    std::uint64_t busy_until_ns = 0;   // end of the latest folded timed operation
    bool last_timed = false;           // whether the latest folded operation had GPU timing
    std::int64_t compute_debt_ns = 0;  // estimated compute not yet counted (<= 0), see above
    std::vector<Pending> pass;
    Clock::time_point last_seen{};
  };
  static std::uint64_t GpuKey(const LocalRank& rank);

  absl::flat_hash_map<std::uint64_t, Gpu> gpus_;
  // The GPU of the previous op: a lane's records come in runs of one process's ranks. Only OnOp
  // inserts into gpus_ (and resets this after), only EndPass erases (and clears this).
  std::uint64_t last_key_ = 0;
  Gpu* last_gpu_ = nullptr;
  SeriesTable<Stats> table_;
};

}  // namespace ncclscope::analytics::detection
