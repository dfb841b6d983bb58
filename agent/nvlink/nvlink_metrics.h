#pragma once

// The NVLink source's families (agent/nvlink), read through NVML. Each family is declared once here
// (agent/core/metric_def.h) and listed in kNvlinkMetrics.

#include <array>

#include "agent/core/metric_def.h"
#include "rdma/nvml/nvlink_reader.h"

namespace ncclscope::nvlink {

// NVML and the link-health rules live in the fabric library (rdma/, docs/developing.md "Names").
namespace nvml = rdma::nvml;

inline constexpr metrics::MetricDef kNvmlAvailable =
    metrics::Gauge("ncclscope_nvml_available", "",
                   "1 when NVML (libnvidia-ml) is loaded and initialized, 0 when it cannot be "
                   "(no driver or library; the nvlink source retries every interval).");
inline constexpr metrics::MetricDef kNvlinkPollsTotal =
    metrics::Counter("ncclscope_nvlink_polls_total", "", "Polls of NVML.");
inline constexpr metrics::MetricDef kNvlinkGpuInfo = metrics::Gauge(
    "ncclscope_nvlink_gpu_info", "",
    "Constant 1 per GPU seen by NVML: index (gpu), UUID and PCI bus id (pci_bus_id) as "
    "dcgm-exporter labels them, the model name (model_name) and the bus id in Linux form "
    "(gpu_bus_id, joins ncclscope_gpu_nic_affinity_info).");
inline constexpr metrics::MetricDef kNvlinkLinkState =
    metrics::Gauge("ncclscope_nvlink_link_state", "", "1 when the NVLink is active, 0 when not.");
inline constexpr metrics::MetricDef kNvlinkActiveLinks =
    metrics::Gauge("ncclscope_nvlink_active_links", "", "Active NVLinks of the GPU.");
inline constexpr metrics::MetricDef kNvlinkExpectedLinks =
    metrics::Gauge("ncclscope_nvlink_expected_links", "", "nvlink.expected_links.");
inline constexpr metrics::MetricDef kNvlinkPollDurationSeconds = metrics::Gauge(
    "ncclscope_nvlink_poll_duration_seconds", "seconds", "Wall time of the latest NVML poll.");
inline constexpr metrics::MetricDef kNvlinkFinding = metrics::Gauge(
    "ncclscope_nvlink_finding", "",
    "1 while a health finding holds for the NVLink (or GPU); the series exists only then. "
    "Severity critical, warning or info.");

// nvmlDeviceGetNvLinkErrorCounter, by NvLinkErrorCounter value.
inline constexpr std::array<metrics::MetricDef, nvml::kErrorCounters> kNvlinkErrorCounters = {
    metrics::Counter("ncclscope_nvlink_replay_errors_total", "",
                     "Data link transmit replays (DL_REPLAY)."),
    metrics::Counter("ncclscope_nvlink_recovery_errors_total", "",
                     "Data link recoveries (DL_RECOVERY)."),
    metrics::Counter("ncclscope_nvlink_crc_flit_errors_total", "",
                     "Flow-control digit CRC errors received (DL_CRC_FLIT)."),
    metrics::Counter("ncclscope_nvlink_crc_data_errors_total", "",
                     "Data CRC errors received (DL_CRC_DATA)."),
    metrics::Counter("ncclscope_nvlink_ecc_data_errors_total", "",
                     "Data ECC errors received (DL_ECC_DATA)."),
};

// Field-value families, aligned with nvml::kLinkFields; scale converts to base units. The
// bit error rates are gauges, the rest counters.
struct NvlinkFieldFamily {
  metrics::MetricDef def;
  double scale = 1;
};
inline constexpr std::array<NvlinkFieldFamily, nvml::kLinkFields.size()> kNvlinkFieldFamilies = {{
    {metrics::Counter(
         "ncclscope_nvlink_data_transmitted_bytes_total", "bytes",
         "Payload bytes transmitted on the link (NVML throughput field 138, KiB x 1024)."),
     1024},
    {metrics::Counter("ncclscope_nvlink_data_received_bytes_total", "bytes",
                      "Payload bytes received on the link (field 139, KiB x 1024)."),
     1024},
    {metrics::Counter("ncclscope_nvlink_raw_transmitted_bytes_total", "bytes",
                      "Bytes transmitted including protocol overhead (field 140, KiB x 1024)."),
     1024},
    {metrics::Counter("ncclscope_nvlink_raw_received_bytes_total", "bytes",
                      "Bytes received including protocol overhead (field 141, KiB x 1024)."),
     1024},
    {metrics::Counter("ncclscope_nvlink_count_transmitted_packets_total", "",
                      "NVLink5 packets transmitted (201)."),
     1},
    {metrics::Counter("ncclscope_nvlink_count_transmitted_bytes_total", "bytes",
                      "NVLink5 bytes transmitted (202)."),
     1},
    {metrics::Counter("ncclscope_nvlink_count_received_packets_total", "",
                      "NVLink5 packets received (203)."),
     1},
    {metrics::Counter("ncclscope_nvlink_count_received_bytes_total", "bytes",
                      "NVLink5 bytes received (204)."),
     1},
    {metrics::Counter("ncclscope_nvlink_malformed_packet_errors_total", "",
                      "NVLink5 malformed packets received (206)."),
     1},
    {metrics::Counter("ncclscope_nvlink_buffer_overrun_errors_total", "",
                      "NVLink5 packets discarded on receive for buffer overrun (207)."),
     1},
    {metrics::Counter("ncclscope_nvlink_receive_errors_total", "",
                      "NVLink5 packets received with errors (208)."),
     1},
    {metrics::Counter("ncclscope_nvlink_receive_remote_errors_total", "",
                      "NVLink5 packets received with a stomp/EBP marker (209)."),
     1},
    {metrics::Counter("ncclscope_nvlink_receive_general_errors_total", "",
                      "NVLink5 packets received with a header mismatch (210)."),
     1},
    {metrics::Counter("ncclscope_nvlink_local_link_integrity_errors_total", "",
                      "NVLink5 times local errors exceeded the threshold (211)."),
     1},
    {metrics::Counter("ncclscope_nvlink_transmit_discards_total", "",
                      "NVLink5 transmit packets discarded (212)."),
     1},
    {metrics::Counter("ncclscope_nvlink_link_recovery_successful_total", "",
                      "NVLink5 recoveries that brought the link back up (213)."),
     1},
    {metrics::Counter("ncclscope_nvlink_link_recovery_failed_total", "",
                      "NVLink5 recoveries that failed: the link was declared down (214)."),
     1},
    {metrics::Counter("ncclscope_nvlink_link_recovery_total", "",
                      "NVLink5 recoveries, whatever the result (215)."),
     1},
    {metrics::Counter("ncclscope_nvlink_effective_errors_total", "",
                      "NVLink5 effective errors (219)."),
     1},
    {metrics::Gauge("ncclscope_nvlink_effective_ber", "",
                    "NVLink5 effective bit error rate (220, decoded: mantissa x 10^-exponent)."),
     1},
    {metrics::Counter("ncclscope_nvlink_symbol_errors_total", "",
                      "NVLink5 symbol errors received (221)."),
     1},
    {metrics::Gauge("ncclscope_nvlink_symbol_ber", "",
                    "NVLink5 symbol bit error rate (222, decoded: mantissa x 10^-exponent)."),
     1},
}};

// GPU totals, aligned with nvml::kGpuFields.
inline constexpr std::array<metrics::MetricDef, nvml::kGpuFields.size()> kNvlinkGpuFamilies = {
    metrics::Counter(
        "ncclscope_nvlink_gpu_data_transmitted_bytes_total", "bytes",
        "Payload bytes transmitted over all of the GPU's links (field 138, scope all links)."),
    metrics::Counter(
        "ncclscope_nvlink_gpu_data_received_bytes_total", "bytes",
        "Payload bytes received over all of the GPU's links (field 139, scope all links)."),
    metrics::Counter(
        "ncclscope_nvlink_gpu_raw_transmitted_bytes_total", "bytes",
        "Bytes transmitted with overhead over all links (field 140, scope all links)."),
    metrics::Counter("ncclscope_nvlink_gpu_raw_received_bytes_total", "bytes",
                     "Bytes received with overhead over all links (field 141, scope all links)."),
};

inline constexpr std::array kNvlinkMetrics = {&kNvmlAvailable,
                                              &kNvlinkPollsTotal,
                                              &kNvlinkGpuInfo,
                                              &kNvlinkLinkState,
                                              &kNvlinkActiveLinks,
                                              &kNvlinkExpectedLinks,
                                              &kNvlinkPollDurationSeconds,
                                              &kNvlinkFinding};

}  // namespace ncclscope::nvlink
