#pragma once

// The NCCL analytics: everything the agent derives from the profiler plugin's records, behind the
// profiler source's RecordSink interface (agent/profiler/record_sink.h). The model and every
// metric are in docs/analytics.md and docs/metrics.md. Pieces, one file each:
//   comm_registry      communicators, their local ranks, processes and GPUs; the `comm` label cap
//   op_series          ops, bytes, GPU-duration histogram, algorithm and bus bytes per op kind
//   p2p_series         Send/Recv by peer class (same node / other node)
//   kernel_details     NCCL 2.31+: kernel phases, GPU-measured sync wait, user tags, kernel
//   variants network_waits      network bytes, busy time and step-state wait decomposition
//   channel_transport  per-channel bytes and busy time, network vs NVLink
//   arrival_matcher    last arriver and arrival lag across the node's ranks (slow ranks)
//   hang_tracker       progress, in-flight ops and their age, hung ops, last seq per function
//   gpu_index          dcgm-exporter's `gpu` index from the PCI bus id
//   channel_nic        the HCA device and port behind each network channel (QP table join)
//   detection/         compute vs communication, the node's straggler findings, latency against
//                      its baseline (detection/detection.h)
//
// Not thread-safe: the profiler source calls it from its reader thread and renders it under its
// own lock.

#include <chrono>
#include <cstdint>
#include <string>

#include "agent/analytics/arrival_matcher.h"
#include "agent/analytics/channel_nic.h"
#include "agent/analytics/channel_transport.h"
#include "agent/analytics/comm_registry.h"
#include "agent/analytics/detection/detection.h"
#include "agent/analytics/exact_counts.h"
#include "agent/analytics/gpu_index.h"
#include "agent/analytics/kernel_details.h"
#include "agent/analytics/network_waits.h"
#include "agent/analytics/op_series.h"
#include "agent/analytics/p2p_series.h"
#include "agent/core/text_exposition.h"
#include "agent/profiler/record_sink.h"

namespace ncclscope::analytics {

struct AnalyticsSettings {
  std::size_t max_comms = 64;                                        // plugin.max_comms
  std::size_t max_peers = 16;                                        // plugin.max_peers
  std::size_t max_tracked_comms = 4096;                              // plugin.max_tracked_comms
  Clock::duration retention = std::chrono::minutes(10);              // plugin.series_retention
  bool channel_metrics = true;                                       // plugin.channel_metrics
  bool rank_histograms = false;                                      // plugin.rank_histograms
  bool p2p_histograms = false;                                       // plugin.p2p_histograms
  bool intra_node_channels = false;                                  // plugin.intra_node_channels
  std::size_t match_window = 4096;                                   // detection.match_window
  Clock::duration match_timeout = std::chrono::seconds(10);          // detection.match_timeout
  std::chrono::nanoseconds hang_timeout = std::chrono::seconds(60);  // detection.hang_timeout
  std::string sysfs_root = "/sys";                                   // rdma.sysfs_root
  bool nic_lookup = true;  // plugin.qp_table is not "off": name the NIC behind each channel
  detection::DetectionSettings detection;  // the rest of the detection section
};

class NcclAnalytics : public profiler::RecordSink {
 public:
  explicit NcclAnalytics(const AnalyticsSettings& settings = {});

  void Configure(const AnalyticsSettings& settings);

  void OnCommInit(const profiler::RingOrigin& origin,
                  const ncclscope_comm_init_record& record) override;
  void OnCommFinalize(const profiler::RingOrigin& origin,
                      const ncclscope_comm_finalize_record& record) override;
  void OnOp(const profiler::RingOrigin& origin, const profiler::OpView& view) override;
  void OnProxyOp(const profiler::RingOrigin& origin,
                 const ncclscope_proxy_op_record& record) override;
  void OnOpCounts(const profiler::RingOrigin& origin, const profiler::OpCounts& counts) override;

  // At the start of each pass of the reader over the rings, before its records: the live rings'
  // communicator tables (sizes, local ranks, progress; PXN origins).
  void OnCommTables(const std::vector<profiler::LiveComm>& comms) override;
  // After each pass: the records held for a communicator no table listed yet, deferred joins,
  // evictions, expiry of ended communicators.
  void EndPass(Clock::time_point now);
  // The rings the reader holds (RingOrigin::ring_id), before EndPass: their ranks stay theirs.
  void SetLiveRings(const std::vector<std::uint32_t>& ring_ids) {
    registry_.SetLiveRings(ring_ids);
    exact_.KeepRings(ring_ids);
  }

  // Every family, `now_ns` being the host's CLOCK_REALTIME (ages of in-flight ops).
  void Render(metrics::TextWriter& out, std::uint64_t now_ns) const;

  // Channel -> NIC (channel_nic.h): who the rings' writers are, and the kernel's QP table, which
  // the caller dumps when WantsQpRefresh() says so (outside its lock: a dump can take a while)
  // and hands over with OnQpDump().
  void SetHostProcesses(std::shared_ptr<HostProcesses> processes);
  bool WantsQpRefresh() const { return nic_.WantsRefresh(now_); }
  void OnQpDump(const rdma::netlink::QpDump& dump, Clock::time_point now);

  const CommRegistry& registry() const { return registry_; }
  const OpSeries& ops() const { return ops_; }
  const NetworkWaits& network() const { return network_; }
  const ChannelTransport& channels() const { return channels_; }
  const ArrivalMatcher& arrivals() const { return arrivals_; }
  const ChannelNic& nic() const { return nic_; }
  const detection::Detection& detection() const { return detection_; }

 private:
  // Which ring a held record came from, as far as admission goes (CommRegistry::Admit). Records
  // handled at once pass the origin's fields as they are (no copy of the principal per record).
  struct From {
    std::uint32_t ring_id = 0;
    std::string principal;
  };
  void RenderInfo(metrics::TextWriter& out) const;
  void RenderLimits(metrics::TextWriter& out) const;
  // `known`: the record's communicator when the caller has it (else looked up, created when new).
  void Op(const From& from, Comm* known, const profiler::OpView& view);
  // A network record, the ring it came from and, for IB records, the process that wrote its ring
  // (channel_nic.h).
  struct HeldProxy {
    From from;
    ncclscope_proxy_op_record record{};
    RingOwner owner;
  };
  void ProxyOp(std::uint32_t ring_id, std::string_view principal, Comm* known,
               const ncclscope_proxy_op_record& record, const RingOwner& owner);

  // Records of a communicator nothing has described yet (its init record lies in a lane not read
  // yet, or was consumed by an earlier agent) wait for the end of the pass, when the rings' tables
  // say what it is (size, nodes, local ranks). Bounded; beyond, they are taken as they are.
  static constexpr std::size_t kMaxHeld = 4096;
  std::vector<std::pair<From, profiler::OpView>> held_ops_;
  std::vector<HeldProxy> held_proxy_;
  AnalyticsSettings settings_;
  CommRegistry registry_;
  OpSeries ops_;
  ExactCounts exact_;
  KernelDetails details_;
  P2pSeries p2p_;
  NetworkWaits network_;
  ChannelTransport channels_;
  ArrivalMatcher arrivals_;
  PxnResolver pxn_;
  ChannelNic nic_;
  GpuIndex gpus_;
  detection::Detection detection_;
  std::uint64_t pass_ = 1;
  Clock::time_point now_{};  // of the current pass (the arrival matcher's clock)
  Clock::time_point last_expiry_{};
  std::uint64_t unknown_network_ops_ = 0;
};

}  // namespace ncclscope::analytics
