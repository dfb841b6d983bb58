#include "agent/analytics/channel_transport.h"

#include <algorithm>

namespace ncclscope::analytics {
namespace {

const char* const kResultNames[] = {"intra_node", "split", "unsampled", "late_network",
                                    "overflow"};

}  // namespace

std::uint64_t ChannelTransport::Key(std::uint32_t comm_label, std::int32_t rank, int channel) {
  return KeyPacker()
      .Add(comm_label, 16)
      .Add(static_cast<std::uint32_t>(rank), 24)
      .Add(static_cast<std::uint32_t>(channel), 6)
      .key();
}

ChannelTransport::Stats& ChannelTransport::Row(const CommRegistry& registry,
                                               std::uint32_t comm_label, std::int32_t rank,
                                               int channel) {
  return table_.Get(Key(comm_label, rank, channel), comm_label, [&] {
    std::string labels;
    metrics::AppendLabel(labels, "comm", registry.Label(comm_label));
    labels += ',';
    metrics::AppendLabel(labels, "rank", std::to_string(rank));
    labels += ',';
    metrics::AppendLabel(labels, "channel", std::to_string(channel));
    return labels;
  });
}

void ChannelTransport::OnOp(const CommRegistry& registry, const Comm& comm,
                            const profiler::OpView& view, const BandwidthModel& model,
                            std::uint64_t pass) {
  const ncclscope_op_record& op = view.op;
  const JoinKey key{op.comm_id, op.rank, op.op_index};
  if ((op.flags & NCCLSCOPE_OP_GPU_TIMING) == 0 || view.n_channels == 0) {
    if ((op.flags & NCCLSCOPE_OP_PROXY_REQUESTED) != 0) pending_.erase(key);  // nothing to split
    return;
  }
  DeferredOp d;
  d.pass = pass;
  d.key = key;
  d.comm_label = comm.label;
  const std::uint32_t split = op.n_channels != 0 ? op.n_channels : view.n_channels;
  d.share = model.bus_bytes() / split;
  for (std::uint32_t i = 0; i < view.n_channels; ++i) {
    const ncclscope_channel_time& t = view.channels[i];
    d.channels.push_back({view.channel_ids[i], t.end_off_ns - t.start_off_ns});
    Row(registry, comm.label, op.rank, view.channel_ids[i]).gpu_busy_ns +=
        t.end_off_ns - t.start_off_ns;
  }
  if (comm.nnodes == 1) {
    ++results_[kIntraNode];
    Attribute(registry, d, nullptr);
  } else if ((op.flags & NCCLSCOPE_OP_PROXY_REQUESTED) == 0 || comm.nnodes == 0) {
    ++results_[kUnsampled];
  } else if (deferred_.size() >= kMaxPending) {
    ++results_[kOverflow];
    auto it = pending_.find(key);
    Attribute(registry, d, it != pending_.end() ? &it->second : nullptr);
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

void ChannelTransport::Attribute(const CommRegistry& registry, const DeferredOp& op,
                                 const PendingNet* net) {
  const std::int32_t rank = std::get<1>(op.key);
  for (const ChannelTime& ch : op.channels) {
    std::uint64_t net_bytes = 0;
    std::uint64_t first = UINT64_MAX;
    std::uint64_t last = 0;
    if (net != nullptr) {
      for (const NetSend& s : net->sends) {
        if (s.channel != ch.channel) continue;
        net_bytes += s.bytes;
        first = std::min(first, s.start_ns);
        last = std::max(last, s.end_ns);
      }
    }
    Stats& row = Row(registry, op.comm_label, rank, ch.channel);
    const double intra = std::max(0.0, op.share - static_cast<double>(net_bytes));
    if (net_bytes > 0) {
      row.networked = true;
      row.bytes[kNetwork] += static_cast<double>(net_bytes);
      row.busy_ns[kNetwork] += last > first ? last - first : 0;
    }
    if (intra > 0) {
      row.bytes[kNvlink] += intra;
      row.busy_ns[kNvlink] += ch.busy_ns;
    }
  }
}

void ChannelTransport::EndPass(const CommRegistry& registry, std::uint64_t pass) {
  // Ops recorded in an earlier pass: every lane has been drained past them since.
  while (!deferred_.empty() && deferred_.front().pass < pass) {
    const DeferredOp& op = deferred_.front();
    auto it = pending_.find(op.key);
    ++results_[kSplit];
    Attribute(registry, op, it != pending_.end() ? &it->second : nullptr);
    if (it != pending_.end()) pending_.erase(it);
    deferred_.pop_front();
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

void ChannelTransport::Render(metrics::TextWriter& out) const {
  static const std::string kTransport[2] = {"transport=\"nvlink\"", "transport=\"network\""};
  const auto& rows = table_.rows();
  out.Header("ncclscope_nccl_channel_gpu_busy_seconds_total",
             "GPU time of each channel (KernelCh start to stop, summed over operations).",
             "counter");
  for (const auto& row : rows) {
    out.Sample("ncclscope_nccl_channel_gpu_busy_seconds_total", row.labels, std::string_view(),
               static_cast<double>(row.stats.gpu_busy_ns) * 1e-9);
  }
  out.Header("ncclscope_nccl_channel_bytes_total",
             "Bytes each channel sent, by transport: network (its network steps) or nvlink (the "
             "rest of its share of the operation's bus bytes: NVLink, PCIe P2P or shared memory). "
             "Single-node communicators and operations with network steps recorded.",
             "counter");
  for (const auto& row : rows) {
    for (int t = 0; t < 2; ++t) {
      if (t == kNetwork && !row.stats.networked) continue;
      out.Sample("ncclscope_nccl_channel_bytes_total", row.labels, kTransport[t],
                 row.stats.bytes[t]);
    }
  }
  out.Header("ncclscope_nccl_channel_busy_seconds_total",
             "Time each channel was busy sending by transport: network steps' start-to-end "
             "window, or the channel's GPU time for intra-node bytes. Bytes over this is the "
             "channel's NVLink or network bandwidth.",
             "counter");
  for (const auto& row : rows) {
    for (int t = 0; t < 2; ++t) {
      if (t == kNetwork && !row.stats.networked) continue;
      out.Sample("ncclscope_nccl_channel_busy_seconds_total", row.labels, kTransport[t],
                 static_cast<double>(row.stats.busy_ns[t]) * 1e-9);
    }
  }
  out.Header("ncclscope_nccl_channel_attribution_total",
             "Operations with GPU timing by how their channels' bytes were attributed: intra_node "
             "(single-node communicator), split (network steps joined), unsampled (no network "
             "steps recorded: GPU time only), overflow (join window full); late_network counts "
             "network records that found no operation to join.",
             "counter");
  for (int r = 0; r < kResults; ++r) {
    std::string label;
    metrics::AppendLabel(label, "result", kResultNames[r]);
    out.Sample("ncclscope_nccl_channel_attribution_total", label, results_[r]);
  }
}

}  // namespace ncclscope::analytics
