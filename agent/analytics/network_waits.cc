#include "agent/analytics/network_waits.h"

#include "agent/analytics/analytics_metrics.h"

namespace ncclscope::analytics {
namespace {

bool SendState(std::uint32_t state) { return state <= NCCLSCOPE_STEP_SEND_WAIT; }

std::string_view Direction(bool send) { return send ? "send" : "recv"; }

const std::string& StateLabel(std::uint32_t state) {
  static const std::vector<std::string> labels = [] {
    std::vector<std::string> l;
    for (std::uint32_t i = 0; i < NCCLSCOPE_STEP_STATE_COUNT; ++i) {
      std::string text;
      metrics::AppendLabel(text, "state", ncclscope_step_state_name(i));
      l.push_back(std::move(text));
    }
    return l;
  }();
  return labels[state];
}

std::string CommRankLabels(const CommRegistry& registry, std::uint32_t comm_label,
                           std::int32_t rank) {
  return analytics::CommRankLabels(
      comm_label == kUnknownCommLabel ? "unknown" : registry.Label(comm_label), rank);
}

}  // namespace

std::uint64_t NetworkWaits::ChannelKey(std::uint32_t comm_label, std::int32_t rank, int channel,
                                       std::int32_t peer, bool send) {
  return KeyPacker()
      .Add(comm_label, 16)
      .Add(static_cast<std::uint32_t>(rank), 20)
      .Add(static_cast<std::uint32_t>(channel), 6)
      .Add(static_cast<std::uint32_t>(peer + 1), 21)  // 0: "other"; peers < 2^20 (decoder)
      .Add(send ? 1 : 0, 1)
      .key();
}

void NetworkWaits::Observe(CommRegistry& registry, Comm* comm,
                           const ncclscope_proxy_op_record& record, bool per_channel) {
  const std::uint32_t label = comm != nullptr ? comm->label : kUnknownCommLabel;
  const bool send = record.is_send != 0;
  const std::uint64_t key = KeyPacker()
                                .Add(label, 16)
                                .Add(static_cast<std::uint32_t>(record.rank), 24)
                                .Add(send ? 1 : 0, 1)
                                .key();
  Totals& t = totals_.Get(key, label, [&] {
    std::string labels = CommRankLabels(registry, label, record.rank);
    labels += ',';
    metrics::AppendLabel(labels, "direction", Direction(send));
    return labels;
  });
  const std::uint32_t weight = ncclscope_record_weight(record.weight);  // plugin.record_one_in
  AddSat(t.ops, weight);
  AddWeighted(t.bytes, record.bytes, weight);
  for (std::uint32_t i = 0; i < NCCLSCOPE_STEP_STATE_COUNT; ++i)
    AddWeighted(t.state_ns[i], record.state_ns[i], weight);
  if (!per_channel) return;

  std::int32_t peer = CommRegistry::kOtherPeer;
  if (comm != nullptr && record.peer >= 0) {
    peer = registry.PeerKey(registry.RankOf(*comm, record.rank), record.peer);
  }
  ChannelPeer& c =
      channels_.Get(ChannelKey(label, record.rank, record.channel, peer, send), label, [&] {
        std::string labels = CommRankLabels(registry, label, record.rank);
        labels += ',';
        metrics::AppendLabel(labels, "channel", std::to_string(record.channel));
        labels += ',';
        metrics::AppendLabel(labels, "peer",
                             peer == CommRegistry::kOtherPeer ? "other" : std::to_string(peer));
        labels += ',';
        metrics::AppendLabel(labels, "direction", Direction(send));
        return labels;
      });
  AddWeighted(c.bytes, record.bytes, weight);
  AddWeighted(c.busy_ns, record.end_ns - record.start_ns, weight);
  for (std::uint32_t i = 0; i < NCCLSCOPE_STEP_STATE_COUNT; ++i)
    AddWeighted(c.state_ns[i], record.state_ns[i], weight);
}

void NetworkWaits::DropLabels(const absl::flat_hash_set<std::uint32_t>& labels) {
  totals_.DropLabels(labels);
  channels_.DropLabels(labels);
}

std::size_t NetworkWaits::series() const { return totals_.size() + channels_.size(); }

void NetworkWaits::Render(metrics::TextWriter& out, bool per_channel) const {
  if (per_channel) {
    RenderChannels(out);
    return;
  }
  // Without the per-channel families the per-rank totals stand in for them. With them, the totals
  // are their sums over channel and peer (bytes, step states), so they are not exported twice:
  // 160 series on the simulated 8-GPU node (docs/metrics.md, "Cost").
  const auto& totals = totals_.rows();
  out.Rows(kNcclNetworkOpsTotal, totals, [&](const auto& row) { return row.stats.ops; });
  out.Rows(kNcclNetworkBytesTotal, totals, [&](const auto& row) { return row.stats.bytes; });
  out.Header(kNcclNetworkStepStateSecondsTotal);
  for (const auto& row : totals) {
    const bool send = (row.key & 1) != 0;
    for (std::uint32_t i = 0; i < NCCLSCOPE_STEP_STATE_COUNT; ++i) {
      if (SendState(i) != send) continue;  // a send step has no recv states and vice versa
      out.Sample(kNcclNetworkStepStateSecondsTotal, row.labels, StateLabel(i),
                 static_cast<double>(row.stats.state_ns[i]) * 1e-9);
    }
  }
}

void NetworkWaits::RenderChannels(metrics::TextWriter& out) const {
  const auto& channels = channels_.rows();
  out.Rows(kNcclChannelNetworkBytesTotal, channels,
           [&](const auto& row) { return row.stats.bytes; });
  out.Rows(kNcclChannelNetworkBusySecondsTotal, channels,
           [&](const auto& row) { return static_cast<double>(row.stats.busy_ns) * 1e-9; });
  out.Header(kNcclChannelStepStateSecondsTotal);
  for (const auto& row : channels) {
    const bool send = (row.key & 1) != 0;
    for (std::uint32_t i = 0; i < NCCLSCOPE_STEP_STATE_COUNT; ++i) {
      if (SendState(i) != send) continue;
      out.Sample(kNcclChannelStepStateSecondsTotal, row.labels, StateLabel(i),
                 static_cast<double>(row.stats.state_ns[i]) * 1e-9);
    }
  }
}

void PxnResolver::Rebuild(const std::vector<profiler::LiveComm>& comms) {
  by_origin_.clear();
  for (const profiler::LiveComm& c : comms) {
    by_origin_[{c.origin->pid, c.slot.context}] = c.slot.comm_id;
  }
}

std::uint64_t PxnResolver::Resolve(std::int32_t pid, std::uint64_t context) const {
  auto it = by_origin_.find({pid, context});
  return it == by_origin_.end() ? 0 : it->second;
}

}  // namespace ncclscope::analytics
