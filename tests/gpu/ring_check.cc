// ring-check: reads the plugin rings a real NCCL job left in a directory (with the agent's own
// reader, which needs nothing but the C++ standard library) and checks them against what the job
// (allreduce_loop) did. Used by tests/gpu/run.sh, where the agent's other dependencies may be
// missing.
//
// Usage: ring-check DIR --ranks R --iterations I --allgathers G --count C [--expect-network]
// Exit 0 when every check passes; prints a summary and one line per failed check.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "agent/profiler/ring_directory.h"

namespace {

using ncclscope::profiler::OpView;
using ncclscope::profiler::RingOrigin;

struct Collect : ncclscope::profiler::RecordSink {
  std::vector<ncclscope_comm_init_record> inits;
  std::vector<ncclscope_comm_finalize_record> finals;
  std::vector<OpView> ops;
  std::vector<ncclscope_proxy_op_record> net;
  void OnCommInit(const RingOrigin&, const ncclscope_comm_init_record& r) override {
    inits.push_back(r);
  }
  void OnCommFinalize(const RingOrigin&, const ncclscope_comm_finalize_record& r) override {
    finals.push_back(r);
  }
  void OnOp(const RingOrigin&, const OpView& v) override { ops.push_back(v); }
  void OnProxyOp(const RingOrigin&, const ncclscope_proxy_op_record& r) override {
    net.push_back(r);
  }
};

int g_failures = 0;

void Check(bool ok, const std::string& what) {
  if (!ok) {
    ++g_failures;
    std::printf("FAIL: %s\n", what.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: ring-check DIR --ranks R --iterations I --allgathers G --count C\n");
    return 2;
  }
  const std::string dir = argv[1];
  int ranks = 0, iterations = 0, allgathers = 0;
  unsigned long long count = 0;
  bool expect_network = false;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&] { return i + 1 < argc ? std::strtoull(argv[++i], nullptr, 10) : 0ull; };
    if (arg == "--ranks")
      ranks = static_cast<int>(next());
    else if (arg == "--iterations")
      iterations = static_cast<int>(next());
    else if (arg == "--allgathers")
      allgathers = static_cast<int>(next());
    else if (arg == "--count")
      count = next();
    else if (arg == "--expect-network")
      expect_network = true;
  }

  ncclscope::profiler::RingDirectory directory(dir);
  Collect c;
  while (directory.Poll(c)) {
  }
  directory.Poll(c);  // the jobs have exited: this pass drains to the end and reclaims
  const auto& snap = directory.snapshot();

  std::printf("rings reclaimed %llu, records: init %zu, op %zu, proxy_op %zu, finalize %zu\n",
              static_cast<unsigned long long>(snap.rings_reclaimed), c.inits.size(), c.ops.size(),
              c.net.size(), c.finals.size());
  Check(snap.rings_reclaimed >= 1, "the job's rings drained and reclaimed");
  Check(snap.dropped_ring_full == 0, "no records dropped (ring full)");
  Check(snap.plugin_counters[NCCLSCOPE_CTR_DROPPED_CONTENTION] == 0, "no records dropped (busy)");
  std::uint64_t corrupt = 0;
  for (std::uint64_t n : snap.corrupt) corrupt += n;
  Check(corrupt == 0, "no corrupt records");

  // Communicators: one, with `ranks` ranks, each on a named GPU.
  Check(static_cast<int>(c.inits.size()) == ranks,
        "comm init records: " + std::to_string(c.inits.size()) + " want " + std::to_string(ranks));
  std::set<std::uint64_t> comms;
  for (const auto& init : c.inits) {
    comms.insert(init.comm_id);
    std::printf("comm 0x%016llx rank %d/%d nnodes %d cuda_device %d %s %s abi v%u\n",
                static_cast<unsigned long long>(init.comm_id), init.rank, init.nranks, init.nnodes,
                init.cuda_device, init.gpu_uuid, init.pci_bus_id, init.nccl_abi);
    Check(init.nranks == ranks, "nranks");
    Check(init.cuda_device >= 0, "cuda_device from the loaded CUDA driver");
    Check(std::string(init.gpu_uuid).rfind("GPU-", 0) == 0, "GPU UUID from the CUDA driver");
    Check(init.nccl_abi >= 4 && init.nccl_abi <= 6, "ABI version");
  }
  Check(comms.size() == 1, "one communicator id shared by all ranks");

  // Ops: per rank, exactly the loop's collectives, all with GPU timing.
  std::map<int, std::map<int, int>> per_rank;  // rank -> func -> ops
  std::map<std::pair<int, std::uint64_t>, std::set<int>> seq_ranks;
  std::vector<double> durations_us;
  for (const OpView& v : c.ops) {
    const ncclscope_op_record& op = v.op;
    ++per_rank[op.rank][op.func];
    seq_ranks[{op.func, op.seq}].insert(op.rank);
    const bool timed = (op.flags & NCCLSCOPE_OP_GPU_TIMING) != 0;
    Check(timed, "op " + std::string(ncclscope_func_name(op.func)) + " seq " +
                     std::to_string(op.seq) + " rank " + std::to_string(op.rank) +
                     " has GPU timing (flags " + std::to_string(op.flags) + ")");
    if (timed) {
      Check(op.gpu_end_ns > op.gpu_start_ns, "GPU duration > 0");
      durations_us.push_back(static_cast<double>(op.gpu_end_ns - op.gpu_start_ns) / 1000.0);
    }
    Check((op.flags & NCCLSCOPE_OP_FLUSHED) == 0, "op completed before its communicator ended");
    Check(op.bytes == count * 4, "op bytes = count x 4");
  }
  for (int r = 0; r < ranks; ++r) {
    Check(per_rank[r][NCCLSCOPE_FUNC_ALL_REDUCE] == iterations,
          "rank " + std::to_string(r) + " AllReduce ops " +
              std::to_string(per_rank[r][NCCLSCOPE_FUNC_ALL_REDUCE]) + " want " +
              std::to_string(iterations));
    Check(per_rank[r][NCCLSCOPE_FUNC_ALL_GATHER] == allgathers,
          "rank " + std::to_string(r) + " AllGather ops " +
              std::to_string(per_rank[r][NCCLSCOPE_FUNC_ALL_GATHER]) + " want " +
              std::to_string(allgathers));
  }
  for (const auto& [key, seen] : seq_ranks) {
    Check(static_cast<int>(seen.size()) == ranks, "(func, seq) " + std::to_string(key.first) + "/" +
                                                      std::to_string(key.second) +
                                                      " seen on every rank (cross-rank join key)");
  }
  for (const auto& f : c.finals) {
    Check(f.ops_enqueued == f.ops_completed && f.ops_flushed == 0,
          "rank " + std::to_string(f.rank) + " finalized with nothing in flight");
  }
  Check(static_cast<int>(c.finals.size()) == ranks, "comm finalize records");
  if (!durations_us.empty()) {
    std::sort(durations_us.begin(), durations_us.end());
    std::printf("GPU duration per op: min %.1f us, median %.1f us, max %.1f us\n",
                durations_us.front(), durations_us[durations_us.size() / 2], durations_us.back());
  }
  if (expect_network) {
    std::uint64_t bytes = 0;
    for (const auto& n : c.net) bytes += n.bytes;
    std::printf("network: %zu proxy ops, %llu bytes\n", c.net.size(),
                static_cast<unsigned long long>(bytes));
    Check(!c.net.empty() && bytes > 0, "network proxy ops with bytes");
  }
  std::printf("%s (%d failed checks)\n", g_failures == 0 ? "PASS" : "FAIL", g_failures);
  return g_failures == 0 ? 0 : 1;
}
