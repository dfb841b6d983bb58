#pragma once

// Channel -> NIC: the HCA device and port behind each network channel of each rank, so a slow
// channel leads to the port whose counters (the rdma source's, node_exporter's) explain it.
//
// The chain, each link from the source that knows it:
//   1. NCCL's IB transport reports every work request it posts as a net-plugin profiler event
//      whose descriptor (ncclProfilerNetIbDescr_v1_t, src/include/plugin/profiler/net_ib_v1.h)
//      carries the QP number it was posted on: v2.28.9-1 src/transport/net_ib.cc:2162-2167 (send:
//      qp.device = devIndex, qp.qpNum = qp->qp->qp_num) and :2405-2409 (recv); v2.27.7-1
//      net_ib.cc:2083/:2326; v2.29.7-1 src/transport/net_ib/p2p.cc:215/:464; v2.30.7-1 p2p.cc:210/
//      :484. The plugin folds them into each PROXY_OP record: net_type, net_dev_index and the first
//      two distinct qp_num (plugin/ring/ncclscope_ring.h). qp.device is devIndex, an index into the
//      communicator's (possibly merged) virtual device, not an HCA: useless to name one.
//   2. The QP was created by the process that wrote the ring (NCCL creates QPs in connect/accept,
//      net_ib.cc:1442/:1801, run by the proxy service thread, src/proxy.cc:1492 and :1878; PXN
//      proxy ops come from the ring of the process whose proxy posts them). The ring header's pid
//      is in the writer's own pid namespace; HostProcesses names the host process (the holder of
//      the ring's flock, agent/profiler/ring_owner.h).
//   3. The kernel's QP table (rdma netlink, rdma/netlink/qp_table.h) lists every QP with its
//      device, port and creating task; the task is a thread, mapped to its process.
// So (comm, rank, channel, direction) -> (host process, QP number) -> (device, port), exactly, for
// the physical device even behind a merged NIC (where a channel's QPs span several devices and the
// channel gets several series).
//
// The QP table is refreshed only when a record names a QP the table does not know, at most every
// refresh_interval (a dump costs the kernel a query per QP on the node); a QP still unknown after a
// refresh is remembered as not found for negative_ttl. Until the refresh, its lookups wait
// (pending), and are counted once decided. Everything is bounded and counts what it drops.

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/analytics/comm_registry.h"
#include "agent/analytics/series_table.h"
#include "agent/core/text_exposition.h"
#include "agent/profiler/record_sink.h"
#include "rdma/netlink/qp_table.h"

namespace ncclscope::analytics {

// Which host process wrote a ring: the reader's side answers (agent/profiler/record_sink.h).
using profiler::HostProcesses;
using profiler::OwnerStatus;
using profiler::RingOwner;

// Why a lookup found no NIC: the `reason` label.
enum class NicFailure : std::uint8_t {
  kOwnerUnknown,
  kOwnerAmbiguous,
  kQpTableUnavailable,
  kQpNotFound,
  kQpAmbiguous,
  kNoQp,
  kLimit,
  kCount
};
std::string_view NicFailureName(NicFailure failure);

struct ChannelNicLimits {
  Clock::duration refresh_interval = std::chrono::seconds(5);      // between QP table dumps
  Clock::duration unavailable_backoff = std::chrono::seconds(60);  // after a failed dump
  Clock::duration negative_ttl = std::chrono::seconds(60);         // a QP not found is not retried
  Clock::duration owner_retry = std::chrono::seconds(5);           // a ring without known owner
};

class ChannelNic {
 public:
  using Limits = ChannelNicLimits;
  static constexpr std::size_t kMaxNics = 64;           // distinct (device, port) pairs
  static constexpr std::size_t kMaxQpsPerChannel = 16;  // QPs remembered per channel row
  static constexpr std::size_t kMaxPending = 65536;     // QPs waiting for a refresh
  static constexpr std::size_t kMaxRemembered = 65536;  // QPs remembered as not found
  static constexpr std::size_t kMaxOwners = 4096;       // rings whose owner is cached
  static constexpr std::size_t kWaitersPerPending = 4;  // channel rows waiting for one QP

  explicit ChannelNic(const Limits& limits = {}) : limits_(limits) {}

  // Lookups happen only when enabled (plugin.qp_table not "off", plugin.channel_metrics on).
  void SetEnabled(bool enabled) { enabled_ = enabled; }
  bool enabled() const { return enabled_; }
  void SetHostProcesses(std::shared_ptr<HostProcesses> processes);

  // Whether a record needs its ring's owner (an IB record while enabled).
  bool NeedsOwner(const ncclscope_proxy_op_record& record) const;
  // The owner of a ring, cached per ring (failures retried after owner_retry).
  RingOwner Owner(const profiler::RingOrigin& origin, Clock::time_point now);

  // One network record; `comm` null when its communicator is unknown (comm="unknown").
  void Observe(const CommRegistry& registry, const Comm* comm, const RingOwner& owner,
               const ncclscope_proxy_op_record& record, Clock::time_point now);

  // Whether the QP table should be dumped now (pending QPs, and the last dump is old enough).
  bool WantsRefresh(Clock::time_point now) const;
  // A new QP table: replaces the previous one, decides every pending lookup.
  void OnQpDump(const rdma::netlink::QpDump& dump, Clock::time_point now);

  void DropLabels(const absl::flat_hash_set<std::uint32_t>& labels);
  // The operations by net type; with per_channel, the info series and the lookup and QP table
  // counters.
  void Render(metrics::TextWriter& out, bool per_channel) const;

  std::size_t series() const;
  std::size_t pending() const { return pending_.size(); }
  std::uint64_t failures(NicFailure failure) const {
    return failures_[static_cast<std::size_t>(failure)];
  }
  std::uint64_t resolved() const { return resolved_; }

  static std::uint64_t ChannelKey(std::uint32_t comm_label, std::int32_t rank, int channel,
                                  bool send);

 private:
  static constexpr std::uint16_t kAmbiguousNic = 0xFFFF;
  struct KnownQp {
    std::int32_t pid = 0;
    std::uint32_t qpn = 0;
  };
  struct Channel {
    std::uint64_t nics = 0;  // bit per NIC id
    std::uint32_t n_qps = 0;
    std::array<KnownQp, kMaxQpsPerChannel> qps{};
  };
  struct Pending {
    std::uint64_t refs = 0;  // lookups waiting
    std::uint32_t n_waiters = 0;
    std::array<std::uint64_t, kWaitersPerPending> waiters{};  // channel row keys
  };
  struct Remembered {
    NicFailure reason = NicFailure::kQpNotFound;
    Clock::time_point until{};
  };
  struct Nic {
    std::string device;
    std::uint32_t port = 0;
    std::string labels;  // device="..",port=".."
  };
  struct OwnerEntry {
    RingOwner owner;
    Clock::time_point retry_at{};
  };

  static std::uint64_t QpKey(std::int32_t pid, std::uint32_t qpn) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(pid)) << 32) | qpn;
  }
  void Lookup(Channel& channel, std::uint64_t channel_key, std::int32_t pid, std::uint32_t qpn,
              Clock::time_point now);
  void Fail(NicFailure failure, std::uint64_t n = 1) {
    failures_[static_cast<std::size_t>(failure)] += n;
  }
  // Records that `channel` used NIC `nic` through QP (pid, qpn).
  void Attach(Channel& channel, std::int32_t pid, std::uint32_t qpn, std::uint16_t nic);
  // The id of (device, port), interned; nullopt beyond kMaxNics.
  std::optional<std::uint16_t> Intern(const std::string& device, std::uint32_t port);
  void Remember(std::uint64_t qp_key, NicFailure reason, Clock::time_point now);

  Limits limits_;
  bool enabled_ = true;
  std::shared_ptr<HostProcesses> processes_;

  SeriesTable<Channel> channels_;
  absl::flat_hash_map<std::uint64_t, std::uint16_t> index_;  // (process, QP) -> NIC id
  std::vector<Nic> nics_;
  absl::flat_hash_map<std::string, std::uint16_t> nic_ids_;
  absl::flat_hash_map<std::uint64_t, Pending> pending_;
  absl::flat_hash_map<std::uint64_t, Remembered> remembered_;
  absl::flat_hash_map<std::string, OwnerEntry> owners_;
  std::string last_ring_;  // one-entry cache in front of owners_
  OwnerEntry last_owner_;

  std::optional<Clock::time_point> last_refresh_;
  Clock::time_point unavailable_until_{};

  // Counters.
  std::array<std::uint64_t, 4> by_net_type_{};  // enum ncclscope_net_type; >= 3 as "other"
  std::uint64_t resolved_ = 0;
  std::array<std::uint64_t, static_cast<std::size_t>(NicFailure::kCount)> failures_{};
  std::array<std::uint64_t, 3> refreshes_{};  // ok, unsupported, error
  std::uint64_t table_qps_ = 0;
  rdma::netlink::DumpStats table_stats_;  // summed over dumps
  std::uint64_t table_no_owner_ = 0;      // kernel QPs and QPs whose task is gone
  std::uint64_t table_no_port_ = 0;       // QPs without a port yet
  std::uint64_t table_nic_limit_ = 0;     // QPs on a (device, port) beyond kMaxNics
};

}  // namespace ncclscope::analytics
