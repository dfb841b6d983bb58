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

#include <cstdint>
#include <deque>
#include <tuple>

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

  void DropLabels(const absl::flat_hash_set<std::uint32_t>& labels) { table_.DropLabels(labels); }
  void Render(metrics::TextWriter& out) const;
  std::size_t series() const { return table_.size(); }
  const Stats* Find(std::uint32_t comm_label, std::int32_t rank, int channel) const {
    return table_.Find(Key(comm_label, rank, channel));
  }
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
    double share = 0;  // bus bytes per channel
    absl::InlinedVector<ChannelTime, 16> channels;
  };

  static std::uint64_t Key(std::uint32_t comm_label, std::int32_t rank, int channel);
  Stats& Row(const CommRegistry& registry, std::uint32_t comm_label, std::int32_t rank,
             int channel);
  void Attribute(const CommRegistry& registry, const DeferredOp& op, const PendingNet* net);

  SeriesTable<Stats> table_;
  absl::flat_hash_map<JoinKey, PendingNet> pending_;
  std::deque<DeferredOp> deferred_;
  std::uint64_t results_[kResults] = {};
};

}  // namespace ncclscope::analytics
