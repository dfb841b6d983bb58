#include "agent/analytics/comm_registry.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace ncclscope::analytics {
namespace {

std::string Bounded(const char* text, std::size_t capacity) {
  return std::string(text, strnlen(text, capacity));
}

}  // namespace

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

int Comm::LocalIndex(std::int32_t rank) const {
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i].rank == rank) return static_cast<int>(i);
  }
  return -1;
}

CommRegistry::CommRegistry(std::size_t max_comms, std::size_t max_peers)
    : labels_(max_comms), max_peers_(max_peers), label_text_{"other"} {}

void CommRegistry::SetLimits(std::size_t max_comms, std::size_t max_peers) {
  labels_.SetLimit(max_comms);
  max_peers_ = max_peers;
  for (auto& [id, comm] : comms_) {
    for (LocalRank& r : comm->ranks) r.peers.SetLimit(max_peers);
  }
}

Comm& CommRegistry::Get(std::uint64_t id) {
  if (last_ != nullptr && last_->id == id) {
    last_->active = true;
    return *last_;
  }
  auto it = comms_.find(id);
  if (it == comms_.end()) {
    auto comm = std::make_unique<Comm>();
    comm->id = id;
    comm->label = labels_.Admit(id);
    if (comm->label != LabelCap::kOverflow) {
      if (label_text_.size() <= comm->label) label_text_.resize(comm->label + 1);
      label_text_[comm->label] = CommLabel(id);
    }
    it = comms_.emplace(id, std::move(comm)).first;
  }
  last_ = it->second.get();
  last_->active = true;
  return *last_;
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
  return *comm.ranks.insert(it, std::move(added));
}

void CommRegistry::OnCommInit(const profiler::RingOrigin& origin,
                              const ncclscope_comm_init_record& record) {
  Comm& comm = Get(record.comm_id);
  comm.nranks = record.nranks;
  comm.nnodes = record.nnodes;
  comm.name = Bounded(record.name, sizeof(record.name));
  LocalRank& r = RankOf(comm, record.rank);
  r.pid = origin.pid;
  r.ring = origin.ring;
  r.hostname = origin.hostname;
  r.job_id = origin.job_id;
  r.cuda_device = record.cuda_device;
  r.gpu_uuid = Bounded(record.gpu_uuid, sizeof(record.gpu_uuid));
  r.pci_bus_id = Bounded(record.pci_bus_id, sizeof(record.pci_bus_id));
  r.finalized = false;
}

void CommRegistry::OnCommFinalize(const profiler::RingOrigin& /*origin*/,
                                  const ncclscope_comm_finalize_record& record) {
  Comm& comm = Get(record.comm_id);
  const int index = comm.LocalIndex(record.rank);
  if (index >= 0) comm.ranks[static_cast<std::size_t>(index)].finalized = true;
}

void CommRegistry::OnPass(const std::vector<profiler::LiveComm>& comms, Clock::time_point now) {
  for (auto& [id, comm] : comms_) {
    comm->live = false;
    for (LocalRank& r : comm->ranks) r.in_table = false;
  }
  for (const profiler::LiveComm& live : comms) {
    const profiler::CommSlotSnapshot& slot = live.slot;
    Comm& comm = Get(slot.comm_id);
    comm.live = true;
    comm.nranks = slot.nranks;
    comm.nnodes = slot.nnodes;
    if (comm.name.empty()) comm.name = slot.name;
    LocalRank& r = RankOf(comm, slot.rank);
    r.in_table = true;
    r.finalized = false;
    r.pid = live.pid;
    r.hostname = live.hostname;
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
    if (comm->active || comm->live) comm->last_activity = now;
    comm->active = false;
    comm->live_ranks = 0;
    for (const LocalRank& r : comm->ranks) comm->live_ranks += r.in_table ? 1 : 0;
  }
}

std::vector<std::uint32_t> CommRegistry::Expire(Clock::time_point now, Clock::duration retention) {
  std::vector<std::uint32_t> freed;
  for (auto it = comms_.begin(); it != comms_.end();) {
    Comm& comm = *it->second;
    if (!comm.live && now - comm.last_activity > retention) {
      if (comm.label != LabelCap::kOverflow) {
        freed.push_back(comm.label);
        labels_.Release(comm.id);
      }
      if (last_ == &comm) last_ = nullptr;
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
