// Coll, P2p and CeColl ops: their start (what NCCL's descriptor says, what the op waits for,
// publishing it), NCCL's stop ("enqueued"), and the completion that the stop or the last kernel
// channel triggers (the op's state word: event_helpers.h).

#include "plugin/src/op_events.h"

#include <atomic>
#include <cstdint>

#include "plugin/src/clock.h"
#include "plugin/src/event_helpers.h"
#include "plugin/src/handle.h"
#include "plugin/src/mask_tracking.h"
#include "plugin/src/names.h"
#include "plugin/src/records.h"
#include "plugin/src/runtime.h"

namespace ncclscope::plugin {
namespace {

// The weight of the op's record (OpState::weight) under plugin.record_one_in and
// plugin.record_rate_limit: the one-in in force when ncclscope_op_recorded() picks the op, 0
// when it is only counted. A p2p op without our per-peer count has no seq its peer shares (seq is
// NCCL's, 0 for p2p before 2.29): always recorded.
std::uint32_t RecordWeight(const Runtime& r, std::uint8_t kind, std::uint8_t func,
                           std::uint16_t flags, std::uint64_t comm_id, std::uint64_t seq,
                           std::int32_t rank, std::int32_t peer) {
  const std::uint32_t one_in = record_rate::OneIn(r);  // record_one_in x the rate limit's factor
  if (one_in <= 1) return 1;
  if (kind == NCCLSCOPE_KIND_P2P && (flags & NCCLSCOPE_OP_P2P_SEQ_PER_PEER) == 0) return 1;
  const std::uint64_t key = ncclscope_op_sample_key(kind, func, rank, peer);
  return ncclscope_op_recorded(comm_id, key, seq, one_in) != 0 ? one_in : 0;
}

// Adds one op to the communicator's exact counts, in its comm slot's part of the ring's count
// table (ncclscope_ring.h): a probe of a small open-addressed table (usually its first entry) and
// two atomic adds. Keys beyond the table's room (NCCLSCOPE_COUNT_KEYS less one per function) count
// under their function's overflow key. False when the communicator has no table (no ring, no comm
// slot): its op records then carry the count (without NCCLSCOPE_OP_COUNTED).
bool CountOp(CommState* comm, std::uint8_t func, std::uint8_t algo, std::uint8_t proto,
             std::uint64_t bytes) {
  ncclscope_op_count* table = R().ring.count_table(Load(comm->comm_slot));
  if (table == nullptr) return false;
  std::atomic<std::uint32_t>& keys_used = comm->count_keys;
  std::uint32_t key = ncclscope_count_key(func, algo, proto, ncclscope_size_class(bytes));
  constexpr std::uint32_t kMask = NCCLSCOPE_COUNT_KEYS - 1;
  static_assert((NCCLSCOPE_COUNT_KEYS & kMask) == 0, "a power of two");
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::uint32_t i = (key * 0x9E3779B1u >> 20) & kMask;
    for (std::uint32_t probe = 0; probe < NCCLSCOPE_COUNT_KEYS; ++probe, i = (i + 1) & kMask) {
      std::atomic_ref<std::uint32_t> entry_key(table[i].key);
      std::uint32_t found = entry_key.load(std::memory_order_relaxed);
      if (found == 0) {
        // A new key: only while room is left for every function's overflow key.
        const bool overflow_key = (key >> 12 & 0xF) == NCCLSCOPE_SIZE_CLASS_OVERFLOW;
        if (!overflow_key && Load(keys_used) >= NCCLSCOPE_COUNT_KEYS - NCCLSCOPE_FUNC_COUNT) break;
        if (entry_key.compare_exchange_strong(found, key, std::memory_order_relaxed)) {
          keys_used.fetch_add(1, std::memory_order_relaxed);
          found = key;
        }
      }
      if (found != key) continue;
      std::atomic_ref<std::uint64_t>(table[i].ops).fetch_add(1, std::memory_order_relaxed);
      std::atomic_ref<std::uint64_t>(table[i].bytes).fetch_add(bytes, std::memory_order_relaxed);
      return true;
    }
    R().ring.Count(NCCLSCOPE_CTR_COUNT_KEYS_OVERFLOW);
    key = ncclscope_count_key(func, NCCLSCOPE_ALGO_UNKNOWN, NCCLSCOPE_PROTO_UNKNOWN,
                              NCCLSCOPE_SIZE_CLASS_OVERFLOW);
  }
  // Every function's overflow key has room, but for claims racing past the room check at once.
  return false;
}

// What an op is, in the plugin's codes, from NCCL's descriptor and the API call's mask copy.
struct OpDescription {
  std::uint64_t comm_id = 0;
  std::uint64_t seq = 0;
  std::uint64_t count = 0;
  std::uint64_t bytes = 0;
  std::int32_t rank = 0;
  std::int32_t peer = -1;
  std::uint16_t flags = 0;
  std::uint8_t func = 0;
  std::uint8_t datatype = NCCLSCOPE_DT_UNKNOWN;
  std::uint8_t algo = NCCLSCOPE_ALGO_NONE;
  std::uint8_t proto = NCCLSCOPE_PROTO_NONE;
};

// Step 1, describe: identity, sizes, function, algorithm; and the op is counted here, exactly,
// since the minimum size, a full pool or record_one_in may leave it out after this
// (ncclscope_ring.h, the count table). Its identity follows once the op is kept
// (IdentifyOp).
OpDescription DescribeOp(CommState* comm, const OpArgs& args, const TaskMask& task_mask) {
  OpDescription d;
  d.func = names::Func(args.func);
  d.datatype = names::Datatype(args.datatype);
  std::uint64_t size = ncclscope_datatype_size(d.datatype);
  if (size == 0) {
    // NCCL 2.28-2.30 name ncclUint8 "Unknown" (no case in ncclDatatypeToString).
    size = 1;
    d.flags |= NCCLSCOPE_OP_DATATYPE_ASSUMED;
  }
  // Saturating: an absurd count must not wrap into a plausible size.
  d.bytes = args.count > UINT64_MAX / size ? UINT64_MAX : args.count * size;
  if (args.kind == NCCLSCOPE_KIND_COLL && args.symmetric) {
    // v7 symmetric kernels: algo is the variant's suffix and proto "" (src/plugin/profiler.cc
    // :610-614 at 2.31.2); the variant itself names the kernel.
    d.algo = NCCLSCOPE_ALGO_SYMMETRIC;
    d.flags |= NCCLSCOPE_OP_SYMMETRIC;
  } else if (args.kind == NCCLSCOPE_KIND_COLL) {
    d.algo = names::Algo(args.algo);
    d.proto = names::Proto(args.proto);
  }
  // Every op is counted, exactly, before anything below may leave it out (the minimum size, a
  // full pool, record_one_in): ncclscope_ring.h, the count table.
  if (CountOp(comm, d.func, d.algo, d.proto, d.bytes)) d.flags |= NCCLSCOPE_OP_COUNTED;
  d.count = args.count;
  // AllGather and Broadcast tasks carry count in bytes and datatype ncclInt8
  // (src/enqueue.cc:2476-2480 at v2.28.9-1); the API's own count and type came with the CollApi.
  // The function first, by itself: evaluated together, the compiler computed every term for
  // every op (measured: ~10 instructions per op that is neither).
  if (d.func != NCCLSCOPE_FUNC_ALL_GATHER && d.func != NCCLSCOPE_FUNC_BROADCAST) return d;
  const std::uint32_t api_size = ncclscope_datatype_size(task_mask.api_datatype);
  if (d.datatype == NCCLSCOPE_DT_INT8 && api_size != 0 && task_mask.api_datatype != d.datatype) {
    d.count = args.count / api_size;
    d.datatype = task_mask.api_datatype;
    d.flags |= NCCLSCOPE_OP_API_COUNT;
  }
  return d;
}

// Step 1 continued, identify: the op's communicator, rank, peer and sequence number, the cross-rank
// join key. Only for an op that is kept (not filtered, a slot found): NCCL has no p2p sequence
// number, so one is counted per (comm, direction, peer) — the k-th send to a peer matches that
// peer's k-th receive — and an op left out must not take one.
void IdentifyOp(CommState* comm, const OpArgs& args, OpDescription* d) {
  d->seq = args.seq;
  d->peer = args.root;
  d->rank = args.identity_from_op ? args.rank : Load(comm->rank);
  d->comm_id = args.identity_from_op ? args.comm_hash : Load(comm->comm_id);
  if (args.kind != NCCLSCOPE_KIND_P2P) return;
  const std::uint32_t peers = Load(comm->p2p_peers);
  if (comm->p2p_seq != nullptr && args.root >= 0 && static_cast<std::uint32_t>(args.root) < peers) {
    std::atomic<std::uint64_t>& counter =
        comm->p2p_seq[(d->func == NCCLSCOPE_FUNC_RECV ? peers : 0) +
                      static_cast<std::uint32_t>(args.root)];
    d->seq = Load(counter);
    Store(counter, d->seq + 1);
    d->flags |= NCCLSCOPE_OP_P2P_SEQ_PER_PEER;
  }
}

// What the op waits for and whether it is recorded.
struct OpExpectation {
  OpExpect expect = kExpectNone;
  std::uint8_t expected = 0;  // KernelCh announced (kExpectKnown)
  std::uint16_t flags = 0;    // added to the description's
  std::uint32_t plan = 0;     // the Group's plan number, 0 = unknown
  bool uncertain = false;     // KernelCh of NCCL's copy unknown (TaskMask::uncertain)
};

// Step 2, expect: which KernelCh complete the op (from NCCL's mask copy for the call, not the mask
// now), whether its network steps are recorded, and its plan. (Whether record_one_in records it,
// RecordWeight, is decided as it is published: it needs every flag.)
OpExpectation ExpectOp(CommState* comm, const OpArgs& args, const TaskMask& task_mask,
                       const OpDescription& d) {
  OpExpectation e;
  // What completes the op. KernelCh come only from profiler proxy ops, which exist only when the
  // task's own mask copy had KernelCh (ncclProfilerNeedsProxy, src/plugin/profiler.cc:677).
  // Copy-engine collectives are issued by the host (v6); they have no kernel channels. Self
  // send/recv get no proxy ops at all, so no KernelCh (nProxyOps = selfSend ? 0 : 2,
  // src/enqueue.cc:805 at v2.28.9-1) although NCCL reports nChannels >= 1.
  // v7 symmetric collectives: KernelCh only for the plan's head task, which announces the plan's
  // channels (the others 0), and none at all when captured into a CUDA graph, whose kernel is
  // the uninstrumented one although the head still announces them (src/plugin/profiler.cc
  // :600-604, :1271, :1286 at 2.31.2).
  const bool symmetric_untimed =
      args.symmetric && (args.n_channels == 0 || task_mask.graph_captured);
  const bool no_kernel_ever = args.kind == NCCLSCOPE_KIND_CE || args.no_kernel_events ||
                              (args.kind == NCCLSCOPE_KIND_P2P && d.peer == d.rank) ||
                              symmetric_untimed;
  if (!no_kernel_ever && task_mask.kernel_candidate) {
    // A number of KernelCh NCCL announces, or an unknown one: ABI v3 announces only an upper bound
    // (nMaxChannels), and CollNet tasks keep nChannels 0 (task->nChannels is set only on the
    // ring/tree/NVLS path, src/enqueue.cc:638 at v2.28.9-1) yet get one KernelCh per channel of
    // channelLo..channelHi (:579-597).
    const bool announced = !args.kernel_untimed && args.n_channels != 0;
    e.expect = announced ? kExpectKnown : kExpectUnknown;
    e.expected = announced ? args.n_channels : 0;
  }
  if (((task_mask.mask & kEventKernelCh) == 0 || args.no_kernel_events) &&
      e.expect == kExpectNone && args.kind != NCCLSCOPE_KIND_CE) {
    e.flags |= NCCLSCOPE_OP_KERNEL_NOT_REQUESTED;
  }
  // Tells the agent whether the op's network steps were recorded (proxy duty cycle), so that it
  // can split the op's traffic into network and intra-node bytes (agent/analytics).
  if ((task_mask.mask & kProxyEvents) != 0) e.flags |= NCCLSCOPE_OP_PROXY_REQUESTED;
  const Handle group = DecodeHandle(args.parent_group);
  e.plan = group.kind == HandleKind::kGroup ? group.index : 0;
  if (e.plan != 0) {
    const std::uint32_t latest = Load(comm->latest_plan);
    if (latest == 0 || PlanBefore(latest, e.plan)) Store(comm->latest_plan, e.plan);
  }
  e.uncertain = e.expect != kExpectNone && task_mask.uncertain;
  if (e.uncertain) Count(NCCLSCOPE_CTR_OPS_MASK_UNCERTAIN);
  return e;
}

// Step 3, publish: the op's slot, then its state word (release: a KernelCh or stop that finds the
// generation sees every field), then the ring's comm slot (the agent's in-flight view).
void PublishOp(Runtime& r, CommState* comm, std::uint32_t comm_index, OpState* op,
               std::uint32_t generation, std::uint64_t now, std::uint64_t op_index,
               const OpArgs& args, const OpDescription& d, const OpExpectation& e) {
  const std::uint32_t comm_slot = Load(comm->comm_slot);
  Store(op->comm_index, comm_index);
  Store(op->comm_generation, comm->slot.generation.load(std::memory_order_relaxed));
  Store(op->comm_id, d.comm_id);
  Store(op->seq, d.seq);
  Store(op->count, d.count);
  Store(op->bytes, d.bytes);
  Store(op->enqueue_ns, now);
  Store(op->enqueue_stop_ns, 0);
  Store(op->op_index, op_index);
  Store(op->rank, d.rank);
  Store(op->peer, d.peer);
  Store(op->comm_slot, comm_slot);
  Store(op->plan, e.plan);
  const auto flags = static_cast<std::uint16_t>(d.flags | e.flags);
  Store(op->flags, flags);
  Store(op->weight, RecordWeight(r, args.kind, d.func, flags, d.comm_id, d.seq, d.rank, d.peer));
  Store(op->kind, args.kind);
  Store(op->func, d.func);
  Store(op->datatype, d.datatype);
  Store(op->algo, d.algo);
  Store(op->proto, d.proto);
  Store(op->n_channels, args.n_channels);
  Store(op->n_warps, args.n_warps);
  Store(op->expected_channels, e.expected);
  Store(op->expect, e.expect);
  Store(op->mask_uncertain, e.uncertain ? 1 : 0);
  Store(op->kernel_untimed, args.kernel_untimed && e.expect != kExpectNone ? 1 : 0);
  Store(op->kernel_variant, args.symmetric ? names::KernelVariant(args.kernel_variant)
                                           : std::uint8_t{NCCLSCOPE_KV_NONE});
  Store(op->user_tag, args.user_tag);
  Store(op->channels_started, 0);
  Store(op->channels_stopped, 0);
  Store(op->last_kernel_ns, 0);
  Store(op->timed_mask, 0);
  Store(op->phase_mask, 0);
  op->state.store(
      generation << kStateGenShift | (e.expect == kExpectNone ? std::uint32_t{kOpKernelDone} : 0u),
      std::memory_order_release);

  if (ncclscope_comm_slot* slot = r.ring.comm_slot(comm_slot)) {
    StoreShared64(slot->ops_enqueued, op_index + 1);
    StoreShared64(slot->last_enqueue_ns, now);
    StoreShared64(slot->last_enqueue_seq, d.seq);
    StoreShared32(slot->last_enqueue_func, d.func);
    ncclscope_recent_op& recent = slot->recent[op_index % NCCLSCOPE_RECENT_OPS];
    StoreShared64(recent.enqueue_ns, now);
    StoreShared32(recent.seq_low, static_cast<std::uint32_t>(d.seq));
    std::atomic_ref<std::uint8_t>(recent.func).store(d.func, std::memory_order_relaxed);
    std::atomic_ref<std::uint8_t>(recent.kind).store(args.kind, std::memory_order_relaxed);
  }
}

}  // namespace

// NCCL's start of a Coll, P2p or CeColl task: describe it (and count it), then, for an op that is
// kept (not under the minimum size, a slot found), identify it, decide what it waits for, and
// publish it. 1 op in sample_every is timed whole by the governor.
void StartOp(void* context, void** handle, const OpArgs& args) {
  Runtime& r = R();
  std::uint32_t comm_index = 0;
  CommState* comm = FindComm(context, &comm_index);
  if (comm == nullptr) {
    *handle = nullptr;
    Count(NCCLSCOPE_CTR_INVALID_HANDLE);
    return;
  }
  // ABI v1-v3: the first op names the communicator (runtime.h, PublishCommIdentity).
  if (args.identity_from_op && Load(comm->identity_pending) != 0) {
    std::uint32_t pending = 1;
    if (comm->identity_pending.compare_exchange_strong(pending, 0, std::memory_order_acq_rel)) {
      PublishCommIdentity(comm, args.comm_hash, args.rank);
    }
  }
  // 1 op in sample_every is timed whole, this start included (governor.h).
  const std::uint64_t op_index = Load(comm->ops_enqueued);
  const bool timed = governor::SampleOp(r.gov, op_index, comm_index);
  const std::uint64_t timed_from = timed ? governor::Begin(r.gov, governor::kOpCalls) : 0;
  const std::uint64_t now = clock::Now();
  const TaskMask task_mask = MaskOfTask(r, args.parent, now);
  OpDescription d = DescribeOp(comm, args, task_mask);
  if (d.bytes < r.min_bytes.load(std::memory_order_relaxed)) {
    *handle = nullptr;
    Count(NCCLSCOPE_CTR_OPS_FILTERED);
    return;
  }
  PoolSlot* slot = nullptr;
  const std::uint32_t index = r.ops.Allocate(&slot);
  if (index == UINT32_MAX) {
    *handle = nullptr;
    Count(NCCLSCOPE_CTR_HANDLES_EXHAUSTED);
    return;
  }
  auto* op = reinterpret_cast<OpState*>(slot);
  const std::uint32_t generation = op->slot.generation.load(std::memory_order_relaxed);
  // A slot's generation never leaves 20 bits (SlotArena::Free and DisownAfterFork wrap it there):
  // told to the compiler, EncodeHandle's mask of it is left out (measured: 2 instructions).
  if (generation > kGenerationMask) __builtin_unreachable();
  IdentifyOp(comm, args, &d);
  Store(comm->ops_enqueued, op_index + 1);
  const OpExpectation e = ExpectOp(comm, args, task_mask, d);
  PublishOp(r, comm, comm_index, op, generation, now, op_index, args, d, e);
  *handle = EncodeHandle(HandleKind::kOp, generation, index);
  if (timed) {
    *handle = governor::MarkTimed(*handle);  // its children inherit the bit (exports.cc)
    r.gov.timed_ops.fetch_add(1, std::memory_order_relaxed);
    governor::End(r.gov, governor::kOpCalls, timed_from, clock::Ticks());
  }
}

void StopOp(void* handle) {
  std::uint32_t index = 0;
  std::uint32_t generation = 0;
  OpState* op = FindOp(handle, &index, &generation);
  if (op == nullptr) {
    Count(NCCLSCOPE_CTR_INVALID_HANDLE);
    return;
  }
  const std::uint32_t state = op->state.load(std::memory_order_acquire);
  if (StateGen(state) != generation || (state & kOpEnqueued) != 0) {
    Count(NCCLSCOPE_CTR_INVALID_HANDLE);  // stopped twice
    return;
  }
  const std::uint64_t now = clock::Now();
  Store(op->enqueue_stop_ns, now);
  const std::uint32_t old = SetStateBits(op, generation, kOpEnqueued);
  if (CompletedBy(old, kOpEnqueued)) {
    EmitAndFree(op, index, old | kOpEnqueued, 0, now);  // completion observed right now
  }
}

// noinline: StopKernelCh's tail call (see NoteKernelActivity).
__attribute__((noinline)) void CompleteKernelOf(OpState* op, std::uint32_t index,
                                                std::uint32_t generation, std::uint64_t when_ns) {
  const std::uint32_t old = SetStateBits(op, generation, kOpKernelDone);
  if (CompletedBy(old, kOpKernelDone)) {
    EmitAndFree(op, index, old | kOpKernelDone, 0, when_ns);
  }
}

void CompleteKernel(std::uint32_t index, std::uint32_t generation, std::uint64_t when_ns) {
  Runtime& r = R();
  if (index >= r.ops.carved()) return;
  CompleteKernelOf(reinterpret_cast<OpState*>(r.ops.At(index)), index, generation, when_ns);
}

bool ForceFinalizeOp(std::uint32_t index, std::uint32_t generation, std::uint16_t flags) {
  Runtime& r = R();
  if (index >= r.ops.carved()) return false;
  auto* op = reinterpret_cast<OpState*>(r.ops.At(index));
  const std::uint32_t old = SetStateBits(op, generation, kOpForced);
  if (old == UINT32_MAX || OpComplete(old)) return false;
  EmitAndFree(op, index, old | kOpForced, flags);
  return true;
}

}  // namespace ncclscope::plugin
