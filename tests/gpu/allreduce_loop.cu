// The real NCCL job of tests/gpu/run.sh: the workload of workload.h (AllReduce loop, grouped
// AllReduce + ReduceScatter + AllGather, send/recv with self, all-to-all, a split communicator,
// a CUDA graph) on every GPU present.
//  * Two or more GPUs: one process, one thread per GPU (ncclCommInitRankConfig per thread).
//  * One GPU: NCCL gives a one-rank communicator no profiler events (ncclLaunchOneRank,
//    src/enqueue.cc:2569 at v2.28.9-1) and refuses two ranks on one device of one host, so RANKS
//    processes (default 2) share the GPU, each claiming a host of its own through NCCL_HOSTID;
//    NCCL then connects them through its network transport (sockets on lo, or IB loopback),
//    which also produces network proxy events.
//
// Usage: allreduce_loop [iterations=100] [count=1048576]. MODE=multi forces processes.
// Prints (stdout) rank 0's manifest and phase timings (workload.h), then one line:
//   job mode=<threads|multi> ranks=R nnodes=N processes=P nccl=<runtime> header=<nccl.h>
//       alltoall=<ncclAlltoAll|grouped>

#include <cuda_runtime.h>
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "workload.h"

#define CHECK_CUDA(x)                                                                        \
  do {                                                                                       \
    cudaError_t e = (x);                                                                     \
    if (e != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)
#define CHECK_NCCL(x)                                                                        \
  do {                                                                                       \
    ncclResult_t r = (x);                                                                    \
    if (r != ncclSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, ncclGetErrorString(r)); \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

// ncclAlltoAll exists from NCCL 2.28 (nccl.h); before, an all-to-all is a group of per-peer
// send/recv, which is also what 2.28 turns ncclAlltoAll into.
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
#define GPUCHECK_HAS_ALLTOALL 1
#define GPUCHECK_ALLTOALL "ncclAlltoAll"
#else
#define GPUCHECK_HAS_ALLTOALL 0
#define GPUCHECK_ALLTOALL "grouped"
#endif

namespace {

using gpucheck::Comm;

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// One rank on one device: its communicators, stream, buffers and captured graphs.
class NcclBackend : public gpucheck::Backend {
 public:
  NcclBackend(int rank, int nranks, int device, const ncclUniqueId& id, std::size_t elements)
      : rank_(rank), nranks_(nranks) {
    CHECK_CUDA(cudaSetDevice(device));
    CHECK_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    CHECK_CUDA(cudaMalloc(&send_, elements * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&recv_, elements * sizeof(float)));
    CHECK_CUDA(cudaMemset(send_, 0, elements * sizeof(float)));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.commName = gpucheck::kWorldName;
    CHECK_NCCL(ncclCommInitRankConfig(&comms_[gpucheck::kWorld], nranks, id, rank, &config));
  }
  ~NcclBackend() override {
    for (cudaGraphExec_t exec : graphs_) CHECK_CUDA(cudaGraphExecDestroy(exec));
    for (int c = gpucheck::kSplit; c >= gpucheck::kWorld; --c) {
      if (comms_[c] != nullptr) CHECK_NCCL(ncclCommDestroy(comms_[c]));
    }
    CHECK_CUDA(cudaFree(send_));
    CHECK_CUDA(cudaFree(recv_));
    CHECK_CUDA(cudaStreamDestroy(stream_));
  }

  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  void Split() override {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.commName = gpucheck::kSplitName;
    CHECK_NCCL(
        ncclCommSplit(comms_[gpucheck::kWorld], 0, rank_, &comms_[gpucheck::kSplit], &config));
  }
  void AllReduce(Comm c, std::size_t n) override {
    CHECK_NCCL(ncclAllReduce(send_, recv_, n, ncclFloat, ncclSum, comms_[c], stream_));
  }
#ifdef NCCL_COLLCONFIG_INITIALIZER
  // NCCL 2.31+: the per-call config that carries the user profiler tag to the plugin (v7).
  bool CanTag() const override { return true; }
  void TaggedAllReduce(Comm c, std::size_t n, std::uint64_t tag) override {
    ncclCollConfig_t config = NCCL_COLLCONFIG_INITIALIZER;
    config.userProfilerTag = tag;
    CHECK_NCCL(
        ncclAllReduceConfig(send_, recv_, n, ncclFloat, ncclSum, comms_[c], stream_, &config));
  }
#endif
  void AllGather(Comm c, std::size_t n) override {
    CHECK_NCCL(ncclAllGather(send_, recv_, n, ncclFloat, comms_[c], stream_));
  }
  void Broadcast(Comm c, std::size_t n, int root) override {
    CHECK_NCCL(ncclBroadcast(send_, recv_, n, ncclFloat, root, comms_[c], stream_));
  }
  void ReduceScatter(Comm c, std::size_t n) override {
    CHECK_NCCL(ncclReduceScatter(send_, recv_, n, ncclFloat, ncclSum, comms_[c], stream_));
  }
  void Send(Comm c, std::size_t n, int peer) override {
    CHECK_NCCL(ncclSend(send_, n, ncclFloat, peer, comms_[c], stream_));
  }
  void Recv(Comm c, std::size_t n, int peer) override {
    CHECK_NCCL(ncclRecv(recv_, n, ncclFloat, peer, comms_[c], stream_));
  }
  void AllToAll(Comm c, std::size_t n) override {
#if GPUCHECK_HAS_ALLTOALL
    CHECK_NCCL(ncclAlltoAll(send_, recv_, n, ncclFloat, comms_[c], stream_));
#else
    CHECK_NCCL(ncclGroupStart());
    for (int peer = 0; peer < nranks_; ++peer) {
      CHECK_NCCL(ncclSend(send_ + peer * n, n, ncclFloat, peer, comms_[c], stream_));
      CHECK_NCCL(ncclRecv(recv_ + peer * n, n, ncclFloat, peer, comms_[c], stream_));
    }
    CHECK_NCCL(ncclGroupEnd());
#endif
  }
  void GroupStart() override { CHECK_NCCL(ncclGroupStart()); }
  void GroupEnd() override { CHECK_NCCL(ncclGroupEnd()); }
  void BeginCapture() override {
    CHECK_CUDA(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  }
  void EndCapture() override {
    cudaGraph_t graph = nullptr;
    CHECK_CUDA(cudaStreamEndCapture(stream_, &graph));
    cudaGraphExec_t exec = nullptr;
    CHECK_CUDA(cudaGraphInstantiateWithFlags(&exec, graph, 0));
    CHECK_CUDA(cudaGraphDestroy(graph));
    graphs_.push_back(exec);
  }
  void LaunchGraphs() override {
    for (cudaGraphExec_t exec : graphs_) CHECK_CUDA(cudaGraphLaunch(exec, stream_));
  }
  void Sync() override { CHECK_CUDA(cudaStreamSynchronize(stream_)); }

 private:
  int rank_;
  int nranks_;
  ncclComm_t comms_[2] = {nullptr, nullptr};
  cudaStream_t stream_ = nullptr;
  float* send_ = nullptr;
  float* recv_ = nullptr;
  std::vector<cudaGraphExec_t> graphs_;
};

// One rank from communicator init to destroy; rank 0 prints its manifest and timings.
void RunRank(int rank, int nranks, int device, const ncclUniqueId& id,
             const gpucheck::Shape& shape) {
  std::FILE* timings = rank == 0 ? stdout : nullptr;
  gpucheck::Manifest manifest;
  {
    const auto start = std::chrono::steady_clock::now();
    NcclBackend backend(rank, nranks, device, id, gpucheck::BufferElements(shape, nranks));
    if (timings != nullptr) std::fprintf(timings, "time phase=init ms=%.1f\n", MsSince(start));
    gpucheck::RunWorkload(backend, shape, manifest, timings);
    const auto destroy = std::chrono::steady_clock::now();
    backend.Sync();
    if (timings != nullptr) std::fprintf(timings, "time phase=sync ms=%.1f\n", MsSince(destroy));
  }
  if (rank == 0) {
    manifest.Print(stdout);
    std::fflush(stdout);
  }
}

void PrintJob(const char* mode, int ranks, int nnodes, int processes) {
  int version = 0;
  CHECK_NCCL(ncclGetVersion(&version));
  std::printf("job mode=%s ranks=%d nnodes=%d processes=%d nccl=%d header=%d alltoall=%s\n", mode,
              ranks, nnodes, processes, version, NCCL_VERSION_CODE, GPUCHECK_ALLTOALL);
}

int Threads(int ndev, const gpucheck::Shape& shape) {
  ncclUniqueId id;
  CHECK_NCCL(ncclGetUniqueId(&id));
  std::vector<std::thread> threads;
  for (int d = 0; d < ndev; ++d) threads.emplace_back([&, d] { RunRank(d, ndev, d, id, shape); });
  for (std::thread& t : threads) t.join();
  PrintJob("threads", ndev, 1, 1);
  return 0;
}

int Multi(int nranks, const gpucheck::Shape& shape) {
  // Fork before anything touches CUDA or NCCL; rank 0 makes the unique id and pipes it over.
  std::vector<int> reads(nranks, -1);
  std::vector<int> writes(nranks, -1);
  for (int r = 1; r < nranks; ++r) {
    int fds[2];
    if (pipe(fds) != 0) return 1;
    reads[r] = fds[0];
    writes[r] = fds[1];
  }
  std::fflush(stdout);
  std::vector<pid_t> children;
  for (int r = 0; r < nranks; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      const std::string host = "ncclscope-gpu-test-host-" + std::to_string(r);
      setenv("NCCL_HOSTID", host.c_str(), 1);
      ncclUniqueId id;
      if (r == 0) {
        CHECK_NCCL(ncclGetUniqueId(&id));
        for (int peer = 1; peer < nranks; ++peer) {
          if (write(writes[peer], &id, sizeof(id)) != sizeof(id)) std::_Exit(1);
        }
      } else if (read(reads[r], &id, sizeof(id)) != sizeof(id)) {
        std::_Exit(1);
      }
      RunRank(r, nranks, 0, id, shape);
      std::fflush(stdout);
      std::_Exit(0);
    }
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
  PrintJob("multi", nranks, nranks, nranks);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  gpucheck::Shape shape;
  if (argc > 1) shape.iterations = std::atoi(argv[1]);
  if (argc > 2) shape.count = std::strtoull(argv[2], nullptr, 10);
  const char* ranks_env = std::getenv("RANKS");
  const char* mode = std::getenv("MODE");  // "multi" forces processes sharing GPU 0
  if (mode != nullptr && std::string(mode) == "multi") {
    return Multi(ranks_env != nullptr ? std::atoi(ranks_env) : 2, shape);
  }
  // Counting devices initializes CUDA, which must not happen before fork: the one-GPU case
  // re-executes itself as "multi".
  int ndev = 0;
  CHECK_CUDA(cudaGetDeviceCount(&ndev));
  if (ndev >= 2) return Threads(ndev, shape);
  setenv("MODE", "multi", 1);
  execv("/proc/self/exe", argv);
  std::perror("execv");
  return 1;
}
