#pragma once

// ncclscope-sim's command line: the simulated job (nodes x GPUs, communicators, the collectives of
// one training iteration, links), its pace, and the faults to inject. See tools/README.md.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ncclscope::sim {

// The communicators a framework builds, as this simulator names them:
//   world  every rank of the job (nodes x gpus ranks, nnodes = nodes)
//   tp     tensor parallel: the GPUs of one node (nnodes = 1, NVLink only)
//   dp     data parallel: the same GPU index on every node (nnodes = nodes, network only)
enum class CommKind : std::uint8_t { kWorld = 0, kTensor = 1, kData = 2 };
inline constexpr int kCommKinds = 3;
const char* CommKindName(CommKind kind);

// One operation of an iteration: a collective on a communicator, or "SendRecv" (each rank sends to
// the next rank of the communicator and receives from the previous one, as a pipeline does).
struct WorkItem {
  std::string func;  // AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, SendRecv
  CommKind comm = CommKind::kWorld;
  std::uint64_t bytes = 0;  // per rank, as NCCL counts them (count x datatype size)
  // Compute before this operation (the GPU outside NCCL), when the item gives one; else
  // Options::compute_gap_ns.
  std::optional<std::uint64_t> compute_ns;
};

struct Options {
  std::string plugin;  // the profiler plugin .so; empty: the one installed next to the binary
  int abi = 6;         // profiler ABI version the simulated NCCL uses (4, 5, 6)

  // Job shape: this node is `node` of `nodes`, with `gpus` ranks (one process each).
  int nodes = 2;
  int gpus = 8;
  int node = 0;
  int channels = 8;
  std::string algo = "RING";
  std::string proto = "SIMPLE";
  std::vector<WorkItem> workload;  // one iteration; default: see ParseOptions

  // Pace: iterations per second (each iteration runs the workload once per rank), how many
  // iterations (0: until --duration or a signal), how long (0: until a signal).
  double rate = 5;
  std::uint64_t iterations = 0;
  double duration_s = 0;
  double linger_s = 0;  // after the last iteration, stay alive (idle) this long before finalizing
  std::uint64_t compute_gap_ns = 2'000'000;  // compute before each operation
  std::uint64_t jitter_ns = 20'000;          // deterministic per-rank noise on top

  // Links, per GPU and direction, split evenly over the channels; and a fixed latency per op.
  double nvlink_gbps = 300;  // GB/s intra-node
  double network_gbps = 50;  // GB/s per GPU to the network (one 400 Gb/s NIC)
  std::uint64_t latency_ns = 10'000;

  // Healthy noise every rank shares: all ranks pause `pause_for` together every `pause_every`
  // (a checkpoint, an evaluation), and the workload's message sizes switch between x1 and
  // x`resize_factor` every `resize_every` (another batch or sequence length). 0: never.
  std::uint64_t pause_every_ns = 0;
  std::uint64_t pause_for_ns = 0;
  std::uint64_t resize_every_ns = 0;
  double resize_factor = 4;

  // Faults. A slow rank computes `slow_by` longer before every operation; a slow channel's
  // network hop runs `slow_factor` times slower (one bad link/NIC path: the hop sent from
  // `slow_node`, or every node's hop of that channel when -1); a hung rank stops before its
  // first operation of iteration `hang_iteration` (or of the first iteration starting
  // `hang_at` after the job start) and never arrives. The slow rank and the slow channel are
  // slow only from `fault_start` to `fault_end` after the job start.
  int slow_rank = -1;
  std::uint64_t slow_by_ns = 5'000'000;
  int slow_channel = -1;
  int slow_node = -1;
  double slow_factor = 4;
  int hang_rank = -1;
  std::uint64_t hang_iteration = 10;
  std::uint64_t hang_at_ns = 0;  // 0: hang_iteration decides
  std::uint64_t fault_start_ns = 0;
  std::uint64_t fault_end_ns = UINT64_MAX;
  // Ends the fault while the job runs (the fault benchmark ends it once its alert has fired):
  // once this file exists it holds the fault's end, in ms after the job start (job_model.h).
  std::string fault_end_file;

  // When the job starts (unix time, ns): the same on every node's simulator, so that their models
  // share one timeline; 0: 200 ms after this process starts.
  std::uint64_t start_at_ns = 0;
  bool threads = false;  // all local ranks as threads of one process (one ring) instead of one
                         // process per rank
  std::uint64_t seed = 1;
  std::string job_id = "simulated";
  std::uint64_t tick_ns = 1'000'000;  // batching of events whose exact host time does not matter
  bool quiet = false;                 // no summary at the end
};

// Parses argv. Returns nullopt with *error set on a bad command line.
std::optional<Options> ParseOptions(int argc, char** argv, std::string* error);
std::string UsageText();

}  // namespace ncclscope::sim
