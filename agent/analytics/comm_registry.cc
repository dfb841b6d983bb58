#include "agent/analytics/comm_registry.h"

#include <absl/hash/hash.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "agent/core/text_exposition.h"
#include "platform/clock.h"
#include "plugin/ring/ring_text.h"

namespace ncclscope::analytics {
namespace {

// Where the rank runs, from the ring that wrote it: the plugin's claims (pid, hostname, job id)
// and what the agent found out (pod, attribution). Set by the rank's comm-init record and again
// by every pass whose live table lists it (a restarted process writes another ring).
void Place(LocalRank& r, const profiler::RingOrigin& origin) {
  r.pid = origin.pid;
  if (r.ring != origin.ring) {
    r.ring = origin.ring;
    r.ring_hash = absl::HashOf(r.ring);
  }
  r.hostname = origin.hostname;
  r.job_id = origin.job_id;
  r.namespace_name = origin.namespace_name;
  r.pod = origin.pod;
  r.container = origin.container;
  r.attribution = origin.attribution;
}

}  // namespace

std::string CommRankLabels(std::string_view comm, std::int32_t rank) {
  std::string labels;
  metrics::AppendLabel(labels, "comm", comm);
  labels += ',';
  metrics::AppendLabel(labels, "rank", std::to_string(rank));
  return labels;
}

std::string CommLabel(std::uint64_t comm_id) {
  char text[24];
  std::snprintf(text, sizeof(text), "0x%016llx", static_cast<unsigned long long>(comm_id));
  return text;
}

std::string_view PeerClassName(PeerClass c) {
  switch (c) {
    case PeerClass::kSelf:
      return "self";
    case PeerClass::kSameNode:
      return "same_node";
    case PeerClass::kOtherNode:
      return "other_node";
    default:
      return "unknown";
  }
}

const char* RefusalName(Refusal refusal) {
  switch (refusal) {
    case Refusal::kRankRange:
      return "rank_range";
    case Refusal::kRanksPerComm:
      return "ranks_per_comm";
    case Refusal::kRanksPerRing:
      return "ranks_per_ring";
    case Refusal::kForeignComm:
      return "foreign_comm";
    case Refusal::kForeignRank:
      return "foreign_rank";
    case Refusal::kEvicted:
      return "comms_evicted";
    case Refusal::kCount:
      break;
  }
  return "unknown";
}

int Comm::LocalIndex(std::int32_t rank) const {
  // ranks are kept sorted: a binary search (a linear scan let random ranks pin the reader).
  auto it = std::lower_bound(ranks.begin(), ranks.end(), rank,
                             [](const LocalRank& r, std::int32_t value) { return r.rank < value; });
  return it != ranks.end() && it->rank == rank ? static_cast<int>(it - ranks.begin()) : -1;
}

CommRegistry::CommRegistry(std::size_t max_comms, std::size_t max_peers, std::size_t max_tracked)
    : labels_(max_comms), max_peers_(max_peers), max_tracked_(max_tracked), label_text_{"other"} {}

void CommRegistry::SetLimits(std::size_t max_comms, std::size_t max_peers,
                             std::size_t max_tracked) {
  labels_.SetLimit(max_comms);
  max_peers_ = max_peers;
  max_tracked_ = max_tracked;
  for (auto& [id, comm] : comms_) {
    for (LocalRank& r : comm->ranks) r.peers.SetLimit(max_peers);
  }
}

Comm& CommRegistry::Get(std::uint64_t id) {
  if (Comm* known = Use(id)) return *known;
  if (comms_.size() >= max_tracked_ || total_ranks_ >= 4 * max_tracked_) Evict(last_);
  auto comm = std::make_unique<Comm>();
  comm->id = id;
  comm->label = labels_.Admit(id);
  if (comm->label != LabelCap::kOverflow) {
    if (label_text_.size() <= comm->label) label_text_.resize(comm->label + 1);
    label_text_[comm->label] = CommLabel(id);
  }
  last_ = comms_.emplace(id, std::move(comm)).first->second.get();
  last_->active = true;
  return *last_;
}

Comm* CommRegistry::Use(std::uint64_t id) {
  Comm* comm = last_ != nullptr && last_->id == id ? last_ : Find(id);
  if (comm != nullptr) {
    last_ = comm;
    comm->active = true;
  }
  return comm;
}

Comm* CommRegistry::Find(std::uint64_t id) {
  auto it = comms_.find(id);
  return it == comms_.end() ? nullptr : it->second.get();
}

const Comm* CommRegistry::Find(std::uint64_t id) const {
  auto it = comms_.find(id);
  return it == comms_.end() ? nullptr : it->second.get();
}

LocalRank& CommRegistry::RankOf(Comm& comm, std::int32_t rank) {
  const int index = comm.LocalIndex(rank);
  if (index >= 0) return comm.ranks[static_cast<std::size_t>(index)];
  auto it = std::lower_bound(comm.ranks.begin(), comm.ranks.end(), rank,
                             [](const LocalRank& r, std::int32_t value) { return r.rank < value; });
  LocalRank added;
  added.rank = rank;
  added.peers.SetLimit(max_peers_);
  ++total_ranks_;
  return *comm.ranks.insert(it, std::move(added));
}

bool CommRegistry::RingAlive(std::uint32_t ring_id) const {
  return !rings_reported_ || ring_id > newest_reported_ring_ || live_rings_.contains(ring_id);
}

void CommRegistry::SetLiveRings(const std::vector<std::uint32_t>& ring_ids) {
  live_rings_ = absl::flat_hash_set<std::uint32_t>(ring_ids.begin(), ring_ids.end());
  for (std::uint32_t id : ring_ids) newest_reported_ring_ = std::max(newest_reported_ring_, id);
  rings_reported_ = true;
  // Per-ring counts matter for live rings only.
  for (auto it = ring_ranks_.begin(); it != ring_ranks_.end();) {
    if (!RingAlive(it->first)) {
      ring_ranks_.erase(it++);
    } else {
      ++it;
    }
  }
}

LocalRank* CommRegistry::Admit(std::uint32_t ring_id, std::string_view principal, Comm& comm,
                               std::int32_t rank) {
  if (rank < 0 || rank >= NCCLSCOPE_MAX_NRANKS || (comm.nranks > 0 && rank >= comm.nranks)) {
    Count(Refusal::kRankRange);
    return nullptr;
  }
  if (!comm.claimed) {
    comm.principal = std::string(principal);
    comm.claimed = true;
    comm.principal_ring = ring_id;
  } else if (ring_id == 0 || ring_id != comm.principal_ring) {
    if (comm.principal != principal) {
      Count(Refusal::kForeignComm);
      return nullptr;
    }
    comm.principal_ring = ring_id;
  }
  const int index = comm.LocalIndex(rank);
  if (index >= 0) {
    LocalRank& r = comm.ranks[static_cast<std::size_t>(index)];
    if (ring_id == 0 || r.owner_ring == ring_id) return &r;
    if (r.owner_ring != 0 && RingAlive(r.owner_ring)) {
      Count(Refusal::kForeignRank);
      return nullptr;
    }
    // Its ring is gone (the process restarted, say): the rank passes to this one.
    std::uint32_t& owned = ring_ranks_[ring_id];
    if (owned >= kMaxRanksPerRing) {
      Count(Refusal::kRanksPerRing);
      return nullptr;
    }
    ++owned;
    r.owner_ring = ring_id;
    return &r;
  }
  if (comm.ranks.size() >= kMaxLocalRanks) {
    Count(Refusal::kRanksPerComm);
    return nullptr;
  }
  if (ring_id != 0) {
    std::uint32_t& owned = ring_ranks_[ring_id];
    if (owned >= kMaxRanksPerRing) {
      Count(Refusal::kRanksPerRing);
      return nullptr;
    }
    ++owned;
  }
  if (total_ranks_ >= 4 * max_tracked_) Evict(&comm);
  LocalRank& r = RankOf(comm, rank);
  r.owner_ring = ring_id;
  return &r;
}

void CommRegistry::Forget(Comm& comm) {
  for (const LocalRank& r : comm.ranks) {
    if (r.owner_ring == 0) continue;
    auto owned = ring_ranks_.find(r.owner_ring);
    if (owned != ring_ranks_.end() && owned->second > 0) --owned->second;
  }
  total_ranks_ -= std::min(total_ranks_, comm.ranks.size());
  if (last_ == &comm) last_ = nullptr;
}

void CommRegistry::Evict(const Comm* keep) {
  std::vector<Comm*> candidates;
  candidates.reserve(comms_.size());
  for (auto& [id, comm] : comms_) {
    if (comm.get() != keep) candidates.push_back(comm.get());
  }
  std::sort(candidates.begin(), candidates.end(), [](const Comm* a, const Comm* b) {
    if (a->live != b->live) return !a->live;
    return a->last_activity < b->last_activity;
  });
  const std::size_t target = std::max<std::size_t>(1, max_tracked_ / 8);
  std::size_t evicted = 0;
  for (Comm* comm : candidates) {
    if (evicted >= target && comms_.size() < max_tracked_ && total_ranks_ < 4 * max_tracked_) {
      break;
    }
    if (comm->label != LabelCap::kOverflow) evicted_labels_.push_back(comm->label);
    Forget(*comm);
    Count(Refusal::kEvicted);
    const std::uint64_t id = comm->id;
    // Its index is released once its series are dropped (TakeEvictedLabels), so no new
    // communicator shares rows with the old one meanwhile.
    if (comm->label != LabelCap::kOverflow) labels_.Detach(id);
    comms_.erase(id);
    ++evicted;
  }
}

std::vector<std::uint32_t> CommRegistry::TakeEvictedLabels() {
  std::vector<std::uint32_t> labels = std::move(evicted_labels_);
  evicted_labels_.clear();
  for (std::uint32_t label : labels) labels_.ReleaseIndex(label);
  return labels;
}

void CommRegistry::OnCommInit(const profiler::RingOrigin& origin,
                              const ncclscope_comm_init_record& record) {
  Comm& comm = Get(record.comm_id);
  LocalRank* admitted = Admit(origin.ring_id, origin.principal, comm, record.rank);
  if (admitted == nullptr) return;
  if (comm.nranks == 0 || comm.nranks == record.nranks) {
    comm.nranks = record.nranks;
    comm.nnodes = record.nnodes;
  }
  if (comm.name.empty()) comm.name = ring::FieldText(record.name);
  LocalRank& r = *admitted;
  Place(r, origin);
  r.cuda_device = record.cuda_device;
  r.gpu_uuid = ring::FieldText(record.gpu_uuid);
  r.pci_bus_id = ring::FieldText(record.pci_bus_id);
  r.finalized = false;
}

void CommRegistry::OnCommFinalize(const profiler::RingOrigin& origin,
                                  const ncclscope_comm_finalize_record& record) {
  Comm* comm = Find(record.comm_id);
  if (comm == nullptr || comm->LocalIndex(record.rank) < 0) return;
  if (LocalRank* r = Admit(origin.ring_id, origin.principal, *comm, record.rank)) {
    r->finalized = true;
  }
}

void CommRegistry::OnTables(const std::vector<profiler::LiveComm>& comms) {
  std::vector<Comm*> was_live;
  for (auto& [id, comm] : comms_) {
    if (comm->live) was_live.push_back(comm.get());
    comm->live = false;
    for (LocalRank& r : comm->ranks) r.in_table = false;
  }
  for (const profiler::LiveComm& live : comms) {
    const profiler::CommSlotSnapshot& slot = live.slot;
    Comm& comm = Get(slot.comm_id);
    // Another principal's or another live ring's slot cannot list, size or fake progress (a
    // hang) for this rank.
    LocalRank* admitted = Admit(live.origin->ring_id, live.origin->principal, comm, slot.rank);
    if (admitted == nullptr) continue;
    comm.live = true;
    if (comm.nranks == 0 || comm.nranks == slot.nranks) {
      comm.nranks = slot.nranks;
      comm.nnodes = slot.nnodes;
    }
    if (comm.name.empty()) comm.name = slot.name;
    LocalRank& r = *admitted;
    r.in_table = true;
    r.finalized = false;
    Place(r, *live.origin);
    if (r.cuda_device < 0) r.cuda_device = slot.cuda_device;
    if (r.gpu_uuid.empty()) r.gpu_uuid = slot.gpu_uuid;
    if (r.pci_bus_id.empty()) r.pci_bus_id = slot.pci_bus_id;
    r.table = slot;
    if (slot.ops_enqueued > 0 && IsCollectiveFunc(slot.last_enqueue_func)) {
      r.enqueued.Raise(slot.last_enqueue_func, slot.last_enqueue_seq);
    }
    if (slot.ops_completed > 0 && IsCollectiveFunc(slot.last_complete_func)) {
      r.completed.Raise(slot.last_complete_func, slot.last_complete_seq);
      r.enqueued.Raise(slot.last_complete_func, slot.last_complete_seq);
    }
  }
  for (auto& [id, comm] : comms_) {
    comm->live_ranks = 0;
    for (const LocalRank& r : comm->ranks) comm->live_ranks += r.in_table ? 1 : 0;
    if (comm->live) comm->ended_unix_ms = 0;
  }
  const auto now_ms = static_cast<std::int64_t>(platform::RealtimeNs() / 1'000'000);
  for (Comm* comm : was_live) {
    if (!comm->live) comm->ended_unix_ms = now_ms;
  }
}

void CommRegistry::EndPass(Clock::time_point now) {
  for (auto& [id, comm] : comms_) {
    if (comm->active || comm->live) comm->last_activity = now;
    comm->active = false;
  }
}

std::vector<std::uint32_t> CommRegistry::Expire(Clock::time_point now, Clock::duration retention) {
  std::vector<std::uint32_t> freed;
  for (auto it = comms_.begin(); it != comms_.end();) {
    Comm& comm = *it->second;
    // A communicator first seen after this pass's EndPass has had no pass yet: its activity is
    // now.
    if (comm.last_activity == Clock::time_point{}) comm.last_activity = now;
    if (!comm.live && now - comm.last_activity > retention) {
      if (comm.label != LabelCap::kOverflow) {
        freed.push_back(comm.label);
        labels_.Release(comm.id);
      }
      Forget(comm);
      comms_.erase(it++);
    } else {
      ++it;
    }
  }
  return freed;
}

const std::string& CommRegistry::Label(std::uint32_t index) const {
  return index < label_text_.size() ? label_text_[index] : label_text_[0];
}

PeerClass CommRegistry::ClassOf(const Comm& comm, std::int32_t rank, std::int32_t peer) const {
  if (peer < 0) return PeerClass::kUnknown;
  if (peer == rank) return PeerClass::kSelf;
  if (comm.nnodes == 1) return PeerClass::kSameNode;
  if (comm.LocalIndex(peer) >= 0) return PeerClass::kSameNode;
  return comm.nnodes > 1 ? PeerClass::kOtherNode : PeerClass::kUnknown;
}

std::int32_t CommRegistry::PeerKey(LocalRank& local, std::int32_t peer) {
  const std::uint64_t before = local.peers.overflowed();
  const std::uint32_t index = local.peers.Admit(static_cast<std::uint64_t>(peer));
  if (local.peers.overflowed() != before) ++peers_overflowed_;
  return index == LabelCap::kOverflow ? kOtherPeer : peer;
}

}  // namespace ncclscope::analytics
