// gpu-check-replay: the GPU check's workload (workload.h) driven through the real plugin .so by
// the replay driver (tools/replay) instead of NCCL, so ring-check can be tested where there is no
// GPU. Like the one-GPU run of allreduce_loop it forks one process per rank (each with a ring of
// its own), two "nodes" whose ops get network ProxyOps (with IB net-plugin events), and prints the
// same manifest and job line.
//
// Usage: gpu-check-replay --plugin PATH [--cuda LIBCUDA] [--abi 1..7] [--ranks N]
//                         [--iterations I] [--break missing-op|stuck-channel]
// --abi plays the NCCL whose newest profiler ABI that is (tools/replay/nccl_replay.h): 1 = 2.23,
// 2 = 2.24/2.25, 3 = 2.26, 4 = 2.27, 5 = 2.28, 6 = 2.29/2.30, 7 = 2.31; the job line's nccl= is
// that release's version code. v7 delivers KernelCh and kernel phases from a profiler thread per
// rank, as 2.31 does.
// --cuda loads a CUDA driver stand-in (tests/support/fake_libcuda.c) first, as NCCL has the real
// one loaded, so the plugin names a GPU.
// Besides the workload's manifest, rank 0 prints the communicators' ids (NCCL's commHash):
//   comm name=NAME id=0xHEX
// ABI v1-v3 hand the plugin no communicator name (NCCL passes name NULL), so ring-check maps the
// rings' communicator ids to the job's names from these lines.
// --break makes the rings disagree with the manifest, for the checker's negative tests:
//   missing-op     rank 1 skips its 3rd AllReduce of the loop (the manifest still lists it);
//   stuck-channel  one channel of rank 0's 5th loop AllReduce starts and never stops.
//
// What the replay simplifies (see nccl_replay.h): channel counts are fixed (8 per collective, 2
// per p2p task, 1 per all-to-all task), GPU times are synthetic (v7: one "compute" phase per
// channel, no initial_sync or final_sync), and each plan's proxy side runs on the rank's one proxy
// thread.

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "platform/clock.h"
#include "tests/gpu/workload.h"
#include "tools/replay/nccl_replay.h"

namespace {

using gpucheck::Comm;
using ncclscope::platform::RealtimeNs;
using ncclscope::replay::CapturedGraph;
using ncclscope::replay::EnqueuedOp;
using ncclscope::replay::GroupTask;
using ncclscope::replay::PlanLaunch;
using ncclscope::replay::PlannedOp;
using ncclscope::replay::PlanTiming;
using ncclscope::replay::ProfilerPlugin;
using ncclscope::replay::ProxyPlan;
using ncclscope::replay::ProxyThread;
using ncclscope::replay::ReplayComm;
using ncclscope::replay::ReplayProcess;

struct Options {
  std::string plugin;
  std::string cuda;
  int abi = 5;
  int ranks = 2;
  int iterations = 100;
  std::string breakage;
};

// NCCL's names, static storage as NCCL's are (the plugin caches lookups by pointer).
constexpr const char* kFloat = "ncclFloat32";

class ReplayBackend : public gpucheck::Backend {
 public:
  ReplayBackend(ReplayProcess& process, std::uint64_t world_id, int rank, int nranks,
                std::string breakage)
      : process_(process),
        world_id_(world_id),
        rank_(rank),
        nranks_(nranks),
        breakage_(std::move(breakage)) {
    comms_[gpucheck::kWorld] = std::make_unique<ReplayComm>(
        process, world_id, gpucheck::kWorldName, nranks, nranks, rank, &proxy_, ProfilerThread());
    ok_ = comms_[gpucheck::kWorld]->Init();
    // Network work of every op: the ranks are two "nodes"; IB names the NIC and queue pairs.
    net_.steps = 2;
    net_.step_bytes = 32768;
    net_.ib_device = 0;
    net_.qp_base = 0x100 + 0x1000 * rank;
  }
  ~ReplayBackend() override {
    for (int c = gpucheck::kSplit; c >= gpucheck::kWorld; --c) {
      if (comms_[c]) comms_[c]->Finalize();
    }
  }
  bool ok() const { return ok_; }

  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  void Split() override {
    comms_[gpucheck::kSplit] =
        std::make_unique<ReplayComm>(process_, world_id_ + 1, gpucheck::kSplitName, nranks_,
                                     nranks_, rank_, &proxy_, ProfilerThread());
    ok_ = comms_[gpucheck::kSplit]->Init() && ok_;
  }
  void AllReduce(Comm c, std::size_t n) override {
    if (c == gpucheck::kWorld && !in_group_ && !capturing_) ++loop_allreduces_;
    if (breakage_ == "missing-op" && rank_ == 1 && c == gpucheck::kWorld && loop_allreduces_ == 3 &&
        !in_group_) {
      return;
    }
    Coll(c, "AllReduce", n);
  }
  // The replay plays the tag into v7's CollApi and Coll as NCCL 2.31 does; older ABIs have no tag.
  bool CanTag() const override { return process_.version() >= 7; }
  void TaggedAllReduce(Comm c, std::size_t n, std::uint64_t tag) override {
    Coll(c, "AllReduce", n, 0, tag);
  }
  void AllGather(Comm c, std::size_t n) override { Coll(c, "AllGather", n); }
  void Broadcast(Comm c, std::size_t n, int root) override { Coll(c, "Broadcast", n, root); }
  void ReduceScatter(Comm c, std::size_t n) override { Coll(c, "ReduceScatter", n); }
  void Send(Comm c, std::size_t n, int peer) override { P2p(c, "Send", n, peer, 2); }
  void Recv(Comm c, std::size_t n, int peer) override { P2p(c, "Recv", n, peer, 2); }
  void AllToAll(Comm c, std::size_t n) override {
    // One implicit group: a Send and a Recv per peer, this rank included.
    GroupStart();
    for (int peer = 0; peer < nranks_; ++peer) {
      P2p(c, "Send", n, peer, 1);
      P2p(c, "Recv", n, peer, 1);
    }
    GroupEnd();
  }
  void GroupStart() override { in_group_ = true; }
  void GroupEnd() override {
    in_group_ = false;
    Launch(group_comm_, group_);
    group_.clear();
  }
  void BeginCapture() override { capturing_ = true; }
  void EndCapture() override { capturing_ = false; }
  void LaunchGraphs() override {
    for (const Captured& g : graphs_) {
      ReplayComm& comm = *comms_[g.comm];
      comm.LaunchGraph(g.graph, &callback_, Upload(comm, nullptr));
    }
  }
  void Sync() override {
    proxy_.Drain();
    profiler_thread_.Drain();
  }

 private:
  // NCCL 2.31's per-communicator profiler thread (shared by a split that shares resources, as
  // here: one per rank), which delivers KernelCh and kernel phases (src/plugin/profiler.cc
  // :1053-1099 at 2.31.2); older versions deliver KernelCh from the proxy thread.
  ProxyThread* ProfilerThread() { return process_.version() >= 7 ? &profiler_thread_ : nullptr; }

  struct Captured {
    Comm comm;
    CapturedGraph graph;
  };

  void Coll(Comm c, const char* func, std::size_t n, int root = 0, std::uint64_t tag = 0) {
    GroupTask task;
    task.coll.user_tag = tag;
    task.coll.func = func;
    task.coll.count = n;
    task.coll.datatype = kFloat;
    task.coll.root = root;
    Add(c, task);
  }
  void P2p(Comm c, const char* func, std::size_t n, int peer, int channels) {
    GroupTask task;
    task.p2p = true;
    task.send_recv.func = func;
    task.send_recv.count = n;
    task.send_recv.datatype = kFloat;
    task.send_recv.peer = peer;
    task.send_recv.channels = static_cast<std::uint8_t>(channels);
    Add(c, task);
  }
  void Add(Comm c, const GroupTask& task) {
    if (in_group_) {
      group_comm_ = c;
      group_.push_back(task);
    } else if (capturing_) {
      graphs_.push_back({c, comms_[c]->CaptureGraph({task})});
    } else {
      Launch(c, {task});
    }
  }

  // The proxy side of each plan: GPU time by size (the largest op of a plan ends last), network
  // ProxyOps on every channel; with --break stuck-channel one op keeps a channel running.
  ReplayComm::Upload Upload(ReplayComm& comm, const bool* stuck) {
    const bool stick = stuck != nullptr && *stuck;
    return [this, &comm, stick](const PlanLaunch& plan) {
      if (stick) {
        proxy_.Post([&comm, plan] {
          const PlannedOp& op = plan.ops.front();
          const EnqueuedOp e{op.handle, op.mask, static_cast<std::uint8_t>(op.channel_ids.size())};
          const std::uint64_t now = RealtimeNs();
          for (std::size_t k = 0; k < op.channel_ids.size(); ++k) {
            void* h = comm.KernelChannelStart(e, op.channel_ids[k], now);
            if (k + 1 < op.channel_ids.size()) comm.KernelChannelStop(h, now + 10'000);
          }
        });
        return;
      }
      PlanTiming timing;
      for (const PlannedOp& op : plan.ops) {
        timing.duration_ns.push_back(10'000 + op.bytes / 10);  // ~10 GB/s
      }
      comm.RunPlan(plan, timing, net_);
    };
  }
  void Launch(Comm c, const std::vector<GroupTask>& tasks) {
    ReplayComm& comm = *comms_[c];
    const bool stuck = breakage_ == "stuck-channel" && rank_ == 0 && c == gpucheck::kWorld &&
                       tasks.size() == 1 && !tasks[0].p2p &&
                       std::strcmp(tasks[0].coll.func, "AllReduce") == 0 && loop_allreduces_ == 5 &&
                       !stuck_done_;
    if (stuck) stuck_done_ = true;
    comm.Group(tasks, nullptr, Upload(comm, &stuck));
  }

  ReplayProcess& process_;
  std::uint64_t world_id_;
  int rank_;
  int nranks_;
  std::string breakage_;
  ProxyThread proxy_;            // NCCL's proxy progress thread
  ProxyThread profiler_thread_;  // NCCL 2.31's profiler thread (v7 only)
  ProxyThread callback_;         // CUDA's host-callback thread (graph launches)
  std::unique_ptr<ReplayComm> comms_[2];
  ProxyPlan net_;
  bool ok_ = false;
  bool in_group_ = false;
  bool capturing_ = false;
  Comm group_comm_ = gpucheck::kWorld;
  std::vector<GroupTask> group_;
  std::vector<Captured> graphs_;
  int loop_allreduces_ = 0;
  bool stuck_done_ = false;
};

int RunRank(const Options& o, std::uint64_t world_id, int rank) {
  if (!o.cuda.empty() && dlopen(o.cuda.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
    std::fprintf(stderr, "cannot load %s: %s\n", o.cuda.c_str(), dlerror());
    return 2;
  }
  ProfilerPlugin plugin(o.plugin);
  if (!plugin.ok() || !plugin.Has(o.abi)) {
    std::fprintf(stderr, "cannot use %s (ABI v%d): %s\n", o.plugin.c_str(), o.abi,
                 plugin.error().c_str());
    return 2;
  }
  ReplayProcess process(plugin, o.abi);
  gpucheck::Shape shape;
  shape.iterations = o.iterations;
  gpucheck::Manifest manifest;
  {
    ReplayBackend backend(process, world_id, rank, o.ranks, o.breakage);
    if (!backend.ok()) {
      std::fprintf(stderr, "rank %d: plugin init gave no context\n", rank);
      return 3;
    }
    gpucheck::RunWorkload(backend, shape, manifest, rank == 0 ? stdout : nullptr);
    if (!backend.ok()) return 3;
  }
  if (rank == 0) {
    // The communicators' ids, for rings without names (v1-v3: NCCL passes name NULL).
    std::printf("comm name=%s id=0x%llx\n", gpucheck::kWorldName,
                static_cast<unsigned long long>(world_id));
    const std::uint64_t split_id = world_id + 1;
    std::printf("comm name=%s id=0x%llx\n", gpucheck::kSplitName,
                static_cast<unsigned long long>(split_id));
    manifest.Print(stdout);
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  auto number = [](const char* text) { return static_cast<int>(std::strtol(text, nullptr, 10)); };
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string arg = argv[i];
    const char* value = argv[i + 1];
    if (arg == "--plugin") {
      o.plugin = value;
    } else if (arg == "--cuda") {
      o.cuda = value;
    } else if (arg == "--abi") {
      o.abi = number(value);
    } else if (arg == "--ranks") {
      o.ranks = number(value);
    } else if (arg == "--iterations") {
      o.iterations = number(value);
    } else if (arg == "--break") {
      o.breakage = value;
    } else {
      std::fprintf(stderr, "unknown argument %s\n", arg.c_str());
      return 2;
    }
  }
  if (argc % 2 == 0) {
    std::fprintf(stderr, "%s needs a value\n", argv[argc - 1]);
    return 2;
  }
  if (o.plugin.empty() || o.ranks < 2 || o.abi < 1 || o.abi > 7) {
    std::fprintf(
        stderr,
        "usage: gpu-check-replay --plugin PATH [--cuda LIBCUDA] [--abi 1..7] [--ranks N>=2] "
        "[--iterations I] [--break missing-op|stuck-channel]\n");
    return 2;
  }
  // commHash: equal on every rank, different per run.
  const std::uint64_t world_id =
      0x6770756300000000ull ^ (static_cast<std::uint64_t>(getpid()) << 8);
  std::fflush(stdout);
  std::vector<pid_t> children;
  for (int r = 0; r < o.ranks; ++r) {
    const pid_t pid = fork();
    if (pid == 0) std::_Exit(RunRank(o, world_id, r));
    children.push_back(pid);
  }
  int failed = 0;
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  if (failed != 0) {
    std::fprintf(stderr, "%d rank process(es) failed\n", failed);
    return 1;
  }
  // The NCCL release the replay plays for this ABI, whose newest table it is (src/misc/profiler.cc
  // :119 at v2.23.4-1, :220-234 at v2.24.3-1; src/plugin/profiler.cc:52-58 at v2.26.6-1, :53-61 at
  // v2.27.7-1, :70-81 at v2.28.9-1; :123-141 at 2.31.2): 2.23.4 v1, 2.24.3 v2, 2.26.6 v3, 2.27.7
  // v4, 2.28.9 v5, 2.29.7 v6, 2.31.2 v7.
  constexpr int kNcclOfAbi[] = {0, 22304, 22403, 22606, 22707, 22809, 22907, 23102};
  const int nccl = kNcclOfAbi[o.abi];
  std::printf(
      "job mode=replay ranks=%d nnodes=%d processes=%d nccl=%d header=%d alltoall=grouped\n",
      o.ranks, o.ranks, o.ranks, nccl, nccl);
  return 0;
}
