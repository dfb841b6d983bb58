#include "agent/analytics/arrival_matcher.h"

#include <algorithm>

#include "agent/analytics/analytics_metrics.h"

namespace ncclscope::analytics {
namespace {

std::uint64_t RankKey(std::uint32_t comm_label, std::int32_t rank) {
  return KeyPacker().Add(comm_label, 16).Add(static_cast<std::uint32_t>(rank), 32).key();
}

// The node's ranks of the communicator, from the live rings' tables; 0 while not known yet.
std::uint32_t Participants(const Comm& comm) { return comm.live ? comm.live_ranks : 0; }

}  // namespace

void ArrivalMatcher::Erase(std::uint32_t index) {
  Pending& p = pool_[index];
  pending_.erase(p.key);
  p.arrivals.clear();
  p.generation = 0;
  free_.push_back(index);
}

void ArrivalMatcher::OnOp(const CommRegistry& registry, const Comm& comm,
                          const ncclscope_op_record& op, Clock::time_point now,
                          std::uint64_t sync_ns) {
  const std::uint32_t expected = Participants(comm);
  if (expected == 1) return;  // nothing to compare on this node
  const Key key{op.comm_id, op.seq, op.func};
  auto [it, inserted] = pending_.try_emplace(key, 0);
  if (inserted) {
    if (pending_.size() > limits_.window) {
      // Make room: the oldest instance still waiting goes.
      while (!order_.empty()) {
        auto [old, generation] = order_.front();
        order_.pop_front();
        if (Alive(old, generation)) {
          ++evictions_[kCapacity];
          Erase(old);
          break;
        }
      }
    }
    std::uint32_t index = 0;
    if (!free_.empty()) {
      index = free_.back();
      free_.pop_back();
    } else {
      index = static_cast<std::uint32_t>(pool_.size());
      pool_.emplace_back();
    }
    Pending& fresh = pool_[index];
    fresh.key = key;
    fresh.generation = next_generation_++;
    fresh.first_seen = now;
    fresh.expected = expected;
    fresh.comm_label = comm.label;
    fresh.weight = 1;
    fresh.rank_bits = 0;
    fresh.arrivals.clear();
    order_.emplace_back(index, fresh.generation);
    if (expected == 0) unsettled_.emplace_back(index, fresh.generation);
    it->second = index;
  }
  const std::uint32_t index = it->second;
  Pending& instance = pool_[index];
  const std::uint64_t bit = std::uint64_t{1} << (static_cast<std::uint32_t>(op.rank) % 64);
  if ((instance.rank_bits & bit) != 0) {
    for (const Arrival& a : instance.arrivals) {
      if (a.rank == op.rank) return;  // a duplicate (e.g. re-read after a lane resync)
    }
  }
  instance.rank_bits |= bit;
  instance.weight = std::max(instance.weight, ncclscope_record_weight(op.weight));
  const bool timed = (op.flags & NCCLSCOPE_OP_GPU_TIMING) != 0;
  instance.arrivals.push_back({op.rank, timed ? op.gpu_start_ns : 0, op.enqueue_ns, sync_ns});
  if (expected != 0) instance.expected = expected;
  if (instance.expected >= 2 && instance.arrivals.size() >= instance.expected) {
    Complete(registry, instance);
    Erase(index);
  }
}

ArrivalMatcher::ArrivalTimes ArrivalMatcher::Times(const Pending& instance) {
  ArrivalTimes times;
  for (const Arrival& a : instance.arrivals) times.gpu = times.gpu && a.gpu_ns != 0;
  for (const Arrival& a : instance.arrivals) {
    const std::uint64_t t = times.Of(a);
    times.earliest = std::min(times.earliest, t);
    if (times.last_rank < 0 || t > times.latest) {
      // The previous latest is the second-last now (none yet for the first record: the last
      // arriver's record may well be the first one read).
      if (times.last_rank >= 0) times.second = times.latest;
      times.latest = t;
      times.last_rank = a.rank;
    } else {
      times.second = std::max(times.second, t);
    }
  }
  return times;
}

// The GPU's own witness (symmetric kernels' initial_sync), when every rank has it.
ArrivalMatcher::SyncWitness ArrivalMatcher::Witness(const Pending& instance) {
  SyncWitness sync;
  std::uint64_t least = kNoSync;
  std::uint64_t next = kNoSync;
  for (const Arrival& a : instance.arrivals) {
    if (a.sync_ns == kNoSync) return SyncWitness{};
    if (a.sync_ns < least) {
      next = least;
      least = a.sync_ns;
      sync.rank = a.rank;
    } else {
      next = std::min(next, a.sync_ns);
    }
  }
  if (sync.rank < 0 || next == kNoSync) return SyncWitness{};
  sync.delay_ns = next - least;
  return sync;
}

void ArrivalMatcher::Complete(const CommRegistry& registry, const Pending& instance) {
  const ArrivalTimes times = Times(instance);
  const std::uint32_t label = instance.comm_label;
  auto rank_labels = [&](std::int32_t rank) {
    return [&registry, label, rank] { return CommRankLabels(registry.Label(label), rank); };
  };
  auto comm_labels = [&] {
    std::string labels;
    metrics::AppendLabel(labels, "comm", registry.Label(label));
    return labels;
  };
  for (const Arrival& a : instance.arrivals) {
    RankStats& s = ranks_.Get(RankKey(label, a.rank), label, rank_labels(a.rank));
    s.lag.Observe(times.Of(a) - times.earliest, instance.weight);
    AddWeighted(s.wait_ns, times.latest - times.Of(a), instance.weight);
  }
  RankStats& last =
      ranks_.Get(RankKey(label, times.last_rank), label, rank_labels(times.last_rank));
  AddSat(last.last_arrivals, instance.weight);
  AddWeighted(last.last_delay_ns, times.latest - times.second, instance.weight);
  const SyncWitness sync = Witness(instance);
  if (sync.rank >= 0) {
    RankStats& quickest = ranks_.Get(RankKey(label, sync.rank), label, rank_labels(sync.rank));
    AddSat(quickest.least_sync_waits, instance.weight);
    if (sync.rank != times.last_rank) {
      AddSat(disagreements_.Get(label, label, comm_labels), instance.weight);
    }
  }
  if (observer_) {
    observer_(label, times.last_rank, times.latest - times.second, sync, instance.weight);
  }
  AddSat(matched_.Get(label, label, comm_labels), instance.weight);
}

void ArrivalMatcher::EndPass(const CommRegistry& registry, Clock::time_point now) {
  std::vector<std::pair<std::uint32_t, std::uint64_t>> still;
  for (const auto& [index, generation] : unsettled_) {
    if (!Alive(index, generation)) continue;
    Pending& instance = pool_[index];
    if (instance.expected == 0) {
      const Comm* comm = registry.Find(instance.key.comm_id);
      instance.expected = comm != nullptr ? Participants(*comm) : 0;
    }
    if (instance.expected == 1) {
      Erase(index);  // a single local rank after all: nothing to compare
    } else if (instance.expected >= 2 && instance.arrivals.size() >= instance.expected) {
      Complete(registry, instance);
      Erase(index);
    } else if (instance.expected == 0) {
      still.emplace_back(index, generation);
    }
  }
  unsettled_ = std::move(still);
  while (!order_.empty()) {
    auto [index, generation] = order_.front();
    if (!Alive(index, generation)) {
      order_.pop_front();  // completed or replaced
      continue;
    }
    if (now - pool_[index].first_seen < limits_.timeout) break;
    // A collective its job ended in (no live ring lists the communicator: its ranks exited at
    // their own pace) was not lost: it is dropped without counting.
    const Comm* comm = registry.Find(pool_[index].key.comm_id);
    if (comm != nullptr && comm->live) ++evictions_[kIncomplete];
    Erase(index);
    order_.pop_front();
  }
}

void ArrivalMatcher::DropLabels(const absl::flat_hash_set<std::uint32_t>& labels) {
  ranks_.DropLabels(labels);
  matched_.DropLabels(labels);
  disagreements_.DropLabels(labels);
}

std::uint64_t ArrivalMatcher::matched(std::uint32_t comm_label) const {
  const std::uint64_t* n = matched_.Find(comm_label);
  return n != nullptr ? *n : 0;
}

const ArrivalMatcher::RankStats* ArrivalMatcher::Find(std::uint32_t comm_label,
                                                      std::int32_t rank) const {
  return ranks_.Find(RankKey(comm_label, rank));
}

void ArrivalMatcher::Render(metrics::TextWriter& out) const {
  out.Rows(kNcclCollMatchedTotal, matched_.rows(), [&](const auto& row) { return row.stats; });
  const auto& rows = ranks_.rows();
  out.Rows(kNcclCollLastArrivalsTotal, rows,
           [&](const auto& row) { return row.stats.last_arrivals; });
  out.Header(kNcclCollLeastSyncWaitsTotal);
  for (const auto& row : rows) {  // NCCL 2.31+ symmetric kernels only: no zero rows elsewhere
    if (row.stats.least_sync_waits != 0) {
      out.Sample(kNcclCollLeastSyncWaitsTotal, row.labels, row.stats.least_sync_waits);
    }
  }
  out.Rows(kNcclCollWitnessDisagreementsTotal, disagreements_.rows(),
           [](const auto& row) { return row.stats; });
  out.Rows(kNcclCollLastArrivalDelaySecondsTotal, rows,
           [&](const auto& row) { return static_cast<double>(row.stats.last_delay_ns) * 1e-9; });
  out.Rows(kNcclCollArrivalLagSecondsTotal, rows,
           [&](const auto& row) { return static_cast<double>(row.stats.lag.sum_ns) * 1e-9; });
  if (lag_histogram_) {
    out.Header(kNcclCollArrivalLagSeconds);
    for (const auto& row : rows) {
      out.Histogram(kNcclCollArrivalLagSeconds, row.labels, LatencyBounds(), row.stats.lag.counts,
                    static_cast<double>(row.stats.lag.sum_ns) * 1e-9);
    }
  }
  out.Rows(kNcclCollWaitSecondsTotal, rows,
           [&](const auto& row) { return static_cast<double>(row.stats.wait_ns) * 1e-9; });
  out.Header(kNcclCollMatchEvictionsTotal);
  out.Sample(kNcclCollMatchEvictionsTotal, "reason=\"incomplete\"", evictions_[kIncomplete]);
  out.Sample(kNcclCollMatchEvictionsTotal, "reason=\"capacity\"", evictions_[kCapacity]);
  out.Header(kNcclCollMatchPending);
  out.Sample(kNcclCollMatchPending, "", static_cast<std::uint64_t>(pending_.size()));
}

}  // namespace ncclscope::analytics
