#pragma once

// The plugin's process-wide state: settings, the ring, the state pools, the controls in force and
// the NCCL event mask. Created at the first communicator init and never destroyed (the library is
// linked -z nodelete, so NCCL's dlclose never unloads it and a later init finds the same ring).

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <new>

#include "platform/pod_vector.h"
#include "platform/posix_thread.h"
#include "plugin/abi/nccl_profiler_abi.h"
#include "plugin/ring/ring_writer.h"
#include "plugin/src/governor.h"
#include "plugin/src/handle.h"
#include "plugin/src/pools.h"
#include "plugin/src/record_rate.h"
#include "plugin/src/settings.h"
#include "plugin/src/state.h"

namespace ncclscope::plugin {

struct Runtime {
  // Init, finalize and the maintenance thread's lifecycle; never taken on the event path.
  platform::Mutex lifecycle;
  bool initialized = false;  // settings read, pools reserved, ring attempted
  bool active = false;       // ring up and events wanted
  bool warned = false;       // "plugin inactive" logged once
  Settings settings;
  ring::RingWriter ring;
  SlotArena ops;
  SlotArena proxy_ops;
  SlotArena comms;
  pid_t pid = 0;
  int abi_version = 0;
  abi::DebugLogger logger = nullptr;
  std::uint32_t live_comms = 0;
  // Finalized comm slots, oldest first: one is reused only NCCLSCOPE_COMM_SLOT_REUSE_NS after its
  // finalize, so the agent reads its last state and exact counts before they are reset.
  struct FreedSlot {
    std::uint32_t index;
    std::uint64_t freed_ns;
  };
  platform::PodQueue<FreedSlot> free_comm_slots;
  std::uint32_t next_comm_slot = 0;
  // Every per-peer p2p counter array ever allocated (CommState lives in an mmap'd arena; this list
  // keeps them reachable). Never freed: a stale event on a reused slot may still read one.
  platform::PodVector<std::atomic<std::uint64_t>*> p2p_arrays;
  platform::PodVector<RetiredOp*> retired_arrays;  // every CommState::retired, kept the same way

  // The NCCL event mask: NCCL's process-global int (saved from init) and what we last put there.
  // NCCL copies it into every task at the API call (its "snapshot", src/plugin/profiler.cc:218 and
  // src/enqueue.cc:2403/2486 at v2.28.9-1; at task append in 2.27, src/enqueue.cc:2292/2370 at
  // v2.27.7-1) and that copy alone decides which child events the task gets. To know the copy,
  // the plugin changes the int where no API call can be between NCCL's read and the plugin's own
  // (see WriteNcclMask in runtime.cc).
  std::atomic<int*> mask_ptr{nullptr};
  std::atomic<std::uint32_t> current_mask{0};
  std::atomic<std::uint32_t> pending_mask{0};   // what the controls and duty cycle want now
  std::atomic<std::uint64_t> mask_write_ns{0};  // host time of the latest write
  std::atomic<std::uint64_t> kernel_off_ns{0};  // host time KernelCh was last switched off
  std::atomic<std::uint32_t> kernel_flip_write{
      0};  // number of the last write that changed KernelCh
  std::atomic<std::uint32_t> kernel_flip_writer{0};  // thread token of that writer
  std::atomic<std::uint64_t> kernel_flip_ns{0};      // host time of that write
  std::atomic<std::uint8_t> kernel_flip_idle{0};     // it was MaskWriter::kIdleMaintenance
  std::atomic<std::uint32_t> mask_writes{0};         // writes so far
  std::atomic<std::uint32_t> api_events_seen{0};     // an API event ran since the last maintenance
  std::atomic<std::uint32_t> plans{0};               // kernel plans (Group events) so far
  std::atomic<std::uint32_t> proxy_pressure{0};      // a ProxyOp found no free slot since the sweep
  // NCCL 2.31+ replaced the mask under us (RAS CONTROL PROFILER_MASK): followed, never written
  // (CheckMaskOverride in runtime.cc). maintenance thread: suspect_value, suspect_passes.
  std::atomic<std::uint32_t> mask_overridden{0};
  std::uint32_t override_suspect = 0;
  std::uint32_t override_suspect_writes = 0;
  std::uint32_t override_suspect_passes = 0;

  // Controls in force (environment, controls file, then the agent through the ring header).
  std::atomic<std::uint32_t> event_mask{0};
  std::atomic<std::uint64_t> min_bytes{0};
  std::atomic<std::uint64_t> duty_period_ns{0};
  std::atomic<std::uint32_t> kernel_duty_pm{1000};
  std::atomic<std::uint32_t> proxy_duty_pm{1000};
  std::atomic<std::uint32_t> overhead_budget_ppm{0};
  std::atomic<std::uint32_t> record_one_in{1};
  std::atomic<std::uint32_t> record_rate_limit{0};
  // The power of two the rate limit multiplies record_one_in by (record_rate.h), and the state of
  // its window (maintenance thread only).
  std::atomic<std::uint32_t> record_rate_factor{1};
  record_rate::Window record_window;
  std::uint32_t applied_control_seq = 0;  // maintenance thread only

  // The overhead governor (governor.h): timing accumulators and the duty-cycle limits it sets.
  governor::State gov;

  // Maintenance thread (controls, duty cycle, clock anchor, stale-op sweep).
  platform::Thread maintenance;
  platform::CondVar wake;
  bool stop_maintenance = false;  // guarded by `lifecycle`
};

// Created when the library is loaded (before NCCL can call anything), never destroyed: NCCL's
// threads and our maintenance thread may outlive static destructors.
extern Runtime* const g_runtime;
// The storage g_runtime points to (runtime.cc). R() names it directly: its fields are then at
// addresses the linker fixes (one RIP-relative load each), where through g_runtime, which the
// compiler cannot see is constant, every handler first loaded the pointer (~25 loads per
// 8-channel collective).
alignas(Runtime) extern unsigned char g_runtime_storage[sizeof(Runtime)];
inline Runtime& R() { return *std::launder(reinterpret_cast<Runtime*>(g_runtime_storage)); }

// ---- Event path ----
// mask_tracking.cc (the mask, API and Group events), op_events.cc, kernel_events.cc,
// proxy_events.cc, event_dispatch.cc (stop and state records), records.cc

struct OpArgs {
  std::uint8_t kind = NCCLSCOPE_KIND_COLL;
  // v5+: the CollApi/P2pApi handle (our kApi, carrying NCCL's mask snapshot); v4: the Group.
  const void* parent = nullptr;
  const void* parent_group = nullptr;  // the Group handle (our kGroup, carrying the plan number)
  std::uint64_t seq = 0;
  const char* func = nullptr;
  std::uint64_t count = 0;
  int root = -1;  // coll: root; p2p: peer
  const char* datatype = nullptr;
  std::uint8_t n_channels = 0;
  std::uint8_t n_warps = 0;
  const char* algo = nullptr;
  const char* proto = nullptr;
  int rank = 0;
  // ABI v1-v3: the communicator's identity, which these versions give with every Coll/P2p
  // (coll.commHash, rank) and not at init.
  bool identity_from_op = false;
  std::uint64_t comm_hash = 0;
  // ABI v3: KernelCh will come, untimed and of a number NCCL does not announce (nMaxChannels is
  // the tuner's upper bound, src/enqueue.cc:390 at v2.26.6-1).
  bool kernel_untimed = false;
  // ABI v1/v2: NCCL 2.23-2.25 have no KernelCh at all, whatever the mask ever said.
  bool no_kernel_events = false;
  // ABI v7.
  std::uint64_t user_tag = 0;
  bool symmetric = false;
  const char* kernel_variant = nullptr;
};

struct ProxyOpArgs {
  void* parent = nullptr;
  int rank = 0;
  pid_t pid = 0;
  std::uint8_t channel = 0;
  int peer = 0;
  int n_steps = 0;
  int chunk_size = 0;
  int is_send = 0;
  // ABI v1-v3: only NCCL's network transport starts ProxyOps before 2.27 (src/transport/net.cc
  // at v2.23.4-1 .. v2.26.6-1; src/proxy.cc starts none), so every one is a network op.
  bool network_known = false;
};

// API events (v5+): GroupApi, CollApi, P2pApi. Returns a stateless handle carrying the mask
// snapshot NCCL took for this API call, the call's datatype and whether it was captured into a
// CUDA graph; CollApi/P2pApi also apply a pending mask change (it takes effect from the next API
// call on).
void* StartApi(std::uint64_t type, const char* datatype, bool graph_captured = false);
// Group (one kernel plan): a stateless handle carrying the plan's number.
void* StartGroup();
// NetPlugin: which NIC and queue pair a network step used (parent: the ProxyStep).
void StartNetPlugin(void** handle, const void* parent, std::int64_t plugin_id, const void* data);
void StartOp(void* context, void** handle, const OpArgs& args);
void StartKernelCh(void* context, void** handle, void* parent, std::uint8_t channel,
                   std::uint64_t ptimer);
void StartProxyOp(void* context, void** handle, const ProxyOpArgs& args);
void StartProxyStep(void* context, void** handle, void* parent, int step);
// v7: one phase of a kernel channel (parent: the KernelCh handle); its stop time comes with
// recordEventState(KernelPhaseStop).
void StartKernelPhase(void** handle, const void* parent, std::uint8_t phase, std::uint64_t ptimer);
void StopEvent(void* handle);
void RecordEventState(void* handle, int state, const abi::StateArgsV4* args);
// v1-v3: a ProxyOp state 0-7 (SendPosted ... RecvDone) with the op's bytes so far.
void RecordProxyOpStateV1(void* handle, int state, std::uint64_t trans_size);
// The KernelCh stop and its KernelChStop record, which StopEvent and RecordEventState dispatch
// to; the exported entry points call them directly (exports.cc, "KernelCh entry").
void StopKernelCh(void* handle);
void RecordKernelChStop(void* handle, const abi::StateArgsV4* args);

// Lookups with generation checks (inline: every event does one); nullptr when the handle is
// stale, foreign or of another kind.
inline CommState* FindComm(const void* context, std::uint32_t* index = nullptr) {
  const Handle h = DecodeHandle(context);
  if (h.kind != HandleKind::kContext) return nullptr;
  SlotArena& arena = R().comms;
  if (h.index >= arena.carved()) return nullptr;
  auto* comm = reinterpret_cast<CommState*>(arena.At(h.index));
  if (comm->slot.generation.load(std::memory_order_acquire) != h.generation) return nullptr;
  if (comm->live.load(std::memory_order_acquire) == 0) return nullptr;
  if (index != nullptr) *index = h.index;
  // Never null below carved() (as FindOp's): the caller's "not found" test is not repeated on
  // this path (measured: 2 instructions per Coll/P2p start).
  if (comm == nullptr) __builtin_unreachable();
  return comm;
}

inline OpState* FindOp(const void* handle, std::uint32_t* index = nullptr,
                       std::uint32_t* generation = nullptr) {
  const Handle h = DecodeHandle(handle);
  if (h.kind != HandleKind::kOp && h.kind != HandleKind::kKernelCh) return nullptr;
  SlotArena& arena = R().ops;
  if (h.index >= arena.carved()) return nullptr;
  auto* op = reinterpret_cast<OpState*>(arena.At(h.index));
  const std::uint32_t slot_generation = op->slot.generation.load(std::memory_order_acquire);
  if (slot_generation != h.generation) return nullptr;
  if (index != nullptr) *index = h.index;
  // The handle's generation, as the slot's word holds it: the compiler knows no more of the
  // decoded one than that it fits 20 bits, and masked it again for each channel tag.
  if (generation != nullptr) *generation = slot_generation;
  // A slot below carved() is never null (the arena's base is set before any is carved): told to
  // the compiler, the caller's "not found" test is not repeated on this path (2 instructions in
  // each KernelCh start and record).
  if (op == nullptr) __builtin_unreachable();
  return op;
}

inline ProxyOpState* FindProxyOp(const void* handle, HandleKind kind, std::uint32_t* index,
                                 std::uint32_t* sub, std::uint32_t* generation = nullptr) {
  const Handle h = DecodeHandle(handle);
  if (h.kind != kind) return nullptr;
  SlotArena& arena = R().proxy_ops;
  if (h.index >= arena.carved()) return nullptr;
  auto* po = reinterpret_cast<ProxyOpState*>(arena.At(h.index));
  if (po->slot.generation.load(std::memory_order_acquire) != h.generation) return nullptr;
  if (index != nullptr) *index = h.index;
  if (sub != nullptr) *sub = h.sub;
  if (generation != nullptr) *generation = h.generation;
  return po;
}

// Marks the ProxyOp of `generation` (its handle's) as doing network work; false when it was
// already released or the slot has passed to another ProxyOp (its handle is dead).
bool ClaimNetwork(ProxyOpState* po, std::uint32_t generation);
// Releases an unclassified ProxyOp that will never do network work (no record is written): its
// parent op is gone and either had GPU timing, or a later plan of its communicator has completed
// with GPU timing (`plan_evidence`: that communicator's max_timed_plan, or the value of one sweep
// ago when another thread asks), or (max_age_ns != 0) it is older than max_age_ns.
enum class ReleaseResult { kReleased, kKept, kGone };
enum class PlanEvidence { kLatest, kSwept };
ReleaseResult ReleaseIfNoNetwork(std::uint32_t index, std::uint32_t generation,
                                 std::uint64_t max_age_ns, PlanEvidence plan_evidence);
// Sets the NCCL event mask now, remembering what it replaces and when (see StartApi).
// Who writes NCCL's int: a job thread (an API event right after NCCL's read, or a communicator's
// init) or the maintenance thread while no API event ran for a whole pass.
enum class MaskWriter : std::uint8_t { kJobThread, kIdleMaintenance };
void WriteNcclMask(std::uint32_t mask, MaskWriter writer = MaskWriter::kJobThread);

// Marks an op's kernel as done (all the KernelCh it will get have stopped) and completes it if it
// is also enqueued; `when_ns` (0: now) is the completion time its record gets.
void CompleteKernel(std::uint32_t index, std::uint32_t generation, std::uint64_t when_ns = 0);
// The same for an op its caller found (FindOp): the slot's lookup by index is not repeated
// (measured: 9 instructions per op completed by its last KernelCh stop).
void CompleteKernelOf(OpState* op, std::uint32_t index, std::uint32_t generation,
                      std::uint64_t when_ns = 0);
// Completes an op that NCCL will not complete (communicator ended, KernelCh that never came).
// `flags` are added to the record (ncclscope_op_flag). Returns whether this call finalized it.
bool ForceFinalizeOp(std::uint32_t index, std::uint32_t generation, std::uint16_t flags);
// Emits a ProxyOp record for a ProxyOp still running when its communicator ends and frees it.
void FlushProxyOp(std::uint32_t index, std::uint32_t generation);

// ---- Lifecycle (runtime.cc) ----

abi::Result Init(void** context, std::uint64_t comm_id, int* mask, const char* name, int nnodes,
                 int nranks, int rank, abi::DebugLogger logger, int abi_version);
abi::Result Finalize(void* context);
// ABI v1-v3: the communicator's hash and rank, from its first op. Publishes them in the comm slot
// and writes the COMM_INIT record (nranks and nnodes unknown: 0). Called once per communicator,
// by the op that cleared identity_pending.
void PublishCommIdentity(CommState* comm, std::uint64_t comm_id, int rank);

// The mask NCCL should use now (controls, duty cycle, what this ABI version knows).
std::uint32_t DesiredMask(std::uint64_t now_ns);
// One maintenance pass: controls from the agent, duty-cycle flips, stale ops. Exposed for tests.
void MaintenancePass(std::uint64_t now_ns);

}  // namespace ncclscope::plugin
