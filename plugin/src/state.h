#pragma once

// Per-event state kept between NCCL's start/record/stop calls. Fields that more than one thread
// touches are relaxed atomics (plain loads and stores on x86 and Arm): the happens-before edges
// come from NCCL's own hand-off of handles between its threads and from the op's `state` word
// (acq_rel read-modify-writes); the atomics only make misuse (handles used from unexpected
// threads) lose precision instead of being undefined behaviour.

#include <atomic>
#include <cstdint>

#include "plugin/ring/ncclscope_ring.h"
#include "plugin/src/handle.h"
#include "plugin/src/pools.h"

namespace ncclscope::plugin {

template <typename T>
inline T Load(const std::atomic<T>& a) {
  return a.load(std::memory_order_relaxed);
}
template <typename T, typename U>
inline void Store(std::atomic<T>& a, U value) {
  a.store(static_cast<T>(value), std::memory_order_relaxed);
}

struct CommState;

// Op completion word (OpState::state).
enum OpStateBits : std::uint32_t {
  kOpEnqueued = 1u << 0,    // NCCL stopped the Coll/P2p event ("enqueued")
  kOpKernelDone = 1u << 1,  // every announced KernelCh stopped, or none was expected
  kOpForced = 1u << 2,      // finalized by the maintenance sweep or the communicator's end
};

inline bool OpComplete(std::uint32_t state) {
  return (state & kOpForced) != 0 ||
         (state & (kOpEnqueued | kOpKernelDone)) == (kOpEnqueued | kOpKernelDone);
}

// One channel's GPU interval, written by the thread that runs KernelCh events. `tag` is the op
// slot's generation << 2 | phase, so a channel left over from the slot's previous op reads as idle
// without being reset when the op is freed.
enum ChannelPhase : std::uint32_t {
  kChannelIdle = 0,
  kChannelStarted = 1,
  kChannelStopped = 2,
};

inline std::uint32_t ChannelTag(std::uint32_t generation, ChannelPhase phase) {
  return generation << 2 | phase;
}

// One channel's GPU interval and (v7) its kernel phases. The phases of a channel arrive between
// its KernelCh start and stop, on the thread that runs KernelCh events (src/plugin/profiler.cc
// :898-941 at 2.31.2): one pending start at a time, durations summed per phase.
struct ChannelTime {
  std::atomic<std::uint64_t> start{0};
  std::atomic<std::uint64_t> stop{0};
  std::atomic<std::uint32_t> tag{0};
  std::atomic<std::uint32_t> phases_present{0};  // bit p: phase p reported (ChannelTag'd below)
  std::atomic<std::uint64_t> phase_start{0};     // GPU start of the phase in progress
  std::atomic<std::uint32_t> phase_ns[NCCLSCOPE_PHASE_COUNT] = {};
  std::uint32_t pad = 0;
};
static_assert(sizeof(ChannelTime) == 48);

// What an op waits for before it is complete (OpState::expect).
enum OpExpect : std::uint8_t {
  kExpectNone = 0,     // no KernelCh will come: complete at NCCL's stop
  kExpectKnown = 1,    // expected_channels KernelCh will come
  kExpectUnknown = 2,  // KernelCh will come, but NCCL did not say how many (CollNet: nChannels 0)
};

struct alignas(64) OpState {
  PoolSlot slot;
  // Identity: written by the enqueuing thread at start, read by whoever finalizes.
  std::atomic<std::uint32_t> comm_index{0};
  std::atomic<std::uint32_t> comm_generation{0};
  std::atomic<std::uint64_t> comm_id{0};
  std::atomic<std::uint64_t> seq{0};
  std::atomic<std::uint64_t> count{0};
  std::atomic<std::uint64_t> bytes{0};
  std::atomic<std::uint64_t> enqueue_ns{0};
  std::atomic<std::uint64_t> enqueue_stop_ns{0};
  std::atomic<std::uint64_t> op_index{0};
  std::atomic<std::int32_t> rank{0};
  std::atomic<std::int32_t> peer{-1};
  std::atomic<std::uint32_t> comm_slot{UINT32_MAX};
  std::atomic<std::uint32_t> plan{0};  // kernel plan number (0: unknown), see CommState
  std::atomic<std::uint16_t> flags{0};
  // The ops its record stands for (ncclscope_op_record.weight); 0: counted, not recorded.
  std::atomic<std::uint32_t> weight{1};
  std::atomic<std::uint8_t> kind{0};
  std::atomic<std::uint8_t> func{0};
  std::atomic<std::uint8_t> datatype{0};
  std::atomic<std::uint8_t> algo{0};
  std::atomic<std::uint8_t> proto{0};
  std::atomic<std::uint8_t> n_channels{0};
  std::atomic<std::uint8_t> n_warps{0};
  std::atomic<std::uint8_t> expected_channels{0};
  std::atomic<std::uint8_t> expect{kExpectNone};  // OpExpect
  std::atomic<std::uint8_t> mask_uncertain{0};    // waits for KernelCh its mask copy may lack
  std::atomic<std::uint8_t> kernel_untimed{0};    // ABI v3: KernelCh without GPU timestamps
  std::atomic<std::uint8_t> kernel_variant{0};    // ncclscope_kernel_variant (v7)
  std::atomic<std::uint64_t> user_tag{0};         // v7 userTag (0: untagged)
  // Completion.
  std::atomic<std::uint32_t> state{0};
  // KernelCh side (the proxy / profiler thread).
  alignas(64) std::atomic<std::uint32_t> channels_started{0};
  std::atomic<std::uint32_t> channels_stopped{0};
  std::atomic<std::uint64_t> last_kernel_ns{0};  // host time of the latest KernelCh event
  std::atomic<std::uint64_t> timed_mask{0};      // channels that reported start and stop
  std::atomic<std::uint64_t> phase_mask{0};      // channels that reported a kernel phase (v7)
  ChannelTime channels[NCCLSCOPE_MAX_CHANNELS];
};

// Step slot inside a ProxyOp: NCCL keeps at most NCCL_STEPS (8) step events per sub-op alive and
// indexes them by step % 8, so the ProxyStep handle is (proxy op, step % 8).
inline constexpr std::uint32_t kStepSlots = 8;
inline constexpr std::uint32_t kNoStepState = 0xFF;

struct StepSlot {
  std::atomic<std::uint32_t> active{0};
  std::atomic<std::uint32_t> state{kNoStepState};  // ncclscope_step_state
  std::atomic<std::uint64_t> state_since{0};
  std::atomic<std::uint64_t> started{0};
  std::atomic<std::uint64_t> trans_size{0};
};

// How a ProxyOp is known to be a network operation (ProxyOpState::network). NCCL starts a ProxyOp
// for every proxy op of every transport (src/proxy.cc:427 at v2.28.9-1) but only the network
// transport progresses (InProgress, steps) and stops it (src/transport/net.cc:1228/1364 send,
// :1409/:1635 recv); CollNet, P2P copy-engine and SHM-memcpy proxy ops are started and never
// stopped. `isSend` is set only for network sends (src/plugin/profiler.cc:492), so at start a
// network receive looks exactly like those.
enum ProxyNetwork : std::uint8_t {
  kProxyUnclassified = 0,  // not yet seen doing network work
  kProxyIsNetwork = 1,     // a network send, or an op that showed network activity
  kProxyReleased = 2,      // released without network work; its handle is dead
};
// ProxyOpState::network: the state tagged with the generation (as handles carry it) of the
// ProxyOp it belongs to. A change made through a stale view of the slot - the sweep or a finalize
// that checked the generation, then lost the CPU while the op was freed and the slot given to the
// next ProxyOp, or a step of a freed op - compares against the tag and cannot land on the next
// occupant (a plain state let the sweep release a live receive, and a dead op's step count on
// the op that reused its slot).
inline std::uint32_t ProxyNetworkWord(std::uint32_t generation, ProxyNetwork state) {
  return (generation & kGenerationMask) << 8 | state;
}
inline ProxyNetwork ProxyNetworkState(std::uint32_t word) {
  return static_cast<ProxyNetwork>(word & 0xFF);
}

struct alignas(64) ProxyOpState {
  PoolSlot slot;
  std::atomic<std::uint32_t> comm_index{0};  // 0 with flags FOREIGN
  std::atomic<std::uint32_t> comm_generation{0};
  std::atomic<std::uint64_t> comm_id{0};
  std::atomic<std::uint64_t> seq{0};
  std::atomic<std::uint64_t> op_index{0};
  std::atomic<std::uint64_t> start_ns{0};
  std::atomic<std::uint64_t> in_progress_ns{0};
  std::atomic<std::uint64_t> origin_context{0};
  std::atomic<std::uint64_t> origin_parent{0};
  std::atomic<std::int32_t> rank{0};
  std::atomic<std::int32_t> peer{0};
  std::atomic<std::int32_t> origin_pid{0};
  std::atomic<std::int32_t> n_steps{0};
  std::atomic<std::int32_t> chunk_size{0};
  std::atomic<std::uint32_t> comm_slot{UINT32_MAX};
  // The parent op (this process only), to release the op if it never does network work.
  std::atomic<std::uint32_t> parent_index{UINT32_MAX};
  std::atomic<std::uint32_t> parent_generation{0};
  // The parent's plan, or when the parent was already gone at start (an op without KernelCh
  // completes at NCCL's stop, which races the proxy thread), the communicator's latest plan then:
  // a bound that later timed plans still beat.
  std::atomic<std::uint32_t> parent_plan{0};
  std::atomic<std::uint16_t> flags{0};
  std::atomic<std::uint32_t> weight{1};  // its op's (OpState::weight); 0: no record
  std::atomic<std::uint8_t> channel{0};
  std::atomic<std::uint8_t> is_send{0};
  std::atomic<std::uint8_t> func{0};
  std::atomic<std::uint32_t> network{0};      // ProxyNetworkWord
  std::atomic<std::uint8_t> parent_timed{0};  // the parent op waits for KernelCh
  std::atomic<std::uint8_t> net_type{0};      // ncclscope_net_type
  // The NIC, from net-plugin events.
  std::atomic<std::int32_t> net_dev_index{-1};
  std::atomic<std::uint32_t> qp_num[2] = {};
  // Accumulated by step events (the proxy thread).
  std::atomic<std::uint64_t> bytes{0};
  std::atomic<std::uint64_t> max_step_ns{0};
  std::atomic<std::int32_t> steps_done{0};
  std::atomic<std::uint64_t> state_ns[NCCLSCOPE_STEP_STATE_COUNT] = {};
  StepSlot steps[kStepSlots];
};

// The identity of an op completed at NCCL's stop of its task, for the ProxyOps NCCL's proxy
// thread starts after that (RetireOp, records.cc). Under ABI v1/v2 (NCCL 2.23-2.25) there is no
// KernelCh to wait for: every op completes at its stop and its slot is reused while the proxy
// thread is still to start its network ops. NCCL stops the task right after handing its proxy ops
// over (hostStreamPlanTask, src/enqueue.cc:1432-1443 at v2.23.4-1) and starts a ProxyOp only when
// the network transport finds it ready (src/transport/net.cc:1047, :1236 at v2.23.4-1): nearly
// always later. By op_index: enough for a plan of 512 send/recv pairs (an all-to-all over 512
// ranks) started after the next plan's stops. A seqlock per entry; `handle` is the op's handle
// (0: empty). (v3+ ops wait for their KernelCh, started after the ProxyOps; with KernelCh off their
// ProxyOps may still name no parent.)
inline constexpr std::uint32_t kRetiredOps = 1024;  // per communicator rank (40 KiB)
struct RetiredOp {
  std::atomic<std::uint32_t> version{0};  // odd while being written
  std::atomic<std::uint32_t> plan{0};
  std::atomic<std::uint64_t> handle{0};
  std::atomic<std::uint64_t> seq{0};
  std::atomic<std::uint64_t> op_index{0};
  std::atomic<std::uint32_t> weight{0};
  std::atomic<std::uint8_t> func{0};
  std::atomic<std::uint8_t> algo{0};
};

// One communicator (one rank of it) in this process: NCCL's profiler context.
struct alignas(64) CommState {
  PoolSlot slot;
  std::atomic<std::uint32_t> live{0};
  // ABI v1-v3: init carries no identity; the first op's descriptor gives the hash and the rank
  // (1 until then; the op that clears it publishes the identity, runtime.cc).
  std::atomic<std::uint32_t> identity_pending{0};
  std::atomic<std::uint64_t> comm_id{0};
  std::atomic<std::int32_t> rank{0};
  std::atomic<std::int32_t> nranks{0};
  std::atomic<std::int32_t> nnodes{0};
  std::atomic<std::int32_t> cuda_device{0};          // -1: unknown (the governor's local GPUs)
  std::atomic<std::uint32_t> comm_slot{UINT32_MAX};  // index in the ring's comm table
  std::atomic<std::uint64_t> context_value{0};       // the encoded handle NCCL holds
  // Per-peer p2p counters: [0, nranks) sends, [nranks, 2 nranks) receives. Allocated at init.
  std::atomic<std::uint64_t>* p2p_seq = nullptr;
  std::atomic<std::uint32_t> p2p_peers{0};
  // Exact-count keys claimed in its comm slot's part of the ring's count table (CountOp).
  std::atomic<std::uint32_t> count_keys{0};
  // kRetiredOps entries (RetiredOp), allocated at an ABI v1/v2 init and kept with the slot like
  // p2p_seq; nullptr otherwise or without memory (the ProxyOps of such ops then name no parent).
  RetiredOp* retired = nullptr;
  // Enqueue side.
  alignas(64) std::atomic<std::uint64_t> ops_enqueued{0};
  // Completion side.
  alignas(64) std::atomic<std::uint64_t> ops_completed{0};
  std::atomic<std::uint64_t> ops_flushed{0};
  // Plans of one communicator run on the GPU one after another (every launch waits on the
  // communicator's deviceStream, src/enqueue.cc:1495-1503 at v2.28.9-1), while the ops inside one
  // plan run concurrently and complete in any order. So "a later plan has completed an op with GPU
  // timing" proves that every earlier plan's kernel is done, and nothing else does.
  std::atomic<std::uint32_t> max_timed_plan{0};    // latest plan with an op completed with timing
  std::atomic<std::uint32_t> swept_timed_plan{0};  // max_timed_plan at the previous sweep
  std::atomic<std::uint32_t> latest_plan{0};       // latest plan that started an op
};

// Plan numbers wrap (32 bits); `a` comes before `b` when the distance is below half the range.
inline bool PlanBefore(std::uint32_t a, std::uint32_t b) {
  return a != 0 && b != 0 && static_cast<std::int32_t>(a - b) < 0;
}

}  // namespace ncclscope::plugin
