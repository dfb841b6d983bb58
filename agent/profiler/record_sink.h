#pragma once

// The seam between the ring reader (agent/profiler) and its sinks (the NCCL analytics,
// agent/analytics; further sinks plug in with ProfilerSource::AddSink): what the reader hands on
// (validated records, grouped: an op with all its channel times, tagged with the process they
// came from; each pass's live communicators) and what a sink may ask of the reader's side (which
// host process wrote a ring). A sink includes this header and nothing else of the reader's.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

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

// An op record with what its follower records carry folded in: the channel times of its
// continuations, and (NCCL 2.31+, ABI v7) its tag and kernel variant and its channels' kernel
// phases.
struct OpView {
  ncclscope_op_record op{};
  std::uint32_t n_channels = 0;  // entries in channels[], ascending channel order
  ncclscope_channel_time channels[NCCLSCOPE_MAX_CHANNELS] = {};
  std::uint8_t channel_ids[NCCLSCOPE_MAX_CHANNELS] = {};
  std::uint64_t user_tag = 0;          // 0: untagged
  std::uint8_t kernel_variant = 0;     // ncclscope_kernel_variant; NONE when not symmetric
  std::uint32_t n_phase_channels = 0;  // entries in phases[], ascending channel order
  ncclscope_channel_phases phases[NCCLSCOPE_MAX_CHANNELS] = {};
};

// A communicator rank's exact op counts from its ring's count table (ncclscope_ring.h): running
// totals since the comm slot took the communicator, the valid keys only.
struct OpCounts {
  std::uint32_t slot = 0;  // comm table index: the counts' identity within the ring
  std::uint64_t comm_id = 0;
  std::uint64_t context = 0;
  std::int32_t rank = 0;
  std::vector<ncclscope_op_count> counts;
};

// One live or finalized communicator from the comm table (consistent copy).
struct CommSlotSnapshot {
  std::uint32_t index = 0;
  std::uint32_t state = 0;  // ncclscope_comm_state
  std::uint64_t comm_id = 0;
  std::uint64_t context = 0;
  std::int32_t rank = 0;
  std::int32_t nranks = 0;
  std::int32_t nnodes = 0;
  std::int32_t cuda_device = -1;
  std::string name;
  std::string gpu_uuid;
  std::string pci_bus_id;
  std::uint64_t ops_enqueued = 0;
  std::uint64_t ops_completed = 0;
  std::uint64_t last_enqueue_ns = 0;
  std::uint64_t last_enqueue_seq = 0;
  std::uint32_t last_enqueue_func = 0;
  std::uint64_t last_complete_ns = 0;
  std::uint64_t last_complete_seq = 0;
  std::uint32_t last_complete_func = 0;
  std::array<ncclscope_recent_op, NCCLSCOPE_RECENT_OPS> recent{};
};

// A communicator from a live ring's comm table, with the ring that lists it (where it runs). Two
// shapes on purpose: the slot is a value the registry keeps (LocalRank::table), the origin lives
// only as long as the pass (RingDirectory drops a ring's origin with the ring).
struct LiveComm {
  CommSlotSnapshot slot;
  const RingOrigin* origin = nullptr;  // never null; valid until the next Poll()
};

enum class OwnerStatus : std::uint8_t {
  kOk,
  kUnknown,    // no process holds the ring's lock with the ring's pid (gone, other pid namespace)
  kAmbiguous,  // several do
};

// The host process that wrote a ring.
struct RingOwner {
  OwnerStatus status = OwnerStatus::kUnknown;
  std::int32_t pid = 0;  // thread group id in the agent's pid namespace
};

// What the join needs to know about the host's processes (ring_owner.h reads /proc; tests inject
// their own).
class HostProcesses {
 public:
  virtual ~HostProcesses() = default;
  // The process that writes `origin`'s ring.
  virtual RingOwner OwnerOf(const profiler::RingOrigin& origin) = 0;
  // The process (thread group id) that task `task` (a thread id) belongs to; nullopt when gone.
  virtual std::optional<std::int32_t> ThreadGroupOf(std::int32_t task) = 0;
};

// What a pass over the rings delivers, in this order: the live rings' communicator tables
// (OnCommTables, once a pass, even when empty), then per ring the records it holds and the exact
// counts of its communicators (after the records: their COMM_INIT comes first).
class RecordSink {
 public:
  virtual ~RecordSink() = default;
  // The LIVE slots of the live rings' communicator tables, read before the pass's records
  // (origins valid until the next pass). A sink that does not track communicators ignores them.
  virtual void OnCommTables(const std::vector<LiveComm>& /*comms*/) {}
  virtual void OnCommInit(const RingOrigin& origin, const ncclscope_comm_init_record& record) = 0;
  virtual void OnCommFinalize(const RingOrigin& origin,
                              const ncclscope_comm_finalize_record& record) = 0;
  virtual void OnOp(const RingOrigin& origin, const OpView& op) = 0;
  virtual void OnProxyOp(const RingOrigin& origin, const ncclscope_proxy_op_record& record) = 0;
  // A communicator rank's exact op counts so far (running totals), every pass for each slot of a
  // ring with a count table, and once more when its process is gone.
  virtual void OnOpCounts(const RingOrigin& /*origin*/, const OpCounts& /*counts*/) {}
};

}  // namespace ncclscope::profiler
