// A small real NCCL job for tests/gpu/run.sh: a loop of AllReduce (and some AllGather) on every
// GPU present. With two or more GPUs: one process, ncclCommInitAll. With one GPU: NCCL refuses
// two ranks on one device in one "host", so RANKS processes (default 2) share the GPU, each
// claiming its own host through NCCL_HOSTID; NCCL then connects them over its socket transport,
// which also exercises the network proxy events.
//
// Usage: allreduce_loop [iterations=200] [count=1048576]. Prints one line:
//   mode=<single|multi> ranks=R iterations=I count=C allgathers=G nccl=<version>

#include <cuda_runtime.h>
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define CHECK_CUDA(x)                                                                  \
  do {                                                                                 \
    cudaError_t e = (x);                                                               \
    if (e != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)
#define CHECK_NCCL(x)                                                                  \
  do {                                                                                 \
    ncclResult_t r = (x);                                                              \
    if (r != ncclSuccess) {                                                            \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, ncclGetErrorString(r)); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

namespace {

constexpr int kAllGatherEvery = 10;

struct Buffers {
  float* send = nullptr;
  float* recv = nullptr;
  float* gathered = nullptr;
  cudaStream_t stream = nullptr;
};

Buffers Allocate(size_t count, int nranks) {
  Buffers b;
  CHECK_CUDA(cudaMalloc(&b.send, count * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&b.recv, count * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&b.gathered, count * sizeof(float) * nranks));
  CHECK_CUDA(cudaMemset(b.send, 0, count * sizeof(float)));
  CHECK_CUDA(cudaStreamCreate(&b.stream));
  return b;
}

int Single(int ndev, int iterations, size_t count) {
  std::vector<ncclComm_t> comms(ndev);
  CHECK_NCCL(ncclCommInitAll(comms.data(), ndev, nullptr));
  std::vector<Buffers> bufs;
  for (int d = 0; d < ndev; ++d) {
    CHECK_CUDA(cudaSetDevice(d));
    bufs.push_back(Allocate(count, ndev));
  }
  int allgathers = 0;
  for (int i = 0; i < iterations; ++i) {
    CHECK_NCCL(ncclGroupStart());
    for (int d = 0; d < ndev; ++d) {
      CHECK_NCCL(ncclAllReduce(bufs[d].send, bufs[d].recv, count, ncclFloat, ncclSum, comms[d],
                               bufs[d].stream));
    }
    CHECK_NCCL(ncclGroupEnd());
    if (i % kAllGatherEvery == 0) {
      CHECK_NCCL(ncclGroupStart());
      for (int d = 0; d < ndev; ++d) {
        CHECK_NCCL(ncclAllGather(bufs[d].send, bufs[d].gathered, count, ncclFloat, comms[d],
                                 bufs[d].stream));
      }
      CHECK_NCCL(ncclGroupEnd());
      ++allgathers;
    }
  }
  for (int d = 0; d < ndev; ++d) {
    CHECK_CUDA(cudaSetDevice(d));
    CHECK_CUDA(cudaStreamSynchronize(bufs[d].stream));
  }
  for (ncclComm_t comm : comms) CHECK_NCCL(ncclCommDestroy(comm));
  int version = 0;
  ncclGetVersion(&version);
  std::printf("mode=single ranks=%d iterations=%d count=%zu allgathers=%d nccl=%d\n", ndev,
              iterations, count, allgathers, version);
  return 0;
}

int Rank(int rank, int nranks, int iterations, size_t count, int id_read, const int* id_writes) {
  std::string host = "ncclscope-gpu-test-host-" + std::to_string(rank);
  setenv("NCCL_HOSTID", host.c_str(), 1);
  ncclUniqueId id;
  if (rank == 0) {
    CHECK_NCCL(ncclGetUniqueId(&id));
    for (int r = 1; r < nranks; ++r) {
      if (write(id_writes[r], &id, sizeof(id)) != sizeof(id)) return 1;
    }
  } else if (read(id_read, &id, sizeof(id)) != sizeof(id)) {
    return 1;
  }
  CHECK_CUDA(cudaSetDevice(0));
  ncclComm_t comm;
  CHECK_NCCL(ncclCommInitRank(&comm, nranks, id, rank));
  Buffers b = Allocate(count, nranks);
  for (int i = 0; i < iterations; ++i) {
    CHECK_NCCL(ncclAllReduce(b.send, b.recv, count, ncclFloat, ncclSum, comm, b.stream));
    if (i % kAllGatherEvery == 0) {
      CHECK_NCCL(ncclAllGather(b.send, b.gathered, count, ncclFloat, comm, b.stream));
    }
  }
  CHECK_CUDA(cudaStreamSynchronize(b.stream));
  CHECK_NCCL(ncclCommDestroy(comm));
  return 0;
}

int Multi(int nranks, int iterations, size_t count) {
  // Fork before anything touches CUDA or NCCL; rank 0 makes the unique id and pipes it over.
  std::vector<int> reads(nranks, -1);
  std::vector<int> writes(nranks, -1);
  for (int r = 1; r < nranks; ++r) {
    int fds[2];
    if (pipe(fds) != 0) return 1;
    reads[r] = fds[0];
    writes[r] = fds[1];
  }
  std::vector<pid_t> children;
  for (int r = 0; r < nranks; ++r) {
    const pid_t pid = fork();
    if (pid == 0) std::_Exit(Rank(r, nranks, iterations, count, reads[r], writes.data()));
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
  int version = 0;
  ncclGetVersion(&version);
  std::printf("mode=multi ranks=%d iterations=%d count=%zu allgathers=%d nccl=%d\n", nranks,
              iterations, count, (iterations + kAllGatherEvery - 1) / kAllGatherEvery, version);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 200;
  const size_t count = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : (1u << 20);
  const char* ranks_env = std::getenv("RANKS");
  const char* mode = std::getenv("MODE");  // "single" or "multi" to force one
  if (mode != nullptr && std::string(mode) == "multi") {
    return Multi(ranks_env != nullptr ? std::atoi(ranks_env) : 2, iterations, count);
  }
  // Counting devices initializes CUDA, so the one-GPU case re-executes itself as "multi".
  int ndev = 0;
  CHECK_CUDA(cudaGetDeviceCount(&ndev));
  if (ndev >= 2 || (mode != nullptr && std::string(mode) == "single")) {
    return Single(ndev, iterations, count);
  }
  setenv("MODE", "multi", 1);
  execv("/proc/self/exe", argv);
  std::perror("execv");
  return 1;
}
