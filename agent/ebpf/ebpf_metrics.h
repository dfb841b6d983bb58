#pragma once

// The eBPF source's families (agent/ebpf): NCCL and libibverbs calls seen by the uprobes, and the
// probes' own health. Each family is declared once here (agent/core/metric_def.h) and listed in
// kEbpfMetrics.

#include <array>

#include "agent/core/metric_def.h"

namespace ncclscope::ebpf {

inline constexpr metrics::MetricDef kEbpfNcclCallsTotal = metrics::Counter(
    "ncclscope_ebpf_nccl_calls_total", "", "NCCL API calls made by applications, by function.");
inline constexpr metrics::MetricDef kEbpfNcclBytesTotal = metrics::Counter(
    "ncclscope_ebpf_nccl_bytes_total", "bytes",
    "Bytes named by NCCL collective and point-to-point calls (count x datatype size).");
inline constexpr metrics::MetricDef kEbpfNcclErrorsTotal = metrics::Counter(
    "ncclscope_ebpf_nccl_errors_total", "", "NCCL API calls that returned an error, by result.");
inline constexpr metrics::MetricDef kEbpfIbvCallsTotal = metrics::Counter(
    "ncclscope_ebpf_ibv_calls_total", "", "libibverbs control-path calls, by function.");
inline constexpr metrics::MetricDef kEbpfIbvRegisteredBytesTotal =
    metrics::Counter("ncclscope_ebpf_ibv_registered_bytes_total", "bytes",
                     "Bytes of memory regions successfully registered.");
inline constexpr metrics::MetricDef kEbpfIbvErrorsTotal = metrics::Counter(
    "ncclscope_ebpf_ibv_errors_total", "", "libibverbs control-path calls that failed, by result.");
inline constexpr metrics::MetricDef kEbpfIbvQpTransitionsTotal =
    metrics::Counter("ncclscope_ebpf_ibv_qp_transitions_total", "",
                     "Successful ibv_modify_qp state changes, by target state.");
inline constexpr metrics::MetricDef kEbpfNcclCommunicatorAbortsTotal =
    metrics::Counter("ncclscope_ebpf_nccl_communicator_aborts_total", "",
                     "ncclCommAbort calls (communicators torn down after an error).");
inline constexpr metrics::MetricDef kEbpfNcclCommunicators =
    metrics::Gauge("ncclscope_ebpf_nccl_communicators", "",
                   "Live NCCL communicators per process, by size and rank.");
inline constexpr metrics::MetricDef kEbpfUncoveredProcesses = metrics::Gauge(
    "ncclscope_ebpf_uncovered_processes", "",
    "Processes using NCCL (a communicator or an NCCL call seen) that hold no profiler ring, by "
    "reason. Every reason of a pod using NCCL is written, 0 when none.");
inline constexpr metrics::MetricDef kEbpfNcclProcessInfo = metrics::Gauge(
    "ncclscope_ebpf_nccl_process_info", "",
    "1 per process using NCCL: the NCCL version its library file carries and how the profiler "
    "plugin covers it (v1..v7: the ABI NCCL chose, else why not).");
inline constexpr metrics::MetricDef kEbpfAttachedFiles =
    metrics::Gauge("ncclscope_ebpf_attached_files", "",
                   "Distinct library files (real inodes) with probes attached.");
inline constexpr metrics::MetricDef kEbpfAttachedProbes =
    metrics::Gauge("ncclscope_ebpf_attached_probes", "", "Uprobe and uretprobe links attached.");
inline constexpr metrics::MetricDef kEbpfProcesses = metrics::Gauge(
    "ncclscope_ebpf_processes", "", "Processes mapping a library file with probes attached.");
inline constexpr metrics::MetricDef kEbpfAttachFailuresTotal =
    metrics::Counter("ncclscope_ebpf_attach_failures_total", "",
                     "Library files that could not be attached (reason in the log).");
inline constexpr metrics::MetricDef kEbpfProcessScansTotal =
    metrics::Counter("ncclscope_ebpf_process_scans_total", "",
                     "Reads of /proc/<pid>/maps looking for the libraries.");
inline constexpr metrics::MetricDef kEbpfDroppedTotal = metrics::Counter(
    "ncclscope_ebpf_dropped_total", "", "Things the eBPF source had to drop, by reason.");

inline constexpr std::array kEbpfMetrics = {&kEbpfNcclCallsTotal,
                                            &kEbpfNcclBytesTotal,
                                            &kEbpfNcclErrorsTotal,
                                            &kEbpfIbvCallsTotal,
                                            &kEbpfIbvRegisteredBytesTotal,
                                            &kEbpfIbvErrorsTotal,
                                            &kEbpfIbvQpTransitionsTotal,
                                            &kEbpfNcclCommunicatorAbortsTotal,
                                            &kEbpfNcclCommunicators,
                                            &kEbpfUncoveredProcesses,
                                            &kEbpfNcclProcessInfo,
                                            &kEbpfAttachedFiles,
                                            &kEbpfAttachedProbes,
                                            &kEbpfProcesses,
                                            &kEbpfAttachFailuresTotal,
                                            &kEbpfProcessScansTotal,
                                            &kEbpfDroppedTotal};

}  // namespace ncclscope::ebpf
