// nccl-replay: a process that behaves like an NCCL job towards the profiler plugin (see
// nccl_replay.h), for end-to-end tests: several communicators, one user thread and one proxy
// thread per rank, a mix of collectives (including ncclUint8, which NCCL names "Unknown"), p2p
// groups and AlltoAll as per-peer Send/Recv. It prints what it drove, one line per series:
//
//   expect phase=1 comm=0x... rank=0 func=AllReduce algo=RING proto=SIMPLE size=1MiB-4MiB ops=N
//   bytes=B
//
// Options:
//   --plugin PATH      the .so (required)       --abi 1..7         ABI version NCCL picks (6)
//   --comms N          communicators (2)         --ranks N          ranks per communicator (2)
//   --colls N          collectives per phase (50) --p2p N           p2p groups per phase (5)
//   --alltoall N       AlltoAlls per phase (2)   --channels N       channels per collective (8)
//   --proxy            emit network proxy ops    --phases N         phases (1)
//   --go PREFIX        before phase k>1 wait for file PREFIX.k
//   --hold PATH        after the last phase, wait for PATH before finalizing and exiting
//   --no-finalize      exit without finalizing (communicators destroyed with the process)
// After each phase it prints "phase K done" to stderr.

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "agent/analytics/comm_registry.h"
#include "agent/analytics/size_bucket.h"
#include "plugin/ring/ncclscope_ring.h"
#include "tests/support/replay_names.h"
#include "tools/replay/nccl_replay.h"

namespace ncclscope::testing {
namespace {

struct Options {
  std::string plugin;
  int abi = 6;
  int comms = 2;
  int ranks = 2;
  int colls = 50;
  int p2p = 5;
  int alltoall = 2;
  int channels = 8;
  bool proxy = false;
  int phases = 1;
  std::string go;
  std::string hold;
  bool finalize = true;
};

using SeriesKey = std::tuple<int, std::string, int, std::string, std::string, std::string,
                             std::string>;  // phase, comm, rank, func, algo, proto, size

struct Series {
  std::uint64_t ops = 0;
  std::uint64_t bytes = 0;
};

struct CollKind {
  const char* func;
  const char* datatype;
  std::size_t element;
  std::size_t count;
};

// Sizes that land in different buckets; "Unknown" is what NCCL passes for ncclUint8.
const CollKind kColls[] = {
    {"AllReduce", "ncclFloat32", 4, 1 << 18},    {"AllGather", "ncclBfloat16", 2, 1 << 12},
    {"ReduceScatter", "ncclFloat16", 2, 1 << 9}, {"Broadcast", "ncclInt8", 1, 300},
    {"AllReduce", "Unknown", 1, 1 << 16},        {"AllReduce", "ncclFloat64", 8, 1 << 22},
};

bool WaitForFile(const std::string& path) {
  struct stat st {};
  while (::stat(path.c_str(), &st) != 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return true;
}

int Run(const Options& o) {
  ProfilerPlugin plugin(o.plugin);
  if (!plugin.ok() || !plugin.Has(o.abi)) {
    std::fprintf(stderr, "cannot use %s (ABI v%d): %s\n", o.plugin.c_str(), o.abi,
                 plugin.error().c_str());
    return 2;
  }
  ReplayProcess process(plugin, o.abi);
  struct Rank {
    std::unique_ptr<ProxyThread> proxy;
    std::vector<std::unique_ptr<ReplayComm>> comms;  // one per communicator
  };
  std::vector<Rank> ranks(static_cast<std::size_t>(o.ranks));
  std::vector<std::uint64_t> comm_ids;
  comm_ids.reserve(static_cast<std::size_t>(o.comms));
  for (int c = 0; c < o.comms; ++c) {
    comm_ids.push_back(0x5eed000000000000ull + static_cast<std::uint64_t>(getpid()) * 1000 +
                       static_cast<std::uint64_t>(c));
  }
  for (int r = 0; r < o.ranks; ++r) {
    Rank& rank = ranks[static_cast<std::size_t>(r)];
    rank.proxy = std::make_unique<ProxyThread>();
    for (int c = 0; c < o.comms; ++c) {
      auto comm = std::make_unique<ReplayComm>(process, comm_ids[static_cast<std::size_t>(c)],
                                               "replay comm " + std::to_string(c), 1, o.ranks, r,
                                               rank.proxy.get());
      if (!comm->Init()) {
        std::fprintf(stderr, "init failed (plugin inactive?)\n");
        return 3;
      }
      rank.comms.push_back(std::move(comm));
    }
  }

  std::map<SeriesKey, Series> expected;
  std::mutex expected_mutex;
  auto expect = [&](int phase, std::uint64_t comm_id, int rank, const std::string& func,
                    const std::string& algo, const std::string& proto, std::uint64_t bytes) {
    std::lock_guard<std::mutex> lock(expected_mutex);
    Series& s =
        expected[{phase, analytics::CommLabel(comm_id), rank, func, algo, proto,
                  std::string(analytics::SizeBucketLabel(analytics::SizeBucketIndex(bytes)))}];
    ++s.ops;
    s.bytes += bytes;
  };

  std::vector<std::uint64_t> seq(static_cast<std::size_t>(o.comms) * 16, 0);
  for (int phase = 1; phase <= o.phases; ++phase) {
    if (phase > 1 && !o.go.empty()) WaitForFile(o.go + "." + std::to_string(phase));
    // One user thread per rank, all ranks issuing the same sequence (as a real job does).
    std::vector<std::thread> threads;
    threads.reserve(static_cast<std::size_t>(o.ranks));
    const std::vector<std::uint64_t> seq_base = seq;
    for (int r = 0; r < o.ranks; ++r) {
      threads.emplace_back([&, r] {
        Rank& rank = ranks[static_cast<std::size_t>(r)];
        std::vector<std::uint64_t> my_seq = seq_base;
        ProxyPlan proxy;
        proxy.enabled = o.proxy;
        GpuTimes gpu;
        gpu.duration_ns = 40'000;
        for (int i = 0; i < o.colls; ++i) {
          const CollKind& kind = kColls[static_cast<std::size_t>(i) % std::size(kColls)];
          const std::size_t func_slot = static_cast<std::size_t>(i) % std::size(kColls);
          for (int c = 0; c < o.comms; ++c) {
            CollSpec spec;
            spec.func = kind.func;
            spec.datatype = kind.datatype;
            spec.count = kind.count;
            spec.channels = static_cast<std::uint8_t>(o.channels);
            spec.algo = i % 2 == 0 ? "RING" : "TREE";
            spec.proto = i % 3 == 0 ? "LL" : "SIMPLE";
            std::uint64_t& s = my_seq[static_cast<std::size_t>(c) * 16 + func_slot];
            rank.comms[static_cast<std::size_t>(c)]->Collective(spec, s++, gpu, proxy);
            expect(phase, comm_ids[static_cast<std::size_t>(c)], r, kind.func, spec.algo,
                   spec.proto, kind.count * kind.element);
          }
        }
        for (int i = 0; i < o.p2p; ++i) {
          for (int c = 0; c < o.comms; ++c) {
            const int next = (r + 1) % o.ranks;
            const int prev = (r + o.ranks - 1) % o.ranks;
            rank.comms[static_cast<std::size_t>(c)]->P2pGroup(
                {{"Send", 4096, "ncclFloat32", next, 2}, {"Recv", 4096, "ncclFloat32", prev, 2}},
                gpu, proxy);
            expect(phase, comm_ids[static_cast<std::size_t>(c)], r, "Send", "none", "none",
                   4096 * 4);
            expect(phase, comm_ids[static_cast<std::size_t>(c)], r, "Recv", "none", "none",
                   4096 * 4);
          }
        }
        for (int i = 0; i < o.alltoall; ++i) {
          for (int c = 0; c < o.comms; ++c) {
            rank.comms[static_cast<std::size_t>(c)]->AllToAll(1024, "ncclBfloat16", gpu, proxy);
            for (int peer = 0; peer < o.ranks; ++peer) {
              expect(phase, comm_ids[static_cast<std::size_t>(c)], r, "Send", "none", "none", 2048);
              expect(phase, comm_ids[static_cast<std::size_t>(c)], r, "Recv", "none", "none", 2048);
            }
          }
        }
        rank.proxy->Drain();
      });
    }
    for (std::thread& t : threads) t.join();
    for (std::size_t i = 0; i < seq.size(); ++i) {
      seq[i] = seq_base[i] + static_cast<std::uint64_t>(o.colls / std::size(kColls) + 1);
    }
    // What this phase drove, then the marker tests wait for.
    for (const auto& [key, s] : expected) {
      const auto& [p, comm, rank, func, algo, proto, size] = key;
      if (p != phase) continue;
      std::printf(
          "expect phase=%d comm=%s rank=%d func=%s algo=%s proto=%s size=%s ops=%llu "
          "bytes=%llu\n",
          p, comm.c_str(), rank, func.c_str(), algo.c_str(), proto.c_str(), size.c_str(),
          static_cast<unsigned long long>(s.ops), static_cast<unsigned long long>(s.bytes));
    }
    std::fflush(stdout);
    std::fprintf(stderr, "phase %d done\n", phase);
    std::fflush(stderr);
  }
  if (!o.hold.empty()) WaitForFile(o.hold);
  if (o.finalize) {
    for (Rank& rank : ranks) {
      for (auto& comm : rank.comms) comm->Finalize();
    }
  } else {
    std::fflush(nullptr);
    std::_Exit(0);  // communicators never finalized: the process just ends
  }
  return 0;
}

}  // namespace
}  // namespace ncclscope::testing

int main(int argc, char** argv) {
  ncclscope::testing::Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    auto number = [&] { return static_cast<int>(std::strtol(next().c_str(), nullptr, 10)); };
    if (arg == "--plugin")
      o.plugin = next();
    else if (arg == "--abi")
      o.abi = number();
    else if (arg == "--comms")
      o.comms = number();
    else if (arg == "--ranks")
      o.ranks = number();
    else if (arg == "--colls")
      o.colls = number();
    else if (arg == "--p2p")
      o.p2p = number();
    else if (arg == "--alltoall")
      o.alltoall = number();
    else if (arg == "--channels")
      o.channels = number();
    else if (arg == "--proxy")
      o.proxy = true;
    else if (arg == "--phases")
      o.phases = number();
    else if (arg == "--go")
      o.go = next();
    else if (arg == "--hold")
      o.hold = next();
    else if (arg == "--no-finalize")
      o.finalize = false;
    else {
      std::fprintf(stderr, "unknown option %s\n", arg.c_str());
      return 2;
    }
  }
  if (o.plugin.empty() || o.ranks < 1 || o.comms < 1 || o.channels < 1 || o.channels > 64) {
    std::fprintf(stderr, "usage: nccl-replay --plugin PATH [options]\n");
    return 2;
  }
  return ncclscope::testing::Run(o);
}
