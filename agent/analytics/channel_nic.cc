#include "agent/analytics/channel_nic.h"

#include "agent/analytics/analytics_metrics.h"
#include "agent/analytics/network_waits.h"

namespace ncclscope::analytics {
namespace {

constexpr std::array<std::string_view, 4> kNetTypeNames = {"none", "ib", "socket", "other"};
constexpr std::array<std::string_view, 3> kRefreshResults = {"ok", "unsupported", "error"};

std::size_t RefreshIndex(rdma::netlink::DumpStatus status) {
  switch (status) {
    case rdma::netlink::DumpStatus::kOk:
      return 0;
    case rdma::netlink::DumpStatus::kUnsupported:
      return 1;
    case rdma::netlink::DumpStatus::kError:
      break;
  }
  return 2;
}

std::string Labeled(std::string_view name, std::string_view value) {
  std::string text;
  metrics::AppendLabel(text, name, value);
  return text;
}

}  // namespace

std::string_view NicFailureName(NicFailure failure) {
  switch (failure) {
    case NicFailure::kOwnerUnknown:
      return "owner_unknown";
    case NicFailure::kOwnerAmbiguous:
      return "owner_ambiguous";
    case NicFailure::kQpTableUnavailable:
      return "qp_table_unavailable";
    case NicFailure::kQpNotFound:
      return "qp_not_found";
    case NicFailure::kQpAmbiguous:
      return "qp_ambiguous";
    case NicFailure::kNoQp:
      return "no_qp";
    case NicFailure::kLimit:
      return "limit";
    case NicFailure::kCount:
      break;
  }
  return "unknown";
}

std::uint64_t ChannelNic::ChannelKey(std::uint32_t comm_label, std::int32_t rank, int channel,
                                     bool send) {
  return KeyPacker()
      .Add(comm_label, 16)
      .Add(static_cast<std::uint32_t>(rank), 24)
      .Add(static_cast<std::uint32_t>(channel), 6)
      .Add(send ? 1 : 0, 1)
      .key();
}

void ChannelNic::SetHostProcesses(std::shared_ptr<HostProcesses> processes) {
  processes_ = std::move(processes);
  owners_.clear();
  last_ring_.clear();
}

bool ChannelNic::NeedsOwner(const ncclscope_proxy_op_record& record) const {
  return enabled_ && record.net_type == NCCLSCOPE_NET_IB;
}

RingOwner ChannelNic::Owner(const profiler::RingOrigin& origin, Clock::time_point now) {
  // Consecutive records mostly come from one ring (a lane is drained in one go).
  if (!last_ring_.empty() && origin.ring == last_ring_ &&
      (last_owner_.owner.status == OwnerStatus::kOk || now < last_owner_.retry_at)) {
    return last_owner_.owner;
  }
  auto it = owners_.find(origin.ring);
  if (it == owners_.end() ||
      (it->second.owner.status != OwnerStatus::kOk && now >= it->second.retry_at)) {
    OwnerEntry entry;
    if (processes_) entry.owner = processes_->OwnerOf(origin);
    entry.retry_at = now + limits_.owner_retry;
    if (owners_.size() >= kMaxOwners) owners_.clear();  // rings come and go; start over
    it = owners_.insert_or_assign(origin.ring, entry).first;
  }
  last_ring_ = origin.ring;
  last_owner_ = it->second;
  return it->second.owner;
}

void ChannelNic::Observe(const CommRegistry& registry, const Comm* comm, const RingOwner& owner,
                         const ncclscope_proxy_op_record& record, Clock::time_point now) {
  ++by_net_type_[record.net_type < 3 ? record.net_type : 3];
  if (!enabled_ || record.net_type != NCCLSCOPE_NET_IB) return;
  std::uint32_t qpns[2] = {record.qp_num[0], record.qp_num[1]};
  if (qpns[1] == qpns[0]) qpns[1] = 0;
  if (qpns[0] == 0) std::swap(qpns[0], qpns[1]);
  const std::uint64_t n = (qpns[0] != 0 ? 1 : 0) + (qpns[1] != 0 ? 1 : 0);
  if (n == 0) {
    Fail(NicFailure::kNoQp);
    return;
  }
  if (owner.status != OwnerStatus::kOk) {
    Fail(owner.status == OwnerStatus::kAmbiguous ? NicFailure::kOwnerAmbiguous
                                                 : NicFailure::kOwnerUnknown,
         n);
    return;
  }
  const std::uint32_t label = comm != nullptr ? comm->label : kUnknownCommLabel;
  const bool send = record.is_send != 0;
  const std::uint64_t key = ChannelKey(label, record.rank, record.channel, send);
  Channel& channel = channels_.Get(key, label, [&] {
    std::string labels =
        CommRankLabels(label == kUnknownCommLabel ? "unknown" : registry.Label(label), record.rank);
    labels += ',';
    metrics::AppendLabel(labels, "channel", std::to_string(record.channel));
    labels += ',';
    metrics::AppendLabel(labels, "direction", send ? "send" : "recv");
    return labels;
  });
  for (const std::uint32_t qpn : qpns) {
    if (qpn != 0) Lookup(channel, key, owner.pid, qpn, now);
  }
}

void ChannelNic::Lookup(Channel& channel, std::uint64_t channel_key, std::int32_t pid,
                        std::uint32_t qpn, Clock::time_point now) {
  // The hot path: a QP this channel already resolved (a connection keeps its QPs).
  for (std::uint32_t i = 0; i < channel.n_qps; ++i) {
    if (channel.qps[i].qpn == qpn && channel.qps[i].pid == pid) {
      ++resolved_;
      return;
    }
  }
  const std::uint64_t qp = QpKey(pid, qpn);
  if (auto it = index_.find(qp); it != index_.end()) {
    if (it->second == kAmbiguousNic) {
      Fail(NicFailure::kQpAmbiguous);
    } else {
      Attach(channel, pid, qpn, it->second);
      ++resolved_;
    }
    return;
  }
  if (auto it = remembered_.find(qp); it != remembered_.end()) {
    if (now < it->second.until) {
      Fail(it->second.reason);
      return;
    }
    remembered_.erase(it);
  }
  if (now < unavailable_until_) {
    Fail(NicFailure::kQpTableUnavailable);
    return;
  }
  auto [it, inserted] = pending_.try_emplace(qp);
  if (inserted && pending_.size() > kMaxPending) {
    pending_.erase(it);
    Fail(NicFailure::kLimit);
    return;
  }
  Pending& p = it->second;
  ++p.refs;
  for (std::uint32_t i = 0; i < p.n_waiters; ++i) {
    if (p.waiters[i] == channel_key) return;
  }
  if (p.n_waiters < kWaitersPerPending) p.waiters[p.n_waiters++] = channel_key;
}

void ChannelNic::Attach(Channel& channel, std::int32_t pid, std::uint32_t qpn, std::uint16_t nic) {
  channel.nics |= std::uint64_t{1} << nic;
  if (channel.n_qps < kMaxQpsPerChannel) channel.qps[channel.n_qps++] = {pid, qpn};
}

std::optional<std::uint16_t> ChannelNic::Intern(const std::string& device, std::uint32_t port) {
  std::string key = device;
  key += '\0';
  key += std::to_string(port);
  if (auto it = nic_ids_.find(key); it != nic_ids_.end()) return it->second;
  if (nics_.size() >= kMaxNics) return std::nullopt;
  const auto id = static_cast<std::uint16_t>(nics_.size());
  Nic& nic = nics_.emplace_back();
  nic.device = device;
  nic.port = port;
  metrics::AppendLabel(nic.labels, "device", device);
  nic.labels += ',';
  metrics::AppendLabel(nic.labels, "port", std::to_string(port));
  nic_ids_.emplace(std::move(key), id);
  return id;
}

void ChannelNic::Remember(std::uint64_t qp_key, NicFailure reason, Clock::time_point now) {
  if (remembered_.size() >= kMaxRemembered) remembered_.clear();
  remembered_[qp_key] = {reason, now + limits_.negative_ttl};
}

bool ChannelNic::WantsRefresh(Clock::time_point now) const {
  if (!enabled_ || pending_.empty()) return false;
  return !last_refresh_ || now - *last_refresh_ >= limits_.refresh_interval;
}

void ChannelNic::OnQpDump(const rdma::netlink::QpDump& dump, Clock::time_point now) {
  last_refresh_ = now;
  ++refreshes_[RefreshIndex(dump.status)];
  if (dump.status != rdma::netlink::DumpStatus::kOk) {
    // Keep the previous table (its QPs are still right) and stop asking for a while.
    unavailable_until_ = now + limits_.unavailable_backoff;
    for (const auto& [qp, p] : pending_) Fail(NicFailure::kQpTableUnavailable, p.refs);
    pending_.clear();
    return;
  }
  unavailable_until_ = {};
  table_stats_.Add(dump.stats);
  index_.clear();
  index_.reserve(dump.qps.size());
  // QP pids are the creating threads; a process's QPs are keyed by its thread group.
  absl::flat_hash_map<std::int32_t, std::int32_t> groups;  // task -> tgid, 0: gone
  const std::string* last_device = nullptr;
  std::uint32_t last_port = 0;
  std::optional<std::uint16_t> last_nic;
  for (const rdma::netlink::QpEntry& qp : dump.qps) {
    if (qp.kernel || qp.pid <= 0) {
      ++table_no_owner_;
      continue;
    }
    if (qp.port == 0) {
      ++table_no_port_;
      continue;
    }
    auto [group, inserted] = groups.try_emplace(qp.pid, 0);
    if (inserted && processes_) group->second = processes_->ThreadGroupOf(qp.pid).value_or(0);
    if (group->second <= 0) {
      ++table_no_owner_;
      continue;
    }
    // A device's QPs come together: intern its (device, port) once per run of entries.
    if (last_device == nullptr || qp.port != last_port || qp.device != *last_device) {
      last_nic = Intern(qp.device, qp.port);
      last_device = &qp.device;
      last_port = qp.port;
    }
    const std::optional<std::uint16_t> nic = last_nic;
    if (!nic) {
      ++table_nic_limit_;
      continue;
    }
    // QP numbers are unique per device only: a process with QPs on two devices may hold the
    // same number on both, and then the number alone cannot say which.
    auto [entry, fresh] = index_.try_emplace(QpKey(group->second, qp.lqpn), *nic);
    if (!fresh && entry->second != *nic) entry->second = kAmbiguousNic;
  }
  table_qps_ = index_.size();
  for (const auto& [qp, p] : pending_) {
    auto it = index_.find(qp);
    if (it == index_.end()) {
      Fail(NicFailure::kQpNotFound, p.refs);
      Remember(qp, NicFailure::kQpNotFound, now);
      continue;
    }
    if (it->second == kAmbiguousNic) {
      Fail(NicFailure::kQpAmbiguous, p.refs);
      continue;  // stays in the index as ambiguous
    }
    resolved_ += p.refs;
    const auto pid = static_cast<std::int32_t>(qp >> 32);
    const auto qpn = static_cast<std::uint32_t>(qp);
    for (std::uint32_t i = 0; i < p.n_waiters; ++i) {
      if (Channel* channel = channels_.FindMutable(p.waiters[i])) {
        Attach(*channel, pid, qpn, it->second);
      }
    }
  }
  pending_.clear();
}

void ChannelNic::DropLabels(const absl::flat_hash_set<std::uint32_t>& labels) {
  channels_.DropLabels(labels);
}

std::size_t ChannelNic::series() const { return channels_.size(); }

void ChannelNic::Render(metrics::TextWriter& out, bool per_channel) const {
  out.Header(kNcclNetworkOpsByNetTypeTotal);
  for (std::size_t i = 0; i < kNetTypeNames.size(); ++i) {
    out.Sample(kNcclNetworkOpsByNetTypeTotal, Labeled("net_type", kNetTypeNames[i]),
               by_net_type_[i]);
  }
  // The rest is the per-channel join, off without plugin.channel_metrics.
  if (!per_channel) return;
  out.Header(kNcclChannelNicInfo);
  for (const auto& row : channels_.rows()) {
    for (std::uint64_t bits = row.stats.nics; bits != 0; bits &= bits - 1) {
      const Nic& nic = nics_[static_cast<std::size_t>(__builtin_ctzll(bits))];
      out.Sample(kNcclChannelNicInfo, row.labels, nic.labels, 1.0);
    }
  }
  std::uint64_t failed = 0;
  for (const std::uint64_t f : failures_) failed += f;
  out.Header(kNcclChannelNicLookupsTotal);
  out.Sample(kNcclChannelNicLookupsTotal, "", resolved_ + failed);
  out.Header(kNcclChannelNicLookupFailuresTotal);
  // A reason's series appears with its first failure: no rule or panel reads them, and the
  // lookups counter above is the denominator either way.
  for (std::size_t i = 0; i < failures_.size(); ++i) {
    if (failures_[i] == 0) continue;
    out.Sample(kNcclChannelNicLookupFailuresTotal,
               Labeled("reason", NicFailureName(static_cast<NicFailure>(i))), failures_[i]);
  }
  out.Header(kNcclQpTableRefreshesTotal);
  for (std::size_t i = 0; i < kRefreshResults.size(); ++i) {
    out.Sample(kNcclQpTableRefreshesTotal, Labeled("result", kRefreshResults[i]), refreshes_[i]);
  }
  out.Header(kNcclQpTableQps);
  out.Sample(kNcclQpTableQps, "", table_qps_);
  out.Header(kNcclQpTableSkippedTotal);
  const std::pair<std::string_view, std::uint64_t> skipped[] = {
      {"malformed_message", table_stats_.malformed_messages},
      {"malformed_entry", table_stats_.malformed_entries},
      {"foreign_message", table_stats_.foreign_messages},
      {"device_error", table_stats_.device_errors},
      {"over_limit", table_stats_.over_limit + table_nic_limit_},
      {"no_owner", table_no_owner_},
      {"no_port", table_no_port_},
  };
  // A reason's series appears with its first skip, as the lookup failures'.
  for (const auto& [reason, count] : skipped) {
    if (count == 0) continue;
    out.Sample(kNcclQpTableSkippedTotal, Labeled("reason", reason), count);
  }
}

}  // namespace ncclscope::analytics
