#include "tools/sim/job_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>

namespace ncclscope::sim {
namespace {

constexpr std::uint64_t kChannelSkewNs = 100;   // channels of one op start this far apart
constexpr std::uint64_t kStepPaddingNs = 1000;  // receive flush and GPU consumption per step
constexpr std::uint64_t kEnqueueLeadNs = 20'000;
constexpr std::uint64_t kStepBytes = 512 << 10;  // NCCL's SIMPLE step: 4 MiB buffer / 8 steps
constexpr int kMaxSteps = 8;

std::uint64_t SplitMix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::uint64_t Add(std::uint64_t a, std::uint64_t b) { return a >= kNever - b ? kNever : a + b; }

// NCCL's func index for per-(comm, func) seq counters.
int FuncSlot(const std::string& func) {
  static const char* const kFuncs[] = {"AllReduce", "AllGather", "ReduceScatter", "Broadcast",
                                       "Reduce"};
  for (int i = 0; i < 5; ++i) {
    if (func == kFuncs[i]) return i;
  }
  return 5;
}

// nccl-tests bus bytes of one rank's op (doc/PERFORMANCE.md), independent of the agent's table.
double BusBytes(const std::string& func, std::uint64_t bytes, int n) {
  const double b = static_cast<double>(bytes);
  if (func == "AllReduce") return b * 2.0 * (n - 1) / n;
  if (func == "AllGather" || func == "ReduceScatter") return b * n * (n - 1.0) / n;
  return b;  // Broadcast, Reduce, Send, Recv
}

}  // namespace

int CommInstance::RankOf(int global) const {
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (members[i] == global) return static_cast<int>(i);
  }
  return -1;
}

bool RankOp::finishes() const {
  for (const std::uint64_t end : channel_end) {
    if (end == kNever) return false;
  }
  return arrival_ns != kNever;
}

JobModel::JobModel(const Options& options, std::uint64_t t0_ns) : options_(options), t0_ns_(t0_ns) {
  const int n = options.nodes;
  const int g = options.gpus;
  auto id_of = [&](CommKind kind, int index) {
    return SplitMix(options.seed * 0x100000001b3ull + static_cast<std::uint64_t>(kind) * 65536 +
                    static_cast<std::uint64_t>(index)) |
           1;
  };
  // A communicator of `count` global ranks: first, first + stride, ... in communicator-rank order.
  auto add = [&](CommKind kind, int index, std::string name, int nnodes, int first, int stride,
                 int count) {
    CommInstance comm;
    comm.kind = kind;
    comm.index = index;
    comm.id = id_of(kind, index);
    comm.name = std::move(name);
    comm.nnodes = nnodes;
    for (int i = 0; i < count; ++i) comm.members.push_back(first + i * stride);
    comms_.push_back(std::move(comm));
  };
  add(CommKind::kWorld, 0, "SIM world", n, 0, 1, n * g);
  for (int node = 0; node < n; ++node) {
    add(CommKind::kTensor, node, "SIM TP group " + std::to_string(node), 1, node * g, 1, g);
  }
  for (int l = 0; l < g; ++l) {
    add(CommKind::kData, l, "SIM DP group " + std::to_string(l), n, l, g, n);
  }
  ready_.assign(static_cast<std::size_t>(n) * static_cast<std::size_t>(g), t0_ns);
  seq_.assign(comms_.size() * 6, 0);
}

const CommInstance& JobModel::InstanceOf(CommKind kind, int global) const {
  switch (kind) {
    case CommKind::kWorld:
      return comms_[0];
    case CommKind::kTensor:
      return comms_[1 + static_cast<std::size_t>(global / options_.gpus)];
    default:
      return comms_[1 + static_cast<std::size_t>(options_.nodes) +
                    static_cast<std::size_t>(global % options_.gpus)];
  }
}

std::vector<const CommInstance*> JobModel::CommsOf(int local) const {
  const int global = GlobalRank(local);
  std::vector<const CommInstance*> out;
  bool used[kCommKinds] = {};
  for (const WorkItem& w : options_.workload) used[static_cast<int>(w.comm)] = true;
  for (int k = 0; k < kCommKinds; ++k) {
    if (used[k]) out.push_back(&InstanceOf(static_cast<CommKind>(k), global));
  }
  return out;
}

std::uint64_t JobModel::Jitter(int global, std::uint64_t op) const {
  if (options_.jitter_ns == 0) return 0;
  const std::uint64_t h =
      SplitMix(options_.seed ^ SplitMix(static_cast<std::uint64_t>(global) * 0x1000003ull + op));
  return h % options_.jitter_ns;
}

double JobModel::ChannelBandwidth(bool network, int /*channel*/) const {
  const double gbps = network ? options_.network_gbps : options_.nvlink_gbps;
  return gbps / options_.channels;  // GB/s = bytes per ns
}

bool JobModel::FaultOn(std::uint64_t at) const {
  const std::uint64_t since = at > t0_ns_ ? at - t0_ns_ : 0;
  return since >= options_.fault_start_ns && since < options_.fault_end_ns;
}

void JobModel::ReadFaultEndFile() {
  if (options_.fault_end_file.empty() || fault_end_read_) return;
  std::ifstream in(options_.fault_end_file);
  if (!in) return;  // not there yet (its writer renames it into place whole)
  fault_end_read_ = true;
  std::uint64_t ms = 0;
  constexpr std::uint64_t kMaxMs = 1'000'000'000'000;  // ~31 years: no overflow in ns
  if (!(in >> ms) || ms > kMaxMs) {
    std::fprintf(stderr,
                 "ncclscope-sim: %s: not a number of ms after the job start; the fault "
                 "keeps its --fault-end\n",
                 options_.fault_end_file.c_str());
    return;
  }
  options_.fault_end_ns = std::min(options_.fault_end_ns, ms * 1'000'000);
}

bool JobModel::HopSlow(int channel, int sender_node, std::uint64_t at) const {
  if (channel != options_.slow_channel || !FaultOn(at)) return false;
  return options_.slow_node < 0 || options_.slow_node == sender_node;
}

std::vector<StepTimes> JobModel::SendSteps(std::uint64_t sender_arrival,
                                           std::uint64_t receiver_arrival, std::uint64_t flow,
                                           int steps, double ring_step_ns, double wire_step_ns) {
  std::vector<StepTimes> out;
  const auto ring = static_cast<std::uint64_t>(std::llround(ring_step_ns));
  const auto wire = static_cast<std::uint64_t>(std::llround(wire_step_ns));
  std::uint64_t previous = sender_arrival;
  for (int s = 0; s < steps; ++s) {
    StepTimes t;
    t.start = previous;
    // GPU data: the rank's own data for the first step, the ring's flow after that.
    const std::uint64_t data =
        s == 0 ? sender_arrival : Add(flow, ring * static_cast<std::uint64_t>(s));
    t.t1 = std::max(t.start, data);
    // Credit: the receiver posts its buffers when it arrives (NCCL keeps 8 steps in flight).
    t.t2 = std::max(t.t1, receiver_arrival);
    t.end = Add(t.t2, wire);
    out.push_back(t);
    previous = t.end;
  }
  return out;
}

std::vector<StepTimes> JobModel::RecvSteps(const std::vector<StepTimes>& sent,
                                           std::uint64_t receiver_arrival) {
  std::vector<StepTimes> out;
  std::uint64_t previous = receiver_arrival;
  for (const StepTimes& s : sent) {
    StepTimes t;
    t.start = previous;
    t.t1 = std::max(t.start, s.end);  // data arrived
    t.t2 = Add(t.t1, kStepPaddingNs / 2);
    t.end = Add(t.t2, kStepPaddingNs / 2);
    out.push_back(t);
    previous = t.end;
  }
  return out;
}

// How one collective instance's ring moves, channel by channel.
struct JobModel::RingPace {
  bool network = false;  // a multi-node ring: every hop of it crosses the network
  double bus = 0;        // bus bytes (BusBytes)
  double per_channel = 0;
  int steps = 1;
  double fast = 0;                          // healthy bytes per ns of a channel
  std::vector<std::uint64_t> channel_time;  // per channel: latency + transfer
  std::vector<double> step_ns;              // per channel: the ring's pace
  std::vector<bool> slow_hop;               // [sender node][channel]
  std::uint64_t longest = 0;
  bool SlowHop(int sender_node, int channel) const {
    return slow_hop[static_cast<std::size_t>(sender_node) * step_ns.size() +
                    static_cast<std::size_t>(channel)];
  }
};

std::vector<const CommInstance*> JobModel::InstancesOf(CommKind kind) const {
  std::vector<const CommInstance*> instances;
  for (const CommInstance& c : comms_) {
    if (c.kind == kind) instances.push_back(&c);
  }
  return instances;
}

JobModel::RingPace JobModel::Pace(const WorkItem& item, std::uint64_t bytes,
                                  const CommInstance& comm, std::uint64_t flow) const {
  const int channels = options_.channels;
  RingPace pace;
  pace.bus = BusBytes(item.func, bytes, comm.nranks());
  pace.per_channel = pace.bus / channels;
  pace.network = comm.nnodes > 1;
  pace.steps = static_cast<int>(std::clamp<std::uint64_t>(
      (static_cast<std::uint64_t>(pace.per_channel) + kStepBytes - 1) / kStepBytes, 1, kMaxSteps));
  pace.channel_time.resize(static_cast<std::size_t>(channels));
  pace.step_ns.resize(static_cast<std::size_t>(channels));
  pace.slow_hop.resize(static_cast<std::size_t>(options_.nodes) *
                       static_cast<std::size_t>(channels));
  pace.fast = ChannelBandwidth(pace.network, 0);
  for (int c = 0; c < channels; ++c) {
    // A ring moves at its slowest hop's pace: every hop of a multi-node ring crosses the
    // network (world: each node's exit GPU to the next node; dp: each rank to the next node).
    bool slow = false;
    if (pace.network) {
      for (int node = 0; node < options_.nodes; ++node) {
        const bool hop = HopSlow(c, node, flow);
        pace.slow_hop[static_cast<std::size_t>(node) * static_cast<std::size_t>(channels) +
                      static_cast<std::size_t>(c)] = hop;
        slow = slow || hop;
      }
    }
    const double bw = slow ? pace.fast / options_.slow_factor : pace.fast;
    pace.step_ns[static_cast<std::size_t>(c)] = pace.per_channel / pace.steps / bw;
    const double transfer = pace.network ? std::llround(pace.step_ns[static_cast<std::size_t>(c)]) *
                                               static_cast<double>(pace.steps)
                                         : pace.per_channel / bw;
    pace.channel_time[static_cast<std::size_t>(c)] =
        options_.latency_ns + static_cast<std::uint64_t>(std::llround(transfer));
    pace.longest = std::max(pace.longest, pace.channel_time[static_cast<std::size_t>(c)]);
  }
  return pace;
}

void JobModel::Collective(const WorkItem& item, std::uint64_t bytes,
                          const std::vector<std::uint64_t>& arrival,
                          std::vector<std::uint64_t>& ready,
                          std::vector<std::vector<RankOp>>& out) {
  const int gpus = options_.gpus;
  const int channels = options_.channels;
  // Every instance of the item's communicator kind runs it concurrently.
  for (const CommInstance* comm : InstancesOf(item.comm)) {
    const int n = comm->nranks();
    std::uint64_t flow = 0;
    for (const int m : comm->members) flow = std::max(flow, arrival[static_cast<std::size_t>(m)]);
    const RingPace pace = Pace(item, bytes, *comm, flow);
    std::uint64_t& seq = seq_[static_cast<std::size_t>(comm - comms_.data()) * 6 +
                              static_cast<std::size_t>(FuncSlot(item.func))];
    const std::uint64_t this_seq = seq++;
    for (const int m : comm->members) ready[static_cast<std::size_t>(m)] = Add(flow, pace.longest);

    for (int r = 0; r < n; ++r) {
      const int global = comm->members[static_cast<std::size_t>(r)];
      if (global / gpus != options_.node) continue;
      const std::uint64_t a = arrival[static_cast<std::size_t>(global)];
      if (a == kNever) continue;  // never gets here: nothing to issue
      RankOp op;
      op.item = &item;
      op.comm = comm;
      op.comm_rank = r;
      op.func = item.func;
      op.seq = this_seq;
      op.bytes = bytes;
      op.arrival_ns = a;
      op.enqueue_ns = a > kEnqueueLeadNs ? a - kEnqueueLeadNs : a;
      op.bus_bytes = pace.bus;
      for (int c = 0; c < channels; ++c) {
        op.channel_start.push_back(a + static_cast<std::uint64_t>(c) * kChannelSkewNs);
        op.channel_end.push_back(Add(flow, pace.channel_time[static_cast<std::size_t>(c)]));
      }
      if (pace.network) AddRingNetOps(*comm, r, arrival, flow, pace, op);
      out[static_cast<std::size_t>(global % gpus)].push_back(std::move(op));
    }
  }
}

// Who sends to / receives from the network on channel c: on world rings the node's exit and entry
// GPUs of that channel (different GPUs on different channels, as NCCL spreads rings over NICs);
// on dp rings (one rank per node) every rank, every channel.
void JobModel::AddRingNetOps(const CommInstance& comm, int r,
                             const std::vector<std::uint64_t>& arrival, std::uint64_t flow,
                             const RingPace& pace, RankOp& op) const {
  const int gpus = options_.gpus;
  const int n = comm.nranks();
  const int global = comm.members[static_cast<std::size_t>(r)];
  const int local = global % gpus;
  const int node = global / gpus;
  const int nodes = options_.nodes;
  const std::uint64_t a = op.arrival_ns;
  const int steps = pace.steps;
  for (int c = 0; c < options_.channels; ++c) {
    const int exit = (c + gpus - 1) % gpus;
    const int entry = c % gpus;
    int send_to = -1;
    int recv_from = -1;
    if (comm.kind == CommKind::kWorld) {
      if (local == exit) send_to = ((node + 1) % nodes) * gpus + entry;
      if (local == entry) recv_from = ((node + nodes - 1) % nodes) * gpus + exit;
    } else {
      send_to = comm.members[static_cast<std::size_t>((r + 1) % n)];
      recv_from = comm.members[static_cast<std::size_t>((r + n - 1) % n)];
    }
    const double d = pace.step_ns[static_cast<std::size_t>(c)];
    // This hop's own wire time per step: the ring's pace on the slow hop, the healthy
    // rate on the others.
    auto wire = [&](int sender_node) {
      return pace.SlowHop(sender_node, c) ? d : pace.per_channel / steps / pace.fast;
    };
    const auto step_bytes = static_cast<std::uint64_t>(pace.per_channel / steps);
    if (send_to >= 0) {
      NetOp net;
      net.channel = c;
      net.send = true;
      net.peer = comm.RankOf(send_to);
      net.step_bytes = step_bytes;
      net.steps =
          SendSteps(a, arrival[static_cast<std::size_t>(send_to)], flow, steps, d, wire(node));
      op.net.push_back(std::move(net));
    }
    if (recv_from >= 0) {
      const std::uint64_t from = arrival[static_cast<std::size_t>(recv_from)];
      NetOp net;
      net.channel = c;
      net.send = false;
      net.peer = comm.RankOf(recv_from);
      net.step_bytes = step_bytes;
      net.steps =
          RecvSteps(SendSteps(from, a, flow, steps, d, wire((node + nodes - 1) % nodes)), a);
      op.net.push_back(std::move(net));
    }
  }
}

// One pair (from -> to) of a SendRecv: it flows once both arrived; each pair uses kP2pChannels
// channels.
struct JobModel::P2pPair {
  bool network = false;
  std::uint64_t flow = 0;
  std::uint64_t end = 0;
  int steps = 1;
  double step_ns = 0;
};

JobModel::P2pPair JobModel::Pair(const CommInstance& comm, int from, int to, std::uint64_t bytes,
                                 const std::vector<std::uint64_t>& arrival) const {
  const int gpus = options_.gpus;
  P2pPair pair;
  const int gf = comm.members[static_cast<std::size_t>(from)];
  const int gt = comm.members[static_cast<std::size_t>(to)];
  pair.network = gf / gpus != gt / gpus;
  pair.flow =
      std::max(arrival[static_cast<std::size_t>(gf)], arrival[static_cast<std::size_t>(gt)]);
  const double per_channel = static_cast<double>(bytes) / kP2pChannels;
  pair.steps = static_cast<int>(std::clamp<std::uint64_t>(
      (static_cast<std::uint64_t>(per_channel) + kStepBytes - 1) / kStepBytes, 1, kMaxSteps));
  const double bw = ChannelBandwidth(pair.network, -1);
  pair.step_ns = per_channel / pair.steps / bw;
  const double transfer = pair.network
                              ? std::llround(pair.step_ns) * static_cast<double>(pair.steps)
                              : per_channel / bw;
  pair.end =
      Add(pair.flow, options_.latency_ns + static_cast<std::uint64_t>(std::llround(transfer)));
  return pair;
}

void JobModel::SendRecv(const WorkItem& item, std::uint64_t bytes,
                        const std::vector<std::uint64_t>& arrival,
                        std::vector<std::uint64_t>& ready, std::vector<std::vector<RankOp>>& out) {
  const int gpus = options_.gpus;
  const std::uint64_t group = group_counter_++;
  for (const CommInstance* comm : InstancesOf(item.comm)) {
    const int n = comm->nranks();
    if (n < 2) continue;
    std::vector<std::uint64_t> done(static_cast<std::size_t>(n), 0);
    for (int r = 0; r < n; ++r) {
      const P2pPair send = Pair(*comm, r, (r + 1) % n, bytes, arrival);
      const P2pPair recv = Pair(*comm, (r + n - 1) % n, r, bytes, arrival);
      done[static_cast<std::size_t>(r)] = std::max(send.end, recv.end);
      const int global = comm->members[static_cast<std::size_t>(r)];
      if (global / gpus != options_.node) continue;
      const std::uint64_t a = arrival[static_cast<std::size_t>(global)];
      if (a == kNever) continue;
      for (const bool is_send : {true, false}) {
        out[static_cast<std::size_t>(global % gpus)].push_back(
            P2pOp(item, *comm, r, is_send, bytes, group, a, is_send ? send : recv, recv, arrival));
      }
    }
    for (int r = 0; r < n; ++r) {
      ready[static_cast<std::size_t>(comm->members[static_cast<std::size_t>(r)])] =
          done[static_cast<std::size_t>(r)];
    }
  }
}

RankOp JobModel::P2pOp(const WorkItem& item, const CommInstance& comm, int r, bool send,
                       std::uint64_t bytes, std::uint64_t group, std::uint64_t a,
                       const P2pPair& pair, const P2pPair& pace,
                       const std::vector<std::uint64_t>& arrival) const {
  const int n = comm.nranks();
  const int peer = send ? (r + 1) % n : (r + n - 1) % n;
  RankOp op;
  op.item = &item;
  op.comm = &comm;
  op.comm_rank = r;
  op.func = send ? "Send" : "Recv";
  op.peer = peer;
  op.bytes = bytes;
  op.arrival_ns = a;
  op.enqueue_ns = a > kEnqueueLeadNs ? a - kEnqueueLeadNs : a;
  op.bus_bytes = static_cast<double>(bytes);
  op.p2p = true;
  op.group = group;
  for (int c = 0; c < kP2pChannels; ++c) {
    op.channel_start.push_back(a + static_cast<std::uint64_t>(c) * kChannelSkewNs);
    op.channel_end.push_back(pair.end);
  }
  if (!pair.network) return op;
  const int other = comm.members[static_cast<std::size_t>(peer)];
  const std::uint64_t other_arrival = arrival[static_cast<std::size_t>(other)];
  const int steps = pace.steps;
  const double step_ns = pace.step_ns;
  for (int c = 0; c < kP2pChannels; ++c) {
    NetOp net;
    net.channel = c;
    net.send = send;
    net.peer = peer;
    net.step_bytes = static_cast<std::uint64_t>(static_cast<double>(bytes) / kP2pChannels / steps);
    if (send) {
      net.steps = SendSteps(a, other_arrival, pair.flow, steps, step_ns, step_ns);
    } else {
      net.steps = RecvSteps(SendSteps(other_arrival, a, pair.flow, steps, step_ns, step_ns), a);
    }
    op.net.push_back(std::move(net));
  }
  return op;
}

std::vector<std::vector<RankOp>> JobModel::NextIteration() {
  ReadFaultEndFile();
  const std::size_t ranks = ready_.size();
  std::vector<std::vector<RankOp>> out(static_cast<std::size_t>(options_.gpus));
  const auto start = t0_ns_ + static_cast<std::uint64_t>(std::llround(
                                  static_cast<double>(iteration_) * 1e9 / options_.rate));
  for (std::uint64_t& r : ready_) r = std::max(r, start);
  // Rank 0's time is the job's clock for what every rank does together (every node's model
  // computes the same ready_ for every rank).
  const std::uint64_t clock = ready_[0] == kNever ? start : ready_[0];
  const std::uint64_t since = clock > t0_ns_ ? clock - t0_ns_ : 0;
  if (options_.pause_every_ns > 0 && options_.pause_for_ns > 0) {
    const std::uint64_t period = since / options_.pause_every_ns;
    if (period > pauses_) {
      pauses_ = period;
      for (std::uint64_t& r : ready_) r = Add(r, options_.pause_for_ns);
    }
  }
  double scale = 1;
  if (options_.resize_every_ns > 0 && (since / options_.resize_every_ns) % 2 == 1) {
    scale = options_.resize_factor;
  }
  bool hang_now = false;
  if (options_.hang_rank >= 0) {
    hang_now = options_.hang_at_ns > 0 ? ready_[static_cast<std::size_t>(options_.hang_rank)] >=
                                             Add(t0_ns_, options_.hang_at_ns)
                                       : iteration_ >= options_.hang_iteration;
  }
  for (const WorkItem& item : options_.workload) {
    std::vector<std::uint64_t> arrival(ranks);
    const std::uint64_t op = op_counter_++;
    const std::uint64_t compute = item.compute_ns.value_or(options_.compute_gap_ns);
    const auto bytes = std::max<std::uint64_t>(
        1, static_cast<std::uint64_t>(std::llround(static_cast<double>(item.bytes) * scale)));
    for (std::size_t g = 0; g < ranks; ++g) {
      std::uint64_t a = Add(ready_[g], compute + Jitter(static_cast<int>(g), op));
      if (static_cast<int>(g) == options_.slow_rank && FaultOn(ready_[g])) {
        a = Add(a, options_.slow_by_ns);
      }
      if (static_cast<int>(g) == options_.hang_rank && hang_now) a = kNever;
      arrival[g] = a;
    }
    std::vector<std::uint64_t> ready = ready_;
    if (item.func == "SendRecv") {
      SendRecv(item, bytes, arrival, ready, out);
    } else {
      Collective(item, bytes, arrival, ready, out);
    }
    ready_ = std::move(ready);
  }
  ++iteration_;
  return out;
}

}  // namespace ncclscope::sim
