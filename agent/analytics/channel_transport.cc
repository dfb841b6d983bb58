#include "agent/analytics/channel_transport.h"

#include <algorithm>

#include "agent/analytics/analytics_metrics.h"

namespace ncclscope::analytics {
namespace {

const char* const kResultNames[] = {"intra_node", "split", "unsampled", "late_network", "overflow"};

}  // namespace

std::uint64_t ChannelTransport::Key(std::uint32_t comm_label, std::int32_t rank) {
  return KeyPacker().Add(comm_label, 16).Add(static_cast<std::uint32_t>(rank), 32).key();
}

ChannelTransport::RankChannels& ChannelTransport::Rank(const CommRegistry& registry,
                                                       std::uint32_t comm_label,
                                                       std::int32_t rank) {
  if (ranks_.size() >= kMaxRanks) {
    auto found = index_.find(Key(comm_label, rank));
    if (found != index_.end()) return ranks_[found->second];
    ++refused_;
    overflow_.used = 0;
    return overflow_;
  }
  auto [it, inserted] =
      index_.try_emplace(Key(comm_label, rank), static_cast<std::uint32_t>(ranks_.size()));
  if (inserted) {
    RankChannels& r = ranks_.emplace_back();
    r.comm_label = comm_label;
    r.rank = rank;
    metrics::AppendLabel(r.labels, "comm", registry.Label(comm_label));
    r.labels += ',';
    metrics::AppendLabel(r.labels, "rank", std::to_string(rank));
  }
  return ranks_[it->second];
}

const ChannelTransport::Stats* ChannelTransport::Find(std::uint32_t comm_label, std::int32_t rank,
                                                      int channel) const {
  auto it = index_.find(Key(comm_label, rank));
  if (it == index_.end() || channel < 0 || channel >= static_cast<int>(NCCLSCOPE_MAX_CHANNELS)) {
    return nullptr;
  }
  const RankChannels& r = ranks_[it->second];
  return (r.used >> channel & 1) != 0 ? &r.channel[static_cast<std::size_t>(channel)] : nullptr;
}

std::size_t ChannelTransport::series() const {
  std::size_t n = 0;
  for (const RankChannels& r : ranks_) n += static_cast<std::size_t>(__builtin_popcountll(r.used));
  return n;
}

void ChannelTransport::DropLabels(const absl::flat_hash_set<std::uint32_t>& labels) {
  if (labels.empty()) return;
  std::vector<RankChannels> kept;
  for (RankChannels& r : ranks_) {
    if (!labels.contains(r.comm_label)) kept.push_back(std::move(r));
  }
  ranks_ = std::move(kept);
  index_.clear();
  for (std::size_t i = 0; i < ranks_.size(); ++i) {
    index_.emplace(Key(ranks_[i].comm_label, ranks_[i].rank), static_cast<std::uint32_t>(i));
  }
}

void ChannelTransport::OnOp(const CommRegistry& registry, const Comm& comm,
                            const profiler::OpView& view, const BandwidthModel& model,
                            std::uint64_t pass) {
  const ncclscope_op_record& op = view.op;
  if ((op.flags & NCCLSCOPE_OP_GPU_TIMING) == 0 || view.n_channels == 0) {
    if ((op.flags & NCCLSCOPE_OP_PROXY_REQUESTED) != 0) {
      pending_.erase(JoinKey{op.comm_id, op.rank, op.op_index});  // nothing to split
    }
    return;
  }
  // A record stands for `weight` ops (plugin.record_one_in), and its network records for theirs
  // (they carry the op's weight): bytes and seconds are scaled alike, so the split holds.
  const std::uint32_t weight = ncclscope_record_weight(op.weight);
  RankChannels& rank = Rank(registry, comm.label, op.rank);
  for (std::uint32_t i = 0; i < view.n_channels; ++i) {
    const ncclscope_channel_time& t = view.channels[i];
    const std::uint8_t c = view.channel_ids[i];
    rank.used |= 1ull << c;
    AddWeighted(rank.channel[c].gpu_busy_ns, t.end_off_ns - t.start_off_ns, weight);
  }
  const std::uint32_t split = op.n_channels != 0 ? op.n_channels : view.n_channels;
  const double share = model.bus_bytes() * weight / split;
  if (comm.nnodes == 1) {
    // Single node: the whole share of every channel went intra-node, during its GPU time.
    ++results_[kIntraNode];
    if (share <= 0) return;
    for (std::uint32_t i = 0; i < view.n_channels; ++i) {
      const ncclscope_channel_time& t = view.channels[i];
      Stats& row = rank.channel[view.channel_ids[i]];
      row.bytes[kNvlink] += share;
      AddWeighted(row.busy_ns[kNvlink], t.end_off_ns - t.start_off_ns, weight);
    }
    return;
  }
  if (comm.nnodes == 0 || (op.flags & NCCLSCOPE_OP_PROXY_REQUESTED) == 0) {
    ++results_[kUnsampled];
    return;
  }
  DeferredOp d;
  d.pass = pass;
  d.key = JoinKey{op.comm_id, op.rank, op.op_index};
  d.comm_label = comm.label;
  d.share = share;
  d.weight = weight;
  for (std::uint32_t i = 0; i < view.n_channels; ++i) {
    const ncclscope_channel_time& t = view.channels[i];
    d.channels.push_back({view.channel_ids[i], t.end_off_ns - t.start_off_ns});
  }
  if (deferred_.size() - deferred_head_ >= kMaxPending) {
    ++results_[kOverflow];
    auto it = pending_.find(d.key);
    Attribute(rank, d, it != pending_.end() ? &it->second : nullptr);
    if (it != pending_.end()) pending_.erase(it);
  } else {
    deferred_.push_back(std::move(d));
  }
}

void ChannelTransport::OnProxyOp(const ncclscope_proxy_op_record& record, std::uint64_t pass) {
  if (record.is_send == 0 || (record.flags & NCCLSCOPE_PROXY_PARENT_KNOWN) == 0 ||
      (record.flags & NCCLSCOPE_PROXY_FOREIGN) != 0 || record.comm_id == 0) {
    return;
  }
  const JoinKey key{record.comm_id, record.rank, record.op_index};
  auto it = pending_.find(key);
  if (it == pending_.end()) {
    if (pending_.size() >= kMaxPending) {
      ++results_[kOverflow];
      return;
    }
    it = pending_.emplace(key, PendingNet{}).first;
  }
  it->second.pass = pass;
  it->second.sends.push_back({record.channel, record.bytes, record.start_ns, record.end_ns});
}

void ChannelTransport::Attribute(RankChannels& rank, const DeferredOp& op, const PendingNet* net) {
  for (const ChannelTime& ch : op.channels) {
    std::uint64_t net_bytes = 0;
    std::uint64_t first = UINT64_MAX;
    std::uint64_t last = 0;
    if (net != nullptr) {
      for (const NetSend& s : net->sends) {
        if (s.channel != ch.channel) continue;
        AddWeighted(net_bytes, s.bytes, op.weight);
        first = std::min(first, s.start_ns);
        last = std::max(last, s.end_ns);
      }
    }
    rank.used |= 1ull << ch.channel;
    Stats& row = rank.channel[ch.channel];
    const double intra = std::max(0.0, op.share - static_cast<double>(net_bytes));
    if (net_bytes > 0) {
      row.networked = true;
      row.bytes[kNetwork] += static_cast<double>(net_bytes);
      AddWeighted(row.busy_ns[kNetwork], last > first ? last - first : 0, op.weight);
    }
    if (intra > 0) {
      row.bytes[kNvlink] += intra;
      AddWeighted(row.busy_ns[kNvlink], ch.busy_ns, op.weight);
    }
  }
}

void ChannelTransport::EndPass(const CommRegistry& registry, std::uint64_t pass) {
  // Ops recorded in an earlier pass: every lane has been drained past them since.
  while (deferred_head_ < deferred_.size() && deferred_[deferred_head_].pass < pass) {
    const DeferredOp& op = deferred_[deferred_head_++];
    auto it = pending_.find(op.key);
    ++results_[kSplit];
    Attribute(Rank(registry, op.comm_label, std::get<1>(op.key)), op,
              it != pending_.end() ? &it->second : nullptr);
    if (it != pending_.end()) pending_.erase(it);
  }
  if (deferred_head_ == deferred_.size()) {
    deferred_.clear();  // keeps its capacity: no allocation per op once warm
    deferred_head_ = 0;
  } else if (deferred_head_ > deferred_.size() / 2) {
    deferred_.erase(deferred_.begin(),
                    deferred_.begin() + static_cast<std::ptrdiff_t>(deferred_head_));
    deferred_head_ = 0;
  }
  // Network records whose op never needed them (no GPU timing, op record dropped) or came late.
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->second.pass + 2 < pass) {
      ++results_[kLateNetwork];
      pending_.erase(it++);
    } else {
      ++it;
    }
  }
}

void ChannelTransport::Render(metrics::TextWriter& out, bool intra_node_channels) const {
  static const std::string kTransport[2] = {"transport=\"nvlink\"", "transport=\"network\""};
  // `comm=..,rank=..,channel="c"` for every channel with a row, built once per scrape.
  struct Row {
    std::string labels;
    const Stats* stats = nullptr;
  };
  std::vector<Row> rows;
  for (const RankChannels& r : ranks_) {
    for (std::uint64_t m = r.used; m != 0; m &= m - 1) {
      const int c = __builtin_ctzll(m);
      // Intra-node-only channels (most of a node's: 15 of 18 per rank on the series budget's
      // node) are rows only on request; per rank their bytes are the op series'.
      if (!intra_node_channels && !r.channel[static_cast<std::size_t>(c)].networked) continue;
      Row row;
      row.labels = r.labels;
      row.labels += ',';
      metrics::AppendLabel(row.labels, "channel", std::to_string(c));
      row.stats = &r.channel[static_cast<std::size_t>(c)];
      rows.push_back(std::move(row));
    }
  }
  out.Rows(kNcclChannelGpuBusySecondsTotal, rows, [&](const Row& row) {
    return std::string_view(), static_cast<double>(row.stats->gpu_busy_ns) * 1e-9;
  });
  out.Header(kNcclChannelBytesTotal);
  for (const Row& row : rows) {
    for (int t = 0; t < 2; ++t) {
      if (t == kNetwork && !row.stats->networked) continue;
      out.Sample(kNcclChannelBytesTotal, row.labels, kTransport[t], row.stats->bytes[t]);
    }
  }
  out.Header(kNcclChannelBusySecondsTotal);
  for (const Row& row : rows) {
    for (int t = 0; t < 2; ++t) {
      if (t == kNetwork && !row.stats->networked) continue;
      out.Sample(kNcclChannelBusySecondsTotal, row.labels, kTransport[t],
                 static_cast<double>(row.stats->busy_ns[t]) * 1e-9);
    }
  }
  out.Header(kNcclChannelAttributionTotal);
  for (int r = 0; r < kResults; ++r) {
    std::string label;
    metrics::AppendLabel(label, "result", kResultNames[r]);
    out.Sample(kNcclChannelAttributionTotal, label, results_[r]);
  }
}

}  // namespace ncclscope::analytics
