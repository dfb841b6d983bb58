#pragma once

// The GPU check's workload, written once and run two ways: against real NCCL on a GPU
// (allreduce_loop.cu) and against the replay driver (replay_job.cc), whose rings unit-test the
// checker (ring_check.cc) where there is no GPU. RunWorkload() issues the calls through a Backend
// and writes down each one in a Manifest: what one rank issued per (communicator, func, bytes,
// peer), which ring-check compares with the plugin's records.
//
// Plain C++17 and the standard library only: nvcc compiles it, and it includes no project header.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>

namespace gpucheck {

// Communicator names (ncclConfig_t.commName, which NCCL hands the plugin's init): how ring-check
// tells the two communicators apart. NCCL keeps the pointer, so they are literals.
inline constexpr const char* kWorldName = "gpucheck-world";
inline constexpr const char* kSplitName = "gpucheck-split";
// The user profiler tag of the split communicator's AllReduces (NCCL reserves tags with the most
// significant bit set: src/include/plugin/profiler/profiler_v7.h at 2.31.2).
inline constexpr std::uint64_t kSplitTag = 0x5C0BE;
enum Comm { kWorld = 0, kSplit = 1 };

// How much of each pattern one run issues. `count` is rounded down to a multiple of 64 (sizes
// below are fractions of it) and is at least 64.
struct Shape {
  int iterations = 100;         // 1. AllReduce(count) on the world communicator
  std::size_t count = 1 << 20;  //    floats
  int every = 10;               //    plus AllGather(count/4) and Broadcast(count/4) this often
  int groups = 20;              // 2. ncclGroupStart; AllReduce + ReduceScatter + AllGather; End
  int p2p_rounds = 20;          // 3. one group: send to next, recv from prev, send+recv self
  int alltoalls = 10;           // 4. all-to-all, count/64 per peer (this rank included)
  int split_iterations = 50;    // 5. AllReduce(count/4) on a communicator split from the world
  int graph_ops = 4;            // 6. AllReduces(count/16) captured into one CUDA graph ...
  int graph_launches = 10;      //    ... launched this many times (after one eager warm-up)
};

// What a backend must do; every call is one NCCL API call on the rank's stream.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  virtual void Split() = 0;  // kSplit = ncclCommSplit(kWorld, color 0, key rank), named
  virtual void AllReduce(Comm c, std::size_t count) = 0;
  // NCCL 2.31+ (profiler ABI v7): an AllReduce carrying the application's profiler tag
  // (ncclCollConfig_t.userProfilerTag through ncclAllReduceConfig; NCCL hands it to the plugin on
  // CollApi and Coll). A backend whose NCCL has no such call says so with CanTag() and the
  // workload issues plain AllReduces instead.
  virtual bool CanTag() const { return false; }
  virtual void TaggedAllReduce(Comm c, std::size_t count, std::uint64_t /*tag*/) {
    AllReduce(c, count);
  }
  virtual void AllGather(Comm c, std::size_t sendcount) = 0;
  virtual void Broadcast(Comm c, std::size_t count, int root) = 0;
  virtual void ReduceScatter(Comm c, std::size_t recvcount) = 0;
  virtual void Send(Comm c, std::size_t count, int peer) = 0;
  virtual void Recv(Comm c, std::size_t count, int peer) = 0;
  virtual void AllToAll(Comm c, std::size_t count_per_peer) = 0;
  virtual void GroupStart() = 0;
  virtual void GroupEnd() = 0;
  virtual void BeginCapture() = 0;  // CUDA graph capture of the rank's stream
  virtual void EndCapture() = 0;    // ... instantiated; kept for LaunchGraphs()
  virtual void LaunchGraphs() = 0;  // every captured graph once, in capture order
  virtual void Sync() = 0;          // wait until the stream is idle
};

// Elements per rank of each call (floats), distinct within each (communicator, func) so each
// phase has manifest lines of its own.
struct Sizes {
  std::size_t loop_allreduce, loop_allgather, loop_broadcast;
  std::size_t group_allreduce, group_reducescatter, group_allgather;
  std::size_t p2p_peer, p2p_self, alltoall;
  std::size_t split_allreduce, graph_allreduce;
};

inline Sizes SizesOf(const Shape& s) {
  const std::size_t c = s.count < 64 ? 64 : s.count / 64 * 64;
  return {c, c / 4, c / 4, c / 2, c / 8, c / 16, c / 8, c / 32, c / 64, c / 4, c / 16};
}

// Buffer elements a backend needs for send and for receive (AllGather/AllToAll outputs,
// ReduceScatter input): count x nranks.
inline std::size_t BufferElements(const Shape& s, int nranks) {
  return SizesOf(s).loop_allreduce * static_cast<std::size_t>(nranks < 1 ? 1 : nranks);
}

// One rank's issued ops, per key. Printed as lines ring-check reads:
//   expect comm=NAME func=FUNC count=N bytes=B peer=none|self|other timing=gpu|none ops=K what=W
//          tag=T
// `count` is the API's count (AllGather: sendcount, ReduceScatter: recvcount; per peer for p2p),
// `bytes` what one rank moves (count x 4), `timing` whether the op must have GPU timing: every op
// except a send/recv to self, which NCCL runs without proxy ops and so without KernelCh
// (src/enqueue.cc:805 at v2.28.9-1); `tag` the user profiler tag the calls carried (0: none).
class Manifest {
 public:
  void Add(const char* comm, const char* func, std::size_t count, const char* peer,
           const std::string& what, std::uint64_t tag = 0) {
    Entry& e = entries_[{comm, func, count, peer}];
    ++e.ops;
    e.tag = tag;
    if (e.what.find(what) == std::string::npos) e.what += (e.what.empty() ? "" : "+") + what;
  }
  std::uint64_t total() const {
    std::uint64_t n = 0;
    for (const auto& kv : entries_) n += kv.second.ops;
    return n;
  }
  void Print(std::FILE* f) const {
    for (const auto& [key, e] : entries_) {
      const auto& [comm, func, count, peer] = key;
      std::fprintf(f,
                   "expect comm=%s func=%s count=%zu bytes=%zu peer=%s timing=%s ops=%llu "
                   "what=%s tag=%llu\n",
                   comm.c_str(), func.c_str(), count, count * 4, peer.c_str(),
                   peer == "self" ? "none" : "gpu", static_cast<unsigned long long>(e.ops),
                   e.what.c_str(), static_cast<unsigned long long>(e.tag));
    }
  }

 private:
  struct Entry {
    unsigned long long ops = 0;
    std::string what;
    std::uint64_t tag = 0;
  };
  std::map<std::tuple<std::string, std::string, std::size_t, std::string>, Entry> entries_;
};

// Runs the whole workload on one rank. `timings` (may be null) gets one line per phase:
//   time phase=NAME ms=T
inline void RunWorkload(Backend& b, const Shape& shape, Manifest& m, std::FILE* timings) {
  const Sizes z = SizesOf(shape);
  const int rank = b.rank();
  const int nranks = b.nranks();
  const char* names[] = {kWorldName, kSplitName};
  auto coll = [&](Comm c, const char* func, std::size_t n, const char* what) {
    m.Add(names[c], func, n, "none", what);
  };
  auto p2p = [&](Comm c, const char* func, std::size_t n, int peer, const char* what) {
    m.Add(names[c], func, n, peer == rank ? "self" : "other", what);
  };
  auto phase = [&](const char* name, auto&& body) {
    const auto start = std::chrono::steady_clock::now();
    body();
    b.Sync();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (timings != nullptr) {
      std::fprintf(timings, "time phase=%s ms=%.1f\n", name, ms);
      std::fflush(timings);
    }
  };

  phase("loop", [&] {
    for (int i = 0; i < shape.iterations; ++i) {
      b.AllReduce(kWorld, z.loop_allreduce);
      coll(kWorld, "AllReduce", z.loop_allreduce, "loop");
      if (shape.every > 0 && i % shape.every == 0) {
        b.AllGather(kWorld, z.loop_allgather);
        coll(kWorld, "AllGather", z.loop_allgather, "loop");
        b.Broadcast(kWorld, z.loop_broadcast, 0);
        coll(kWorld, "Broadcast", z.loop_broadcast, "loop");
      }
    }
  });
  // One plan, ops of three functions and sizes running concurrently on channels of their own.
  phase("grouped", [&] {
    for (int i = 0; i < shape.groups; ++i) {
      b.GroupStart();
      b.AllReduce(kWorld, z.group_allreduce);
      b.ReduceScatter(kWorld, z.group_reducescatter);
      b.AllGather(kWorld, z.group_allgather);
      b.GroupEnd();
      coll(kWorld, "AllReduce", z.group_allreduce, "group");
      coll(kWorld, "ReduceScatter", z.group_reducescatter, "group");
      coll(kWorld, "AllGather", z.group_allgather, "group");
    }
  });
  // Pipeline-style p2p rounds, a send to and a receive from this rank itself in each.
  phase("sendrecv", [&] {
    const int next = (rank + 1) % nranks;
    const int prev = (rank + nranks - 1) % nranks;
    for (int i = 0; i < shape.p2p_rounds; ++i) {
      b.GroupStart();
      b.Send(kWorld, z.p2p_peer, next);
      b.Recv(kWorld, z.p2p_peer, prev);
      b.Send(kWorld, z.p2p_self, rank);
      b.Recv(kWorld, z.p2p_self, rank);
      b.GroupEnd();
      p2p(kWorld, "Send", z.p2p_peer, next, "p2p");
      p2p(kWorld, "Recv", z.p2p_peer, prev, "p2p");
      p2p(kWorld, "Send", z.p2p_self, rank, "p2p");
      p2p(kWorld, "Recv", z.p2p_self, rank, "p2p");
    }
  });
  // NCCL appends an all-to-all as a Send and a Recv per peer, this rank included
  // (src/enqueue.cc:2585-2589 at v2.28.9-1); the backend's fallback does the same by hand.
  phase("alltoall", [&] {
    for (int i = 0; i < shape.alltoalls; ++i) {
      b.AllToAll(kWorld, z.alltoall);
      for (int peer = 0; peer < nranks; ++peer) {
        p2p(kWorld, "Send", z.alltoall, peer, "alltoall");
        p2p(kWorld, "Recv", z.alltoall, peer, "alltoall");
      }
    }
  });
  // The split communicator's AllReduces carry a user profiler tag where NCCL can take one (all
  // of them: one size, one manifest line, one tag).
  phase("split", [&] {
    b.Split();
    const std::uint64_t tag = b.CanTag() ? kSplitTag : 0;
    for (int i = 0; i < shape.split_iterations; ++i) {
      if (tag != 0) {
        b.TaggedAllReduce(kSplit, z.split_allreduce, tag);
      } else {
        b.AllReduce(kSplit, z.split_allreduce);
      }
      m.Add(names[kSplit], "AllReduce", z.split_allreduce, "none", "split", tag);
    }
  });
  // A CUDA graph: its ops' events come at every launch, from CUDA's host-callback thread, with
  // the capture-time mask (KernelCh on, so NCCL advances seqNumber at each launch:
  // src/plugin/profiler.cc:425-427 at v2.28.9-1). One eager op of the same size first, so that
  // the connections it needs exist before capture.
  phase("graph", [&] {
    b.AllReduce(kSplit, z.graph_allreduce);
    coll(kSplit, "AllReduce", z.graph_allreduce, "graph");
    b.Sync();
    b.BeginCapture();
    for (int k = 0; k < shape.graph_ops; ++k) b.AllReduce(kSplit, z.graph_allreduce);
    b.EndCapture();
    for (int l = 0; l < shape.graph_launches; ++l) {
      b.LaunchGraphs();
      for (int k = 0; k < shape.graph_ops; ++k) {
        coll(kSplit, "AllReduce", z.graph_allreduce, "graph");
      }
    }
  });
}

}  // namespace gpucheck
