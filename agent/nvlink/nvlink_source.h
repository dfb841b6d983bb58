#pragma once

// The `nvlink` source: NVLink state, throughput and errors of every GPU through NVML, loaded at
// run time. Without NVML (no driver, or a container without the library) the source reports down
// with the loader's reason, exports ncclscope_nvml_available 0, retries every interval, and the
// rest of the agent runs on. A PolledSource: it polls in the background and scrapes read the last
// published families.

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/config/config.h"
#include "agent/core/metric_family.h"
#include "agent/core/polled_source.h"
#include "rdma/counters/counter_state.h"
#include "rdma/health/clock.h"
#include "rdma/health/nvlink_health.h"
#include "rdma/nvml/nvlink_reader.h"
#include "rdma/nvml/nvml_library.h"

namespace ncclscope::nvlink {

// NVML and the link-health rules live in the fabric library (rdma/, docs/developing.md "Names").
namespace counters = rdma::counters;
namespace health = rdma::health;
namespace nvml = rdma::nvml;

// nvlink.down_after and nvlink.errors in the health library's own terms.
health::NvlinkHealthParams NvlinkParams(const config::NvlinkConfig& config);

class NvlinkSource : public PolledSource {
 public:
  struct Deps {
    std::shared_ptr<platform::Clock> clock;
  };

  NvlinkSource();
  explicit NvlinkSource(Deps deps);
  ~NvlinkSource() override;

  bool Enabled(const config::Config& config) const override { return config.nvlink.enabled; }
  void PollOnce() override;
  // Applies a config without starting the poller thread (tests).
  void Configure(const config::NvlinkConfig& config);

 protected:
  void ApplyConfig(const config::Config& config) override { Configure(config.nvlink); }
  std::chrono::nanoseconds PollInterval(const config::Config& config) const override {
    return config.nvlink.interval.value();
  }

 private:
  struct LinkState {
    std::array<counters::CounterState, nvml::kErrorCounters> errors;
    std::array<counters::CounterState, nvml::kLinkFields.size()> fields;
    health::NvlinkHealth health;
    explicit LinkState(const config::NvlinkConfig& config) : health(NvlinkParams(config)) {}
  };
  struct GpuState {
    std::array<counters::CounterState, nvml::kGpuFields.size()> totals;
  };

  // What one GPU's links add up to, for the per-GPU series (without nvlink.per_link_metrics each
  // per-link family is one series per GPU: counters summed over its links, BER gauges the worst
  // link's; findings still name the link).
  struct LinkSums {
    std::array<std::optional<double>, nvml::kErrorCounters> errors;
    std::array<std::optional<double>, nvml::kLinkFields.size()> fields;
    unsigned active = 0;
  };

  std::string Render(const nvml::NvlinkSnapshot& snapshot, health::TimePoint now,
                     double poll_seconds);
  void RenderGpu(metrics::FamilySet& out, const nvml::GpuReading& gpu, health::TimePoint now);
  // NVML's own GPU-scope totals (nvml::kGpuFields).
  void RenderGpuTotals(metrics::FamilySet& out, const nvml::GpuReading& gpu);
  // One link: its counters (per link, or into `sums`), its health, its findings.
  void RenderLink(metrics::FamilySet& out, const nvml::GpuReading& gpu,
                  const nvml::LinkReading& link, health::TimePoint now, LinkSums& sums);
  void RenderLinkSums(metrics::FamilySet& out, const nvml::GpuReading& gpu, const LinkSums& sums);
  // The link's error total for the link_errors finding; nullopt before any counter was seen.
  static std::optional<double> ErrorTotal(const LinkState& state);

  Deps deps_;

  std::mutex poll_mutex_;
  config::NvlinkConfig config_;
  std::unique_ptr<nvml::Library> library_;
  std::unique_ptr<nvml::NvlinkReader> reader_;
  std::string load_error_;
  std::map<std::pair<std::string, unsigned>, LinkState> links_;  // (UUID, link)
  std::map<std::string, GpuState> gpus_;                         // UUID
  std::uint64_t polls_ = 0;
};

}  // namespace ncclscope::nvlink
