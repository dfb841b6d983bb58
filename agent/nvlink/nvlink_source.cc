#include "agent/nvlink/nvlink_source.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "agent/core/log.h"
#include "agent/core/metric_family.h"
#include "agent/core/text_exposition.h"

namespace ncclscope::rdma {

health::NvLinkHealthParams NvLinkParams(const config::NvlinkConfig& config) {
  return {config.down_after.value(),
          {config.errors.increase, config.errors.window.value(), config.errors.severity}};
}
namespace {

struct CounterName {
  const char* metric;
  const char* help;
};

// nvmlDeviceGetNvLinkErrorCounter, by NvLinkErrorCounter value.
constexpr CounterName kErrorNames[nvml::kErrorCounters] = {
    {"ncclscope_nvlink_replay_errors_total", "Data link transmit replays (DL_REPLAY)."},
    {"ncclscope_nvlink_recovery_errors_total", "Data link recoveries (DL_RECOVERY)."},
    {"ncclscope_nvlink_crc_flit_errors_total",
     "Flow-control digit CRC errors received (DL_CRC_FLIT)."},
    {"ncclscope_nvlink_crc_data_errors_total", "Data CRC errors received (DL_CRC_DATA)."},
    {"ncclscope_nvlink_ecc_data_errors_total", "Data ECC errors received (DL_ECC_DATA)."},
};

// Field-value counters, aligned with nvml::kLinkFields. scale converts to base units.
struct FieldName {
  const char* metric;
  const char* help;
  double scale;
  bool gauge;
};
constexpr FieldName kFieldNames[nvml::kLinkFields.size()] = {
    {"ncclscope_nvlink_data_transmitted_bytes_total",
     "Payload bytes transmitted on the link (NVML throughput field 138, KiB x 1024).", 1024, false},
    {"ncclscope_nvlink_data_received_bytes_total",
     "Payload bytes received on the link (field 139, KiB x 1024).", 1024, false},
    {"ncclscope_nvlink_raw_transmitted_bytes_total",
     "Bytes transmitted including protocol overhead (field 140, KiB x 1024).", 1024, false},
    {"ncclscope_nvlink_raw_received_bytes_total",
     "Bytes received including protocol overhead (field 141, KiB x 1024).", 1024, false},
    {"ncclscope_nvlink_count_transmitted_packets_total", "NVLink5 packets transmitted (201).", 1,
     false},
    {"ncclscope_nvlink_count_transmitted_bytes_total", "NVLink5 bytes transmitted (202).", 1,
     false},
    {"ncclscope_nvlink_count_received_packets_total", "NVLink5 packets received (203).", 1, false},
    {"ncclscope_nvlink_count_received_bytes_total", "NVLink5 bytes received (204).", 1, false},
    {"ncclscope_nvlink_malformed_packet_errors_total", "NVLink5 malformed packets received (206).",
     1, false},
    {"ncclscope_nvlink_buffer_overrun_errors_total",
     "NVLink5 packets discarded on receive for buffer overrun (207).", 1, false},
    {"ncclscope_nvlink_receive_errors_total", "NVLink5 packets received with errors (208).", 1,
     false},
    {"ncclscope_nvlink_receive_remote_errors_total",
     "NVLink5 packets received with a stomp/EBP marker (209).", 1, false},
    {"ncclscope_nvlink_receive_general_errors_total",
     "NVLink5 packets received with a header mismatch (210).", 1, false},
    {"ncclscope_nvlink_local_link_integrity_errors_total",
     "NVLink5 times local errors exceeded the threshold (211).", 1, false},
    {"ncclscope_nvlink_transmit_discards_total", "NVLink5 transmit packets discarded (212).", 1,
     false},
    {"ncclscope_nvlink_link_recovery_successful_total",
     "NVLink5 recoveries that brought the link back up (213).", 1, false},
    {"ncclscope_nvlink_link_recovery_failed_total",
     "NVLink5 recoveries that failed: the link was declared down (214).", 1, false},
    {"ncclscope_nvlink_link_recovery_total", "NVLink5 recoveries, whatever the result (215).", 1,
     false},
    {"ncclscope_nvlink_effective_errors_total", "NVLink5 effective errors (219).", 1, false},
    {"ncclscope_nvlink_effective_ber",
     "NVLink5 effective bit error rate (220, decoded: mantissa x 10^-exponent).", 1, true},
    {"ncclscope_nvlink_symbol_errors_total", "NVLink5 symbol errors received (221).", 1, false},
    {"ncclscope_nvlink_symbol_ber",
     "NVLink5 symbol bit error rate (222, decoded: mantissa x 10^-exponent).", 1, true},
};
static_assert(std::size(kFieldNames) == nvml::kLinkFields.size());

constexpr CounterName kGpuNames[nvml::kGpuFields.size()] = {
    {"ncclscope_nvlink_gpu_data_transmitted_bytes_total",
     "Payload bytes transmitted over all of the GPU's links (field 138, scope all links)."},
    {"ncclscope_nvlink_gpu_data_received_bytes_total",
     "Payload bytes received over all of the GPU's links (field 139, scope all links)."},
    {"ncclscope_nvlink_gpu_raw_transmitted_bytes_total",
     "Bytes transmitted with overhead over all links (field 140, scope all links)."},
    {"ncclscope_nvlink_gpu_raw_received_bytes_total",
     "Bytes received with overhead over all links (field 141, scope all links)."},
};

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

constexpr const char* kFindingHelp =
    "1 while a health finding holds for the NVLink (or GPU); the series exists only then. "
    "Severity critical, warning or info.";

}  // namespace

NvlinkSource::NvlinkSource() : NvlinkSource(Deps{}) {}

NvlinkSource::NvlinkSource(Deps deps) : PolledSource("nvlink"), deps_(std::move(deps)) {
  if (!deps_.clock) deps_.clock = std::make_shared<health::SteadyClock>();
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
  for (auto& [key, link] : links_) link.health.Reconfigure(NvLinkParams(config));
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
      out.Gauge("ncclscope_nvml_available",
                "1 when NVML (libnvidia-ml) is loaded and initialized, 0 when it cannot be "
                "(no driver or library; the nvlink source retries every interval).")
          .Add({}, 0);
      out.Counter("ncclscope_nvlink_polls_total", "Polls of NVML.")
          .Add({}, static_cast<double>(polls_));
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
  out.Gauge("ncclscope_nvml_available",
            "1 when NVML (libnvidia-ml) is loaded and initialized, 0 when it cannot be (no "
            "driver or library; the nvlink source retries every interval).")
      .Add({}, 1);
  for (const nvml::GpuReading& gpu : snapshot.gpus) {
    const std::string index = std::to_string(gpu.index);
    const std::string key = GpuKey(gpu);
    const metrics::Labels gpu_labels = {{"gpu", index}, {"UUID", gpu.uuid}};
    out.Gauge("ncclscope_nvlink_gpu_info",
              "Constant 1 per GPU seen by NVML: index (gpu), UUID and PCI bus id (pci_bus_id) as "
              "dcgm-exporter labels them, the model name (model_name) and the bus id in Linux form "
              "(gpu_bus_id, joins ncclscope_gpu_nic_affinity_info).")
        .Add({{"gpu", index},
              {"UUID", gpu.uuid},
              {"pci_bus_id", gpu.pci_bus_id},
              {"model_name", gpu.name},
              {"gpu_bus_id", gpu.bus_id}},
             1);
    // Findings are series only while they hold (the rules test == 1; a finding at 0 would be a
    // series per GPU and link and finding kind for nothing: 296 on an 8 x 18-link node).
    if (gpu.lost) {
      out.Gauge("ncclscope_nvlink_finding", kFindingHelp)
          .Add({{"gpu", index},
                {"UUID", gpu.uuid},
                {"nvlink", ""},
                {"finding", "gpu_lost"},
                {"severity", "critical"}},
               1);
      continue;
    }

    GpuState& gpu_state = gpus_[key];
    for (std::size_t i = 0; i < nvml::kGpuFields.size(); ++i) {
      if (!gpu.totals[i]) continue;
      gpu_state.totals[i].Update(*gpu.totals[i], counters::Behavior::kPlain64, 64);
      out.Counter(kGpuNames[i].metric, kGpuNames[i].help)
          .Add(gpu_labels, gpu_state.totals[i].extended() * 1024);
    }

    // Without nvlink.per_link_metrics each per-link family is one series per GPU: counters summed
    // over its links, BER gauges the worst link's. Findings still name the link.
    const bool per_link = config_.per_link_metrics;
    std::array<std::optional<double>, nvml::kErrorCounters> error_sums;
    std::array<std::optional<double>, nvml::kLinkFields.size()> field_sums;
    const auto accumulate = [](std::optional<double>& slot, double value, bool gauge) {
      slot = !slot ? value : gauge ? std::max(*slot, value) : *slot + value;
    };
    unsigned active = 0;
    for (const nvml::LinkReading& link : gpu.links) {
      const std::string link_label = std::to_string(link.link);
      const metrics::Labels labels = {{"gpu", index}, {"UUID", gpu.uuid}, {"nvlink", link_label}};
      auto [it, inserted] = links_.try_emplace({key, link.link}, config_);
      LinkState& state = it->second;
      if (link.active) {
        if (*link.active) ++active;
        if (per_link) {
          out.Gauge("ncclscope_nvlink_link_state", "1 when the NVLink is active, 0 when not.")
              .Add(labels, *link.active ? 1 : 0);
        }
      }
      double error_total = 0;
      bool any_error_counter = false;
      for (std::size_t c = 0; c < nvml::kErrorCounters; ++c) {
        if (!link.errors[c]) continue;
        state.errors[c].Update(*link.errors[c], counters::Behavior::kPlain64, 64);
        const double value = static_cast<double>(state.errors[c].extended());
        if (per_link) {
          out.Counter(kErrorNames[c].metric, kErrorNames[c].help).Add(labels, value);
        } else {
          accumulate(error_sums[c], value, false);
        }
      }
      for (std::size_t c : kErrorTotalDl) {
        if (!state.errors[c].seen()) continue;
        error_total += state.errors[c].accumulated();
        any_error_counter = true;
      }
      for (std::size_t f = 0; f < nvml::kLinkFields.size(); ++f) {
        if (!link.fields[f]) continue;
        const FieldName& name = kFieldNames[f];
        if (name.gauge) {
          const double ber = nvml::DecodeBer(*link.fields[f]);
          if (per_link) {
            out.Gauge(name.metric, name.help).Add(labels, ber);
          } else {
            accumulate(field_sums[f], ber, true);
          }
          continue;
        }
        state.fields[f].Update(*link.fields[f], counters::Behavior::kPlain64, 64);
        const double value = static_cast<double>(state.fields[f].extended()) * name.scale;
        if (per_link) {
          out.Counter(name.metric, name.help).Add(labels, value);
        } else {
          accumulate(field_sums[f], value, false);
        }
      }
      for (unsigned id : kErrorTotalFields) {
        const int slot = FieldSlot(id);
        if (slot < 0 || !state.fields[slot].seen()) continue;
        error_total += state.fields[slot].accumulated();
        any_error_counter = true;
      }
      state.health.Observe(now, link.active ? (*link.active ? 1 : 0) : -1,
                           any_error_counter ? error_total : -1);
      if (state.health.Inactive(now)) {
        out.Gauge("ncclscope_nvlink_finding", kFindingHelp)
            .Add({{"gpu", index},
                  {"UUID", gpu.uuid},
                  {"nvlink", link_label},
                  {"finding", "link_inactive"},
                  {"severity", "critical"}},
                 1);
      }
      if (state.health.error_severity() != "none" && state.health.Errors()) {
        out.Gauge("ncclscope_nvlink_finding", kFindingHelp)
            .Add({{"gpu", index},
                  {"UUID", gpu.uuid},
                  {"nvlink", link_label},
                  {"finding", "link_errors"},
                  {"severity", state.health.error_severity()}},
                 1);
      }
    }
    for (std::size_t c = 0; c < nvml::kErrorCounters; ++c) {
      if (error_sums[c]) {
        out.Counter(kErrorNames[c].metric, kErrorNames[c].help).Add(gpu_labels, *error_sums[c]);
      }
    }
    for (std::size_t f = 0; f < nvml::kLinkFields.size(); ++f) {
      if (!field_sums[f]) continue;
      // The throughput summed over the links repeats NVML's own GPU total (the gpu_* families
      // above; some drivers report the total in every link's field, which a sum multiplies):
      // only where NVML gave no total. 28 series on an 8-GPU node (docs/metrics.md, "Cost").
      if (const int total = GpuFieldSlot(nvml::kLinkFields[f]); total >= 0 && gpu.totals[total]) {
        continue;
      }
      const FieldName& name = kFieldNames[f];
      if (name.gauge) {
        out.Gauge(name.metric, name.help).Add(gpu_labels, *field_sums[f]);
      } else {
        out.Counter(name.metric, name.help).Add(gpu_labels, *field_sums[f]);
      }
    }
    out.Gauge("ncclscope_nvlink_active_links", "Active NVLinks of the GPU.")
        .Add(gpu_labels, active);
    if (config_.expected_links > 0) {
      out.Gauge("ncclscope_nvlink_expected_links", "nvlink.expected_links.")
          .Add(gpu_labels, config_.expected_links);
      if (active < config_.expected_links) {
        out.Gauge("ncclscope_nvlink_finding", kFindingHelp)
            .Add({{"gpu", index},
                  {"UUID", gpu.uuid},
                  {"nvlink", ""},
                  {"finding", "links_below_expected"},
                  {"severity", "critical"}},
                 1);
      }
    }
  }
  out.Counter("ncclscope_nvlink_polls_total", "Polls of NVML.")
      .Add({}, static_cast<double>(polls_));
  out.Gauge("ncclscope_nvlink_poll_duration_seconds", "Wall time of the latest NVML poll.")
      .Add({}, poll_seconds);
  return out.Text();
}

}  // namespace ncclscope::rdma
