#pragma once

// The NCCL analytics' families (agent/analytics): per-rank operations, latency, bandwidth, arrival
// lag, channels, network waits, hangs. Each family is declared once here (agent/core/metric_def.h)
// and listed in kAnalyticsMetrics.

#include <array>

#include "agent/core/metric_def.h"

namespace ncclscope::analytics {

inline constexpr metrics::MetricDef kNcclCollMatchedTotal =
    metrics::Counter("ncclscope_nccl_coll_matched_total", "",
                     "Collectives matched across every local rank of the communicator on this node "
                     "(by comm, func and seq), the denominator of the last-arriver fraction.");
inline constexpr metrics::MetricDef kNcclCollLastArrivalsTotal = metrics::Counter(
    "ncclscope_nccl_coll_last_arrivals_total", "",
    "Matched collectives this rank arrived at last among the node's ranks: the others "
    "waited inside the collective for it.");
inline constexpr metrics::MetricDef kNcclCollLastArrivalDelaySecondsTotal = metrics::Counter(
    "ncclscope_nccl_coll_last_arrival_delay_seconds_total", "seconds",
    "For the collectives this rank arrived at last: how much later than the second-last "
    "local rank, summed.");
inline constexpr metrics::MetricDef kNcclCollArrivalLagSecondsTotal = metrics::Counter(
    "ncclscope_nccl_coll_arrival_lag_seconds_total", "seconds",
    "How long after the node's first rank this rank arrived at matched collectives "
    "(kernel start on the GPU, one clock for the node), summed; over "
    "ncclscope_nccl_coll_matched_total, its mean lag.");
inline constexpr metrics::MetricDef kNcclCollArrivalLagSeconds = metrics::Histogram(
    "ncclscope_nccl_coll_arrival_lag_seconds", "seconds",
    "Per matched collective, how long after the node's first rank this rank arrived "
    "(kernel start on the GPU, one clock for the node); with plugin.rank_histograms.");
inline constexpr metrics::MetricDef kNcclCollLeastSyncWaitsTotal = metrics::Counter(
    "ncclscope_nccl_coll_least_sync_waits_total", "",
    "Matched collectives (NCCL 2.31+ symmetric kernels with kernel phases) in which this rank's "
    "kernel waited least at the opening barrier, measured on the GPU: the others waited for it. "
    "The GPU's own witness beside ncclscope_nccl_coll_last_arrivals_total.");
inline constexpr metrics::MetricDef kNcclCollWitnessDisagreementsTotal = metrics::Counter(
    "ncclscope_nccl_coll_witness_disagreements_total", "",
    "Matched collectives whose last arriver (kernel start) and least barrier wait (GPU-measured "
    "initial_sync) name different ranks; the detectors then follow the barrier wait.");
inline constexpr metrics::MetricDef kNcclKernelPhaseOpsTotal =
    metrics::Counter("ncclscope_nccl_kernel_phase_ops_total", "",
                     "Operations whose kernel reported phases (NCCL 2.31+, profiler ABI v7).");
inline constexpr metrics::MetricDef kNcclKernelPhaseSecondsTotal = metrics::Counter(
    "ncclscope_nccl_kernel_phase_seconds_total", "seconds",
    "GPU time of each kernel phase (initial_sync, compute, final_sync): per operation the mean "
    "over its channels that reported the phase, summed. Over "
    "ncclscope_nccl_kernel_phase_ops_total, the mean per operation.");
inline constexpr metrics::MetricDef kNcclSyncWaitOpsTotal = metrics::Counter(
    "ncclscope_nccl_sync_wait_ops_total", "",
    "Symmetric-memory operations (NCCL 2.31+) that reported their initial_sync phase.");
inline constexpr metrics::MetricDef kNcclSyncWaitSecondsTotal = metrics::Counter(
    "ncclscope_nccl_sync_wait_seconds_total", "seconds",
    "GPU-measured time the rank's symmetric kernels waited at their opening barrier for the "
    "other ranks (the initial_sync phase, mean over channels, summed over operations). Regular "
    "kernels' initial_sync is no peer wait and is not in it.");
inline constexpr metrics::MetricDef kNcclUserTagOpsTotal = metrics::Counter(
    "ncclscope_nccl_user_tag_ops_total", "",
    "Operations per user tag (NCCL 2.31+ ncclCollConfig_t.userProfilerTag; untagged ones are not "
    "counted here); a communicator's first 16 tags are values of their own, the rest \"other\".");
inline constexpr metrics::MetricDef kNcclUserTagGpuSecondsTotal =
    metrics::Counter("ncclscope_nccl_user_tag_gpu_seconds_total", "seconds",
                     "GPU time of the operations with GPU timing, per user tag.");
inline constexpr metrics::MetricDef kNcclKernelVariantOpsTotal = metrics::Counter(
    "ncclscope_nccl_kernel_variant_ops_total", "",
    "Symmetric-memory operations (NCCL 2.31+) per kernel variant, as NCCL names it "
    "(AllReduce_AGxLL_R, ...; \"other\" for a variant this agent does not know).");
inline constexpr metrics::MetricDef kNcclCollWaitSecondsTotal =
    metrics::Counter("ncclscope_nccl_coll_wait_seconds_total", "seconds",
                     "Time this rank waited inside matched collectives for the node's last arriver "
                     "(latest local arrival minus its own), summed.");
inline constexpr metrics::MetricDef kNcclCollMatchEvictionsTotal = metrics::Counter(
    "ncclscope_nccl_coll_match_evictions_total", "",
    "Collectives given up before every local rank's record arrived: incomplete (waited "
    "detection.match_timeout: a record dropped, or the collective hangs) or capacity "
    "(detection.match_window instances were waiting).");
inline constexpr metrics::MetricDef kNcclCollMatchPending =
    metrics::Gauge("ncclscope_nccl_coll_match_pending", "",
                   "Collectives waiting for the rest of the node's ranks.");
inline constexpr metrics::MetricDef kNcclNetworkOpsByNetTypeTotal = metrics::Counter(
    "ncclscope_nccl_network_ops_by_net_type_total", "",
    "Network proxy operations by the net-plugin events NCCL sent with them: ib (NCCL's "
    "IB transport: QP numbers), socket (NCCL's socket transport), other (an external "
    "net plugin's own events), none (no net-plugin events).");
inline constexpr metrics::MetricDef kNcclChannelNicInfo = metrics::Gauge(
    "ncclscope_nccl_channel_nic_info", "",
    "Constant 1 for each HCA device and port a network channel of a rank used (from the "
    "QPs of NCCL's IB net-plugin events and the kernel's QP table): join on device, port "
    "with the InfiniBand port metrics.");
inline constexpr metrics::MetricDef kNcclChannelNicLookupsTotal = metrics::Counter(
    "ncclscope_nccl_channel_nic_lookups_total", "",
    "QP numbers of IB network operations looked up in the QP table, resolved or failed "
    "(counted when decided).");
inline constexpr metrics::MetricDef kNcclChannelNicLookupFailuresTotal = metrics::Counter(
    "ncclscope_nccl_channel_nic_lookup_failures_total", "",
    "Lookups that named no NIC, by reason: owner_unknown, owner_ambiguous (the ring's "
    "writer process), qp_table_unavailable, qp_not_found, qp_ambiguous, no_qp, limit.");
inline constexpr metrics::MetricDef kNcclQpTableRefreshesTotal = metrics::Counter(
    "ncclscope_nccl_qp_table_refreshes_total", "",
    "Dumps of the kernel's QP table (rdma netlink), by result: ok, unsupported (no rdma "
    "netlink in this kernel), error.");
inline constexpr metrics::MetricDef kNcclQpTableQps = metrics::Gauge(
    "ncclscope_nccl_qp_table_qps", "", "QPs of user processes with a port in the latest QP table.");
inline constexpr metrics::MetricDef kNcclQpTableSkippedTotal = metrics::Counter(
    "ncclscope_nccl_qp_table_skipped_total", "",
    "QP table entries and netlink messages not used, by reason (summed over dumps).");
inline constexpr metrics::MetricDef kNcclChannelGpuBusySecondsTotal =
    metrics::Counter("ncclscope_nccl_channel_gpu_busy_seconds_total", "seconds",
                     "GPU time of each channel (KernelCh start to stop, summed over operations).");
inline constexpr metrics::MetricDef kNcclChannelBytesTotal = metrics::Counter(
    "ncclscope_nccl_channel_bytes_total", "bytes",
    "Bytes each channel sent, by transport: network (its network steps) or nvlink (the "
    "rest of its share of the operation's bus bytes: NVLink, PCIe P2P or shared memory). "
    "Single-node communicators and operations with network steps recorded.");
inline constexpr metrics::MetricDef kNcclChannelBusySecondsTotal = metrics::Counter(
    "ncclscope_nccl_channel_busy_seconds_total", "seconds",
    "Time each channel was busy sending by transport: network steps' start-to-end "
    "window, or the channel's GPU time for intra-node bytes. Bytes over this is the "
    "channel's NVLink or network bandwidth.");
inline constexpr metrics::MetricDef kNcclChannelAttributionTotal = metrics::Counter(
    "ncclscope_nccl_channel_attribution_total", "",
    "Operations with GPU timing by how their channels' bytes were attributed: intra_node "
    "(single-node communicator), split (network steps joined), unsampled (no network "
    "steps recorded: GPU time only), overflow (join window full); late_network counts "
    "network records that found no operation to join.");
inline constexpr metrics::MetricDef kNcclOpsInFlight =
    metrics::Gauge("ncclscope_nccl_ops_in_flight", "",
                   "Operations enqueued on the communicator rank and not yet completed.");
inline constexpr metrics::MetricDef kNcclLastOpCompletionTimestampSeconds =
    metrics::Gauge("ncclscope_nccl_last_op_completion_timestamp_seconds", "seconds",
                   "Host time the communicator rank last completed an operation (0: none yet): its "
                   "last progress.");
inline constexpr metrics::MetricDef kNcclOldestInFlightOpAgeSeconds = metrics::Gauge(
    "ncclscope_nccl_oldest_in_flight_op_age_seconds", "seconds",
    "How long the oldest operation in flight on the communicator rank has been enqueued "
    "(0 when none), computed at scrape time.");
inline constexpr metrics::MetricDef kNcclOpsHung = metrics::Gauge(
    "ncclscope_nccl_ops_hung", "",
    "Operations in flight for longer than detection.hang_timeout on the communicator "
    "rank. The series exists only while there is one.");
inline constexpr metrics::MetricDef kNcclCommInfo = metrics::Gauge(
    "ncclscope_nccl_comm_info", "",
    "Constant 1 for each live communicator rank on this node: its name (the framework's "
    "parallelism group), size, local rank, process and GPU, for joins with "
    "dcgm-exporter (gpu, UUID, pci_bus_id) and grouping by parallelism group. "
    "namespace, pod and container are the agent's own finding (the ring lock holder's "
    "cgroup; attribution=\"verified\"); pid, process_hostname, job_id and the GPU "
    "fields are what the plugin claims.");
inline constexpr metrics::MetricDef kNcclCommEndTimestampSeconds = metrics::Gauge(
    "ncclscope_nccl_comm_end_timestamp_seconds", "seconds",
    "When the job of a communicator rank that ran on this node ended (no live ring listed it "
    "any more), Unix seconds, with comm_info's identity labels: kept while its series are "
    "(plugin.series_retention), so the node page shows the last finished jobs.");
inline constexpr metrics::MetricDef kNcclRecordsForeignTotal = metrics::Counter(
    "ncclscope_nccl_records_foreign_total", "",
    "Records and table slots refused because they would add to or rewrite what another "
    "tenant owns: foreign_comm (a communicator another principal, Kubernetes namespace or "
    "file owner, named first), foreign_rank (a communicator rank another live ring "
    "writes).");
inline constexpr metrics::MetricDef kNcclAnalyticsLimitsTotal = metrics::Counter(
    "ncclscope_nccl_analytics_limits_total", "",
    "What the NCCL analytics refused or forgot to stay bounded, by limit: rank_range "
    "(rank outside the communicator), ranks_per_comm, ranks_per_ring, comms_evicted "
    "(plugin.max_tracked_comms), series_<group> (label sets beyond a group's row cap).");
inline constexpr metrics::MetricDef kNcclCommsTracked =
    metrics::Gauge("ncclscope_nccl_comms_tracked", "",
                   "Communicator ids the analytics track (labelled or not), at most "
                   "plugin.max_tracked_comms.");
inline constexpr metrics::MetricDef kNcclComms =
    metrics::Gauge("ncclscope_nccl_comms", "",
                   "Communicator ids that have their own comm label (at most plugin.max_comms).");
inline constexpr metrics::MetricDef kNcclCommsOverLimitTotal =
    metrics::Counter("ncclscope_nccl_comms_over_limit_total", "",
                     "Communicators beyond plugin.max_comms, whose records are aggregated under "
                     "comm=\"other\".");
inline constexpr metrics::MetricDef kNcclPeersOverLimitTotal = metrics::Counter(
    "ncclscope_nccl_peers_over_limit_total", "",
    "Network peers beyond plugin.max_peers of a communicator rank, whose per-channel "
    "series are aggregated under peer=\"other\".");
inline constexpr metrics::MetricDef kNcclNetworkOpsUnattributedTotal = metrics::Counter(
    "ncclscope_nccl_network_ops_unattributed_total", "",
    "Network operations raised for another process (PXN) whose communicator no live "
    "ring's table names; counted under comm=\"unknown\".");
inline constexpr metrics::MetricDef kNcclAnalyticsSeries = metrics::Gauge(
    "ncclscope_nccl_analytics_series", "",
    "Label sets the NCCL analytics hold, by group (each renders into several series).");
inline constexpr metrics::MetricDef kNcclNetworkOpsTotal = metrics::Counter(
    "ncclscope_nccl_network_ops_total", "",
    "Network proxy operations (one channel, one peer, one direction) recorded while "
    "ProxyOp events were on.");
inline constexpr metrics::MetricDef kNcclNetworkBytesTotal =
    metrics::Counter("ncclscope_nccl_network_bytes_total", "bytes",
                     "Bytes the network proxy operations transferred.");
inline constexpr metrics::MetricDef kNcclNetworkStepStateSecondsTotal = metrics::Counter(
    "ncclscope_nccl_network_step_state_seconds_total", "seconds",
    "Time network steps spent in each state (send_gpu_wait, send_peer_wait, send_wait, "
    "recv_wait, recv_flush_wait, recv_gpu_wait), summed over steps.");
inline constexpr metrics::MetricDef kNcclChannelNetworkBytesTotal =
    metrics::Counter("ncclscope_nccl_channel_network_bytes_total", "bytes",
                     "Bytes of the network operations, per channel and peer rank.");
inline constexpr metrics::MetricDef kNcclChannelNetworkBusySecondsTotal = metrics::Counter(
    "ncclscope_nccl_channel_network_busy_seconds_total", "seconds",
    "Time the network operations of a channel and peer were in progress (start to end, "
    "summed): bytes over this is the channel's effective network bandwidth.");
inline constexpr metrics::MetricDef kNcclChannelStepStateSecondsTotal = metrics::Counter(
    "ncclscope_nccl_channel_step_state_seconds_total", "seconds",
    "Wait decomposition of network steps per channel and peer: time in each step state "
    "(GPU wait: send_gpu_wait, recv_flush_wait, recv_gpu_wait; peer credit wait: "
    "send_peer_wait; network wait: send_wait, recv_wait), summed over steps.");
inline constexpr metrics::MetricDef kNcclOpsTotal = metrics::Counter(
    "ncclscope_nccl_ops_total", "",
    "Completed NCCL operations recorded by the profiler plugin, by communicator, rank, "
    "function, algorithm, protocol and message-size bucket.");
inline constexpr metrics::MetricDef kNcclOpBytesTotal = metrics::Counter(
    "ncclscope_nccl_op_bytes_total", "bytes",
    "Message bytes of the completed operations (count x datatype size, per rank).");
inline constexpr metrics::MetricDef kNcclOpsTimedTotal = metrics::Counter(
    "ncclscope_nccl_ops_timed_total", "",
    "Completed operations with GPU timing (KernelCh timestamps; see the kernel duty "
    "cycle).");
inline constexpr metrics::MetricDef kNcclOpGpuSecondsTotal = metrics::Counter(
    "ncclscope_nccl_op_gpu_seconds_total", "seconds",
    "GPU execution time of the timed operations (latest channel end minus earliest "
    "channel start): over ncclscope_nccl_ops_timed_total the rank's mean time inside.");
inline constexpr metrics::MetricDef kNcclOpGpuDurationSeconds = metrics::Histogram(
    "ncclscope_nccl_op_gpu_duration_seconds", "seconds",
    "GPU execution time of completed operations with GPU timing, the node's ranks of "
    "the communicator together (per rank with plugin.rank_histograms); collectives, and "
    "Send/Recv with plugin.p2p_histograms.");
inline constexpr metrics::MetricDef kNcclOpAlgoBytesTotal = metrics::Counter(
    "ncclscope_nccl_op_algo_bytes_total", "bytes",
    "nccl-tests algorithm bytes (S) of the operations with GPU timing: divided by their "
    "GPU time (ncclscope_nccl_op_gpu_seconds_total) it is the algorithm bandwidth.");
inline constexpr metrics::MetricDef kNcclOpBusBytesTotal = metrics::Counter(
    "ncclscope_nccl_op_bus_bytes_total", "bytes",
    "nccl-tests bus bytes (S x the function's factor for nranks) of the operations with "
    "GPU timing: divided by their GPU time it is the bus bandwidth.");
inline constexpr metrics::MetricDef kNcclP2pOpsTotal = metrics::Counter(
    "ncclscope_nccl_p2p_ops_total", "",
    "Completed Send/Recv operations (AlltoAll, Gather and Scatter included, which NCCL "
    "runs as per-peer Send/Recv) by peer class: same_node, other_node or self.");
inline constexpr metrics::MetricDef kNcclP2pBytesTotal = metrics::Counter(
    "ncclscope_nccl_p2p_bytes_total", "bytes", "Message bytes of those operations.");
inline constexpr metrics::MetricDef kNcclP2pGpuSecondsTotal =
    metrics::Counter("ncclscope_nccl_p2p_gpu_seconds_total", "seconds",
                     "GPU time of those operations that had GPU timing.");
inline constexpr metrics::MetricDef kNcclP2pBusBytesTotal = metrics::Counter(
    "ncclscope_nccl_p2p_bus_bytes_total", "bytes",
    "Bytes of the operations with GPU timing (bus bytes: factor 1): divided by "
    "ncclscope_nccl_p2p_gpu_seconds_total it is the p2p bandwidth per peer class.");
inline constexpr metrics::MetricDef kNcclLastEnqueuedSeq =
    metrics::Gauge("ncclscope_nccl_last_enqueued_seq", "",
                   "Highest NCCL seqNumber the rank enqueued per collective function (equal across "
                   "the ranks of a communicator when they are in step).");
inline constexpr metrics::MetricDef kNcclLastCompletedSeq =
    metrics::Gauge("ncclscope_nccl_last_completed_seq", "",
                   "Highest NCCL seqNumber the rank completed per collective function, while an "
                   "operation of the rank is hung (past detection.hang_timeout).");

inline constexpr std::array kAnalyticsMetrics = {&kNcclCollLeastSyncWaitsTotal,
                                                 &kNcclCollWitnessDisagreementsTotal,
                                                 &kNcclKernelPhaseOpsTotal,
                                                 &kNcclKernelPhaseSecondsTotal,
                                                 &kNcclSyncWaitOpsTotal,
                                                 &kNcclSyncWaitSecondsTotal,
                                                 &kNcclUserTagOpsTotal,
                                                 &kNcclUserTagGpuSecondsTotal,
                                                 &kNcclKernelVariantOpsTotal,
                                                 &kNcclLastEnqueuedSeq,
                                                 &kNcclLastCompletedSeq,
                                                 &kNcclCollMatchedTotal,
                                                 &kNcclCollLastArrivalsTotal,
                                                 &kNcclCollLastArrivalDelaySecondsTotal,
                                                 &kNcclCollArrivalLagSecondsTotal,
                                                 &kNcclCollArrivalLagSeconds,
                                                 &kNcclCollWaitSecondsTotal,
                                                 &kNcclCollMatchEvictionsTotal,
                                                 &kNcclCollMatchPending,
                                                 &kNcclNetworkOpsByNetTypeTotal,
                                                 &kNcclChannelNicInfo,
                                                 &kNcclChannelNicLookupsTotal,
                                                 &kNcclChannelNicLookupFailuresTotal,
                                                 &kNcclQpTableRefreshesTotal,
                                                 &kNcclQpTableQps,
                                                 &kNcclQpTableSkippedTotal,
                                                 &kNcclChannelGpuBusySecondsTotal,
                                                 &kNcclChannelBytesTotal,
                                                 &kNcclChannelBusySecondsTotal,
                                                 &kNcclChannelAttributionTotal,
                                                 &kNcclOpsInFlight,
                                                 &kNcclLastOpCompletionTimestampSeconds,
                                                 &kNcclOldestInFlightOpAgeSeconds,
                                                 &kNcclOpsHung,
                                                 &kNcclCommInfo,
                                                 &kNcclCommEndTimestampSeconds,
                                                 &kNcclRecordsForeignTotal,
                                                 &kNcclAnalyticsLimitsTotal,
                                                 &kNcclCommsTracked,
                                                 &kNcclComms,
                                                 &kNcclCommsOverLimitTotal,
                                                 &kNcclPeersOverLimitTotal,
                                                 &kNcclNetworkOpsUnattributedTotal,
                                                 &kNcclAnalyticsSeries,
                                                 &kNcclNetworkOpsTotal,
                                                 &kNcclNetworkBytesTotal,
                                                 &kNcclNetworkStepStateSecondsTotal,
                                                 &kNcclChannelNetworkBytesTotal,
                                                 &kNcclChannelNetworkBusySecondsTotal,
                                                 &kNcclChannelStepStateSecondsTotal,
                                                 &kNcclOpsTotal,
                                                 &kNcclOpBytesTotal,
                                                 &kNcclOpsTimedTotal,
                                                 &kNcclOpGpuSecondsTotal,
                                                 &kNcclOpGpuDurationSeconds,
                                                 &kNcclOpAlgoBytesTotal,
                                                 &kNcclOpBusBytesTotal,
                                                 &kNcclP2pOpsTotal,
                                                 &kNcclP2pBytesTotal,
                                                 &kNcclP2pGpuSecondsTotal,
                                                 &kNcclP2pBusBytesTotal};

}  // namespace ncclscope::analytics
