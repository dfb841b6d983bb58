#pragma once

// The detectors' families (agent/analytics/detection): latency baselines, stragglers, the GPU
// timeline. Each family is declared once here (agent/core/metric_def.h) and listed in
// kDetectionMetrics.

#include <array>

#include "agent/core/metric_def.h"

namespace ncclscope::analytics::detection {

inline constexpr metrics::MetricDef kNcclRankComputeSecondsTotal = metrics::Counter(
    "ncclscope_nccl_rank_compute_seconds_total", "seconds",
    "Time the rank's GPU was outside NCCL (computing, or idle) right before this "
    "communicator's operations: each gap since the end of its previous NCCL operation "
    "(of any communicator), counted for the operation that ends it. Only gaps between "
    "two operations with GPU timing, each under a minute.");
inline constexpr metrics::MetricDef kNcclRankPauseSecondsTotal = metrics::Counter(
    "ncclscope_nccl_rank_pause_seconds_total", "seconds",
    "Of ncclscope_nccl_rank_compute_seconds_total, the gaps of a second or more (a "
    "checkpoint, an evaluation, a host stall): each is counted at once when it ends, so the "
    "slow-rank verdict compares compute without them over 30 s, and them over 5 minutes. "
    "Only for ranks that paused: the first pause starts the series at 0 and is counted in "
    "neither.");
inline constexpr metrics::MetricDef kNcclRankCommunicationSecondsTotal = metrics::Counter(
    "ncclscope_nccl_rank_communication_seconds_total", "seconds",
    "Time the rank's GPU was inside this communicator's operations with GPU timing, "
    "overlaps with the GPU's other NCCL operations counted once: with "
    "ncclscope_nccl_rank_compute_seconds_total, the communication share of its time.");
inline constexpr metrics::MetricDef kNcclOpLatencyBaselineRatio = metrics::Histogram(
    "ncclscope_nccl_op_latency_baseline_ratio", "ratio",
    "GPU time of completed collectives divided by the usual P99 of their stable key "
    "(communicator name, nranks, nnodes, rank, func, algo, proto, size bucket; kept in "
    "detection.state_dir across restarts): P99 of this over 2 = P99 latency over twice "
    "its baseline.");
inline constexpr metrics::MetricDef kNcclOpLatencyUnbaselinedTotal = metrics::Counter(
    "ncclscope_nccl_op_latency_unbaselined_total", "",
    "Completed collectives with GPU timing whose key had no latency baseline yet (its "
    "first learning window), so not in ncclscope_nccl_op_latency_baseline_ratio.");
inline constexpr metrics::MetricDef kNcclBaselines =
    metrics::Gauge("ncclscope_nccl_baselines", "",
                   "Latency baselines held (at most detection.baseline_max_keys).");
inline constexpr metrics::MetricDef kNcclBaselinesLoaded =
    metrics::Gauge("ncclscope_nccl_baselines_loaded", "",
                   "Latency baselines read from detection.state_dir when the agent started.");
inline constexpr metrics::MetricDef kNcclBaselineEvictionsTotal =
    metrics::Counter("ncclscope_nccl_baseline_evictions_total", "",
                     "Latency baselines dropped to stay within detection.baseline_max_keys (least "
                     "recently seen first).");
inline constexpr metrics::MetricDef kNcclBaselineStoreErrorsTotal = metrics::Counter(
    "ncclscope_nccl_baseline_store_errors_total", "",
    "Failures of the baseline file in detection.state_dir: on load (unreadable, "
    "too_large, corrupt: the agent starts without baselines) and on save (write).");
inline constexpr metrics::MetricDef kNcclStragglerCusumSeconds = metrics::Gauge(
    "ncclscope_nccl_straggler_cusum_seconds", "seconds",
    "The node's straggler CUSUM of the communicator rank: excess seconds the node's "
    "other ranks waited for it beyond detection.straggler_min_cost / 2 of the wall "
    "time, accumulated per second (capped at twice detection.straggler_threshold). The "
    "series exists only while it is above 0.");
inline constexpr metrics::MetricDef kNcclRankFinding =
    metrics::Gauge("ncclscope_nccl_rank_finding", "",
                   "1 while the detector holds a finding on the communicator rank: straggler = the "
                   "node's other ranks keep waiting for it (its CUSUM reached "
                   "detection.straggler_threshold, until it falls under half of it). The series "
                   "exists only while the finding holds.");
inline constexpr metrics::MetricDef kNcclStragglerAlarmsTotal = metrics::Counter(
    "ncclscope_nccl_straggler_alarms_total", "",
    "Times the straggler finding of the communicator rank turned on; a series from the "
    "first time on.");

inline constexpr std::array kDetectionMetrics = {&kNcclRankComputeSecondsTotal,
                                                 &kNcclRankPauseSecondsTotal,
                                                 &kNcclRankCommunicationSecondsTotal,
                                                 &kNcclOpLatencyBaselineRatio,
                                                 &kNcclOpLatencyUnbaselinedTotal,
                                                 &kNcclBaselines,
                                                 &kNcclBaselinesLoaded,
                                                 &kNcclBaselineEvictionsTotal,
                                                 &kNcclBaselineStoreErrorsTotal,
                                                 &kNcclStragglerCusumSeconds,
                                                 &kNcclRankFinding,
                                                 &kNcclStragglerAlarmsTotal};

}  // namespace ncclscope::analytics::detection
