// The agent's side of the NCCL profiler records (docs/benchmarks.md, "NCCL analytics"):
//
//  * BM_Ingest: records per second through the whole reader path on one thread: the rings'
//    lanes read and validated (checksums, fields), ops folded with their channel records, and
//    every analytics module (op series and bus bytes, p2p, network waits, per-channel transport
//    joins, last-arriver matching, comm tables). The records are written by the real plugin .so
//    (tools/replay) for 8 ranks of 3 communicators (world: 2 nodes; tp: this node; dp: across
//    nodes) with a mix of collectives, sizes and Send/Recv, and, with the argument 1, network
//    steps on every multi-node op (the plugin's default samples them 10 % of the time).
//  * BM_RenderScrape: the scrape of ~20 k series: NcclAnalytics::Render through the agent's whole
//    scrape path (ScrapeCollector::RenderText: every source, self-metrics, text). (Its comparison
//    with prometheus-cpp's MetricFamily values and TextSerializer, what the agent did before, went
//    with prometheus-cpp; its last results are in docs/benchmarks.md.)
//
// Run: build/default/bench/analytics_bench (exact command and results in docs/benchmarks.md).

#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "agent/analytics/nccl_analytics.h"
#include "agent/config/config.h"
#include "agent/core/source_set.h"
#include "agent/core/text_exposition.h"
#include "agent/exporter/scrape_collector.h"
#include "agent/profiler/ring_directory.h"
#include "tests/support/plugin_environment.h"
#include "tools/replay/nccl_replay.h"

namespace ncclscope::bench {
namespace {

constexpr int kRanks = 8;
constexpr int kNodes = 2;

// A job of 8 local ranks writing into one ring dir through the real plugin.
struct Job {
  std::string dir;
  std::unique_ptr<replay::ProfilerPlugin> plugin;
  std::unique_ptr<replay::ReplayProcess> process;
  std::vector<std::unique_ptr<replay::ReplayComm>> comms;  // [rank * 3 + kind]
  std::uint64_t seq = 0;

  Job() {
    char templ[] = "/tmp/ncclscope-analytics-bench-XXXXXX";
    if (mkdtemp(templ) == nullptr) throw std::runtime_error("mkdtemp");
    dir = templ;
    // Before any thread exists; the plugin reads them at its first init. One big ring: the
    // benchmark writes a batch, then the reader drains it.
    // The governor off, whatever the environment says: writing 100 iterations in a burst is far
    // over its budget, and it would thin out what the reader gets (proxy then kernel records)
    // differently from run to run.
    testing::SetPluginEnvironment(
        dir, {{"RING_SIZE", "256MiB"}, {"PROXY_DUTY", "1"}, {"OVERHEAD_BUDGET", "0"}});
    plugin = std::make_unique<replay::ProfilerPlugin>(NCCLSCOPE_PLUGIN_PATH);
    if (!plugin->ok()) throw std::runtime_error(plugin->error());
    process = std::make_unique<replay::ReplayProcess>(*plugin, 6);
    for (int r = 0; r < kRanks; ++r) {
      // world: 16 ranks on 2 nodes; tp: the node's 8; dp: rank r of each node.
      comms.push_back(std::make_unique<replay::ReplayComm>(*process, 0xA11, "world", kNodes,
                                                           kRanks * kNodes, r, nullptr));
      comms.push_back(
          std::make_unique<replay::ReplayComm>(*process, 0x7B0, "tp", 1, kRanks, r, nullptr));
      comms.push_back(std::make_unique<replay::ReplayComm>(
          *process, 0xD90 + static_cast<std::uint64_t>(r), "dp", kNodes, kNodes, 0, nullptr));
    }
    for (auto& c : comms) {
      if (!c->Init()) throw std::runtime_error("plugin init failed");
    }
  }

  // One iteration of every rank: 6 collectives and a Send/Recv pair.
  void Iteration(bool network) {
    struct Kind {
      int comm;
      const char* func;
      std::size_t count;
      const char* proto;
    };
    static const Kind kKinds[] = {
        {0, "AllReduce", 16 << 20, "SIMPLE"},    {1, "AllGather", 1 << 20, "SIMPLE"},
        {1, "ReduceScatter", 1 << 20, "SIMPLE"}, {1, "AllReduce", 4096, "LL"},
        {0, "AllReduce", 65536, "LL128"},        {2, "AllReduce", 4 << 20, "SIMPLE"}};
    const std::uint64_t s = seq++;
    for (int r = 0; r < kRanks; ++r) {
      replay::GpuTimes gpu;
      gpu.base = 1'700'000'000'000'000'000ull + s * 1'000'000 + static_cast<std::uint64_t>(r) * 500;
      gpu.duration_ns = 80'000;
      for (const Kind& k : kKinds) {
        replay::CollSpec spec;
        spec.func = k.func;
        spec.count = k.count;
        spec.proto = k.proto;
        spec.channels = 8;
        replay::ProxyPlan proxy;
        // Network steps on multi-node communicators: 2 channels x send and receive, 2 steps each.
        proxy.enabled = network && k.comm != 1;
        proxy.steps = 2;
        comms[static_cast<std::size_t>(r) * 3 + static_cast<std::size_t>(k.comm)]->Collective(
            spec, s, gpu, proxy);
      }
      replay::ProxyPlan p2p_proxy;  // the dp peer is on the other node
      p2p_proxy.enabled = network;
      p2p_proxy.steps = 2;
      comms[static_cast<std::size_t>(r) * 3 + 2]->P2pGroup(
          {{"Send", 1 << 18, "ncclFloat32", 1, 2}, {"Recv", 1 << 18, "ncclFloat32", 1, 2}}, {},
          p2p_proxy);
    }
  }
};

Job& TheJob() {
  static Job job;
  return job;
}

void BM_Ingest(benchmark::State& state) {
  Job& job = TheJob();
  const bool network = state.range(0) != 0;
  profiler::RingDirectory directory(job.dir);
  analytics::NcclAnalytics analytics;
  directory.Poll(analytics);  // the rings and their comm inits
  analytics.EndPass(analytics::Clock::now());
  // Counted as read (the agent's own counts), not as the plugin was asked to write: what the reader
  // really processed.
  auto records_read = [&] {
    std::uint64_t n = 0;
    for (const std::uint64_t r : directory.snapshot().records) n += r;
    return n;
  };
  const std::uint64_t read_before = records_read();
  for (auto _ : state) {
    state.PauseTiming();
    for (int i = 0; i < 100; ++i) job.Iteration(network);
    state.ResumeTiming();
    // What the profiler source's reader thread does (ProfilerSource::Run): a pass, its end, and
    // another pass at once while a lane had more than one batch.
    bool more = true;
    while (more) {
      more = directory.Poll(analytics);
      analytics.EndPass(analytics::Clock::now());
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(records_read() - read_before));
  if (directory.snapshot().dropped_ring_full != 0) state.SkipWithError("records were dropped");
}
BENCHMARK(BM_Ingest)->Arg(0)->Arg(1)->ArgName("network")->Unit(benchmark::kMicrosecond);

// ---- Scrape ----

// A fully loaded node: 8 ranks x 4 communicators x 30 op kinds (3 functions x 2 protocols x 5
// sizes) and their channels and arrivals.
analytics::NcclAnalytics& Loaded() {
  // Built once and never destroyed (it is not movable; the benchmarks share it to the end).
  static analytics::NcclAnalytics* const a = [] {
    auto* loaded = new analytics::NcclAnalytics();
    std::vector<profiler::LiveComm> live;
    std::vector<profiler::RingOrigin> origins(kRanks);  // one process per rank
    for (int r = 0; r < kRanks; ++r) origins[static_cast<std::size_t>(r)].pid = 1000 + r;
    for (std::uint64_t comm = 1; comm <= 4; ++comm) {
      for (int r = 0; r < kRanks; ++r) {
        profiler::LiveComm c;
        c.slot.state = NCCLSCOPE_COMM_LIVE;
        c.slot.comm_id = comm;
        c.slot.rank = r;
        c.slot.nranks = kRanks;
        c.slot.nnodes = 1;
        c.slot.name = "group " + std::to_string(comm);
        c.origin = &origins[static_cast<std::size_t>(r)];
        live.push_back(c);
      }
    }
    loaded->OnCommTables(live);
    loaded->EndPass(analytics::Clock::now());
    const profiler::RingOrigin origin;
    const std::uint8_t funcs[] = {NCCLSCOPE_FUNC_ALL_REDUCE, NCCLSCOPE_FUNC_ALL_GATHER,
                                  NCCLSCOPE_FUNC_REDUCE_SCATTER};
    std::uint64_t seq = 0;
    for (std::uint64_t comm = 1; comm <= 4; ++comm) {
      for (const std::uint8_t func : funcs) {
        for (std::uint8_t proto : {NCCLSCOPE_PROTO_SIMPLE, NCCLSCOPE_PROTO_LL}) {
          for (int size = 0; size < 5; ++size) {
            ++seq;
            for (int r = 0; r < kRanks; ++r) {
              profiler::OpView v;
              v.op.comm_id = comm;
              v.op.rank = r;
              v.op.kind = NCCLSCOPE_KIND_COLL;
              v.op.func = func;
              v.op.algo = NCCLSCOPE_ALGO_RING;
              v.op.proto = proto;
              v.op.bytes = 4096ull << (2 * size);
              v.op.seq = seq;
              v.op.n_channels = 8;
              v.op.flags = NCCLSCOPE_OP_GPU_TIMING;
              v.op.gpu_start_ns = 1000 + static_cast<std::uint64_t>(r);
              v.op.gpu_end_ns = 90'000;
              v.n_channels = 8;
              for (int c = 0; c < 8; ++c) {
                v.channel_ids[c] = static_cast<std::uint8_t>(c);
                v.channels[c] = {0, 89'000};
              }
              loaded->OnOp(origin, v);
            }
          }
        }
      }
    }
    loaded->OnCommTables(live);
    loaded->EndPass(analytics::Clock::now());
    return loaded;
  }();
  return *a;
}

// The analytics as a source, so the scrape goes through the agent's own ScrapeCollector.
class AnalyticsSource : public Source {
 public:
  AnalyticsSource() : Source("profiler") {}
  bool Enabled(const config::Config& /*config*/) const override { return true; }
  SourceStatus Start(const config::Config& /*config*/) override { return SourceStatus::Up(); }
  void Stop() override {}
  void Collect(metrics::TextWriter& out) const override { Loaded().Render(out, 0); }
};

void BM_RenderScrape(benchmark::State& state) {
  Loaded();
  SourceSet sources({std::make_shared<AnalyticsSource>()});
  sources.Apply(config::Config{});
  ReloadStats reload;
  ScrapeCollector collector(&sources, &reload);
  std::size_t series = 0;
  std::size_t bytes = 0;
  for (auto _ : state) {
    const std::string text = collector.RenderText();
    bytes = text.size();
    benchmark::DoNotOptimize(text.data());
  }
  const std::string text = collector.RenderText();
  for (std::size_t at = 0; at < text.size(); at = text.find('\n', at) + 1) {
    if (text[at] != '#') ++series;
  }
  state.counters["series"] = static_cast<double>(series);
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_RenderScrape)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ncclscope::bench

BENCHMARK_MAIN();
