#pragma once

// The simulated job's timeline: a deterministic model of when every rank of the job (all nodes)
// arrives at each operation, when each channel of each op finishes, and how each network step
// splits into GPU wait, peer credit wait and wire time. Every rank process computes the same
// timeline from the same options, so the local ranks agree with each other and with the remote
// ranks they never see. Times are absolute CLOCK_REALTIME ns (a GPU's %globaltimer is that clock).
//
// The model (coherent by construction, simple on purpose; docs/analytics.md):
//  * Rank g arrives at op j of iteration i after computing: a = ready(g) + compute + jitter
//    (compute: the item's, else compute_gap; + slow_by for the slow rank while the fault is on;
//    never, for the hung rank from hang_iteration / hang_at on). Every rank pauses together for
//    pause_for every pause_every, and message sizes switch between x1 and x resize_factor every
//    resize_every (the clock of both is rank 0's, so that every node's model agrees).
//  * A collective flows once its last member arrived (F = max a); channel c then needs T_c =
//    latency + bus bytes per channel / the channel's slowest hop (the network hop on multi-node
//    communicators, slow_factor x slower on the slow channel). Every member's channel c ends at
//    F + T_c: the late rank spends the least time inside, the others wait (straggler.md §1).
//  * Network steps of channel c (exit rank -> next node's entry rank on world rings; every hop of
//    dp rings): step s waits for the GPU (own arrival at s = 0, the ring's data flow F + s*d
//    after, d paced by the ring's slowest hop), then for the receiver's credit (its arrival),
//    then runs on the wire for its own hop's step time (the slow hop's d; a fast hop's shorter
//    one, its sender waiting for the GPU instead: NCCL's SendGPUWait -> SendPeerWait ->
//    SendWait, v2.28.9-1 src/transport/net.cc:1267, 1314, 1327). The receiver waits for the
//    data, flushes and consumes it.
//  * Send/Recv pairs flow once both ends arrived.

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "tools/sim/sim_options.h"

namespace ncclscope::sim {

inline constexpr std::uint64_t kNever = std::numeric_limits<std::uint64_t>::max();

struct CommInstance {
  CommKind kind = CommKind::kWorld;
  int index = 0;  // which instance of its kind (tp: node, dp: GPU index)
  std::uint64_t id = 0;
  std::string name;
  int nnodes = 0;
  std::vector<int> members;  // global ranks, in communicator-rank order
  int nranks() const { return static_cast<int>(members.size()); }
  int RankOf(int global) const;
};

// One network step: send: start -> GPU data ready -> receiver's credit -> done;
//                   recv: start -> data arrived -> flushed -> consumed.
struct StepTimes {
  std::uint64_t start = 0;
  std::uint64_t t1 = 0;
  std::uint64_t t2 = 0;
  std::uint64_t end = 0;
};

struct NetOp {
  int channel = 0;
  bool send = true;
  int peer = 0;  // communicator rank
  std::uint64_t step_bytes = 0;
  std::vector<StepTimes> steps;
};

// One operation of one local rank.
struct RankOp {
  const WorkItem* item = nullptr;
  const CommInstance* comm = nullptr;
  int comm_rank = 0;
  std::string func;  // NCCL's name: AllReduce..., or Send / Recv for a SendRecv item
  int peer = -1;     // p2p: communicator rank of the peer
  std::uint64_t seq = 0;
  std::uint64_t bytes = 0;
  std::uint64_t enqueue_ns = 0;
  std::uint64_t arrival_ns = 0;  // kernel start (kNever: the rank never gets here)
  std::vector<std::uint64_t> channel_start;
  std::vector<std::uint64_t> channel_end;  // kNever: the op never finishes (hang)
  std::vector<NetOp> net;
  double bus_bytes = 0;  // nccl-tests bus bytes of the op (the sim's own table)
  bool p2p = false;
  std::uint64_t group = 0;  // ops with the same group id are issued together (Send + Recv)
  bool finishes() const;
};

class JobModel {
 public:
  JobModel(const Options& options, std::uint64_t t0_ns);

  // The communicator instances the local rank `local` (0 .. gpus-1) belongs to.
  std::vector<const CommInstance*> CommsOf(int local) const;
  const std::vector<CommInstance>& comms() const { return comms_; }

  // The next iteration: per local rank, its operations in issue order. A rank stops getting ops
  // once it hangs or waits on a hung peer.
  std::vector<std::vector<RankOp>> NextIteration();
  std::uint64_t iteration() const { return iteration_; }

  int GlobalRank(int local) const { return options_.node * options_.gpus + local; }

  // P2p ops use this many channels.
  static constexpr int kP2pChannels = 2;

 private:
  const CommInstance& InstanceOf(CommKind kind, int global) const;
  std::uint64_t Jitter(int global, std::uint64_t op) const;
  double ChannelBandwidth(bool network, int channel) const;  // bytes per ns, healthy
  // Whether the fault window (fault_start .. fault_end after t0) holds `at`.
  bool FaultOn(std::uint64_t at) const;
  // Takes the fault's end from options_.fault_end_file once it exists. Every rank's model reads
  // it before each iteration; its writer puts the end at least a second ahead of the wall clock
  // and a model runs one iteration (tens of ms) ahead of it, so every rank of every node's
  // simulator ends the fault at the same point of the shared timeline.
  void ReadFaultEndFile();
  // Whether the network hop that `sender_node` sends on `channel` is the slow link at `at`.
  bool HopSlow(int channel, int sender_node, std::uint64_t at) const;
  // The communicator instances of a kind (every one runs the item concurrently).
  std::vector<const CommInstance*> InstancesOf(CommKind kind) const;
  // Collective()'s steps: how the instance's ring moves once the data flows at `flow`; the
  // network sends and receives of rank `r`'s op.
  struct RingPace;  // job_model.cc
  RingPace Pace(const WorkItem& item, std::uint64_t bytes, const CommInstance& comm,
                std::uint64_t flow) const;
  void AddRingNetOps(const CommInstance& comm, int r, const std::vector<std::uint64_t>& arrival,
                     std::uint64_t flow, const RingPace& pace, RankOp& op) const;
  void Collective(const WorkItem& item, std::uint64_t bytes,
                  const std::vector<std::uint64_t>& arrival, std::vector<std::uint64_t>& ready,
                  std::vector<std::vector<RankOp>>& out);
  // SendRecv()'s steps: how one pair's transfer goes; one rank's send or receive op. The network
  // steps of both directions take the pace (`pace`) of the pair the rank receives from, as the
  // model always has.
  struct P2pPair;  // job_model.cc
  P2pPair Pair(const CommInstance& comm, int from, int to, std::uint64_t bytes,
               const std::vector<std::uint64_t>& arrival) const;
  RankOp P2pOp(const WorkItem& item, const CommInstance& comm, int r, bool send,
               std::uint64_t bytes, std::uint64_t group, std::uint64_t a, const P2pPair& pair,
               const P2pPair& pace, const std::vector<std::uint64_t>& arrival) const;
  void SendRecv(const WorkItem& item, std::uint64_t bytes,
                const std::vector<std::uint64_t>& arrival, std::vector<std::uint64_t>& ready,
                std::vector<std::vector<RankOp>>& out);
  // Steps paced by the ring (`ring_step_ns` apart once the data flows), each on the wire for
  // `wire_step_ns`.
  static std::vector<StepTimes> SendSteps(std::uint64_t sender_arrival,
                                          std::uint64_t receiver_arrival, std::uint64_t flow,
                                          int steps, double ring_step_ns, double wire_step_ns);
  static std::vector<StepTimes> RecvSteps(const std::vector<StepTimes>& sent,
                                          std::uint64_t receiver_arrival);

  Options options_;
  std::uint64_t t0_ns_;
  std::vector<CommInstance> comms_;
  std::vector<std::uint64_t> ready_;  // per global rank: when it is free for its next op
  std::vector<std::uint64_t> seq_;    // per comm instance x NCCL func
  std::uint64_t iteration_ = 0;
  std::uint64_t op_counter_ = 0;
  std::uint64_t group_counter_ = 0;
  std::uint64_t pauses_ = 0;  // pause_every periods already paused for
  bool fault_end_read_ = false;
};

}  // namespace ncclscope::sim
