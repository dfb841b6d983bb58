#pragma once

// What the ring reader hands on: validated records, grouped (an op with all its channel times),
// tagged with the process they came from. The NCCL analytics (agent/analytics) are the profiler
// source's sink; further sinks plug in with ProfilerSource::AddSink without touching the reader.

#include <cstdint>
#include <string>

#include "plugin/ring/ncclscope_ring.h"

namespace ncclscope::profiler {

// The process a record came from (one ring per process). What the plugin wrote in its ring header
// is only a claim; the attribution fields are what the agent found out itself (ring_attribution.h).
struct RingOrigin {
  std::string ring;           // file name, unique per process instance
  std::uint32_t ring_id = 0;  // unique per ring the agent opened (0: not from a RingDirectory)
  // Claimed by the plugin (ring header).
  std::int32_t pid = 0;  // in the process's own pid namespace
  std::string hostname;  // gethostname(): the pod name in Kubernetes
  std::string job_id;
  // Verified by the agent.
  std::uint32_t owner_uid = 0;  // the ring file's owner
  std::int32_t holder_pid = 0;  // the lock holder's pid as the agent sees it (0: none found)
  std::string namespace_name;   // the holder's pod, from its cgroup (empty: not in a pod)
  std::string pod;
  std::string container;
  // "verified" (holder in a pod), "process" (holder found, not in a pod) or "claimed" (no holder
  // found: nothing but the plugin's word).
  std::string attribution = "claimed";
  // The trust boundary communicators do not cross (comm_registry.h): "ns:<namespace>" for a pod,
  // else "uid:<owner_uid>".
  std::string principal;
};

// An op record with the channel times of its continuation records folded in.
struct OpView {
  ncclscope_op_record op{};
  std::uint32_t n_channels = 0;  // entries in channels[], ascending channel order
  ncclscope_channel_time channels[NCCLSCOPE_MAX_CHANNELS] = {};
  std::uint8_t channel_ids[NCCLSCOPE_MAX_CHANNELS] = {};
};

class RecordSink {
 public:
  virtual ~RecordSink() = default;
  virtual void OnCommInit(const RingOrigin& origin, const ncclscope_comm_init_record& record) = 0;
  virtual void OnCommFinalize(const RingOrigin& origin,
                              const ncclscope_comm_finalize_record& record) = 0;
  virtual void OnOp(const RingOrigin& origin, const OpView& op) = 0;
  virtual void OnProxyOp(const RingOrigin& origin, const ncclscope_proxy_op_record& record) = 0;
};

}  // namespace ncclscope::profiler
