// Cost of the fabric sources per poll: a full rdma poll (sysfs reads of every attribute and
// counter file, counter state, health, rendering) over N mlx5 ports with PMA and hw_counters, the
// scrape side (Collect), and an NVLink poll over the fake NVML. The target (issue 6): 16 ports
// at a 1 s interval under 0.5% of a core, i.e. under 5 ms of CPU per poll. Results and the
// command: docs/benchmarks.md.

#include <benchmark/benchmark.h>

#include <memory>
#include <string>

#include "agent/core/text_exposition.h"
#include "agent/nvlink/nvlink_source.h"
#include "agent/rdma/rdma_source.h"
#include "rdma/health/clock.h"
#include "rdma/sysfs/file_reader.h"
#include "tests/support/fake_nvml.h"
#include "tests/support/sysfs_tree.h"

namespace {

using ncclscope::testing::SysfsTree;

class NoVerbs : public ncclscope::rdma::verbs::VerbsApi {
 public:
  int ListDevices(std::vector<ncclscope::rdma::verbs::DeviceAttr>* devices) override {
    devices->clear();
    return 0;
  }
};

// A node with `ports` mlx5 IB ports (two per HCA), each with 21 PMA counters and 32 hw_counters.
void BuildNode(SysfsTree& tree, int ports) {
  for (int d = 0; d < (ports + 1) / 2; ++d) {
    SysfsTree::Hca hca;
    hca.name = "mlx5_" + std::to_string(d);
    char pci[32];
    std::snprintf(pci, sizeof(pci), "0000:%02x:00.0", (0x10 + d) & 0xff);
    hca.pci_address = pci;
    const int n = std::min(2, ports - 2 * d);
    hca.pci_parent = "pci0000:00/0000:00:0" + std::to_string(d % 8) + ".0";
    tree.AddMlx5Ib(hca, static_cast<std::uint32_t>(n));
    for (int p = 1; p <= n; ++p) {
      tree.SetCounters(hca.name, static_cast<std::uint32_t>(p), "hw_counters",
                       SysfsTree::Mlx5HwCounters());
    }
  }
}

struct RdmaNode {
  SysfsTree tree;
  std::shared_ptr<ncclscope::platform::ManualClock> clock =
      std::make_shared<ncclscope::platform::ManualClock>();
  ncclscope::rdma::RdmaSource source{{nullptr, std::make_shared<NoVerbs>(), clock}};

  explicit RdmaNode(int ports) {
    ncclscope::rdma::sysfs::RaiseOpenFileLimit();  // as RdmaSource::Start does
    BuildNode(tree, ports);
    ncclscope::config::RdmaConfig config;
    config.sysfs_root = tree.root();
    source.Configure(config);
    source.PollOnce();  // discovery happens here, not in the measured polls
  }
};

void BM_RdmaPoll(benchmark::State& state) {
  const int ports = static_cast<int>(state.range(0));
  RdmaNode node(ports);
  for (auto _ : state) {
    node.clock->Advance(std::chrono::seconds(1));
    node.source.PollOnce();
  }
  state.counters["ports"] = ports;
  state.counters["files_per_poll"] = ports * (21.0 + 32 + 3);
}
BENCHMARK(BM_RdmaPoll)->Arg(1)->Arg(4)->Arg(16)->Arg(64)->Unit(benchmark::kMicrosecond);

void BM_RdmaCollect(benchmark::State& state) {
  RdmaNode node(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    std::string text;
    ncclscope::metrics::TextWriter writer(text);
    node.source.Collect(writer);
    benchmark::DoNotOptimize(text.data());
  }
}
BENCHMARK(BM_RdmaCollect)->Arg(16)->Unit(benchmark::kMicrosecond);

#ifdef NCCLSCOPE_FAKE_NVML
// 8 GPUs x 18 NVLinks (an HGX H100), Hopper counters.
void BM_NvlinkPoll(benchmark::State& state) {
  ncclscope::testing::TempDir dir;
  const std::string path = dir.path() + "/nvml-state";
  std::string text;
  for (int g = 0; g < 8; ++g) {
    const std::string gpu = std::to_string(g);
    text += "gpu " + gpu;
    text += " GPU-0000000" + gpu;
    text += " 00000000:1" + gpu;
    text += ":00.0 NVIDIA_H100 18\n";
    for (int l = 0; l < 18; ++l) {
      for (int f = 138; f <= 141; ++f) {
        text += "field " + gpu;
        text += " " + std::to_string(l);
        text += " " + std::to_string(f);
        text += " 12345\n";
      }
    }
  }
  ncclscope::testing::WriteFakeNvmlState(path, text);
  setenv("FAKE_NVML_STATE", path.c_str(), 1);  // NOLINT(concurrency-mt-unsafe): before threads
  auto clock = std::make_shared<ncclscope::platform::ManualClock>();
  ncclscope::nvlink::NvlinkSource source({clock});
  ncclscope::config::NvlinkConfig config;
  config.library = NCCLSCOPE_FAKE_NVML;
  source.Configure(config);
  source.PollOnce();
  for (auto _ : state) {
    clock->Advance(std::chrono::seconds(1));
    source.PollOnce();
  }
  state.counters["links"] = 8 * 18;
}
BENCHMARK(BM_NvlinkPoll)->Unit(benchmark::kMicrosecond);
#endif

}  // namespace

BENCHMARK_MAIN();
