#pragma once

// The network side, from PROXY_OP records (one channel, one peer, one direction of one op, while
// the plugin's proxy events are on): bytes, busy time and the time its steps spent in each state,
// which is the wait decomposition of a network transfer:
//   send side: send_gpu_wait  (GPU wait: the local GPU had not produced the data yet)
//              send_peer_wait (peer credit wait: the receiver had not posted its buffer)
//              send_wait      (network wait: the send was on the wire)
//   recv side: recv_wait      (network wait: data not there yet, a late sender included)
//              recv_flush_wait, recv_gpu_wait (GPU wait: the local GPU consuming the data)
// Exported per (comm, rank, channel, peer, direction) with plugin.channel_metrics (the default),
// else per (comm, rank, direction) (ncclscope_nccl_network_*: their sums, kept either way so a
// reload that turns the channels off finds them whole). Peers beyond plugin.max_peers per rank
// share peer="other".
//
// PXN: a network op raised by another local process's proxy carries no communicator id; it is
// resolved through the communicator tables (origin pid and context) to the rank whose data it is,
// else counted under comm="unknown".

#include <absl/container/flat_hash_map.h>

#include <cstdint>

#include "agent/analytics/comm_registry.h"
#include "agent/analytics/series_table.h"
#include "agent/core/text_exposition.h"

namespace ncclscope::analytics {

// The label index of network ops whose communicator is not known (never freed).
inline constexpr std::uint32_t kUnknownCommLabel = 0xFFFF;

class NetworkWaits {
 public:
  struct Totals {
    std::uint64_t ops = 0;
    std::uint64_t bytes = 0;
    std::uint64_t state_ns[NCCLSCOPE_STEP_STATE_COUNT] = {};
  };
  struct ChannelPeer {
    std::uint64_t bytes = 0;
    std::uint64_t busy_ns = 0;  // sum of the ops' start -> end
    std::uint64_t state_ns[NCCLSCOPE_STEP_STATE_COUNT] = {};
  };

  // `comm` is null when the communicator is unknown (label "unknown").
  void Observe(CommRegistry& registry, Comm* comm, const ncclscope_proxy_op_record& record,
               bool per_channel);
  void DropLabels(const absl::flat_hash_set<std::uint32_t>& labels);
  void Render(metrics::TextWriter& out, bool per_channel) const;

  std::size_t series() const;
  std::uint64_t refused() const { return totals_.refused() + channels_.refused(); }
  static std::uint64_t ChannelKey(std::uint32_t comm_label, std::int32_t rank, int channel,
                                  std::int32_t peer, bool send);

 private:
  void RenderChannels(metrics::TextWriter& out) const;

  SeriesTable<Totals> totals_;
  SeriesTable<ChannelPeer> channels_;
};

// Resolves PXN network ops (raised by another process's proxy) to their communicator: the comm
// tables list each communicator with its process's pid and the plugin's context value.
class PxnResolver {
 public:
  void Rebuild(const std::vector<profiler::LiveComm>& comms);
  // The comm id of (origin pid, origin context), 0 when unknown.
  std::uint64_t Resolve(std::int32_t pid, std::uint64_t context) const;

 private:
  absl::flat_hash_map<std::pair<std::int32_t, std::uint64_t>, std::uint64_t> by_origin_;
};

}  // namespace ncclscope::analytics
