#pragma once

// The profiler source's families (agent/profiler): rings, records, plugin counters and the overhead
// governor. Each family is declared once here (agent/core/metric_def.h) and listed in
// kProfilerMetrics.

#include <array>

#include "agent/core/metric_def.h"

namespace ncclscope::profiler {

inline constexpr metrics::MetricDef kNcclPluginOverheadSecondsTotal = metrics::Counter(
    "ncclscope_nccl_plugin_overhead_seconds_total", "seconds",
    "Estimated time the profiler plugins spent inside NCCL's calls, all processes on the "
    "node (every call of 1 op in 256, NCCLSCOPE_OVERHEAD_SAMPLE, is timed and scaled up).");
inline constexpr metrics::MetricDef kNcclPluginGovernorStepsTotal = metrics::Counter(
    "ncclscope_nccl_plugin_governor_steps_total", "",
    "Overhead governor steps of the plugins, by direction: down (a duty cycle lowered "
    "because the plugin's time exceeded plugin.overhead_budget) or up (restored).");
inline constexpr metrics::MetricDef kNcclPluginGovernedProcesses = metrics::Gauge(
    "ncclscope_nccl_plugin_governed_processes", "",
    "Processes whose plugin samples less than its controls ask because it exceeded its "
    "overhead budget, by level: proxy (network steps sampled less or not at all), kernel "
    "(also less GPU timing), floor (both off and still over budget).");
inline constexpr metrics::MetricDef kNcclPluginMaskOverriddenProcesses = metrics::Gauge(
    "ncclscope_nccl_plugin_mask_overridden_processes", "",
    "Live processes whose NCCL event mask NCCL's RAS took over (RAS CONTROL PROFILER_MASK, "
    "NCCL 2.31+): their plugin follows NCCL's mask; duty cycles, the agent's controls and the "
    "overhead governor no longer apply to them.");
inline constexpr metrics::MetricDef kNcclPluginDutyCycleRatio = metrics::Gauge(
    "ncclscope_nccl_plugin_duty_cycle_ratio", "ratio",
    "The lowest duty cycle in force among the node's live processes, after their overhead "
    "governor, by events: kernel_ch (GPU timing) or proxy (network steps).");
inline constexpr metrics::MetricDef kNcclPluginOverheadRatio = metrics::Gauge(
    "ncclscope_nccl_plugin_overhead_ratio", "ratio",
    "The highest plugin time share among the node's live processes in their last governor "
    "window: plugin time / window / local GPUs (compare with plugin.overhead_budget).");
inline constexpr metrics::MetricDef kNcclPluginOpOverheadSeconds = metrics::Gauge(
    "ncclscope_nccl_plugin_op_overhead_seconds", "seconds",
    "The highest mean plugin time per timed operation (its start, stop, kernel channels, "
    "network ops and steps) among the node's live processes in their last governor window.");
inline constexpr metrics::MetricDef kNcclPluginRecordOneIn = metrics::Gauge(
    "ncclscope_nccl_plugin_record_one_in", "",
    "The largest N among the node's live processes that record 1 operation in N "
    "(plugin.record_one_in times the power of two plugin.record_rate_limit asks for); 1: every "
    "operation recorded, the NCCL series exact rather than estimated.");
inline constexpr metrics::MetricDef kNcclRings = metrics::Gauge(
    "ncclscope_nccl_rings", "",
    "Plugin rings in the ring directory (one per process using the plugin), by state: live, "
    "or closed (every communicator finalized, process still running).");
inline constexpr metrics::MetricDef kNcclRingsReclaimedTotal =
    metrics::Counter("ncclscope_nccl_rings_reclaimed_total", "",
                     "Rings of exited processes, drained to the end and deleted.");
inline constexpr metrics::MetricDef kNcclRingsRejectedTotal = metrics::Counter(
    "ncclscope_nccl_rings_rejected_total", "",
    "Ring files that failed validation, by reason (magic, version, format, geometry, size, "
    "sparse, not_regular, open, map), plus rings dropped because their file broke while read "
    "(reason fault).");
inline constexpr metrics::MetricDef kNcclRecordsTotal = metrics::Counter(
    "ncclscope_nccl_records_total", "", "Valid records read from the rings, by type.");
inline constexpr metrics::MetricDef kNcclRecordsCorruptTotal = metrics::Counter(
    "ncclscope_nccl_records_corrupt_total", "",
    "Records skipped because they failed validation, by reason (checksum, position, type, "
    "layout, field, continuation, lane_resync: records skipped after a nonsensical lane "
    "head/tail).");
inline constexpr metrics::MetricDef kNcclRecordsDroppedTotal = metrics::Counter(
    "ncclscope_nccl_records_dropped_total", "",
    "Records the plugins could not write, by reason: ring_full (the agent had not consumed "
    "the lane yet) or lane_busy (every lane tried was being written).");
inline constexpr metrics::MetricDef kNcclRingLimitsTotal = metrics::Counter(
    "ncclscope_nccl_ring_limits_total", "",
    "What the ring reader left out because one of its bounds was reached, by limit: rings "
    "(plugin.max_rings held), opens_per_pass, rejected_names (oldest forgotten), "
    "directory_entries, comm_slots_per_ring, comm_slots_total (docs/trust-model.md).");
inline constexpr metrics::MetricDef kNcclRingMappedBytes =
    metrics::Gauge("ncclscope_nccl_ring_mapped_bytes", "bytes",
                   "Bytes of ring metadata (header, comm table, lanes) the agent maps, "
                   "all rings held; record data is read, never mapped.");
inline constexpr metrics::MetricDef kNcclRingPollWaitSeconds =
    metrics::Gauge("ncclscope_nccl_ring_poll_wait_seconds", "seconds",
                   "How long the ring reader waits after its last pass: plugin.poll_interval "
                   "while records come in fast, up to plugin.poll_interval_max while the lanes "
                   "are nearly empty (the NCCL series can be that much older than the scrape).");
inline constexpr metrics::MetricDef kNcclControlsFileRepairsTotal = metrics::Counter(
    "ncclscope_nccl_controls_file_repairs_total", "",
    "Times <ring_dir>/ncclscope.controls was found changed, replaced or removed by someone "
    "else, and rewritten.");
inline constexpr metrics::MetricDef kNcclPluginEventsTotal = metrics::Counter(
    "ncclscope_nccl_plugin_events_total", "",
    "Plugin-side event outcomes other than recording, by event (see docs/metrics.md).");

inline constexpr std::array kProfilerMetrics = {&kNcclPluginOverheadSecondsTotal,
                                                &kNcclPluginGovernorStepsTotal,
                                                &kNcclPluginGovernedProcesses,
                                                &kNcclPluginMaskOverriddenProcesses,
                                                &kNcclPluginDutyCycleRatio,
                                                &kNcclPluginOverheadRatio,
                                                &kNcclPluginOpOverheadSeconds,
                                                &kNcclPluginRecordOneIn,
                                                &kNcclRings,
                                                &kNcclRingsReclaimedTotal,
                                                &kNcclRingsRejectedTotal,
                                                &kNcclRecordsTotal,
                                                &kNcclRecordsCorruptTotal,
                                                &kNcclRecordsDroppedTotal,
                                                &kNcclRingLimitsTotal,
                                                &kNcclRingMappedBytes,
                                                &kNcclRingPollWaitSeconds,
                                                &kNcclControlsFileRepairsTotal,
                                                &kNcclPluginEventsTotal};

}  // namespace ncclscope::profiler
