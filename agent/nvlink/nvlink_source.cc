#include "agent/nvlink/nvlink_source.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "agent/core/log.h"
#include "agent/core/metric_family.h"
#include "agent/core/text_exposition.h"
#include "agent/nvlink/nvlink_metrics.h"

namespace ncclscope::nvlink {

health::NvlinkHealthParams NvlinkParams(const config::NvlinkConfig& config) {
  return {config.down_after.value(),
          {config.errors.increase, config.errors.window.value(), config.errors.severity}};
}
namespace {

// Counters that make up a link's error total for the link_errors finding (replays and corrected
// symbol errors are left out: links retransmit and correct as part of normal operation).
constexpr std::size_t kErrorTotalDl[] = {1, 2, 3, 4};  // recovery, crc_flit, crc_data, ecc
constexpr unsigned kErrorTotalFields[] = {
    nvml::field::kCountMalformedPacketErrors, nvml::field::kCountBufferOverrunErrors,
    nvml::field::kCountRcvErrors, nvml::field::kCountLocalLinkIntegrityErrors,
    nvml::field::kCountLinkRecoveryFailedEvents};

// The slot of a field among the GPU-scope totals (nvml::kGpuFields), -1 when it has none.
int GpuFieldSlot(unsigned id) {
  for (std::size_t i = 0; i < nvml::kGpuFields.size(); ++i) {
    if (nvml::kGpuFields[i] == id) return static_cast<int>(i);
  }
  return -1;
}

int FieldSlot(unsigned id) {
  for (std::size_t i = 0; i < nvml::kLinkFields.size(); ++i) {
    if (nvml::kLinkFields[i] == id) return static_cast<int>(i);
  }
  return -1;
}

std::string GpuKey(const nvml::GpuReading& gpu) {
  return gpu.uuid.empty() ? "gpu" + std::to_string(gpu.index) : gpu.uuid;
}

metrics::Labels GpuLabels(const nvml::GpuReading& gpu) {
  return {{"gpu", std::to_string(gpu.index)}, {"UUID", gpu.uuid}};
}

// Findings are series only while they hold (the rules test == 1; a finding at 0 would be a series
// per GPU and link and finding kind for nothing: 296 on an 8 x 18-link node). `link` is "" for a
// finding about the whole GPU.
void AddFinding(metrics::FamilySet& out, const nvml::GpuReading& gpu, const std::string& link,
                const std::string& finding, const std::string& severity) {
  out.Get(kNvlinkFinding)
      .Add({{"gpu", std::to_string(gpu.index)},
            {"UUID", gpu.uuid},
            {"nvlink", link},
            {"finding", finding},
            {"severity", severity}},
           1);
}

// One link's value into its GPU's series (without nvlink.per_link_metrics): counters add up,
// gauges (BER) keep the worst link's.
void Accumulate(std::optional<double>& slot, double value, bool gauge) {
  slot = !slot ? value : gauge ? std::max(*slot, value) : *slot + value;
}

}  // namespace

NvlinkSource::NvlinkSource() : NvlinkSource(Deps{}) {}

NvlinkSource::NvlinkSource(Deps deps) : PolledSource("nvlink"), deps_(std::move(deps)) {
  if (!deps_.clock) deps_.clock = std::make_shared<platform::SteadyClock>();
}

NvlinkSource::~NvlinkSource() {
  StopPolling();
  reader_.reset();
  library_.reset();
}

void NvlinkSource::Configure(const config::NvlinkConfig& config) {
  std::lock_guard<std::mutex> lock(poll_mutex_);
  if (config.library != config_.library) {
    reader_.reset();
    library_.reset();
    links_.clear();
    gpus_.clear();
  }
  config_ = config;
  for (auto& [key, link] : links_) link.health.Reconfigure(NvlinkParams(config));
}

void NvlinkSource::PollOnce() {
  std::lock_guard<std::mutex> lock(poll_mutex_);
  const auto wall_start = std::chrono::steady_clock::now();
  ++polls_;
  if (!library_) {
    std::string error;
    library_ = nvml::Library::Open(config_.library, &error);
    if (!library_) {
      if (error != load_error_) {
        NCCLSCOPE_LOG(kWarn, "nvlink") << "NVML not available, will retry: " << error;
      }
      load_error_ = error;
      metrics::FamilySet out;
      out.Get(kNvmlAvailable).Add({}, 0);
      out.Get(kNvlinkPollsTotal).Add({}, static_cast<double>(polls_));
      Publish(out.Text(), SourceStatus::Down("NVML not available: " + error));
      return;
    }
    NCCLSCOPE_LOG(kInfo, "nvlink") << "NVML loaded from " << config_.library;
    load_error_.clear();
    reader_ = std::make_unique<nvml::NvlinkReader>(library_.get());
  }
  const health::TimePoint now = deps_.clock->Now();
  const nvml::NvlinkSnapshot snapshot = reader_->Poll();
  if (snapshot.errors > 0) errors().Add("nvml", snapshot.errors);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  std::string text = Render(snapshot, now, seconds);
  SourceStatus status = SourceStatus::Up();
  if (snapshot.gpus.empty() && !snapshot.last_error.empty()) {
    status = SourceStatus::Down("NVML: " + snapshot.last_error);
  }
  Publish(std::move(text), std::move(status));
}

std::string NvlinkSource::Render(const nvml::NvlinkSnapshot& snapshot, health::TimePoint now,
                                 double poll_seconds) {
  metrics::FamilySet out;
  out.Get(kNvmlAvailable).Add({}, 1);
  for (const nvml::GpuReading& gpu : snapshot.gpus) RenderGpu(out, gpu, now);
  out.Get(kNvlinkPollsTotal).Add({}, static_cast<double>(polls_));
  out.Get(kNvlinkPollDurationSeconds).Add({}, poll_seconds);
  return out.Text();
}

void NvlinkSource::RenderGpu(metrics::FamilySet& out, const nvml::GpuReading& gpu,
                             health::TimePoint now) {
  const std::string index = std::to_string(gpu.index);
  out.Get(kNvlinkGpuInfo)
      .Add({{"gpu", index},
            {"UUID", gpu.uuid},
            {"pci_bus_id", gpu.pci_bus_id},
            {"model_name", gpu.name},
            {"gpu_bus_id", gpu.bus_id}},
           1);
  if (gpu.lost) {
    AddFinding(out, gpu, "", "gpu_lost", "critical");
    return;
  }
  RenderGpuTotals(out, gpu);
  LinkSums sums;
  for (const nvml::LinkReading& link : gpu.links) RenderLink(out, gpu, link, now, sums);
  RenderLinkSums(out, gpu, sums);

  const metrics::Labels gpu_labels = GpuLabels(gpu);
  out.Get(kNvlinkActiveLinks).Add(gpu_labels, sums.active);
  if (config_.expected_links > 0) {
    out.Get(kNvlinkExpectedLinks).Add(gpu_labels, config_.expected_links);
    if (sums.active < config_.expected_links) {
      AddFinding(out, gpu, "", "links_below_expected", "critical");
    }
  }
}

void NvlinkSource::RenderGpuTotals(metrics::FamilySet& out, const nvml::GpuReading& gpu) {
  GpuState& gpu_state = gpus_[GpuKey(gpu)];
  const metrics::Labels gpu_labels = GpuLabels(gpu);
  for (std::size_t i = 0; i < nvml::kGpuFields.size(); ++i) {
    if (!gpu.totals[i]) continue;
    gpu_state.totals[i].Update(*gpu.totals[i], counters::Behavior::kPlain64, 64);
    out.Get(kNvlinkGpuFamilies[i]).Add(gpu_labels, gpu_state.totals[i].extended() * 1024);
  }
}

void NvlinkSource::RenderLink(metrics::FamilySet& out, const nvml::GpuReading& gpu,
                              const nvml::LinkReading& link, health::TimePoint now,
                              LinkSums& sums) {
  const std::string link_label = std::to_string(link.link);
  const metrics::Labels labels = {
      {"gpu", std::to_string(gpu.index)}, {"UUID", gpu.uuid}, {"nvlink", link_label}};
  auto [it, inserted] = links_.try_emplace({GpuKey(gpu), link.link}, config_);
  LinkState& state = it->second;
  const bool per_link = config_.per_link_metrics;
  if (link.active) {
    if (*link.active) ++sums.active;
    if (per_link) {
      out.Get(kNvlinkLinkState).Add(labels, *link.active ? 1 : 0);
    }
  }
  for (std::size_t c = 0; c < nvml::kErrorCounters; ++c) {
    if (!link.errors[c]) continue;
    state.errors[c].Update(*link.errors[c], counters::Behavior::kPlain64, 64);
    const double value = static_cast<double>(state.errors[c].extended());
    if (per_link) {
      out.Get(kNvlinkErrorCounters[c]).Add(labels, value);
    } else {
      Accumulate(sums.errors[c], value, false);
    }
  }
  for (std::size_t f = 0; f < nvml::kLinkFields.size(); ++f) {
    if (!link.fields[f]) continue;
    const NvlinkFieldFamily& family = kNvlinkFieldFamilies[f];
    const bool gauge = family.def.type == metrics::MetricType::kGauge;
    double value = 0;
    if (gauge) {
      value = nvml::DecodeBer(*link.fields[f]);
    } else {
      state.fields[f].Update(*link.fields[f], counters::Behavior::kPlain64, 64);
      value = static_cast<double>(state.fields[f].extended()) * family.scale;
    }
    if (per_link) {
      out.Get(family.def).Add(labels, value);
    } else {
      Accumulate(sums.fields[f], value, gauge);
    }
  }
  const std::optional<double> error_total = ErrorTotal(state);
  state.health.Observe(now, link.active ? (*link.active ? 1 : 0) : -1, error_total.value_or(-1));
  if (state.health.Inactive(now)) {
    AddFinding(out, gpu, link_label, "link_inactive", "critical");
  }
  if (state.health.error_severity() != "none" && state.health.Errors()) {
    AddFinding(out, gpu, link_label, "link_errors", state.health.error_severity());
  }
}

std::optional<double> NvlinkSource::ErrorTotal(const LinkState& state) {
  std::optional<double> total;
  for (std::size_t c : kErrorTotalDl) {
    if (!state.errors[c].seen()) continue;
    total = total.value_or(0) + state.errors[c].accumulated();
  }
  for (unsigned id : kErrorTotalFields) {
    const int slot = FieldSlot(id);
    if (slot < 0 || !state.fields[slot].seen()) continue;
    total = total.value_or(0) + state.fields[slot].accumulated();
  }
  return total;
}

void NvlinkSource::RenderLinkSums(metrics::FamilySet& out, const nvml::GpuReading& gpu,
                                  const LinkSums& sums) {
  const metrics::Labels gpu_labels = GpuLabels(gpu);
  for (std::size_t c = 0; c < nvml::kErrorCounters; ++c) {
    if (sums.errors[c]) {
      out.Get(kNvlinkErrorCounters[c]).Add(gpu_labels, *sums.errors[c]);
    }
  }
  for (std::size_t f = 0; f < nvml::kLinkFields.size(); ++f) {
    if (!sums.fields[f]) continue;
    // The throughput summed over the links repeats NVML's own GPU total (the gpu_* families
    // above; some drivers report the total in every link's field, which a sum multiplies):
    // only where NVML gave no total. 28 series on an 8-GPU node (docs/metrics.md, "Cost").
    if (const int total = GpuFieldSlot(nvml::kLinkFields[f]); total >= 0 && gpu.totals[total]) {
      continue;
    }
    out.Get(kNvlinkFieldFamilies[f].def).Add(gpu_labels, *sums.fields[f]);
  }
}

}  // namespace ncclscope::nvlink
