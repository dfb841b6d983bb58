// Cost of the profiler plugin on NCCL's threads: the real libnccl-profiler-ncclscope.so, loaded
// with dlopen and called through its ncclProfiler_v6 table exactly as NCCL would, recording into
// a real ring. Each iteration is one 8-channel collective:
//
//   Coll start, 8 x (KernelCh start, recordEventState(KernelChStop), KernelCh stop), Coll stop
//
// which is also the moment the op completes and its record is written to the ring. Variants add
// the Group/API events NCCL 2.28+ emits around it, network proxy steps, or run 8 ranks at once.
// The "Chained" variants run the same calls into a second instance of the plugin (a copy of the
// .so, so that its first init sees NCCLSCOPE_CHAIN while the first instance's did not) chained to
// a minimal plugin (bench/minimal_chained_profiler.cc): what chaining adds, side by side.
// The ring is consumed by advancing the lane tails every 256 collectives (what the agent does from
// another process), so every collective is recorded and nothing is dropped; the benchmark checks
// that at the end.
//
// Run: build/default/bench/plugin_bench (see docs/benchmarks.md for the exact command and numbers).
// NCCLSCOPE_BENCH_PLUGIN=<other .so> measures another build of the plugin with the same binary
// (bench/plugin_ab.sh alternates two builds, run after run, to compare them side by side), or
// another profiler plugin altogether: one that exports only ncclProfiler_v5 (NVIDIA's Inspector,
// bench/inspector_ab.sh) is called through the same harness, and one without our ring simply has
// nothing to consume (its chained variants are skipped).

#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "agent/analytics/nccl_analytics.h"
#include "agent/profiler/ring_directory.h"
#include "plugin/abi/nccl_profiler_abi.h"
#include "plugin/ring/ncclscope_ring.h"
#include "tests/support/ring_records.h"
#include "tools/replay/nccl_replay.h"

namespace ncclscope::bench {
namespace {

using replay::ProfilerPlugin;

constexpr int kVersion = 6;
constexpr int kChannels = 8;

// One loaded instance of the plugin: its library, its v6 table, its ring (our own mapping, to
// advance the tails) and the event-mask int NCCL would give it.
struct Instance {
  std::string dir;
  std::unique_ptr<ProfilerPlugin> plugin;
  const abi::ProfilerV6* v6 = nullptr;
  const abi::ProfilerV7* v7 = nullptr;  // the v7 instance only (NCCL 2.31+'s table)
  int version = kVersion;  // the ABI the table is called as (5: a plugin without ncclProfiler_v6)
  unsigned char* ring = nullptr;
  std::uint32_t lanes = 0;
  int mask = 0;

  void MapRing() {
    const std::string path = testing::OnlyRing(dir);
    if (path.empty() && version != kVersion) return;  // another plugin: no ring of ours
    const int fd = ::open(path.c_str(), O_RDWR);
    ncclscope_ring_header header{};
    if (fd < 0 || ::pread(fd, &header, sizeof(header), 0) != sizeof(header)) {
      throw std::runtime_error("cannot read ring " + path);
    }
    void* map = ::mmap(nullptr, header.file_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    ring = static_cast<unsigned char*>(map);
    lanes = header.lane_count;
  }

  ncclscope_lane* Lane(std::uint32_t i) const {
    const auto* header = reinterpret_cast<const ncclscope_ring_header*>(ring);
    return reinterpret_cast<ncclscope_lane*>(ring + header->lanes_offset + i * NCCLSCOPE_LANE_SIZE);
  }

  // The agent's side, minus the reading: mark everything consumed.
  void Consume() const {
    for (std::uint32_t i = 0; i < lanes; ++i) {
      ncclscope_lane* lane = Lane(i);
      __atomic_store_n(&lane->tail, __atomic_load_n(&lane->head, __ATOMIC_ACQUIRE),
                       __ATOMIC_RELEASE);
    }
  }

  std::uint64_t DroppedFull() const {
    std::uint64_t dropped = 0;
    for (std::uint32_t i = 0; i < lanes; ++i) {
      dropped += __atomic_load_n(&Lane(i)->dropped, __ATOMIC_RELAXED);
    }
    return dropped;
  }
  std::uint64_t Counter(ncclscope_counter counter) const {
    if (ring == nullptr) return 0;
    const auto* header = reinterpret_cast<const ncclscope_ring_header*>(ring);
    return __atomic_load_n(&header->counters[counter], __ATOMIC_RELAXED);
  }
  std::uint64_t DroppedBusy() const { return Counter(NCCLSCOPE_CTR_DROPPED_CONTENTION); }
};

std::string TempDirectory() {
  char templ[] = "/tmp/ncclscope-bench-XXXXXX";
  if (mkdtemp(templ) == nullptr) throw std::runtime_error("mkdtemp");
  return templ;
}

// The two instances (plain, chained), set up once per process, before any benchmark thread.
struct World {
  Instance plain;
  Instance chained;
  Instance v7;  // another copy of the .so whose first init is v7's: NCCL 2.31+, kernel phases
  std::mutex mutex;
  std::uint64_t next_comm = 1;

  World() {
    // Each instance reads its settings at its own first init, done here before any benchmark
    // thread exists (the plugin's maintenance threads never read the environment).
    plain.dir = TempDirectory();
    setenv("NCCLSCOPE_RING_SIZE", "64MiB", 1);  // NOLINT(concurrency-mt-unsafe)
    // Every network step recorded unless the environment says otherwise (bench/overhead_sweep.sh
    // sets the events, duty cycles and period it measures).
    setenv("NCCLSCOPE_PROXY_DUTY", "1", 0);  // NOLINT(concurrency-mt-unsafe)
    // The overhead governor off (0: it still times 1 op in 256, and that cost is measured, but it
    // limits nothing). A benchmark calls the plugin back to back, the plugin is most of the
    // thread's time, and the governor would rightly lower the duty cycles within a window: the
    // runs after the first measured a mask without KernelCh (kernel_share 0).
    setenv("NCCLSCOPE_OVERHEAD_BUDGET", "0", 0);                // NOLINT(concurrency-mt-unsafe)
    setenv("NCCLSCOPE_RING_DIR", plain.dir.c_str(), 1);         // NOLINT(concurrency-mt-unsafe)
    unsetenv("NCCLSCOPE_CHAIN");                                // NOLINT(concurrency-mt-unsafe)
    const char* other = std::getenv("NCCLSCOPE_BENCH_PLUGIN");  // NOLINT(concurrency-mt-unsafe)
    const std::string path = other != nullptr && *other != '\0' ? other : NCCLSCOPE_PLUGIN_PATH;
    Load(plain, path);
    if (plain.version != kVersion) return;  // another plugin: it has no NCCLSCOPE_CHAIN
    chained.dir = TempDirectory();
    const std::string copy = chained.dir + "/libnccl-profiler-ncclscope-chained.so";
    std::filesystem::copy_file(path, copy);
    setenv("NCCLSCOPE_RING_DIR", chained.dir.c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
    // NOLINTNEXTLINE(concurrency-mt-unsafe)
    setenv("NCCLSCOPE_CHAIN", NCCLSCOPE_MINIMAL_CHAINED_PLUGIN, 1);
    Load(chained, copy);
    unsetenv("NCCLSCOPE_CHAIN");  // NOLINT(concurrency-mt-unsafe)
    // The ABI is decided at a process's first init (plugin/src/runtime.cc: KernelPhase only from
    // v7), so the v7 instance is a copy of its own, first initialized through ncclProfiler_v7.
    v7.dir = TempDirectory();
    const std::string v7_copy = v7.dir + "/libnccl-profiler-ncclscope-v7.so";
    std::filesystem::copy_file(path, v7_copy);
    setenv("NCCLSCOPE_RING_DIR", v7.dir.c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
    v7.version = 7;
    Load(v7, v7_copy);
  }

  void Load(Instance& instance, const std::string& path) {
    instance.plugin = std::make_unique<ProfilerPlugin>(path);
    if (!instance.plugin->ok()) throw std::runtime_error(instance.plugin->error());
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    instance.v6 = static_cast<const abi::ProfilerV6*>(dlsym(lib, "ncclProfiler_v6"));
    if (instance.version == 7) {
      instance.v7 = static_cast<const abi::ProfilerV7*>(dlsym(lib, "ncclProfiler_v7"));
      if (instance.v7 == nullptr) throw std::runtime_error(path + ": no ncclProfiler_v7");
    } else if (instance.v6 == nullptr) {
      // A v5-only plugin (NCCL Inspector 2.30.7 exports only ncclProfiler_v5): v6 is v5 plus the
      // copy-engine events at the same descriptor size and offsets (plugin/abi/nccl_profiler_abi.h)
      // and the same init, so the v5 table takes the harness's v6 calls unchanged; the harness
      // never sends it a copy-engine event.
      static_assert(sizeof(abi::EventDescrV5) == sizeof(abi::EventDescrV6));
      static_assert(sizeof(abi::StateArgsV5) == sizeof(abi::StateArgsV6));
      instance.v6 = reinterpret_cast<const abi::ProfilerV6*>(dlsym(lib, "ncclProfiler_v5"));
      instance.version = 5;
    }
    if (instance.v6 == nullptr) throw std::runtime_error(path + ": no ncclProfiler_v6 or _v5");
    NewComm(instance, 0, 8);  // the first init: settings, ring, chain
    instance.MapRing();
  }

  // A fresh communicator context (rank `rank` of `nranks`) of `instance`.
  void* NewComm(Instance& instance, int rank, int nranks) {
    std::lock_guard<std::mutex> lock(mutex);
    void* context = nullptr;
    instance.plugin->Init(instance.version, &context, 0xBE7C000000000000ull + next_comm++,
                          &instance.mask, "bench", 2, nranks, rank);
    if (context == nullptr) throw std::runtime_error("plugin init failed");
    return context;
  }
};

World& TheWorld() {
  static World world;
  return world;
}

// What one collective asked for: NCCL snapshots the plugin's mask at the API call (GroupApi start,
// src/plugin/profiler.cc:218 at v2.28.9-1) and raises ProxyOps only when the snapshot has ProxyOp,
// ProxyStep or NetPlugin (:482), ProxySteps only with ProxyStep or NetPlugin (:516), KernelCh
// only with KernelCh (:593, :678). Null `mask` (the nop and minimal tables): everything.
struct Asked {
  bool kernel = true;
  bool proxy_ops = true;
  bool proxy_steps = true;
};
Asked AskedBy(const int* mask) {
  if (mask == nullptr) return {};
  const int m = __atomic_load_n(mask, __ATOMIC_RELAXED);
  return {(m & abi::kKernelCh) != 0, (m & (abi::kProxyOp | abi::kProxyStep | abi::kNetPlugin)) != 0,
          (m & (abi::kProxyStep | abi::kNetPlugin)) != 0};
}

// The Coll event of a 1 MiB float AllReduce on kChannels channels (the grouped benchmark then sets
// its own function, size and channels), in v6's or v7's descriptor (the same coll fields).
template <typename Descr>
void DescribeColl(Descr& d, std::uint64_t seq, void* parent, void* group) {
  std::memset(&d, 0, sizeof(d));
  d.type = abi::kColl;
  d.parentObj = parent;
  d.coll.seqNumber = seq;
  d.coll.func = "AllReduce";
  d.coll.count = 1 << 20;
  d.coll.datatype = "ncclFloat32";
  d.coll.nChannels = kChannels;
  d.coll.nWarps = 16;
  d.coll.algo = "RING";
  d.coll.proto = "SIMPLE";
  d.coll.parentGroup = group;
}

// One collective as the v6 table sees it. With `api`, the GroupApi/CollApi/Group events that
// NCCL 2.28+ emits around every collective are included. Returns what the mask asked for.
// Whole: the calls in NCCL's order, top to bottom, are the harness every figure subtracts; split
// into calls of its own, the harness's cost (the do-nothing plugin's baseline) would move.
// NOLINTNEXTLINE(readability-function-size): see above
Asked Collective(const abi::ProfilerV6* p, void* context, std::uint64_t seq, bool api,
                 int proxy_steps, const int* mask = nullptr) {
  const Asked asked = AskedBy(mask);
  abi::EventDescrV6 d{};
  void* group_api = nullptr;
  void* coll_api = nullptr;
  void* group = nullptr;
  if (api) {
    std::memset(&d, 0, sizeof(d));
    d.type = abi::kGroupApi;
    d.groupApi.groupDepth = 1;
    p->startEvent(context, &group_api, &d);
    std::memset(&d, 0, sizeof(d));
    d.type = abi::kCollApi;
    d.parentObj = group_api;
    d.collApi.func = "AllReduce";
    d.collApi.count = 1 << 20;
    d.collApi.datatype = "ncclFloat32";
    p->startEvent(context, &coll_api, &d);
    p->stopEvent(coll_api);
    std::memset(&d, 0, sizeof(d));
    d.type = abi::kGroup;
    p->startEvent(context, &group, &d);
  }
  DescribeColl(d, seq, coll_api, group);
  void* coll = nullptr;
  p->startEvent(context, &coll, &d);

  void* net[kChannels][2] = {};
  static const pid_t pid = getpid();
  const bool proxy = proxy_steps > 0 && asked.proxy_ops;
  if (proxy) {
    for (int c = 0; c < kChannels; ++c) {
      for (int dir = 0; dir < 2; ++dir) {
        std::memset(&d, 0, sizeof(d));
        d.type = abi::kProxyOp;
        d.parentObj = coll;
        d.proxyOp.pid = pid;  // NCCL stores its pid once at load
        d.proxyOp.channelId = static_cast<std::uint8_t>(c);
        d.proxyOp.nSteps = proxy_steps;
        d.proxyOp.isSend = dir;
        p->startEvent(context, &net[c][dir], &d);
        p->recordEventState(net[c][dir], abi::kProxyOpInProgress, nullptr);
      }
    }
  }
  const std::uint64_t t0 = 1'700'000'000'000'000'000ull + seq * 100'000;
  void* kernel[kChannels];
  for (int c = 0; asked.kernel && c < kChannels; ++c) {
    std::memset(&d, 0, sizeof(d));
    d.type = abi::kKernelCh;
    d.parentObj = coll;
    d.kernelCh.channelId = static_cast<std::uint8_t>(c);
    d.kernelCh.pTimer = t0 + static_cast<std::uint64_t>(c);
    p->startEvent(context, &kernel[c], &d);
  }
  if (proxy && asked.proxy_steps) {
    abi::StateArgsV6 args;
    args.proxyStep.transSize = 65536;
    for (int s = 0; s < proxy_steps; ++s) {
      for (int c = 0; c < kChannels; ++c) {
        for (int dir = 0; dir < 2; ++dir) {
          std::memset(&d, 0, sizeof(d));
          d.type = abi::kProxyStep;
          d.parentObj = net[c][dir];
          d.proxyStep.step = s;
          void* step = nullptr;
          p->startEvent(context, &step, &d);
          const int send[] = {abi::kProxyStepSendGpuWait, abi::kProxyStepSendPeerWait,
                              abi::kProxyStepSendWait};
          const int recv[] = {abi::kProxyStepRecvWait, abi::kProxyStepRecvFlushWait,
                              abi::kProxyStepRecvGpuWait};
          for (int state : dir != 0 ? send : recv) p->recordEventState(step, state, &args);
          p->stopEvent(step);
        }
      }
    }
  }
  abi::StateArgsV6 stop;
  for (int c = 0; asked.kernel && c < kChannels; ++c) {
    stop.kernelCh.pTimer = t0 + 50'000 + static_cast<std::uint64_t>(c);
    p->recordEventState(kernel[c], abi::kKernelChStop, &stop);
    p->stopEvent(kernel[c]);
  }
  if (proxy) {
    for (auto& channel : net) {
      for (void* h : channel) p->stopEvent(h);
    }
  }
  p->stopEvent(coll);
  if (api) {
    p->stopEvent(group);
    p->stopEvent(group_api);
  }
  return asked;
}

// One grouped plan of four collectives as NCCL 2.28 launches it (ncclGroupStart; AllReduce,
// AllGather, ReduceScatter, AllReduce; ncclGroupEnd): one GroupApi, a CollApi per call, one Group
// for the plan, then the four Coll events, each on two channels of its own (the plan splits the
// channels among its tasks, src/enqueue.cc), their KernelCh, and the ops finishing in reverse
// order (the first, largest op of a plan usually ends last).
void GroupedPlan(const abi::ProfilerV6* p, void* context, std::uint64_t seq) {
  constexpr int kOps = 4;
  constexpr int kOpChannels = 2;
  static const char* const kFuncs[kOps] = {"AllReduce", "AllGather", "ReduceScatter", "AllReduce"};
  abi::EventDescrV6 d{};
  void* group_api = nullptr;
  std::memset(&d, 0, sizeof(d));
  d.type = abi::kGroupApi;
  d.groupApi.groupDepth = 1;
  p->startEvent(context, &group_api, &d);
  void* coll_api[kOps] = {};
  for (int i = 0; i < kOps; ++i) {
    std::memset(&d, 0, sizeof(d));
    d.type = abi::kCollApi;
    d.parentObj = group_api;
    d.collApi.func = kFuncs[i];
    d.collApi.count = 1u << (20 - i);
    d.collApi.datatype = "ncclFloat32";
    p->startEvent(context, &coll_api[i], &d);
    p->stopEvent(coll_api[i]);
  }
  void* group = nullptr;
  std::memset(&d, 0, sizeof(d));
  d.type = abi::kGroup;
  p->startEvent(context, &group, &d);
  void* coll[kOps] = {};
  for (int i = 0; i < kOps; ++i) {
    DescribeColl(d, seq, coll_api[i], group);
    d.coll.func = kFuncs[i];
    d.coll.count = 1u << (20 - i);
    d.coll.nChannels = kOpChannels;
    p->startEvent(context, &coll[i], &d);
  }
  const std::uint64_t t0 = 1'700'000'000'000'000'000ull + seq * 100'000;
  void* kernel[kOps][kOpChannels];
  for (int i = 0; i < kOps; ++i) {
    for (int c = 0; c < kOpChannels; ++c) {
      std::memset(&d, 0, sizeof(d));
      d.type = abi::kKernelCh;
      d.parentObj = coll[i];
      d.kernelCh.channelId = static_cast<std::uint8_t>(i * kOpChannels + c);
      d.kernelCh.pTimer = t0 + static_cast<std::uint64_t>(c);
      p->startEvent(context, &kernel[i][c], &d);
    }
  }
  for (int i = 0; i < kOps; ++i) p->stopEvent(coll[i]);  // enqueued
  abi::StateArgsV6 stop;
  for (int i = kOps - 1; i >= 0; --i) {
    for (int c = 0; c < kOpChannels; ++c) {
      stop.kernelCh.pTimer =
          t0 + 50'000 * static_cast<std::uint64_t>(kOps - i) + static_cast<std::uint64_t>(c);
      p->recordEventState(kernel[i][c], abi::kKernelChStop, &stop);
      p->stopEvent(kernel[i][c]);
    }
  }
  p->stopEvent(group);
  p->stopEvent(group_api);
}

void Run(benchmark::State& state, bool chained, bool api, int proxy_steps) {
  World& world = TheWorld();
  Instance& instance = chained ? world.chained : world.plain;
  if (instance.plugin == nullptr) {
    state.SkipWithError("no chained instance: NCCLSCOPE_BENCH_PLUGIN is another plugin");
    return;
  }
  thread_local void* contexts[2] = {nullptr, nullptr};
  void*& context = contexts[chained ? 1 : 0];
  if (context == nullptr) context = world.NewComm(instance, state.thread_index(), state.threads());
  const std::uint64_t full_before = instance.DroppedFull();
  const std::uint64_t busy_before = instance.DroppedBusy();
  const std::uint64_t chain_errors_before = instance.Counter(NCCLSCOPE_CTR_CHAIN_ERRORS);
  std::uint64_t seq = 0;
  std::uint64_t timed = 0;
  std::uint64_t networked = 0;
  for (auto _ : state) {
    const Asked asked = Collective(instance.v6, context, seq++, api, proxy_steps, &instance.mask);
    timed += asked.kernel ? 1 : 0;
    networked += asked.proxy_ops ? 1 : 0;
    if ((seq & 255) == 0) instance.Consume();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(seq));
  // The share of collectives the mask gave GPU timing and (with proxy steps) network events: the
  // duty cycles at work.
  state.counters["kernel_share"] =
      benchmark::Counter(static_cast<double>(timed), benchmark::Counter::kAvgIterations);
  if (proxy_steps > 0) {
    state.counters["proxy_share"] =
        benchmark::Counter(static_cast<double>(networked), benchmark::Counter::kAvgIterations);
  }
  instance.Consume();
  if (state.thread_index() == 0) {
    state.counters["dropped_full"] = static_cast<double>(instance.DroppedFull() - full_before);
    state.counters["dropped_busy"] = static_cast<double>(instance.DroppedBusy() - busy_before);
    if (chained) {
      state.counters["chain_errors"] =
          static_cast<double>(instance.Counter(NCCLSCOPE_CTR_CHAIN_ERRORS) - chain_errors_before);
    }
  }
}

// The same calls into a plugin that does nothing: what building NCCL's descriptors and making
// the indirect calls costs by itself. Subtract it from the other results to get the plugin's cost.
// One template per call for every table version (v6, v7: their descriptors differ).
template <typename Descr>
abi::Result NopStart(void*, void** handle, Descr*) {
  *handle = reinterpret_cast<void*>(0x1);
  return 0;
}
abi::Result NopStop(void*) { return 0; }
template <typename StateArgs>
abi::Result NopRecord(void*, int, StateArgs*) {
  return 0;
}
const abi::ProfilerV6 kNop = {
    "nop", nullptr, NopStart<abi::EventDescrV6>, NopStop, NopRecord<abi::StateArgsV6>, nullptr};

void BM_GroupedPlanOf4Ops(benchmark::State& state) {
  World& world = TheWorld();
  const bool nop = state.range(0) != 0;
  static void* context = world.NewComm(world.plain, 0, 8);
  const abi::ProfilerV6* table = nop ? &kNop : world.plain.v6;
  std::uint64_t seq = 0;
  for (auto _ : state) {
    GroupedPlan(table, nop ? nullptr : context, seq++);
    if ((seq & 63) == 0 && !nop) world.plain.Consume();
  }
  world.plain.Consume();
  state.SetItemsProcessed(static_cast<std::int64_t>(seq) * 4);  // per op
}

void BM_HarnessOnly(benchmark::State& state) {
  std::uint64_t seq = 0;
  for (auto _ : state) Collective(&kNop, nullptr, seq++, state.range(0) != 0, 0);
  state.SetItemsProcessed(static_cast<std::int64_t>(seq));
}
BENCHMARK(BM_HarnessOnly)->Arg(0)->Arg(1)->ArgName("api");

void BM_Collective8Channels(benchmark::State& state) { Run(state, false, false, 0); }
void BM_Collective8ChannelsWithApiEvents(benchmark::State& state) { Run(state, false, true, 0); }
void BM_Collective8ChannelsWithProxySteps(benchmark::State& state) {
  Run(state, false, true, static_cast<int>(state.range(0)));
}
void BM_Collective8ChannelsChained(benchmark::State& state) { Run(state, true, false, 0); }
void BM_Collective8ChannelsWithApiEventsChained(benchmark::State& state) {
  Run(state, true, true, 0);
}
void BM_Collective8ChannelsWithProxyStepsChained(benchmark::State& state) {
  Run(state, true, true, static_cast<int>(state.range(0)));
}

// One 8-channel collective through the v7 table (NCCL 2.31+): Coll start, KernelCh start per
// channel, then, with `phases`, each channel's three kernel phases (initial_sync, compute,
// final_sync: start, KernelPhaseStop record with the GPU stop time, stop) that NCCL raises between
// a channel's KernelCh start and stop (src/plugin/profiler.cc:898-977 at 2.31.2), the KernelCh
// stops and the Coll stop. What the phases add to a collective, side by side with phases: 0.
void CollectiveV7(const abi::ProfilerV7* p, void* context, std::uint64_t seq, bool phases,
                  const int* mask) {
  const int m = mask != nullptr ? __atomic_load_n(mask, __ATOMIC_RELAXED) : -1;
  const bool kernel = (m & abi::kKernelCh) != 0;
  const bool phased = phases && (m & abi::kKernelPhase) != 0;
  abi::EventDescrV7 d{};
  DescribeColl(d, seq, nullptr, nullptr);
  void* coll = nullptr;
  p->startEvent(context, &coll, &d);
  const std::uint64_t t0 = 1'700'000'000'000'000'000ull + seq * 100'000;
  void* channel[kChannels];
  for (int c = 0; kernel && c < kChannels; ++c) {
    std::memset(&d, 0, sizeof(d));
    d.type = abi::kKernelCh;
    d.parentObj = coll;
    d.kernelCh.channelId = static_cast<std::uint8_t>(c);
    d.kernelCh.pTimer = t0 + static_cast<std::uint64_t>(c);
    p->startEvent(context, &channel[c], &d);
  }
  static const char* const kPhaseNames[] = {"initial_sync", "compute", "final_sync"};
  abi::StateArgsV7 args;
  for (int c = 0; phased && c < kChannels; ++c) {
    for (std::uint8_t phase = 0; phase < 3; ++phase) {
      std::memset(&d, 0, sizeof(d));
      d.type = abi::kKernelPhase;
      d.parentObj = channel[c];
      d.kernelPhase.channelId = static_cast<std::uint8_t>(c);
      d.kernelPhase.phaseId = phase;
      d.kernelPhase.phaseName = kPhaseNames[phase];
      d.kernelPhase.pTimer = t0 + 10'000 * (phase + 1u);
      void* span = nullptr;
      p->startEvent(context, &span, &d);
      args.kernelCh.pTimer = t0 + 10'000 * (phase + 1u) + 5'000;
      p->recordEventState(span, abi::kKernelPhaseStop, &args);
      p->stopEvent(span);
    }
  }
  for (int c = 0; kernel && c < kChannels; ++c) {
    args.kernelCh.pTimer = t0 + 50'000 + static_cast<std::uint64_t>(c);
    p->recordEventState(channel[c], abi::kKernelChStop, &args);
    p->stopEvent(channel[c]);
  }
  p->stopEvent(coll);
}

const abi::ProfilerV7 kNopV7 = {
    "nop", nullptr, NopStart<abi::EventDescrV7>, NopStop, NopRecord<abi::StateArgsV7>, nullptr};

// Per collective through v7: phases 0/1, and nop 1: the same calls into a table that does nothing
// (the harness, to subtract).
void BM_Collective8ChannelsV7(benchmark::State& state) {
  World& world = TheWorld();
  Instance& instance = world.v7;
  if (instance.plugin == nullptr) {
    state.SkipWithError("no v7 instance: NCCLSCOPE_BENCH_PLUGIN is another plugin");
    return;
  }
  const bool phases = state.range(0) != 0;
  const bool nop = state.range(1) != 0;
  static void* context = world.NewComm(instance, 0, 8);
  const int all = -1;
  std::uint64_t seq = 0;
  for (auto _ : state) {
    CollectiveV7(nop ? &kNopV7 : instance.v7, nop ? nullptr : context, seq++, phases,
                 nop ? &all : &instance.mask);
    if ((seq & 255) == 0) instance.Consume();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(seq));
  instance.Consume();
}
BENCHMARK(BM_Collective8ChannelsV7)
    ->Args({0, 0})
    ->Args({1, 0})
    ->Args({1, 1})
    ->ArgNames({"phases", "nop"});

// The minimal chained plugin on its own, as NCCL would call it: its share of a chained run.
void BM_MinimalChainedPluginAlone(benchmark::State& state) {
  static const abi::ProfilerV6* minimal = [] {
    void* lib = dlopen(NCCLSCOPE_MINIMAL_CHAINED_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    return static_cast<const abi::ProfilerV6*>(dlsym(lib, "ncclProfiler_v6"));
  }();
  std::uint64_t seq = 0;
  for (auto _ : state) Collective(minimal, nullptr, seq++, state.range(0) != 0, 0);
  state.SetItemsProcessed(static_cast<std::int64_t>(seq));
}
BENCHMARK(BM_MinimalChainedPluginAlone)->Arg(0)->Arg(1)->ArgName("api");

BENCHMARK(BM_Collective8Channels);
// Per op of a grouped plan (items/s are ops): the plugin (nop=0) and the same calls into nothing.
BENCHMARK(BM_GroupedPlanOf4Ops)->Arg(0)->Arg(1)->ArgName("nop");
BENCHMARK(BM_Collective8ChannelsChained);
BENCHMARK(BM_Collective8ChannelsWithApiEvents);
BENCHMARK(BM_Collective8ChannelsWithApiEventsChained);
BENCHMARK(BM_Collective8ChannelsWithProxySteps)->Arg(1)->Arg(4);
BENCHMARK(BM_Collective8ChannelsWithProxyStepsChained)->Arg(1);
// Eight ranks of one process (ncclCommInitAll style), each on its own thread and communicator,
// sharing the plugin's pools and ring.
BENCHMARK(BM_Collective8Channels)->Threads(8)->UseRealTime();
BENCHMARK(BM_Collective8ChannelsWithApiEvents)->Threads(8)->UseRealTime();
BENCHMARK(BM_Collective8ChannelsWithApiEventsChained)->Threads(8)->UseRealTime();

// The agent's side: validating, decoding and aggregating op records.
void BM_AgentReadsOpRecords(benchmark::State& state) {
  World& world = TheWorld();
  static void* context = world.NewComm(world.plain, 0, 8);
  const abi::ProfilerV6* v6 = world.plain.v6;
  profiler::RingDirectory directory(world.plain.dir);
  analytics::NcclAnalytics metrics;
  world.plain.Consume();
  std::uint64_t seq = 0;
  std::int64_t records = 0;
  for (auto _ : state) {
    state.PauseTiming();
    for (int i = 0; i < 1000; ++i) Collective(v6, context, seq++, false, 0);
    state.ResumeTiming();
    while (directory.Poll(metrics)) {
    }
    records += 1000;
  }
  state.SetItemsProcessed(records);
}
BENCHMARK(BM_AgentReadsOpRecords)->Unit(benchmark::kMicrosecond);

// Instruction counts do not depend on what else the machine runs: `plugin_bench --count N MODE`
// runs N collectives (MODE: plugin, chained, nop) inside CountedCollectives(), for
// `valgrind --tool=callgrind --toggle-collect=*CountedCollectives*` (docs/benchmarks.md); MODE
// grouped / grouped-nop runs N grouped plans of 4 ops inside CountedGroupedPlans().
__attribute__((noinline)) void CountedCollectives(const abi::ProfilerV6* p, void* context, int n) {
  for (int i = 0; i < n; ++i) Collective(p, context, static_cast<std::uint64_t>(i), false, 0);
}

__attribute__((noinline)) void CountedGroupedPlans(const abi::ProfilerV6* p, void* context, int n) {
  for (int i = 0; i < n; ++i) GroupedPlan(p, context, static_cast<std::uint64_t>(i));
}

int CountMode(int n, const std::string& mode) {
  World& world = TheWorld();
  if (mode == "grouped" || mode == "grouped-nop") {
    void* context = world.NewComm(world.plain, 0, 8);
    const abi::ProfilerV6* table = mode == "grouped" ? world.plain.v6 : &kNop;
    for (int i = 0; i < 100; ++i) GroupedPlan(table, context, 0);
    world.plain.Consume();
    for (int done = 0; done < n; done += 250) {
      CountedGroupedPlans(table, context, n - done < 250 ? n - done : 250);
      world.plain.Consume();
    }
    std::printf("%d grouped plans of 4 ops (%s), dropped %" PRIu64 "\n", n, mode.c_str(),
                world.plain.DroppedFull() + world.plain.DroppedBusy());
    return 0;
  }
  Instance& instance = mode == "chained" ? world.chained : world.plain;
  void* context = world.NewComm(instance, 0, 8);
  const abi::ProfilerV6* table = mode == "nop" ? &kNop : instance.v6;
  // Warm up pools and caches outside the counted region.
  CountedCollectives(table, context, 0);
  for (int i = 0; i < 100; ++i) Collective(table, context, 0, false, 0);
  instance.Consume();
  for (int done = 0; done < n; done += 1000) {
    CountedCollectives(table, context, n - done < 1000 ? n - done : 1000);
    instance.Consume();
  }
  const std::uint64_t dropped = instance.DroppedFull() + instance.DroppedBusy();
  std::printf("%d collectives (%s), dropped %" PRIu64 ", chain errors %" PRIu64 "\n", n,
              mode.c_str(), dropped, instance.Counter(NCCLSCOPE_CTR_CHAIN_ERRORS));
  return 0;
}

}  // namespace
}  // namespace ncclscope::bench

int main(int argc, char** argv) {
  try {
    if (argc >= 3 && std::string(argv[1]) == "--count") {
      return ncclscope::bench::CountMode(static_cast<int>(std::strtol(argv[2], nullptr, 10)),
                                         argc >= 4 ? argv[3] : "plugin");
    }
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "plugin_bench: %s\n", e.what());
    return 1;
  }
}
