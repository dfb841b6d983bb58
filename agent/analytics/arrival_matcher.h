#pragma once

// Slow-rank detection on this node. The ranks of a node share one clock, so one collective's
// records from every local rank (matched by comm id, func and NCCL's seqNumber, which are equal
// across ranks) tell who arrived last and by how much: arrival = the op's earliest kernel-channel
// start on the GPU (host enqueue time when some rank of the instance has no GPU timing). In a
// synchronous collective the last arriver is the culprit: the others wait inside the collective
// for it (shared/reference/straggler.md §1). Per instance:
//   last arriver       -> ncclscope_nccl_coll_last_arrivals_total{comm,rank} += 1, and
//                         ..._last_arrival_delay_seconds_total += latest - second latest
//   every rank         -> arrival lag (own - earliest) into a counter (its mean is the counter
//                         over ..._matched_total; a histogram per rank with
//                         plugin.rank_histograms), and wait (latest - own: time spent waiting
//                         inside) into a counter
// NCCL 2.31+ symmetric kernels also report, per channel, how long the kernel waited at its
// opening barrier for its peers (the initial_sync kernel phase, GPU-measured: kernel_details.h).
// When every rank of an instance has it, it is a second, independent witness: the straggler is
// the rank that waited least, and it held the others for the second-least wait minus its own.
//   least sync wait    -> ncclscope_nccl_coll_least_sync_waits_total{comm,rank} += 1
// The detectors get both witnesses (Observer); where they name different ranks the instance is
// counted in ncclscope_nccl_coll_witness_disagreements_total{comm}.
// Who takes part: the communicator's ranks that the live rings' tables list on this node (known
// from the end of the pass in which a communicator first shows up; its records of that pass wait
// for it). Memory is bounded: at most `window` instances wait for the rest of their ranks; an
// instance
// still incomplete after `timeout` (a rank's record was dropped, or the collective hangs) or
// pushed out by the window is evicted and counted.

#include <absl/container/flat_hash_map.h>
#include <absl/container/inlined_vector.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <utility>

#include "agent/analytics/comm_registry.h"
#include "agent/analytics/latency_buckets.h"
#include "agent/analytics/series_table.h"
#include "agent/core/text_exposition.h"

namespace ncclscope::analytics {

class ArrivalMatcher {
 public:
  struct Limits {
    std::size_t window = 4096;
    Clock::duration timeout = std::chrono::seconds(10);
  };
  struct RankStats {
    LatencyHistogram lag;
    std::uint64_t wait_ns = 0;
    std::uint64_t last_arrivals = 0;
    std::uint64_t last_delay_ns = 0;
    std::uint64_t least_sync_waits = 0;
  };
  // The GPU-measured witness of one matched instance (symmetric kernels' initial_sync phase):
  // the rank that waited least at the opening barrier and by how much less than the next one;
  // rank -1 when some rank of the instance reported no phases.
  struct SyncWitness {
    std::int32_t rank = -1;
    std::uint64_t delay_ns = 0;
  };
  enum Eviction { kIncomplete = 0, kCapacity = 1 };

  void SetLimits(const Limits& limits) { limits_ = limits; }
  // Whether the arrival lag is also rendered as a histogram (16 series per rank instead of one:
  // plugin.rank_histograms; the rules and dashboards read the mean, series_budget.mjs).
  void SetLagHistogram(bool lag_histogram) { lag_histogram_ = lag_histogram; }
  // Called for every matched collective with its last arriver and its lead over the second-last
  // (the detectors' input, agent/analytics/detection), and the collectives it stands for.
  using Observer =
      std::function<void(std::uint32_t comm_label, std::int32_t last_rank, std::uint64_t delay_ns,
                         const SyncWitness& sync, std::uint32_t weight)>;
  void SetObserver(Observer observer) { observer_ = std::move(observer); }
  // A completed collective of a local rank (kind COLL); `sync_ns` its mean initial_sync over its
  // channels when it is a symmetric kernel that reported phases (UINT64_MAX when not).
  void OnOp(const CommRegistry& registry, const Comm& comm, const ncclscope_op_record& op,
            Clock::time_point now, std::uint64_t sync_ns = kNoSync);
  static constexpr std::uint64_t kNoSync = UINT64_MAX;
  // Settles instances whose participants were not known when their records came (a
  // communicator's first pass), and evicts the ones that waited too long.
  void EndPass(const CommRegistry& registry, Clock::time_point now);

  void DropLabels(const absl::flat_hash_set<std::uint32_t>& labels);
  void Render(metrics::TextWriter& out) const;

  std::size_t pending() const { return pending_.size(); }
  std::uint64_t evictions(Eviction e) const { return evictions_[e]; }
  std::uint64_t matched(std::uint32_t comm_label) const;
  const RankStats* Find(std::uint32_t comm_label, std::int32_t rank) const;
  std::size_t series() const { return ranks_.size() + matched_.size(); }
  std::uint64_t refused() const { return ranks_.refused() + matched_.refused(); }

 private:
  struct Key {
    std::uint64_t comm_id;
    std::uint64_t seq;
    std::uint8_t func;
    bool operator==(const Key& o) const {
      return comm_id == o.comm_id && seq == o.seq && func == o.func;
    }
    // absl's hash, seeded per process: comm ids and seqs come from pods, and an unseeded mix
    // would let one pod craft thousands of colliding keys and make every probe of this map walk
    // them.
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), k.comm_id, k.seq, k.func);
    }
  };
  struct Arrival {
    std::int32_t rank;
    std::uint64_t gpu_ns;  // 0: no GPU timing
    std::uint64_t enqueue_ns;
    std::uint64_t sync_ns;  // kNoSync: no initial_sync phase
  };
  struct Pending {
    Key key{};
    std::uint64_t generation = 0;
    Clock::time_point first_seen;
    std::uint32_t expected = 0;
    std::uint32_t comm_label = 0;
    // The ops the instance stands for (its records' weight, plugin.record_one_in). Ranks briefly
    // on different settings record the ops of the coarser one (ncclscope_op_recorded): an
    // instance all of them recorded stands for the largest weight.
    std::uint32_t weight = 1;
    // Bit (rank % 64) of every arrival: a record whose bit is clear is no duplicate, and the
    // arrivals (other cache lines, cold by the time the next rank's record is read) are not
    // scanned for it.
    std::uint64_t rank_bits = 0;
    absl::InlinedVector<Arrival, 8> arrivals;
  };

  // When the ranks of a matched instance arrived: by the GPU's clock when every rank has it, else
  // by enqueue time; the last arriver and the second-last arrival.
  struct ArrivalTimes {
    bool gpu = true;
    std::uint64_t earliest = UINT64_MAX;
    std::uint64_t latest = 0;
    std::uint64_t second = 0;
    std::int32_t last_rank = -1;
    std::uint64_t Of(const Arrival& a) const { return gpu ? a.gpu_ns : a.enqueue_ns; }
  };
  static ArrivalTimes Times(const Pending& instance);
  static SyncWitness Witness(const Pending& instance);
  void Complete(const CommRegistry& registry, const Pending& instance);
  // Whether pool slot `index` still holds the instance created with `generation` (not completed,
  // evicted or reused since).
  bool Alive(std::uint32_t index, std::uint64_t generation) const {
    return pool_[index].generation == generation;
  }
  void Erase(std::uint32_t index);

  Limits limits_;
  bool lag_histogram_ = false;
  Observer observer_;
  // Key -> index into pool_: probing touches 32-byte slots, not whole instances.
  absl::flat_hash_map<Key, std::uint32_t> pending_;
  std::vector<Pending> pool_;
  std::vector<std::uint32_t> free_;
  // Pool indices with the generation they were created with (a reused slot has a newer one):
  // creation order, and the ones whose participants are not known yet.
  std::deque<std::pair<std::uint32_t, std::uint64_t>> order_;
  std::vector<std::pair<std::uint32_t, std::uint64_t>> unsettled_;
  std::uint64_t next_generation_ = 1;
  SeriesTable<RankStats> ranks_;
  SeriesTable<std::uint64_t> matched_;
  SeriesTable<std::uint64_t> disagreements_;
  std::uint64_t evictions_[2] = {};
};

}  // namespace ncclscope::analytics
