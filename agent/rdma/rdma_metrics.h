#pragma once

// The RDMA source's families (agent/rdma): InfiniBand/RoCE ports, their attributes, health and the
// poller. The counter families come from rdma/counters/catalogue.cc (CounterFamily below). Each
// family is declared once here (agent/core/metric_def.h) and listed in kRdmaMetrics.

#include <array>
#include <string_view>

#include "agent/core/metric_def.h"
#include "rdma/counters/catalogue.h"

namespace ncclscope::rdma {

inline constexpr metrics::MetricDef kGpuNicAffinityInfo =
    metrics::Gauge("ncclscope_gpu_nic_affinity_info", "",
                   "Constant 1 per GPU and RDMA port: how they are connected in the PCIe tree "
                   "(relation PIX, PXB, PHB, NODE, SYS as nvidia-smi topo) and the hop count.");
inline constexpr metrics::MetricDef kRdmaVerbsDevices =
    metrics::Gauge("ncclscope_rdma_verbs_devices", "",
                   "RDMA devices libibverbs could open (0 without /dev/infiniband or a provider).");
inline constexpr metrics::MetricDef kRdmaPollsTotal =
    metrics::Counter("ncclscope_rdma_polls_total", "", "Polls of the RDMA ports.");
inline constexpr metrics::MetricDef kRdmaFileReadsTotal =
    metrics::Counter("ncclscope_rdma_file_reads_total", "",
                     "sysfs attribute and counter files opened (each counters/ read is a firmware "
                     "command on the HCA).");
inline constexpr metrics::MetricDef kRdmaPollDurationSeconds = metrics::Gauge(
    "ncclscope_rdma_poll_duration_seconds", "seconds", "Wall time of the latest poll.");
inline constexpr metrics::MetricDef kRdmaLastPollTimestampSeconds = metrics::Gauge(
    "ncclscope_rdma_last_poll_timestamp_seconds", "seconds", "Unix time of the latest poll.");
inline constexpr metrics::MetricDef kRdmaDevices = metrics::Gauge(
    "ncclscope_rdma_devices", "",
    "RDMA devices by state: monitored, excluded by the filters (never read), vanished (gone, "
    "findings kept for rdma.link.flap_window).");
inline constexpr metrics::MetricDef kInfinibandInfo =
    metrics::Gauge("ncclscope_infiniband_info", "",
                   "Constant 1 per RDMA device, labeled with its firmware, board, HCA type, node "
                   "GUID and PCI address.");
inline constexpr metrics::MetricDef kInfinibandPortInfo =
    metrics::Gauge("ncclscope_infiniband_port_info", "",
                   "Constant 1 per port, labeled with link layer, active width and speed, and the "
                   "network interface (RoCE, IPoIB).");
inline constexpr metrics::MetricDef kInfinibandStateId =
    metrics::Gauge("ncclscope_infiniband_state_id", "",
                   "Port state (1: down, 2: init, 3: armed, 4: active, 5: active defer).");
inline constexpr metrics::MetricDef kInfinibandPhysicalStateId =
    metrics::Gauge("ncclscope_infiniband_physical_state_id", "",
                   "Physical port state (1: sleep, 2: polling, 3: disabled, 4: port configuration "
                   "training, 5: link up, 6: link error recovery, 7: phy test).");
inline constexpr metrics::MetricDef kInfinibandRateBytesPerSecond = metrics::Gauge(
    "ncclscope_infiniband_rate_bytes_per_second", "bytes_per_second",
    "Nominal signalling rate of the port (lanes x lane speed), in bytes per second.");
inline constexpr metrics::MetricDef kInfinibandPortSaturated =
    metrics::Gauge("ncclscope_infiniband_port_saturated", "",
                   "1 while a counter sits at its maximum (2^width-1): it no longer counts, so "
                   "its rate reads 0 whatever happens. Absent while not saturated.");
inline constexpr metrics::MetricDef kInfinibandPortClearsTotal =
    metrics::Counter("ncclscope_infiniband_port_clears_total", "",
                     "Times a counter went down other than by a 32-bit wrap (perfquery -R, "
                     "driver reload). Present once a reset was seen.");
inline constexpr metrics::MetricDef kInfinibandPortSaturatedCounters =
    metrics::Gauge("ncclscope_infiniband_port_saturated_counters", "",
                   "Number of the port's counters sitting at their maximum; absent while none is.");
inline constexpr metrics::MetricDef kInfinibandPortUnreadableFiles =
    metrics::Gauge("ncclscope_infiniband_port_unreadable_files", "",
                   "Port files that gave no value this poll, by reason (errno name, no_pma, "
                   "malformed, restricted). Failing files are not read again.");
inline constexpr metrics::MetricDef kInfinibandPortRestricted =
    metrics::Gauge("ncclscope_infiniband_port_restricted", "",
                   "1 when the port's PMA counters fail with EINVAL (restricted PF): they are no "
                   "longer read. Absent otherwise.");
inline constexpr metrics::MetricDef kInfinibandPortStateTransitionsTotal =
    metrics::Counter("ncclscope_infiniband_port_state_transitions_total", "",
                     "Port state changes seen between polls, by from and to state.");
inline constexpr metrics::MetricDef kInfinibandPortFlapEpisodes =
    metrics::Gauge("ncclscope_infiniband_port_flap_episodes", "",
                   "Link-down-then-ACTIVE episodes within rdma.link.flap_window; absent while "
                   "there is none.");
// Findings are series only while they hold: the rules test == 1, and a finding at 0 would be a
// series per port and finding kind for nothing (12 a port).
inline constexpr metrics::MetricDef kInfinibandFinding = metrics::Gauge(
    "ncclscope_infiniband_finding", "",
    "1 while a health finding holds for the port (or node); the series exists only then. "
    "Severity critical, warning or info.");
inline constexpr metrics::MetricDef kInfinibandActivePorts =
    metrics::Gauge("ncclscope_infiniband_active_ports", "",
                   "Ports of rdma.expected.link_layer that are ACTIVE, LinkUp and at least "
                   "rdma.expected.rate_gbps.");
inline constexpr metrics::MetricDef kInfinibandExpectedActivePorts =
    metrics::Gauge("ncclscope_infiniband_expected_active_ports", "",
                   "rdma.expected.ports: ports the node should have.");
inline constexpr metrics::MetricDef kInfinibandExpectedRateBytesPerSecond =
    metrics::Gauge("ncclscope_infiniband_expected_rate_bytes_per_second", "bytes_per_second",
                   "rdma.expected.rate_gbps in bytes per second.");

inline constexpr metrics::MetricDef kInfinibandHwCountersTotal =
    metrics::Counter(counters::kUnknownHwCounterMetric, "",
                     "hw_counters files not in the catalogue (rdma.unknown_hw_counters).");

// The family of a catalogue counter (rdma/counters/catalogue.cc). rdma/ stays agent-free: its
// catalogue holds the name, help and behaviour, and this gives them the agent's family shape (a
// gauge for kGauge counters, the unit its name ends with).
constexpr metrics::MetricDef CounterFamily(const counters::CounterInfo& info) {
  const std::string_view name = info.metric;
  const std::string_view base = name.ends_with("_total") ? name.substr(0, name.size() - 6) : name;
  const std::string_view unit = base.ends_with("_bytes")     ? "bytes"
                                : base.ends_with("_seconds") ? "seconds"
                                                             : "";
  return info.behavior == counters::Behavior::kGauge ? metrics::Gauge(name, unit, info.help)
                                                     : metrics::Counter(name, unit, info.help);
}

inline constexpr std::array kRdmaMetrics = {&kInfinibandHwCountersTotal,
                                            &kGpuNicAffinityInfo,
                                            &kRdmaVerbsDevices,
                                            &kRdmaPollsTotal,
                                            &kRdmaFileReadsTotal,
                                            &kRdmaPollDurationSeconds,
                                            &kRdmaLastPollTimestampSeconds,
                                            &kRdmaDevices,
                                            &kInfinibandInfo,
                                            &kInfinibandPortInfo,
                                            &kInfinibandStateId,
                                            &kInfinibandPhysicalStateId,
                                            &kInfinibandRateBytesPerSecond,
                                            &kInfinibandPortSaturated,
                                            &kInfinibandPortClearsTotal,
                                            &kInfinibandPortSaturatedCounters,
                                            &kInfinibandPortUnreadableFiles,
                                            &kInfinibandPortRestricted,
                                            &kInfinibandPortStateTransitionsTotal,
                                            &kInfinibandPortFlapEpisodes,
                                            &kInfinibandFinding,
                                            &kInfinibandActivePorts,
                                            &kInfinibandExpectedActivePorts,
                                            &kInfinibandExpectedRateBytesPerSecond};

}  // namespace ncclscope::rdma
