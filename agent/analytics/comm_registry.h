#pragma once

// The communicators seen on this node and their local ranks: who they are (id, name, size, nodes),
// where each local rank runs (process, ring, GPU) and how far it got (the ring's communicator
// table). Fed by COMM_INIT/COMM_FINALIZE records and, every pass, by the communicator tables of the
// live rings, which stay right when records are dropped or were consumed by an earlier agent.
//
// Every communicator gets a `comm` label value through a LabelCap (plugin.max_comms); the ones over
// the cap share comm="other" but are still tracked by id (slow-rank matching, hangs). A
// communicator no live ring lists any more is forgotten plugin.series_retention after its last
// activity, and its label index is freed (the series keyed by it are dropped by their owners).
//
// Rings are pods' files (docs/trust-model.md), so what a record may touch is decided here
// (Admit): ranks below the communicator's size (and NCCLSCOPE_MAX_NRANKS); a communicator belongs
// to the principal (Kubernetes namespace, else file owner) of the ring that first named it, and
// records from another principal's ring are refused; a communicator rank belongs to the live ring
// that first wrote it, and no other ring adds to it or rewrites it while that ring lives. Memory
// is bounded: at most kMaxLocalRanks ranks per communicator, kMaxRanksPerRing per ring,
// max_tracked communicators (beyond, the least recently active ones, preferring those no live
// ring lists, are forgotten) and 4 x max_tracked ranks in all. Every refusal is counted.

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/analytics/label_cap.h"
#include "agent/profiler/record_sink.h"

namespace ncclscope::analytics {

using Clock = std::chrono::steady_clock;

// Where a p2p peer is relative to the rank: the `peer_class` label.
enum class PeerClass : std::uint8_t { kSelf = 0, kSameNode = 1, kOtherNode = 2, kUnknown = 3 };
std::string_view PeerClassName(PeerClass c);

// Functions whose seq is NCCL's seqNumber, equal across ranks (p2p seqs are per peer).
inline bool IsCollectiveFunc(std::uint32_t func) {
  return (func >= NCCLSCOPE_FUNC_ALL_REDUCE && func <= NCCLSCOPE_FUNC_REDUCE) ||
         func == NCCLSCOPE_FUNC_ALL_GATHER_V;
}

// Last sequence numbers per collective function (hang and lag detection).
struct SeqByFunc {
  std::array<std::uint64_t, NCCLSCOPE_FUNC_COUNT> seq{};
  std::uint32_t known = 0;  // bit per func
  void Raise(std::uint32_t func, std::uint64_t value) {
    if (func >= NCCLSCOPE_FUNC_COUNT) return;
    const std::uint32_t bit = 1u << func;
    if ((known & bit) == 0 || value > seq[func]) seq[func] = value;
    known |= bit;
  }
};

// Why a record was refused or state forgotten (ncclscope_nccl_analytics_limits_total and
// ncclscope_nccl_records_foreign_total).
enum class Refusal : std::uint8_t {
  kRankRange = 0,  // rank outside [0, nranks) or beyond NCCLSCOPE_MAX_NRANKS
  kRanksPerComm,   // a communicator already has kMaxLocalRanks ranks on this node
  kRanksPerRing,   // a ring already wrote kMaxRanksPerRing communicator ranks
  kForeignComm,    // the communicator belongs to another principal
  kForeignRank,    // the communicator rank belongs to another live ring
  kEvicted,        // a communicator forgotten to stay within max_tracked (not a record)
  kCount
};
const char* RefusalName(Refusal refusal);

// One rank of a communicator that runs on this node.
struct LocalRank {
  std::int32_t rank = 0;
  std::uint32_t owner_ring = 0;  // RingOrigin::ring_id of the ring that writes it (0: none)
  std::int32_t pid = 0;          // claimed: in the job's pid namespace
  std::string ring;              // the process instance's ring file
  std::uint64_t ring_hash = 0;   // absl::HashOf(ring), set with it: keys per-process state per op
  std::string hostname;          // claimed: the pod name in Kubernetes
  std::string job_id;            // claimed
  // Verified by the agent (profiler::RingOrigin): the ring lock holder's pod.
  std::string namespace_name;
  std::string pod;
  std::string container;
  std::string attribution = "claimed";
  std::int32_t cuda_device = -1;
  std::string gpu_uuid;
  std::string pci_bus_id;
  int gpu_index = -1;  // dcgm-exporter's `gpu` (gpu_index.h), -1 when unknown
  bool finalized = false;
  // The latest copy of its communicator-table slot (progress, recent ops), when listed.
  std::optional<profiler::CommSlotSnapshot> table;
  bool in_table = false;  // listed as live in the last pass
  SeqByFunc enqueued;     // collectives only: the highest seq seen enqueued / completed
  SeqByFunc completed;
  LabelCap peers{0};  // network peers with their own `peer` label (plugin.max_peers)
};

struct Comm {
  std::uint64_t id = 0;
  std::uint32_t label = LabelCap::kOverflow;
  std::string principal;  // of the ring that first named it
  // The ring whose principal last matched: a ring's principal is fixed when the agent opens it
  // (agent/profiler/ring_directory.cc, NextRingId then Attribute), so its next records need no
  // string compare (that compare was ~4 % of the agent's samples per op).
  std::uint32_t principal_ring = 0;
  bool claimed = false;
  std::string name;
  std::int32_t nranks = 0;  // 0 until known
  std::int32_t nnodes = 0;
  std::vector<LocalRank> ranks;  // ascending rank
  Clock::time_point last_activity{};
  bool active = false;           // a record or a live table slot since the last pass
  bool live = false;             // listed by a live ring in the last pass
  std::uint32_t live_ranks = 0;  // local ranks listed as live in the last pass (hot: every op)
  // Unix time (ms) of the pass that found it no longer listed after it had been (its job ended);
  // 0 while live or never seen live.
  std::int64_t ended_unix_ms = 0;

  // Index of `rank` among the local ranks, or -1.
  int LocalIndex(std::int32_t rank) const;
};

class CommRegistry {
 public:
  static constexpr std::size_t kMaxLocalRanks = 256;  // per communicator on one node
  static constexpr std::uint32_t kMaxRanksPerRing = NCCLSCOPE_AGENT_MAX_COMMS_PER_RING;

  CommRegistry(std::size_t max_comms, std::size_t max_peers, std::size_t max_tracked = 4096);

  void SetLimits(std::size_t max_comms, std::size_t max_peers, std::size_t max_tracked = 4096);

  // The rank of `comm` that a record from ring `ring_id` of `principal` may touch, created when
  // new; null when refused (counted). Ring 0 (records not from a ring directory) owns nothing.
  LocalRank* Admit(std::uint32_t ring_id, std::string_view principal, Comm& comm,
                   std::int32_t rank);
  // The rings the reader holds (their ranks stay theirs); rings opened since count as live too.
  void SetLiveRings(const std::vector<std::uint32_t>& ring_ids);
  std::uint64_t refusals(Refusal r) const { return refusals_[static_cast<std::size_t>(r)]; }
  std::size_t tracked() const { return comms_.size(); }
  std::size_t tracked_ranks() const { return total_ranks_; }
  // Label indices freed by evictions since the last call (the caller drops their series), now
  // released for reuse.
  std::vector<std::uint32_t> TakeEvictedLabels();

  // The communicator, created (and its label admitted) when new. Stable until Expire() drops it or
  // a later Get() of a new id evicts it (never the one returned last).
  Comm& Get(std::uint64_t id);
  // The communicator when tracked, marked in use as Get() marks it; nullptr (nothing created) when
  // not. One lookup for a record's communicator where Find() then Get() took two.
  Comm* Use(std::uint64_t id);
  Comm* Find(std::uint64_t id);
  const Comm* Find(std::uint64_t id) const;
  // The local rank, created when new.
  LocalRank& RankOf(Comm& comm, std::int32_t rank);

  void OnCommInit(const profiler::RingOrigin& origin, const ncclscope_comm_init_record& record);
  // Whether ring `ring_id` (live or newer than the last SetLiveRings) still holds its ranks.
  bool RingAlive(std::uint32_t ring_id) const;
  void OnCommFinalize(const profiler::RingOrigin& origin,
                      const ncclscope_comm_finalize_record& record);
  // The communicator tables of the live rings, at the start of a pass (before its records).
  void OnTables(const std::vector<profiler::LiveComm>& comms);
  // The end of a pass: communicators with records or a live slot in it were active `now`.
  void EndPass(Clock::time_point now);

  // Forgets communicators that no live ring lists and that had no activity for `retention`.
  // Returns the label indices that were freed.
  std::vector<std::uint32_t> Expire(Clock::time_point now, Clock::duration retention);

  // The `comm` label value of an index ("0x" + 16 hex digits, or "other").
  const std::string& Label(std::uint32_t index) const;
  PeerClass ClassOf(const Comm& comm, std::int32_t rank, std::int32_t peer) const;
  // The `peer` label of a network peer of (comm, rank): the peer's rank while the rank has fewer
  // than plugin.max_peers of them, else kOtherPeer ("other").
  static constexpr std::int32_t kOtherPeer = -1;
  std::int32_t PeerKey(LocalRank& local, std::int32_t peer);

  std::size_t admitted() const { return labels_.admitted(); }
  std::uint64_t overflowed() const { return labels_.overflowed(); }
  std::uint64_t peers_overflowed() const { return peers_overflowed_; }
  std::size_t max_peers() const { return max_peers_; }

  template <typename F>
  void ForEach(F&& f) const {
    for (const auto& [id, comm] : comms_) f(*comm);
  }
  template <typename F>
  void ForEachMutable(F&& f) {
    for (auto& [id, comm] : comms_) f(*comm);
  }

 private:
  void Count(Refusal r) { ++refusals_[static_cast<std::size_t>(r)]; }
  // Forgets about an eighth of max_tracked communicators (never `keep`): least recently active
  // first, those no live ring lists before those that one does.
  void Evict(const Comm* keep);
  void Forget(Comm& comm);

  LabelCap labels_;
  std::size_t max_peers_;
  std::size_t max_tracked_;
  std::uint64_t peers_overflowed_ = 0;
  std::array<std::uint64_t, static_cast<std::size_t>(Refusal::kCount)> refusals_{};
  std::size_t total_ranks_ = 0;
  absl::flat_hash_map<std::uint32_t, std::uint32_t> ring_ranks_;  // ring id -> ranks it owns
  absl::flat_hash_set<std::uint32_t> live_rings_;
  std::uint32_t newest_reported_ring_ = 0;
  bool rings_reported_ = false;
  std::vector<std::uint32_t> evicted_labels_;  // not yet released (their series still exist)
  absl::flat_hash_map<std::uint64_t, std::unique_ptr<Comm>> comms_;
  std::vector<std::string> label_text_;  // by label index; [0] = "other"
  Comm* last_ = nullptr;                 // one-entry cache for Get()
};

// "0x" + 16 hex digits.
std::string CommLabel(std::uint64_t comm_id);

// `comm="…",rank="…"`: the labels every per-rank series starts with (`comm`: a Label()).
std::string CommRankLabels(std::string_view comm, std::int32_t rank);

}  // namespace ncclscope::analytics
