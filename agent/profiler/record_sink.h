#pragma once

// What the ring reader hands on: validated records, grouped (an op with all its channel times),
// tagged with the process they came from. The NCCL analytics (agent/analytics) are the profiler
// source's sink; further sinks plug in with ProfilerSource::AddSink without touching the reader.

#include <cstdint>
#include <string>

#include "plugin/ring/ncclscope_ring.h"

namespace ncclscope::profiler {

// The process a record came from (one ring per process).
struct RingOrigin {
  std::string ring;      // file name, unique per process instance
  std::int32_t pid = 0;  // in the process's own pid namespace
  std::string hostname;  // the pod name in Kubernetes
  std::string job_id;
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
