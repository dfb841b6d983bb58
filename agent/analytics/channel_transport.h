#pragma once

// Per-channel bytes and busy time by transport: what each channel of a rank sends over the network
// versus intra-node (NVLink, or PCIe P2P / shared memory on GPUs without NVLink; the profiler
// cannot tell those apart). The model (docs/analytics.md):
//
//  * A channel's share of an op's traffic is the op's nccl-tests bus bytes / nChannels (NCCL
//    splits an op evenly over its channels), and the channel is busy for its KernelCh time.
//  * Single-node communicators (nnodes == 1) send everything intra-node.
//  * On multi-node communicators, the network bytes a channel sends are the bytes of the op's
//    send-side PROXY_OP records on that channel (busy: their start..end window); the rest of the
//    channel's share went intra-node, during the channel's KernelCh time. That needs the op's
//    network records, so it is done for ops the plugin flagged NCCLSCOPE_OP_PROXY_REQUESTED
//    (proxy events on: plugin.proxy_duty_cycle), one pass after the op record arrived (records of
//    one op can sit in different lanes). Other multi-node ops only add GPU busy time.
//
// Bounded: at most kMaxPending ops and network records wait for their partner; beyond, they are
// attributed without it and counted.

#include <absl/container/flat_hash_map.h>
#include <absl/container/inlined_vector.h>

#include <array>
#include <cstdint>
#include <tuple>
#include <vector>

#include "agent/analytics/bus_bandwidth.h"
#include "agent/analytics/comm_registry.h"
#include "agent/analytics/series_table.h"
#include "agent/core/text_exposition.h"

namespace ncclscope::analytics {

class ChannelTransport {
 public:
  enum Transport { kNvlink = 0, kNetwork = 1 };
  enum Result { kIntraNode = 0, kSplit, kUnsampled, kLateNetwork, kOverflow, kResults };

  struct Stats {
    std::uint64_t gpu_busy_ns = 0;  // KernelCh time, every op with GPU timing
    double bytes[2] = {};           // by Transport, attributed ops only
    std::uint64_t busy_ns[2] = {};
    bool networked = false;  // some op had network bytes on this channel
  };

  static constexpr std::size_t kMaxPending = 65536;

  void OnOp(const CommRegistry& registry, const Comm& comm, const profiler::OpView& view,
            const BandwidthModel& model, std::uint64_t pass);
  void OnProxyOp(const ncclscope_proxy_op_record& record, std::uint64_t pass);
  // Attributes the ops deferred in earlier passes and forgets network records nobody claimed.
  void EndPass(const CommRegistry& registry, std::uint64_t pass);

  void DropLabels(const absl::flat_hash_set<std::uint32_t>& labels);
  // intra_node_channels: also the channels that never carried network bytes (plugin.
  // intra_node_channels); otherwise only networked channels have per-channel series.
  void Render(metrics::TextWriter& out, bool intra_node_channels) const;
  std::size_t series() const;
  std::uint64_t refused() const { return refused_; }
  static constexpr std::size_t kMaxRanks = 4096;  // (comm, rank) rows, 64 channels each
  const Stats* Find(std::uint32_t comm_label, std::int32_t rank, int channel) const;
  std::uint64_t result(Result r) const { return results_[r]; }

 private:
  using JoinKey = std::tuple<std::uint64_t, std::int32_t, std::uint64_t>;  // comm, rank, op_index
  struct NetSend {
    std::uint8_t channel;
    std::uint64_t bytes;
    std::uint64_t start_ns;
    std::uint64_t end_ns;
  };
  struct PendingNet {
    std::uint64_t pass = 0;
    absl::InlinedVector<NetSend, 4> sends;
  };
  struct ChannelTime {
    std::uint8_t channel;
    std::uint32_t busy_ns;
  };
  struct DeferredOp {
    std::uint64_t pass = 0;
    JoinKey key;
    std::uint32_t comm_label = 0;
    double share = 0;          // bus bytes per channel, times weight
    std::uint32_t weight = 1;  // the ops the record stands for (plugin.record_one_in)
    absl::InlinedVector<ChannelTime, 16> channels;
  };

  // Every channel of one (comm, rank): one lookup per op, not one per channel.
  struct RankChannels {
    std::uint32_t comm_label = 0;
    std::int32_t rank = 0;
    std::string labels;      // `comm="..",rank=".."`
    std::uint64_t used = 0;  // channels with a row
    std::array<Stats, NCCLSCOPE_MAX_CHANNELS> channel{};
  };

  static std::uint64_t Key(std::uint32_t comm_label, std::int32_t rank);
  RankChannels& Rank(const CommRegistry& registry, std::uint32_t comm_label, std::int32_t rank);
  void Attribute(RankChannels& rank, const DeferredOp& op, const PendingNet* net);

  absl::flat_hash_map<std::uint64_t, std::uint32_t> index_;  // Key -> ranks_
  std::vector<RankChannels> ranks_;
  absl::flat_hash_map<JoinKey, PendingNet> pending_;
  std::vector<DeferredOp> deferred_;  // [deferred_head_, end) wait; the front is reused
  std::size_t deferred_head_ = 0;
  std::uint64_t results_[kResults] = {};
  RankChannels overflow_;  // updates beyond kMaxRanks land here, never rendered
  std::uint64_t refused_ = 0;
};

}  // namespace ncclscope::analytics
