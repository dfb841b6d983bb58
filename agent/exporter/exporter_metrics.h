#pragma once

// The agent's own families (agent/exporter): build, sources, config reloads, scrapes. Each family
// is declared once here (agent/core/metric_def.h) and listed in kExporterMetrics.

#include <array>

#include "agent/core/metric_def.h"

namespace ncclscope {

inline constexpr metrics::MetricDef kBuildInfo = metrics::Gauge(
    "ncclscope_build_info", "",
    "A metric with a constant '1' value labeled by version, revision and compiler of the agent.");
inline constexpr metrics::MetricDef kSourceUp =
    metrics::Gauge("ncclscope_source_up", "",
                   "1 when the source is running and healthy, 0 when it is down or "
                   "disabled (see the agent log for why).");
inline constexpr metrics::MetricDef kSourceEnabled =
    metrics::Gauge("ncclscope_source_enabled", "", "1 when the config enables the source.");
inline constexpr metrics::MetricDef kSourceErrorsTotal = metrics::Counter(
    "ncclscope_source_errors_total", "", "Errors a source met, by kind; the source keeps running.");
inline constexpr metrics::MetricDef kSourceCollectionDurationSeconds =
    metrics::Gauge("ncclscope_source_collection_duration_seconds", "seconds",
                   "Time the source took to render its metrics for this scrape.");
inline constexpr metrics::MetricDef kConfigLastReloadSuccessful =
    metrics::Gauge("ncclscope_config_last_reload_successful", "",
                   "Whether the last configuration reload attempt was successful.");
inline constexpr metrics::MetricDef kConfigLastReloadSuccessTimestampSeconds =
    metrics::Gauge("ncclscope_config_last_reload_success_timestamp_seconds", "seconds",
                   "Timestamp of the last successful configuration load.");
inline constexpr metrics::MetricDef kConfigReloadsTotal = metrics::Counter(
    "ncclscope_config_reloads_total", "", "Configuration reload attempts (SIGHUP), by result.");
inline constexpr metrics::MetricDef kScrapesTotal = metrics::Counter(
    "ncclscope_scrapes_total", "", "Scrapes of the metrics path served, this one included.");
inline constexpr metrics::MetricDef kScrapeDurationSeconds =
    metrics::Gauge("ncclscope_scrape_duration_seconds", "seconds",
                   "Time the previous scrape took to render every family into the response text.");
inline constexpr metrics::MetricDef kScrapeBytes =
    metrics::Gauge("ncclscope_scrape_bytes", "bytes", "Size of the previous scrape's text.");

// The process collector's families, as the Prometheus client libraries name them
// (agent/exporter/process_metrics.cc).
inline constexpr metrics::MetricDef kProcessCpuSecondsTotal = metrics::Counter(
    "process_cpu_seconds_total", "seconds", "Total user and system CPU time spent in seconds.");
inline constexpr metrics::MetricDef kProcessResidentMemoryBytes =
    metrics::Gauge("process_resident_memory_bytes", "bytes", "Resident memory size in bytes.");
inline constexpr metrics::MetricDef kProcessVirtualMemoryBytes =
    metrics::Gauge("process_virtual_memory_bytes", "bytes", "Virtual memory size in bytes.");
inline constexpr metrics::MetricDef kProcessStartTimeSeconds =
    metrics::Gauge("process_start_time_seconds", "seconds",
                   "Start time of the process since unix epoch in seconds.");
inline constexpr metrics::MetricDef kProcessOpenFds =
    metrics::Gauge("process_open_fds", "", "Number of open file descriptors.");
inline constexpr metrics::MetricDef kProcessMaxFds =
    metrics::Gauge("process_max_fds", "", "Maximum number of open file descriptors.");
inline constexpr metrics::MetricDef kProcessVirtualMemoryMaxBytes =
    metrics::Gauge("process_virtual_memory_max_bytes", "bytes",
                   "Maximum amount of virtual memory available in bytes.");

inline constexpr std::array kExporterMetrics = {&kProcessCpuSecondsTotal,
                                                &kProcessResidentMemoryBytes,
                                                &kProcessVirtualMemoryBytes,
                                                &kProcessStartTimeSeconds,
                                                &kProcessOpenFds,
                                                &kProcessMaxFds,
                                                &kProcessVirtualMemoryMaxBytes,
                                                &kBuildInfo,
                                                &kSourceUp,
                                                &kSourceEnabled,
                                                &kSourceErrorsTotal,
                                                &kSourceCollectionDurationSeconds,
                                                &kConfigLastReloadSuccessful,
                                                &kConfigLastReloadSuccessTimestampSeconds,
                                                &kConfigReloadsTotal,
                                                &kScrapesTotal,
                                                &kScrapeDurationSeconds,
                                                &kScrapeBytes};

}  // namespace ncclscope
