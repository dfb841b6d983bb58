// The event path: what NCCL's threads run on every start, record and stop. No locks, no
// allocation once the pools are warm, no system calls (timestamps come from the TSC, see
// clock.h); the only read-modify-writes per op are the two that decide who completes it, the
// ring's lane try-lock, the completion counter and the pool hand-back.
//
// Op completion: NCCL's stop of a Coll/P2p event only means "enqueued". The op is complete when it
// is enqueued AND all the KernelCh events we expect (nChannels, when KernelCh is in the mask) have
// stopped. Each side sets its bit in the op's state word with a compare-and-swap; whoever sets
// the second bit writes the record. The state word carries the slot's generation, so a late or
// stale caller can never complete the slot's next occupant.

#include <pthread.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "plugin/src/chain.h"
#include "plugin/src/clock.h"
#include "plugin/src/handle.h"
#include "plugin/src/names.h"
#include "plugin/src/runtime.h"

namespace ncclscope::plugin {
namespace {

constexpr std::uint32_t kStateGenShift = 8;

std::uint32_t StateGen(std::uint32_t state) { return state >> kStateGenShift; }

// Sets `bits` in the op's state word if it still belongs to `generation`. Returns the previous
// word, or nullopt-like UINT32_MAX when the slot has moved on.
std::uint32_t SetStateBits(OpState* op, std::uint32_t generation, std::uint32_t bits) {
  std::uint32_t old = op->state.load(std::memory_order_acquire);
  while (true) {
    if (StateGen(old) != generation) return UINT32_MAX;
    if ((old & bits) == bits) return old;
    if (op->state.compare_exchange_weak(old, old | bits, std::memory_order_acq_rel,
                                        std::memory_order_acquire)) {
      return old;
    }
  }
}

void Count(ncclscope_counter counter) { R().ring.Count(counter); }

void StoreShared64(std::uint64_t& field, std::uint64_t value) {
  std::atomic_ref<std::uint64_t>(field).store(value, std::memory_order_relaxed);
}
void StoreShared32(std::uint32_t& field, std::uint32_t value) {
  std::atomic_ref<std::uint32_t>(field).store(value, std::memory_order_relaxed);
}

// Inline bit count: the x86-64 baseline has no popcnt, and __builtin_popcountll there is a libgcc
// call.
std::uint32_t PopCount(std::uint64_t x) {
  x -= (x >> 1) & 0x5555555555555555ull;
  x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
  x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
  return static_cast<std::uint32_t>((x * 0x0101010101010101ull) >> 56);
}

std::uint32_t Saturate32(std::uint64_t value) {
  return value > UINT32_MAX ? UINT32_MAX : static_cast<std::uint32_t>(value);
}

// A channel's time as an offset from the op's first start, clamped when kSaturate.
template <bool kSaturate>
std::uint32_t ChannelOffset(std::uint64_t t, std::uint64_t first) {
  return kSaturate ? Saturate32(t - first) : static_cast<std::uint32_t>(t - first);
}

// The first 16 timed channels (ascending) into the op record; returns the bits of the rest.
template <bool kSaturate>
std::uint64_t WriteInlineChannels(const OpState* op, ncclscope_op_record* rec, std::uint64_t mask,
                                  std::uint64_t first) {
  std::uint64_t m = mask;
  for (std::uint32_t position = 0; m != 0 && position < NCCLSCOPE_OP_INLINE_CHANNELS;
       m &= m - 1, ++position) {
    const ChannelTime& ch = op->channels[__builtin_ctzll(m)];
    rec->ch[position] = ncclscope_channel_time{ChannelOffset<kSaturate>(Load(ch.start), first),
                                               ChannelOffset<kSaturate>(Load(ch.stop), first)};
  }
  return m;
}

// The channel times of an op with more than 16 timed channels beyond the first 16 (`rest`: their
// bits), into the continuation records reserved right after the op record. Rare: clamps always.
__attribute__((noinline)) void WriteContinuations(const OpState* op, const ncclscope_op_record& rec,
                                                  std::uint64_t rest, std::uint64_t first,
                                                  const ring::RingWriter::Reservation& slots) {
  ncclscope_op_channels_record* cont = nullptr;
  std::uint32_t position = NCCLSCOPE_OP_INLINE_CHANNELS;
  for (std::uint64_t m = rest; m != 0; m &= m - 1, ++position) {
    const ChannelTime& ch = op->channels[__builtin_ctzll(m)];
    const std::uint32_t part =
        (position - NCCLSCOPE_OP_INLINE_CHANNELS) / NCCLSCOPE_OP_CONT_CHANNELS + 1;
    const std::uint32_t at = (position - NCCLSCOPE_OP_INLINE_CHANNELS) % NCCLSCOPE_OP_CONT_CHANNELS;
    if (at == 0) {
      unsigned char* cont_raw = slots.slots[part];
      std::memset(cont_raw, 0, NCCLSCOPE_RECORD_SIZE);
      cont = reinterpret_cast<ncclscope_op_channels_record*>(cont_raw);
      cont->h.type = NCCLSCOPE_REC_OP_CHANNELS;
      cont->comm_id = rec.comm_id;
      cont->seq = rec.seq;
      cont->op_index = rec.op_index;
      cont->rank = rec.rank;
      cont->part = static_cast<std::uint8_t>(part);
      cont->first = static_cast<std::uint8_t>(position);
      cont->func = rec.func;
    }
    cont->ch[at] = ncclscope_channel_time{ChannelOffset<true>(Load(ch.start), first),
                                          ChannelOffset<true>(Load(ch.stop), first)};
    cont->n = static_cast<std::uint8_t>(at + 1);
  }
}

// v7: the op's tag and kernel variant, into the record reserved after its channel records. Rare
// (tagged or symmetric ops only): out of line.
__attribute__((noinline)) void WriteDetail(const OpState* op, const ncclscope_op_record& rec,
                                           unsigned char* raw) {
  std::memset(raw, 0, NCCLSCOPE_RECORD_SIZE);
  auto* d = reinterpret_cast<ncclscope_op_detail_record*>(raw);
  d->h.type = NCCLSCOPE_REC_OP_DETAIL;
  d->comm_id = rec.comm_id;
  d->seq = rec.seq;
  d->op_index = rec.op_index;
  d->user_tag = Load(op->user_tag);
  d->rank = rec.rank;
  d->func = rec.func;
  d->kernel_variant = Load(op->kernel_variant);
}

// v7: the kernel phases of the channels in `phase_mask` (ascending), into the records reserved
// from slots.slots[first] on.
__attribute__((noinline)) void WritePhases(const OpState* op, const ncclscope_op_record& rec,
                                           std::uint64_t phase_mask,
                                           const ring::RingWriter::Reservation& slots,
                                           std::uint32_t first) {
  ncclscope_op_phases_record* p = nullptr;
  std::uint32_t position = 0;
  for (std::uint64_t m = phase_mask; m != 0; m &= m - 1, ++position) {
    const std::uint32_t channel = __builtin_ctzll(m);
    const ChannelTime& ch = op->channels[channel];
    const std::uint32_t at = position % NCCLSCOPE_OP_PHASE_CHANNELS;
    if (at == 0) {
      const std::uint32_t part = position / NCCLSCOPE_OP_PHASE_CHANNELS;
      unsigned char* raw = slots.slots[first + part];
      std::memset(raw, 0, NCCLSCOPE_RECORD_SIZE);
      p = reinterpret_cast<ncclscope_op_phases_record*>(raw);
      p->h.type = NCCLSCOPE_REC_OP_PHASES;
      p->comm_id = rec.comm_id;
      p->seq = rec.seq;
      p->op_index = rec.op_index;
      p->rank = rec.rank;
      p->part = static_cast<std::uint8_t>(part + 1);
      p->func = rec.func;
    }
    ncclscope_channel_phases& out = p->ch[at];
    out.channel = static_cast<std::uint8_t>(channel);
    out.present = static_cast<std::uint8_t>(Load(ch.phases_present));
    for (std::uint32_t phase = 0; phase < NCCLSCOPE_PHASE_COUNT; ++phase) {
      out.ns[phase] = Load(ch.phase_ns[phase]);
    }
    p->n = static_cast<std::uint8_t>(at + 1);
  }
}

// Builds the op's record(s) in place in the ring (or, without room, on the stack: dropped and
// counted, the code path one). always_inline, with CompleteInCommTable: as calls they cost 27
// instructions more per recorded collective (callgrind, docs/benchmarks.md, "record_one_in").
__attribute__((always_inline)) inline void WriteOpRecords(
    Runtime& r, const OpState* op, std::uint32_t weight, std::uint64_t mask, std::uint32_t timed,
    bool partial, std::uint32_t final_state, std::uint16_t extra_flags, std::uint64_t complete_ns) {
  // How many records the timed channels need, in ascending channel order.
  const std::uint32_t continuations =
      timed > NCCLSCOPE_OP_INLINE_CHANNELS
          ? (timed - NCCLSCOPE_OP_INLINE_CHANNELS + NCCLSCOPE_OP_CONT_CHANNELS - 1) /
                NCCLSCOPE_OP_CONT_CHANNELS
          : 0;
  // v7: the tag and kernel variant (OP_DETAIL), the kernel phases (OP_PHASES).
  const std::uint64_t phase_mask = Load(op->phase_mask);
  const bool detail = Load(op->user_tag) != 0 || Load(op->kernel_variant) != NCCLSCOPE_KV_NONE;
  const std::uint32_t phase_records =
      (PopCount(phase_mask) + NCCLSCOPE_OP_PHASE_CHANNELS - 1) / NCCLSCOPE_OP_PHASE_CHANNELS;
  ring::RingWriter::Reservation slots;
  const bool reserved = r.ring.Reserve(1 + continuations + (detail ? 1 : 0) + phase_records,
                                       ThreadLaneHint(), &slots);
  alignas(64) unsigned char spare[NCCLSCOPE_RECORD_SIZE];
  unsigned char* raw = reserved ? slots.slots[0] : spare;
  std::memset(raw, 0, NCCLSCOPE_RECORD_SIZE);
  auto* rec = reinterpret_cast<ncclscope_op_record*>(raw);
  rec->h.type = NCCLSCOPE_REC_OP;
  rec->comm_id = Load(op->comm_id);
  rec->seq = Load(op->seq);
  rec->count = Load(op->count);
  rec->bytes = Load(op->bytes);
  rec->enqueue_ns = Load(op->enqueue_ns);
  rec->complete_ns = complete_ns;
  rec->op_index = Load(op->op_index);
  const std::uint64_t stop_ns = Load(op->enqueue_stop_ns);
  rec->enqueue_dur_ns = stop_ns > rec->enqueue_ns ? Saturate32(stop_ns - rec->enqueue_ns) : 0;
  rec->rank = Load(op->rank);
  rec->peer = Load(op->peer);
  rec->kind = Load(op->kind);
  rec->func = Load(op->func);
  rec->datatype = Load(op->datatype);
  rec->algo = Load(op->algo);
  rec->proto = Load(op->proto);
  rec->n_channels = Load(op->n_channels);
  rec->n_warps = Load(op->n_warps);
  rec->comm_slot = Load(op->comm_slot);
  rec->weight = weight;
  std::uint16_t flags = static_cast<std::uint16_t>(Load(op->flags) | extra_flags);
  if ((final_state & kOpEnqueued) == 0) flags |= NCCLSCOPE_OP_NO_ENQUEUE_STOP;
  if (partial) flags |= NCCLSCOPE_OP_GPU_TIMING_PARTIAL;

  if (mask != 0) {
    std::uint64_t first = UINT64_MAX;
    std::uint64_t last = 0;
    for (std::uint64_t m = mask; m != 0; m &= m - 1) {
      const ChannelTime& ch = op->channels[__builtin_ctzll(m)];
      const std::uint64_t start = Load(ch.start);
      const std::uint64_t stop = Load(ch.stop);
      first = start < first ? start : first;
      last = stop > last ? stop : last;
    }
    rec->gpu_start_ns = first;
    rec->gpu_end_ns = last;
    rec->channel_mask = mask;
    rec->n_timed = static_cast<std::uint8_t>(timed);
    flags |= NCCLSCOPE_OP_GPU_TIMING;

    rec->n_inline = static_cast<std::uint8_t>(
        timed < NCCLSCOPE_OP_INLINE_CHANNELS ? timed : NCCLSCOPE_OP_INLINE_CHANNELS);
    // Every timed channel has first <= start <= stop <= last (StopKernelCh times only those), so
    // an offset saturates only if last - first does: one test for the whole op, and the common
    // loop converts without clamping.
    const bool saturated = ((last - first) >> 32) != 0;
    const std::uint64_t rest = saturated ? WriteInlineChannels<true>(op, rec, mask, first)
                                         : WriteInlineChannels<false>(op, rec, mask, first);
    // Dropped without a reservation: no continuation to build (and `spare` holds rec).
    if (rest != 0 && reserved) WriteContinuations(op, *rec, rest, first, slots);
    if (saturated) flags |= NCCLSCOPE_OP_TIME_SATURATED;
  }
  // Every record that follows the op in its group: channel continuations, then OP_DETAIL, then
  // OP_PHASES (ncclscope_op_record.n_continuations).
  rec->n_continuations =
      static_cast<std::uint8_t>(continuations + (detail ? 1 : 0) + phase_records);
  if ((detail || phase_records != 0) && reserved) {
    std::uint32_t next = 1 + continuations;
    if (detail) {
      WriteDetail(op, *rec, slots.slots[next++]);
      flags |= NCCLSCOPE_OP_HAS_DETAIL;
    }
    if (phase_records != 0) {
      WritePhases(op, *rec, phase_mask, slots, next);
      flags |= NCCLSCOPE_OP_HAS_PHASES;
    }
  }
  rec->flags = flags;
  // The slot is the agent's from here on: nothing reads rec after this.
  if (reserved) r.ring.Commit(slots);
}

// Keeps the identity of an op that completed at NCCL's stop while its ProxyOps may still come
// (state.h, RetiredOp): what StartProxyOp names as their parent once the op's slot is gone.
__attribute__((noinline)) void RetireOp(CommState* comm, const OpState* op, std::uint32_t index) {
  RetiredOp& e = comm->retired[Load(op->op_index) % kRetiredOps];
  std::uint32_t version = e.version.load(std::memory_order_relaxed);
  // Another thread writing this entry (an op kRetiredOps later, completing at the same moment):
  // this one's ProxyOps go without a parent, as they would without the table.
  if ((version & 1) != 0 ||
      !e.version.compare_exchange_strong(version, version + 1, std::memory_order_relaxed)) {
    return;
  }
  // A sequence lock: each field is stored with release order, so no reader sees it before the odd
  // version (what a release fence after the CAS would do; ThreadSanitizer does not model fences,
  // and on x86 a release store is the same move).
  constexpr auto kRelease = std::memory_order_release;
  const void* handle =
      EncodeHandle(HandleKind::kOp, op->slot.generation.load(std::memory_order_relaxed), index);
  e.handle.store(reinterpret_cast<std::uintptr_t>(handle), kRelease);
  e.plan.store(Load(op->plan), kRelease);
  e.seq.store(Load(op->seq), kRelease);
  e.op_index.store(Load(op->op_index), kRelease);
  e.weight.store(Load(op->weight), kRelease);
  e.func.store(Load(op->func), kRelease);
  e.algo.store(Load(op->algo), kRelease);
  e.version.store(version + 2, kRelease);
}

// Communicator progress (the agent's in-flight view): every op completes here, recorded or not.
__attribute__((always_inline)) inline void CompleteInCommTable(Runtime& r, const OpState* op,
                                                               std::uint32_t index, bool kernel_ran,
                                                               std::uint32_t final_state,
                                                               std::uint64_t complete_ns) {
  const std::uint32_t comm_index = Load(op->comm_index);
  if (comm_index >= r.comms.carved()) return;
  auto* comm = reinterpret_cast<CommState*>(r.comms.At(comm_index));
  if (comm->slot.generation.load(std::memory_order_acquire) != Load(op->comm_generation)) return;
  const std::uint64_t completed = comm->ops_completed.fetch_add(1, std::memory_order_relaxed) + 1;
  // Completed at NCCL's stop (no KernelCh to wait for) with ProxyOps requested: the proxy thread
  // starts the network ones after this (state.h, RetiredOp). Self send/recv and CE ops get none.
  if (Load(op->expect) == kExpectNone && (Load(op->flags) & NCCLSCOPE_OP_PROXY_REQUESTED) != 0 &&
      (final_state & kOpForced) == 0 && comm->retired != nullptr &&
      Load(op->kind) != NCCLSCOPE_KIND_CE &&
      !(Load(op->kind) == NCCLSCOPE_KIND_P2P && Load(op->peer) == Load(op->rank))) {
    RetireOp(comm, op, index);
  }
  // A plan whose op's kernel was seen to finish: every earlier plan's kernel has finished.
  const std::uint32_t plan = Load(op->plan);
  if (kernel_ran && (final_state & kOpForced) == 0 && plan != 0) {
    const std::uint32_t latest = Load(comm->max_timed_plan);
    if (latest == 0 || PlanBefore(latest, plan)) Store(comm->max_timed_plan, plan);
  }
  if (ncclscope_comm_slot* slot = r.ring.comm_slot(Load(op->comm_slot))) {
    StoreShared64(slot->ops_completed, completed);
    StoreShared64(slot->last_complete_ns, complete_ns);
    StoreShared64(slot->last_complete_seq, Load(op->seq));
    StoreShared32(slot->last_complete_func, Load(op->func));
  }
}

// Records the op (unless record_one_in left it out), completes it in the comm table and frees it.
void EmitAndFree(OpState* op, std::uint32_t index, std::uint32_t final_state,
                 std::uint16_t extra_flags, std::uint64_t now = 0) {
  Runtime& r = R();
  const std::uint64_t mask = Load(op->timed_mask);  // channels that reported both ends
  const std::uint32_t timed = PopCount(mask);
  // ABI v3: KernelCh without timestamps were all that could come (the flag says they came).
  const bool untimed_by_abi = Load(op->kernel_untimed) != 0;
  if (untimed_by_abi && Load(op->channels_started) != 0) {
    extra_flags |= NCCLSCOPE_OP_KERNEL_UNTIMED;
  }
  // Some channels untimed, or none though kernel events were expected (and not given up on).
  const bool partial = mask != 0 ? timed < Load(op->n_channels)
                                 : Load(op->expect) != kExpectNone && !untimed_by_abi &&
                                       (extra_flags & NCCLSCOPE_OP_KERNEL_NEVER_CAME) == 0;
  const std::uint64_t complete_ns = now != 0 ? now : clock::Now();
  // An op left out by record_one_in (weight 0) builds no record: it is counted, and completes in
  // the comm table like every op.
  const std::uint32_t weight = Load(op->weight);
  if (weight == 0) {
    Count(NCCLSCOPE_CTR_OPS_NOT_RECORDED);
  } else {
    WriteOpRecords(r, op, weight, mask, timed, partial, final_state, extra_flags, complete_ns);
  }
  if (partial || (extra_flags & NCCLSCOPE_OP_FLUSHED) != 0) Count(NCCLSCOPE_CTR_OPS_INCOMPLETE);
  // Evidence that the op's kernel ran (CompleteInCommTable): GPU timing, or under ABI v3 every
  // channel NCCL's proxy saw end.
  const bool kernel_ran = mask != 0 || (untimed_by_abi && Load(op->channels_stopped) != 0 &&
                                        Load(op->channels_stopped) == Load(op->channels_started));
  CompleteInCommTable(r, op, index, kernel_ran, final_state, complete_ns);
  // Channel tags carry the generation: freeing (which bumps it) makes them all idle.
  r.ops.Free(index);
}

}  // namespace

// In static storage, constructed when the library is loaded and never destroyed (no destructor is
// registered for a placement new): NCCL's threads and the maintenance thread may outlive static
// destructors.
namespace {
alignas(Runtime) unsigned char g_runtime_storage[sizeof(Runtime)];
}  // namespace
Runtime* const g_runtime = new (g_runtime_storage) Runtime();  // NOLINT(cert-err58-cpp)

namespace {

// NCCL 2.27 (v4) has no API events: it copies the global at task append (src/enqueue.cc:2292 p2p,
// :2370 coll at v2.27.7-1), before the plan's Coll events, which follow at ncclGroupEnd on the
// same thread or on CUDA's host-callback thread (hostStreamPlanTask, src/enqueue.cc:1283 at
// v2.27.7-1). KernelCh switched off within this window of the Coll start may still have been in
// that copy.
constexpr std::uint64_t kV4AppendWindowNs = 200'000'000;

// Mask writes this thread has accounted for: at its previous API event (v5+), and before the
// Group event of its current plan (v4: the copy was taken at task append, after the previous plan
// of this thread was launched).
thread_local std::uint32_t t_seen_mask_writes = 0;
thread_local std::uint32_t t_plan_seen_writes = 0;
thread_local std::uint32_t t_prev_plan_seen_writes = 0;

bool IsCollNet(std::uint8_t algo) {
  return algo == NCCLSCOPE_ALGO_COLLNET_DIRECT || algo == NCCLSCOPE_ALGO_COLLNET_CHAIN;
}

// A change the maintenance thread makes to an idle process (no API event for a whole pass) can
// only race a thread that resumed right at that moment: NCCL's read and the API event are a few
// hundred instructions apart (src/plugin/profiler.cc:218 to :294 at v2.28.9-1), but a thread
// descheduled in between arrives as late as the scheduler lets it. The window must outlast that:
// an API event after it is taken to have read the new value, and if NCCL's copy was the old one
// with KernelCh the op completes untimed and its KernelCh come late. 50 ms was too short for the
// plugin's stress test under TSan on a loaded 2-core CI machine, where idle passes are frequent
// (every user thread waiting on its proxy; over 100 idle writes in one run pinned to one core):
// one op lost its timing with all its KernelCh late, this race's signature. Inside the window an
// op is only uncertain (it waits for what comes, at most kUncertainMaskWait in runtime.cc), so a
// long window costs one uncertain op per thread per idle flip. Writes by job threads race any
// other job thread at any time.
constexpr std::uint64_t kIdleWriteRaceWindowNs = 500'000'000;

// Another thread changed KernelCh (either way) after write number `seen`, so that NCCL's copy
// may be on either side of that write. No time bound is safe for a job thread's write (this
// thread may have been descheduled between NCCL's read and the event), and none is needed for
// 2.27, whose copy is taken at task append.
bool KernelFlippedSince(const Runtime& r, std::uint32_t seen, std::uint64_t now,
                        bool bound_idle_writes) {
  const std::uint32_t flip = Load(r.kernel_flip_write);
  if (flip == 0 || static_cast<std::int32_t>(flip - seen) <= 0 ||
      Load(r.kernel_flip_writer) == ThreadToken()) {
    return false;
  }
  if (!bound_idle_writes || Load(r.kernel_flip_idle) == 0) return true;
  const std::uint64_t at = Load(r.kernel_flip_ns);
  return now < at || now - at < kIdleWriteRaceWindowNs;
}

// The event mask NCCL used for a task: exact from the API handle (v5+, also for CUDA-graph
// replays: NCCL passes the capture-time handle, src/plugin/profiler.cc:403/:438 at v2.28.9-1),
// else (v4) the current mask. When the copy may predate or postdate a write by another thread,
// KernelCh is uncertain: the op waits for KernelCh as if it had it, and completes untimed
// (KERNEL_NEVER_CAME) once the GPU's order shows it had not.
struct TaskMask {
  std::uint32_t mask = 0;
  bool kernel_candidate = false;
  bool uncertain = false;       // KernelCh of the copy unknown: the mask changed around the copy
  bool graph_captured = false;  // the API call was captured into a CUDA graph (v5+)
  std::uint8_t api_datatype = NCCLSCOPE_DT_UNKNOWN;
};

bool KernelOnWithin(const Runtime& r, std::uint64_t now, std::uint64_t window) {
  const std::uint64_t off = Load(r.kernel_off_ns);
  return off != 0 && now >= off && now - off < window;
}

TaskMask MaskOfTask(const Runtime& r, const void* parent, std::uint64_t now) {
  TaskMask t;
  const Handle api = DecodeHandle(parent);
  if (api.kind == HandleKind::kApi) {
    t.mask = api.index;
    t.uncertain = (api.sub & kApiKernelUncertain) != 0;
    t.graph_captured = (api.sub & kApiGraphCaptured) != 0;
    t.kernel_candidate = (t.mask & kEventKernelCh) != 0 || t.uncertain;
    t.api_datatype = static_cast<std::uint8_t>(api.sub & kApiDatatypeMask);
    return t;
  }
  // 2.27: a flip since this thread launched its previous plan may be on either side of the
  // append; a Coll on CUDA's host-callback thread (a graph's plan) has no such anchor, hence also
  // the window since KernelCh was switched off.
  t.mask = Load(r.current_mask);
  t.uncertain = KernelFlippedSince(r, t_prev_plan_seen_writes, now, false) ||
                ((t.mask & kEventKernelCh) == 0 && KernelOnWithin(r, now, kV4AppendWindowNs));
  t.kernel_candidate = (t.mask & kEventKernelCh) != 0 || t.uncertain;
  return t;
}

}  // namespace

void WriteNcclMask(std::uint32_t mask, MaskWriter writer) {
  Runtime& r = R();
  // NCCL replaced the mask (CheckMaskOverride, runtime.cc): it is NCCL's, never written again.
  if (Load(r.mask_overridden) != 0) return;
  const std::uint64_t now = clock::Now();
  const std::uint32_t before = Load(r.current_mask);
  const bool kernel_flip = ((before ^ mask) & kEventKernelCh) != 0;
  if (kernel_flip && (mask & kEventKernelCh) == 0) Store(r.kernel_off_ns, now);
  if (kernel_flip) {
    Store(r.kernel_flip_writer, ThreadToken());
    Store(r.kernel_flip_ns, now);
    Store(r.kernel_flip_idle, writer == MaskWriter::kIdleMaintenance ? 1 : 0);
  }
  Store(r.mask_write_ns, now);
  // The write's number first, NCCL's int last (release): whoever reads the new value in StartApi
  // (acquire) also sees which write changed KernelCh.
  const std::uint32_t writes = r.mask_writes.fetch_add(1, std::memory_order_relaxed) + 1;
  if (kernel_flip) Store(r.kernel_flip_write, writes);
  r.current_mask.store(mask, std::memory_order_release);
  if (int* target = r.mask_ptr.load(std::memory_order_relaxed)) {
    __atomic_store_n(target, static_cast<int>(mask), __ATOMIC_RELEASE);
  }
  // Chaining: `target` is ncclscope's own int; NCCL's is the union (chain.h).
  chain::PublishOwnMask();
  if (ncclscope_ring_header* header = r.ring.header()) {
    std::atomic_ref<std::uint32_t>(header->effective_mask).store(mask, std::memory_order_relaxed);
  }
}

void* StartApi(std::uint64_t type, const char* datatype, bool graph_captured) {
  Runtime& r = R();
  // The value NCCL read into its thread-local copy just before (src/plugin/profiler.cc:218 at
  // GroupApi, used by the CollApi/P2pApi at :269/:294 at v2.28.9-1): this thread has not written
  // it since, and another thread's write in between is caught below.
  const int* target = r.mask_ptr.load(std::memory_order_relaxed);
  const std::uint32_t snapshot =
      target != nullptr ? static_cast<std::uint32_t>(__atomic_load_n(target, __ATOMIC_ACQUIRE))
                        : r.current_mask.load(std::memory_order_acquire);
  std::uint32_t sub = datatype != nullptr ? names::Datatype(datatype) & kApiDatatypeMask : 0;
  if (graph_captured) sub |= kApiGraphCaptured;
  const std::uint32_t writes = r.mask_writes.load(std::memory_order_relaxed);
  // GroupApi leaves the bookkeeping to the CollApi/P2pApi of the same call, which always follows
  // it (src/enqueue.cc:2390-2393 and :2464-2466 at v2.28.9-1): that one's handle is the task's
  // parent, and the writes since this thread's previous call are as suspect for it.
  if (type != abi::kGroupApi && writes != t_seen_mask_writes) {
    // Another thread changed KernelCh since this thread's previous API event: NCCL's read for
    // this call may be on either side of that write, so the op waits for what comes.
    if (KernelFlippedSince(r, t_seen_mask_writes, clock::Now(), true)) {
      sub |= kApiKernelUncertain;
    }
    t_seen_mask_writes = writes;
  }
  if (Load(r.api_events_seen) == 0) Store(r.api_events_seen, 1);
  // A pending change is applied here, after NCCL's read for this call: NCCL's next read on this
  // thread is the next API call, so the write can never land inside a snapshot of this thread.
  // Not at GroupApi: the CollApi/P2pApi of the same call follows it and must read the same value.
  if (type != abi::kGroupApi) {
    const std::uint32_t pending = Load(r.pending_mask);
    if (pending != Load(r.current_mask)) {
      WriteNcclMask(pending);
      t_seen_mask_writes = r.mask_writes.load(std::memory_order_relaxed);
    }
  }
  return EncodeHandle(HandleKind::kApi, 0, snapshot, sub);
}

void* StartGroup() {
  Runtime& r = R();
  // For 2.27's copies (MaskOfTask): the writes before this plan's tasks were appended.
  t_prev_plan_seen_writes = t_plan_seen_writes;
  t_plan_seen_writes = r.mask_writes.load(std::memory_order_acquire);
  // One Group per kernel plan, emitted in launch order (src/enqueue.cc:1308 at v2.28.9-1).
  std::uint32_t plan = r.plans.fetch_add(1, std::memory_order_relaxed) + 1;
  if (plan == 0) plan = r.plans.fetch_add(1, std::memory_order_relaxed) + 1;  // 0 = unknown
  return EncodeHandle(HandleKind::kGroup, 0, plan);
}

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

namespace {

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

}  // namespace

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
  const std::uint8_t func = names::Func(args.func);
  std::uint16_t flags = 0;
  std::uint8_t datatype = names::Datatype(args.datatype);
  std::uint64_t size = ncclscope_datatype_size(datatype);
  if (size == 0) {
    // NCCL 2.28-2.30 name ncclUint8 "Unknown" (no case in ncclDatatypeToString).
    size = 1;
    flags |= NCCLSCOPE_OP_DATATYPE_ASSUMED;
  }
  // Saturating: an absurd count must not wrap into a plausible size.
  const std::uint64_t bytes = args.count > UINT64_MAX / size ? UINT64_MAX : args.count * size;
  std::uint8_t algo = NCCLSCOPE_ALGO_NONE;
  std::uint8_t proto = NCCLSCOPE_PROTO_NONE;
  if (args.kind == NCCLSCOPE_KIND_COLL && args.symmetric) {
    // v7 symmetric kernels: algo is the variant's suffix and proto "" (src/plugin/profiler.cc
    // :610-614 at 2.31.2); the variant itself names the kernel.
    algo = NCCLSCOPE_ALGO_SYMMETRIC;
    flags |= NCCLSCOPE_OP_SYMMETRIC;
  } else if (args.kind == NCCLSCOPE_KIND_COLL) {
    algo = names::Algo(args.algo);
    proto = names::Proto(args.proto);
  }
  // Every op is counted, exactly, before anything below may leave it out (the minimum size, a
  // full pool, record_one_in): ncclscope_ring.h, the count table.
  if (CountOp(comm, func, algo, proto, bytes)) flags |= NCCLSCOPE_OP_COUNTED;
  std::uint64_t count = args.count;
  // AllGather and Broadcast tasks carry count in bytes and datatype ncclInt8
  // (src/enqueue.cc:2476-2480 at v2.28.9-1); the API's own count and type came with the CollApi.
  const std::uint32_t api_size = ncclscope_datatype_size(task_mask.api_datatype);
  if ((func == NCCLSCOPE_FUNC_ALL_GATHER || func == NCCLSCOPE_FUNC_BROADCAST) &&
      datatype == NCCLSCOPE_DT_INT8 && api_size != 0 && task_mask.api_datatype != datatype) {
    count = args.count / api_size;
    datatype = task_mask.api_datatype;
    flags |= NCCLSCOPE_OP_API_COUNT;
  }
  if (bytes < r.min_bytes.load(std::memory_order_relaxed)) {
    *handle = nullptr;
    Count(NCCLSCOPE_CTR_OPS_FILTERED);
    return;
  }
  const std::uint32_t index = r.ops.Allocate();
  if (index == UINT32_MAX) {
    *handle = nullptr;
    Count(NCCLSCOPE_CTR_HANDLES_EXHAUSTED);
    return;
  }
  auto* op = reinterpret_cast<OpState*>(r.ops.At(index));
  const std::uint32_t generation = op->slot.generation.load(std::memory_order_relaxed);

  std::uint64_t seq = args.seq;
  std::int32_t peer = args.root;
  const std::int32_t rank = args.identity_from_op ? args.rank : Load(comm->rank);
  const std::uint64_t comm_id = args.identity_from_op ? args.comm_hash : Load(comm->comm_id);
  if (args.kind == NCCLSCOPE_KIND_P2P) {
    // NCCL has no p2p sequence number; count per (comm, direction, peer) so the k-th send to a
    // peer matches that peer's k-th receive.
    const std::uint32_t peers = Load(comm->p2p_peers);
    if (comm->p2p_seq != nullptr && args.root >= 0 &&
        static_cast<std::uint32_t>(args.root) < peers) {
      std::atomic<std::uint64_t>& counter =
          comm->p2p_seq[(func == NCCLSCOPE_FUNC_RECV ? peers : 0) +
                        static_cast<std::uint32_t>(args.root)];
      seq = Load(counter);
      Store(counter, seq + 1);
      flags |= NCCLSCOPE_OP_P2P_SEQ_PER_PEER;
    }
  }
  Store(comm->ops_enqueued, op_index + 1);

  // What completes the op. KernelCh come only from profiler proxy ops, which exist only when the
  // task's own mask copy had KernelCh (ncclProfilerNeedsProxy, src/plugin/profiler.cc:677).
  OpExpect expect = kExpectNone;
  std::uint8_t expected = 0;
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
                              (args.kind == NCCLSCOPE_KIND_P2P && peer == rank) ||
                              symmetric_untimed;
  if (!no_kernel_ever && task_mask.kernel_candidate) {
    // A number of KernelCh NCCL announces, or an unknown one: ABI v3 announces only an upper bound
    // (nMaxChannels), and CollNet tasks keep nChannels 0 (task->nChannels is set only on the
    // ring/tree/NVLS path, src/enqueue.cc:638 at v2.28.9-1) yet get one KernelCh per channel of
    // channelLo..channelHi (:579-597).
    const bool announced = !args.kernel_untimed && args.n_channels != 0;
    expect = announced ? kExpectKnown : kExpectUnknown;
    expected = announced ? args.n_channels : 0;
  }
  if (((task_mask.mask & kEventKernelCh) == 0 || args.no_kernel_events) && expect == kExpectNone &&
      args.kind != NCCLSCOPE_KIND_CE) {
    flags |= NCCLSCOPE_OP_KERNEL_NOT_REQUESTED;
  }
  // Tells the agent whether the op's network steps were recorded (proxy duty cycle), so that it
  // can split the op's traffic into network and intra-node bytes (agent/analytics).
  if ((task_mask.mask & kProxyEvents) != 0) flags |= NCCLSCOPE_OP_PROXY_REQUESTED;
  const Handle group = DecodeHandle(args.parent_group);
  const std::uint32_t plan = group.kind == HandleKind::kGroup ? group.index : 0;
  if (plan != 0) {
    const std::uint32_t latest = Load(comm->latest_plan);
    if (latest == 0 || PlanBefore(latest, plan)) Store(comm->latest_plan, plan);
  }
  const std::uint32_t comm_slot = Load(comm->comm_slot);

  Store(op->comm_index, comm_index);
  Store(op->comm_generation, comm->slot.generation.load(std::memory_order_relaxed));
  Store(op->comm_id, comm_id);
  Store(op->seq, seq);
  Store(op->count, count);
  Store(op->bytes, bytes);
  Store(op->enqueue_ns, now);
  Store(op->enqueue_stop_ns, 0);
  Store(op->op_index, op_index);
  Store(op->rank, rank);
  Store(op->peer, peer);
  Store(op->comm_slot, comm_slot);
  Store(op->plan, plan);
  Store(op->flags, flags);
  Store(op->weight, RecordWeight(r, args.kind, func, flags, comm_id, seq, rank, peer));
  Store(op->kind, args.kind);
  Store(op->func, func);
  Store(op->datatype, datatype);
  Store(op->algo, algo);
  Store(op->proto, proto);
  Store(op->n_channels, args.n_channels);
  Store(op->n_warps, args.n_warps);
  Store(op->expected_channels, expected);
  Store(op->expect, expect);
  const bool uncertain = expect != kExpectNone && task_mask.uncertain;
  Store(op->mask_uncertain, uncertain ? 1 : 0);
  if (uncertain) Count(NCCLSCOPE_CTR_OPS_MASK_UNCERTAIN);
  Store(op->kernel_untimed, args.kernel_untimed && expect != kExpectNone ? 1 : 0);
  Store(op->kernel_variant, args.symmetric ? names::KernelVariant(args.kernel_variant)
                                           : std::uint8_t{NCCLSCOPE_KV_NONE});
  Store(op->user_tag, args.user_tag);
  Store(op->channels_started, 0);
  Store(op->channels_stopped, 0);
  Store(op->last_kernel_ns, 0);
  Store(op->timed_mask, 0);
  Store(op->phase_mask, 0);
  op->state.store(
      generation << kStateGenShift | (expect == kExpectNone ? std::uint32_t{kOpKernelDone} : 0u),
      std::memory_order_release);

  if (ncclscope_comm_slot* slot = r.ring.comm_slot(comm_slot)) {
    StoreShared64(slot->ops_enqueued, op_index + 1);
    StoreShared64(slot->last_enqueue_ns, now);
    StoreShared64(slot->last_enqueue_seq, seq);
    StoreShared32(slot->last_enqueue_func, func);
    ncclscope_recent_op& recent = slot->recent[op_index % NCCLSCOPE_RECENT_OPS];
    StoreShared64(recent.enqueue_ns, now);
    StoreShared32(recent.seq_low, static_cast<std::uint32_t>(seq));
    std::atomic_ref<std::uint8_t>(recent.func).store(func, std::memory_order_relaxed);
    std::atomic_ref<std::uint8_t>(recent.kind).store(args.kind, std::memory_order_relaxed);
  }
  *handle = EncodeHandle(HandleKind::kOp, generation, index);
  if (timed) {
    *handle = governor::MarkTimed(*handle);  // its children inherit the bit (exports.cc)
    r.gov.timed_ops.fetch_add(1, std::memory_order_relaxed);
    governor::End(r.gov, governor::kOpCalls, timed_from, clock::Ticks());
  }
}

// The KernelCh handlers call nothing on their common path: a call there makes the compiler save
// registers on every KernelCh event (exports.cc, "KernelCh entry"). What needs a call (the clock,
// completing the op) is in these, reached by a tail call.
__attribute__((noinline)) void NoteKernelActivity(OpState* op) {
  Store(op->last_kernel_ns, clock::Now());
}

void StartKernelCh(void* /*context*/, void** handle, void* parent, std::uint8_t channel,
                   std::uint64_t ptimer) {
  std::uint32_t index = 0;
  std::uint32_t generation = 0;
  OpState* op = FindOp(parent, &index, &generation);
  if (op == nullptr || DecodeHandle(parent).kind != HandleKind::kOp) {
    *handle = nullptr;
    if (parent != nullptr) Count(NCCLSCOPE_CTR_LATE_EVENT);
    return;
  }
  const std::uint32_t state = op->state.load(std::memory_order_acquire);
  if (StateGen(state) != generation || OpComplete(state) || channel >= NCCLSCOPE_MAX_CHANNELS) {
    *handle = nullptr;
    Count(NCCLSCOPE_CTR_LATE_EVENT);
    return;
  }
  ChannelTime& ch = op->channels[channel];
  Store(ch.start, ptimer);
  Store(ch.stop, 0);
  // The channel's phase times are not cleared here but at its first phase stop in this op
  // (RecordKernelPhaseStop): every timed op pays this path, and only v7's phases need them.
  Store(ch.tag, ChannelTag(generation, kChannelStarted));
  Store(op->channels_started, Load(op->channels_started) + 1);
  *handle = EncodeHandle(HandleKind::kKernelCh, generation, index, channel);
  if (Load(op->expect) == kExpectUnknown) NoteKernelActivity(op);
}

bool ClaimNetwork(ProxyOpState* po, std::uint32_t generation) {
  const std::uint32_t network = ProxyNetworkWord(generation, kProxyIsNetwork);
  std::uint32_t word = po->network.load(std::memory_order_acquire);
  if (word == network) return true;
  const std::uint32_t unclassified = ProxyNetworkWord(generation, kProxyUnclassified);
  while (word == unclassified) {
    if (po->network.compare_exchange_weak(word, network, std::memory_order_acq_rel,
                                          std::memory_order_acquire)) {
      return true;
    }
  }
  return word == network;
}

ReleaseResult ReleaseIfNoNetwork(std::uint32_t index, std::uint32_t generation,
                                 std::uint64_t max_age_ns, PlanEvidence plan_evidence) {
  Runtime& r = R();
  if (index >= r.proxy_ops.carved()) return ReleaseResult::kGone;
  auto* po = reinterpret_cast<ProxyOpState*>(r.proxy_ops.At(index));
  if (po->slot.generation.load(std::memory_order_acquire) != generation) {
    return ReleaseResult::kGone;
  }
  const std::uint32_t unclassified = ProxyNetworkWord(generation, kProxyUnclassified);
  if (po->network.load(std::memory_order_acquire) != unclassified) return ReleaseResult::kKept;
  const std::uint32_t parent = Load(po->parent_index);
  bool parent_live = false;
  if (parent != UINT32_MAX && parent < r.ops.carved()) {
    auto* op = reinterpret_cast<OpState*>(r.ops.At(parent));
    parent_live =
        op->slot.generation.load(std::memory_order_acquire) == Load(po->parent_generation);
  }
  if (parent_live) return ReleaseResult::kKept;
  bool proven = parent != UINT32_MAX && Load(po->parent_timed) != 0;
  if (!proven && (Load(po->flags) & NCCLSCOPE_PROXY_FOREIGN) == 0) {
    // A later plan's kernel finished, so this op's plan ran: a network receive of it would have
    // been progressed by now (on the proxy thread, before the GPU could use its data).
    const std::uint32_t comm_index = Load(po->comm_index);
    if (comm_index < r.comms.carved()) {
      auto* comm = reinterpret_cast<CommState*>(r.comms.At(comm_index));
      if (comm->slot.generation.load(std::memory_order_acquire) == Load(po->comm_generation)) {
        const std::uint32_t timed = plan_evidence == PlanEvidence::kLatest
                                        ? Load(comm->max_timed_plan)
                                        : Load(comm->swept_timed_plan);
        proven = PlanBefore(Load(po->parent_plan), timed);
      }
    }
  }
  if (!proven) {
    const std::uint64_t now = clock::Now();
    const std::uint64_t started = Load(po->start_ns);
    if (max_age_ns == 0 || now < started || now - started < max_age_ns) return ReleaseResult::kKept;
  }
  // Tagged: if the op was freed and its slot given to the next ProxyOp since the generation was
  // checked above, this fails instead of releasing the live newcomer.
  std::uint32_t expected = unclassified;
  if (!po->network.compare_exchange_strong(expected, ProxyNetworkWord(generation, kProxyReleased),
                                           std::memory_order_acq_rel)) {
    return ReleaseResult::kKept;
  }
  r.proxy_ops.Free(index);
  Count(NCCLSCOPE_CTR_PROXY_OPS_NO_NETWORK);
  return ReleaseResult::kReleased;
}

namespace {

// Unclassified ProxyOps of this thread (NCCL's proxy progress thread), oldest first, as
// (index << 32 | generation). Released here, on the thread that starts them, as soon as the proof
// is in (ReleaseIfNoNetwork): a few are looked at per ProxyOp start, and one that must wait goes
// back to the end so it holds up none of the others. What does not fit is the sweep's job.
constexpr std::uint32_t kUnclassifiedRing = 16384;
struct UnclassifiedRing {
  std::uint64_t entries[kUnclassifiedRing] = {};
  std::uint32_t head = 0;
  std::uint32_t tail = 0;
  bool Full() const { return tail - head >= kUnclassifiedRing; }
  void Push(std::uint64_t entry) { entries[tail++ % kUnclassifiedRing] = entry; }
};
// On the heap, for the proxy threads only: a thread-local array would be allocated for every
// thread of the process that touches any of the plugin's thread-locals. Freed at the thread's exit
// by a pthread key's destructor (a thread_local with a destructor would need the C++ run time's
// __cxa_thread_atexit, which the plugin does without: platform/README.md).
thread_local UnclassifiedRing* t_unclassified = nullptr;
pthread_key_t g_unclassified_key;
pthread_once_t g_unclassified_once = PTHREAD_ONCE_INIT;

void ReleaseUnclassified(Runtime& r) {
  UnclassifiedRing* ring = t_unclassified;
  if (ring == nullptr) return;
  for (int budget = 0; budget < 4 && ring->head != ring->tail; ++budget) {
    const std::uint64_t entry = ring->entries[ring->head++ % kUnclassifiedRing];
    const auto index = static_cast<std::uint32_t>(entry >> 32);
    const auto generation = static_cast<std::uint32_t>(entry);
    auto* po = reinterpret_cast<ProxyOpState*>(r.proxy_ops.At(index));
    if (po->slot.generation.load(std::memory_order_acquire) != generation ||
        Load(po->network) != ProxyNetworkWord(generation, kProxyUnclassified)) {
      continue;  // stopped, classified or released elsewhere
    }
    if (ReleaseIfNoNetwork(index, generation, /*max_age_ns=*/0, PlanEvidence::kLatest) ==
        ReleaseResult::kKept) {
      ring->Push(entry);  // not yet: to the back (there is room: one was just taken)
    }
  }
}

void TrackUnclassified(std::uint32_t index, std::uint32_t generation) {
  if (t_unclassified == nullptr) {
    pthread_once(&g_unclassified_once, [] {
      pthread_key_create(&g_unclassified_key, [](void* ring) { std::free(ring); });
    });
    // Zeroed memory is an empty ring (UnclassifiedRing is an aggregate of integers).
    t_unclassified = static_cast<UnclassifiedRing*>(std::calloc(1, sizeof(UnclassifiedRing)));
    if (t_unclassified == nullptr) return;
    pthread_setspecific(g_unclassified_key, t_unclassified);
  }
  if (t_unclassified->Full()) return;
  t_unclassified->Push(static_cast<std::uint64_t>(index) << 32 | generation);
}

}  // namespace

namespace {

struct RetiredIdentity {
  std::uint64_t seq = 0;
  std::uint64_t op_index = 0;
  std::uint32_t plan = 0;
  std::uint32_t weight = 1;
  std::uint8_t func = 0;
  std::uint8_t algo = 0;
};

// The identity RetireOp kept for the op whose handle is `parent`, if an entry of `comm` still
// holds it (cold: only ProxyOps whose op has completed come here).
__attribute__((noinline)) bool FindRetired(CommState* comm, const void* parent,
                                           RetiredIdentity* out) {
  if (comm->retired == nullptr) return false;
  const auto wanted = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(parent));
  for (std::uint32_t i = 0; i < kRetiredOps; ++i) {
    RetiredOp& e = comm->retired[i];
    const std::uint32_t before = e.version.load(std::memory_order_acquire);
    if ((before & 1) != 0 || Load(e.handle) != wanted) continue;
    // Each field loaded with acquire order, so the version's re-read below cannot move before them
    // (what an acquire fence before it would do; see RetireOp).
    constexpr auto kAcquire = std::memory_order_acquire;
    RetiredIdentity got;
    got.seq = e.seq.load(kAcquire);
    got.op_index = e.op_index.load(kAcquire);
    got.plan = e.plan.load(kAcquire);
    got.weight = e.weight.load(kAcquire);
    got.func = e.func.load(kAcquire);
    got.algo = e.algo.load(kAcquire);
    const std::uint64_t handle = e.handle.load(kAcquire);
    if (e.version.load(std::memory_order_relaxed) != before || handle != wanted) continue;
    *out = got;
    return true;
  }
  return false;
}

}  // namespace

void StartProxyOp(void* context, void** handle, const ProxyOpArgs& args) {
  Runtime& r = R();
  ReleaseUnclassified(r);
  std::uint16_t flags = 0;
  std::uint32_t comm_index = 0;
  std::uint32_t comm_generation = 0;
  std::uint64_t comm_id = 0;
  std::uint32_t comm_slot = UINT32_MAX;
  std::uint64_t seq = 0;
  std::uint64_t op_index = 0;
  std::uint8_t func = 0;
  std::uint32_t parent_index = UINT32_MAX;
  std::uint32_t parent_generation = 0;
  std::uint32_t parent_plan = 0;  // see ProxyOpState::parent_plan
  std::uint8_t parent_timed = 0;
  // A network op of a parent we cannot see (PXN, or gone) is always recorded: weight 1 keeps the
  // network bytes the agent sums unbiased either way.
  std::uint32_t weight = 1;
  if (args.pid != r.pid) {
    // PXN: raised by our proxy on behalf of another process. The context and parent are that
    // process's values: keep them as numbers for the agent to join, never decode them here.
    flags |= NCCLSCOPE_PROXY_FOREIGN;
    Count(NCCLSCOPE_CTR_FOREIGN_PROXY_OPS);
  } else {
    CommState* comm = FindComm(context, &comm_index);
    if (comm != nullptr) {
      comm_generation = comm->slot.generation.load(std::memory_order_relaxed);
      comm_id = Load(comm->comm_id);
      comm_slot = Load(comm->comm_slot);
      parent_plan = Load(comm->latest_plan);
    }
    std::uint32_t op_slot = 0;
    std::uint32_t op_generation = 0;
    if (OpState* op = FindOp(args.parent, &op_slot, &op_generation);
        op != nullptr && DecodeHandle(args.parent).kind == HandleKind::kOp) {
      seq = Load(op->seq);
      op_index = Load(op->op_index);
      func = Load(op->func);
      const std::uint32_t parent_weight = Load(op->weight);
      const std::uint8_t algo = Load(op->algo);
      const std::uint8_t expect = Load(op->expect);
      const std::uint32_t plan = Load(op->plan);
      // Re-check: the op may have completed and been reused while we copied.
      if (op->slot.generation.load(std::memory_order_acquire) == op_generation) {
        if (IsCollNet(algo) && args.is_send == 0) {
          // CollNet proxy ops are progressed by the CollNet transport, which raises no profiler
          // event (src/transport/coll_net.cc has no ncclProfiler call at v2.28.9-1): never stopped.
          *handle = IgnoredHandle();
          Count(NCCLSCOPE_CTR_PROXY_OPS_NO_NETWORK);
          return;
        }
        flags |= NCCLSCOPE_PROXY_PARENT_KNOWN;
        parent_index = op_slot;
        parent_generation = op_generation;
        parent_timed = expect != kExpectNone ? 1 : 0;
        parent_plan = plan;
        weight = parent_weight;
      }
    }
    // The parent completed at its stop before this start (no KernelCh kept it): its identity,
    // if still kept (state.h, RetiredOp).
    if ((flags & NCCLSCOPE_PROXY_PARENT_KNOWN) == 0 && comm != nullptr &&
        DecodeHandle(args.parent).kind == HandleKind::kOp) {
      RetiredIdentity retired;
      if (FindRetired(comm, args.parent, &retired)) {
        if (IsCollNet(retired.algo) && args.is_send == 0) {
          *handle = IgnoredHandle();  // as above: never stopped
          Count(NCCLSCOPE_CTR_PROXY_OPS_NO_NETWORK);
          return;
        }
        flags |= NCCLSCOPE_PROXY_PARENT_KNOWN;
        seq = retired.seq;
        op_index = retired.op_index;
        func = retired.func;
        parent_plan = retired.plan;
        weight = retired.weight;
      }
    }
  }
  const std::uint32_t index = r.proxy_ops.Allocate();
  if (index == UINT32_MAX) {
    *handle = nullptr;
    Count(NCCLSCOPE_CTR_HANDLES_EXHAUSTED);
    if (Load(r.proxy_pressure) == 0) Store(r.proxy_pressure, 1);
    return;
  }
  auto* po = reinterpret_cast<ProxyOpState*>(r.proxy_ops.At(index));
  const std::uint32_t generation = po->slot.generation.load(std::memory_order_relaxed);
  Store(po->comm_index, comm_index);
  Store(po->comm_generation, comm_generation);
  Store(po->comm_id, comm_id);
  Store(po->comm_slot, comm_slot);
  Store(po->seq, seq);
  Store(po->op_index, op_index);
  Store(po->func, func);
  Store(po->flags, flags);
  Store(po->weight, weight);
  Store(po->origin_context, reinterpret_cast<std::uintptr_t>(context));
  Store(po->origin_parent, reinterpret_cast<std::uintptr_t>(args.parent));
  Store(po->origin_pid, args.pid);
  Store(po->rank, args.rank);
  Store(po->peer, args.peer);
  Store(po->channel, args.channel);
  Store(po->is_send, args.is_send != 0 ? 1 : 0);
  Store(po->n_steps, args.n_steps);
  Store(po->chunk_size, args.chunk_size);
  Store(po->parent_index, parent_index);
  Store(po->parent_generation, parent_generation);
  Store(po->parent_timed, parent_timed);
  Store(po->parent_plan, parent_plan);
  Store(po->net_type, NCCLSCOPE_NET_UNKNOWN);
  Store(po->net_dev_index, -1);
  Store(po->qp_num[0], 0);
  Store(po->qp_num[1], 0);
  Store(po->start_ns, clock::Now());
  Store(po->in_progress_ns, 0);
  Store(po->bytes, 0);
  Store(po->max_step_ns, 0);
  Store(po->steps_done, 0);
  for (auto& s : po->state_ns) Store(s, 0);
  for (auto& step : po->steps) Store(step.active, 0);
  // Only network sends set isSend (src/plugin/profiler.cc:492 at v2.28.9-1); before 2.27 only the
  // network transport starts ProxyOps at all (ProxyOpArgs::network_known).
  const bool network = args.is_send != 0 || args.network_known;
  po->network.store(ProxyNetworkWord(generation, network ? kProxyIsNetwork : kProxyUnclassified),
                    std::memory_order_release);
  if (!network) TrackUnclassified(index, generation);
  *handle = EncodeHandle(HandleKind::kProxyOp, generation, index);
}

void StartProxyStep(void* /*context*/, void** handle, void* parent, int step) {
  std::uint32_t index = 0;
  std::uint32_t generation = 0;
  ProxyOpState* po = FindProxyOp(parent, HandleKind::kProxyOp, &index, nullptr, &generation);
  if (po == nullptr || !ClaimNetwork(po, generation)) {
    *handle = nullptr;
    if (parent != nullptr && DecodeHandle(parent).kind != HandleKind::kIgnored) {
      Count(NCCLSCOPE_CTR_INVALID_HANDLE);
    }
    return;
  }
  const auto slot_index = static_cast<std::uint32_t>(step) % kStepSlots;
  StepSlot& slot = po->steps[slot_index];
  const std::uint64_t now = clock::Now();
  Store(slot.state, kNoStepState);
  Store(slot.started, now);
  Store(slot.state_since, now);
  Store(slot.trans_size, 0);
  Store(slot.active, 1);
  // The generation the claim was made for, not the slot's now: a step of an op freed meanwhile
  // stays dead instead of counting on the slot's next ProxyOp.
  *handle = EncodeHandle(HandleKind::kProxyStep, generation, index, slot_index);
}

void StartNetPlugin(void** handle, const void* parent, std::int64_t plugin_id, const void* data) {
  *handle = IgnoredHandle();  // NetPlugin stop and NetPluginUpdate states need nothing back
  std::uint32_t sub = 0;
  std::uint32_t generation = 0;
  ProxyOpState* po = FindProxyOp(parent, HandleKind::kProxyStep, nullptr, &sub, &generation);
  if (po == nullptr || !ClaimNetwork(po, generation)) return;
  const auto type = static_cast<std::uint32_t>(static_cast<std::uint64_t>(plugin_id) >> 16);
  const auto version = static_cast<std::uint32_t>(plugin_id & 0xFFFF);
  if (type == abi::kNetPluginTypeIb && version == abi::kNetIbDescrVersion && data != nullptr) {
    abi::NetIbDescrV1 descr{};
    std::memcpy(&descr, data, sizeof(descr));
    if (descr.type != abi::kNetIbQpEvent) return;
    Store(po->net_type, NCCLSCOPE_NET_IB);
    Store(po->net_dev_index, descr.qp.device);
    const auto qp = static_cast<std::uint32_t>(descr.qp.qpNum);
    const std::uint32_t first = Load(po->qp_num[0]);
    if (first == 0) {
      Store(po->qp_num[0], qp);
    } else if (first != qp && Load(po->qp_num[1]) == 0) {
      Store(po->qp_num[1], qp);
    }
  } else if (Load(po->net_type) == NCCLSCOPE_NET_UNKNOWN) {
    Store(po->net_type,
          type == abi::kNetPluginTypeSocket ? NCCLSCOPE_NET_SOCKET : NCCLSCOPE_NET_OTHER);
  }
}

namespace {

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
  if (old != UINT32_MAX && !OpComplete(old) && OpComplete(old | kOpEnqueued)) {
    EmitAndFree(op, index, old | kOpEnqueued, 0, now);  // completion observed right now
  }
}

void EmitProxyOp(ProxyOpState* po, std::uint32_t index, std::uint16_t extra_flags) {
  Runtime& r = R();
  const std::uint32_t weight = Load(po->weight);
  if (weight == 0) {  // its op is counted, not recorded (record_one_in)
    r.proxy_ops.Free(index);
    return;
  }
  alignas(64) ncclscope_proxy_op_record rec{};
  rec.h.type = NCCLSCOPE_REC_PROXY_OP;
  rec.comm_id = Load(po->comm_id);
  rec.seq = Load(po->seq);
  rec.bytes = Load(po->bytes);
  rec.start_ns = Load(po->start_ns);
  rec.end_ns = clock::Now();
  rec.in_progress_ns = Load(po->in_progress_ns);
  rec.origin_context = Load(po->origin_context);
  rec.origin_parent = Load(po->origin_parent);
  for (std::uint32_t i = 0; i < NCCLSCOPE_STEP_STATE_COUNT; ++i)
    rec.state_ns[i] = Load(po->state_ns[i]);
  rec.op_index = Load(po->op_index);
  rec.rank = Load(po->rank);
  rec.peer = Load(po->peer);
  rec.origin_pid = Load(po->origin_pid);
  rec.n_steps = Load(po->n_steps);
  rec.steps_done = Load(po->steps_done);
  rec.chunk_size = Load(po->chunk_size);
  rec.comm_slot = Load(po->comm_slot);
  rec.flags = static_cast<std::uint16_t>(Load(po->flags) | extra_flags);
  rec.channel = Load(po->channel);
  rec.is_send = Load(po->is_send);
  rec.func = Load(po->func);
  rec.max_step_ns = Load(po->max_step_ns);
  rec.net_type = Load(po->net_type);
  rec.net_dev_index = Load(po->net_dev_index);
  rec.qp_num[0] = Load(po->qp_num[0]);
  rec.qp_num[1] = Load(po->qp_num[1]);
  rec.weight = weight;
  r.ring.Write(&rec, 1, ThreadLaneHint());
  r.proxy_ops.Free(index);
}

std::uint32_t StepStateIndex(int state) {
  switch (state) {
    case abi::kProxyStepSendGpuWait:
      return NCCLSCOPE_STEP_SEND_GPU_WAIT;
    case abi::kProxyStepSendPeerWait:
      return NCCLSCOPE_STEP_SEND_PEER_WAIT;
    case abi::kProxyStepSendWait:
      return NCCLSCOPE_STEP_SEND_WAIT;
    case abi::kProxyStepRecvWait:
      return NCCLSCOPE_STEP_RECV_WAIT;
    case abi::kProxyStepRecvFlushWait:
      return NCCLSCOPE_STEP_RECV_FLUSH_WAIT;
    case abi::kProxyStepRecvGpuWait:
      return NCCLSCOPE_STEP_RECV_GPU_WAIT;
    default:
      return kNoStepState;
  }
}

// Closes the step's current state interval at `now`.
void CloseStepState(ProxyOpState* po, StepSlot& slot, std::uint64_t now) {
  const std::uint32_t state = Load(slot.state);
  if (state >= NCCLSCOPE_STEP_STATE_COUNT) return;
  const std::uint64_t since = Load(slot.state_since);
  if (now > since) Store(po->state_ns[state], Load(po->state_ns[state]) + (now - since));
}

}  // namespace

void StopKernelCh(void* handle) {
  const Handle h = DecodeHandle(handle);
  std::uint32_t index = 0;
  std::uint32_t generation = 0;
  OpState* op = FindOp(handle, &index, &generation);
  if (op == nullptr || h.sub >= NCCLSCOPE_MAX_CHANNELS) {
    Count(NCCLSCOPE_CTR_LATE_EVENT);
    return;
  }
  ChannelTime& ch = op->channels[h.sub];
  if (Load(ch.tag) != ChannelTag(generation, kChannelStarted)) {
    Count(NCCLSCOPE_CTR_INVALID_HANDLE);  // stopped twice, or never started
    return;
  }
  Store(ch.tag, ChannelTag(generation, kChannelStopped));
  const std::uint64_t stop = Load(ch.stop);
  if (stop != 0 && stop >= Load(ch.start)) {
    Store(op->timed_mask, Load(op->timed_mask) | (1ull << h.sub));
  }
  const std::uint32_t stopped = Load(op->channels_stopped) + 1;
  Store(op->channels_stopped, stopped);
  // kExpectUnknown (CollNet) leaves expected_channels 0: its op completes by the clock.
  if (Load(op->expect) == kExpectUnknown) return NoteKernelActivity(op);
  const std::uint32_t expected = Load(op->expected_channels);
  if (expected != 0 && stopped == expected) CompleteKernel(index, generation);
}

void RecordKernelChStop(void* handle, const abi::StateArgsV4* args) {
  const Handle h = DecodeHandle(handle);
  OpState* op = FindOp(handle);
  if (op == nullptr || h.sub >= NCCLSCOPE_MAX_CHANNELS) {
    Count(NCCLSCOPE_CTR_LATE_EVENT);
    return;
  }
  ChannelTime& ch = op->channels[h.sub];
  if (Load(ch.tag) != ChannelTag(h.generation, kChannelStarted)) {
    Count(NCCLSCOPE_CTR_INVALID_HANDLE);  // record after stop
    return;
  }
  Store(ch.stop, args->kernelCh.pTimer);
}

void StartKernelPhase(void** handle, const void* parent, std::uint8_t phase, std::uint64_t ptimer) {
  const Handle k = DecodeHandle(parent);
  std::uint32_t index = 0;
  std::uint32_t generation = 0;
  OpState* op = FindOp(parent, &index, &generation);
  if (op == nullptr || k.kind != HandleKind::kKernelCh || k.sub >= NCCLSCOPE_MAX_CHANNELS ||
      phase >= NCCLSCOPE_PHASE_COUNT) {
    *handle = nullptr;
    if (parent != nullptr) Count(NCCLSCOPE_CTR_LATE_EVENT);
    return;
  }
  ChannelTime& ch = op->channels[k.sub];
  if (Load(ch.tag) != ChannelTag(generation, kChannelStarted)) {
    *handle = nullptr;
    Count(NCCLSCOPE_CTR_LATE_EVENT);  // the channel already stopped
    return;
  }
  Store(ch.phase_start, ptimer);
  *handle = EncodeHandle(HandleKind::kKernelPhase, generation, index, k.sub | phase << 6);
}

namespace {

void RecordKernelPhaseStop(void* handle, const abi::StateArgsV4* args) {
  const Handle h = DecodeHandle(handle);
  const std::uint32_t channel = h.sub & 0x3F;
  const std::uint32_t phase = h.sub >> 6;
  Runtime& r = R();
  if (h.index >= r.ops.carved() || phase >= NCCLSCOPE_PHASE_COUNT || args == nullptr) {
    Count(NCCLSCOPE_CTR_INVALID_HANDLE);
    return;
  }
  auto* op = reinterpret_cast<OpState*>(r.ops.At(h.index));
  ChannelTime& ch = op->channels[channel];
  if (op->slot.generation.load(std::memory_order_acquire) != h.generation ||
      Load(ch.tag) != ChannelTag(h.generation, kChannelStarted)) {
    Count(NCCLSCOPE_CTR_LATE_EVENT);
    return;
  }
  const std::uint64_t start = Load(ch.phase_start);
  const std::uint64_t stop = args->kernelCh.pTimer;
  if (stop < start) return;  // a clock that ran backwards is no duration
  // The channel's first phase in this op (StartOp cleared the op's phase_mask): its times start
  // from zero here. WritePhases reads only the channels in phase_mask.
  const std::uint64_t channel_bit = 1ull << channel;
  const std::uint64_t phase_mask = Load(op->phase_mask);
  if ((phase_mask & channel_bit) == 0) {
    for (auto& ns : ch.phase_ns) Store(ns, 0);
    Store(ch.phases_present, 0);
  }
  Store(ch.phase_ns[phase], Load(ch.phase_ns[phase]) + Saturate32(stop - start));
  Store(ch.phases_present, Load(ch.phases_present) | 1u << phase);
  Store(op->phase_mask, phase_mask | channel_bit);
}

}  // namespace

void RecordProxyOpStateV1(void* handle, int state, std::uint64_t trans_size) {
  std::uint32_t generation = 0;
  ProxyOpState* po = FindProxyOp(handle, HandleKind::kProxyOp, nullptr, nullptr, &generation);
  if (po == nullptr || !ClaimNetwork(po, generation)) {
    Count(NCCLSCOPE_CTR_INVALID_HANDLE);
    return;
  }
  // Posted is the op's first network action (net.cc:1104-1150 at v2.26.6-1): what v4 calls
  // "in progress". transSize is the op's bytes so far (plugin/profiler.cc:478-489 at v2.26.6-1);
  // ProxyStep records carry none before v4.
  if ((state == abi::kProxyOpSendPosted || state == abi::kProxyOpRecvPosted) &&
      Load(po->in_progress_ns) == 0) {
    Store(po->in_progress_ns, clock::Now());
  }
  if (trans_size > Load(po->bytes)) Store(po->bytes, trans_size);
}

void StopEvent(void* handle) {
  const Handle h = DecodeHandle(handle);
  switch (h.kind) {
    case HandleKind::kOp:
      StopOp(handle);
      return;
    case HandleKind::kKernelCh:
      StopKernelCh(handle);
      return;
    case HandleKind::kProxyOp: {
      std::uint32_t index = 0;
      std::uint32_t generation = 0;
      ProxyOpState* po = FindProxyOp(handle, HandleKind::kProxyOp, &index, nullptr, &generation);
      if (po == nullptr || !ClaimNetwork(po, generation)) {
        Count(NCCLSCOPE_CTR_INVALID_HANDLE);
        return;
      }
      EmitProxyOp(po, index, 0);  // only the network transport stops ProxyOps
      return;
    }
    case HandleKind::kProxyStep: {
      std::uint32_t sub = 0;
      ProxyOpState* po = FindProxyOp(handle, HandleKind::kProxyStep, nullptr, &sub);
      if (po == nullptr || Load(po->steps[sub].active) == 0) {
        Count(NCCLSCOPE_CTR_INVALID_HANDLE);
        return;
      }
      StepSlot& slot = po->steps[sub];
      const std::uint64_t now = clock::Now();
      CloseStepState(po, slot, now);
      Store(po->bytes, Load(po->bytes) + Load(slot.trans_size));
      Store(po->steps_done, Load(po->steps_done) + 1);
      const std::uint64_t started = Load(slot.started);
      if (now > started && now - started > Load(po->max_step_ns)) {
        Store(po->max_step_ns, now - started);
      }
      Store(slot.active, 0);
      return;
    }
    case HandleKind::kIgnored:
    case HandleKind::kApi:
    case HandleKind::kGroup:
    case HandleKind::kKernelPhase:  // its duration came with its KernelPhaseStop record
      return;
    default:
      if (handle != nullptr) Count(NCCLSCOPE_CTR_INVALID_HANDLE);
      return;
  }
}

void RecordEventState(void* handle, int state, const abi::StateArgsV4* args) {
  const Handle h = DecodeHandle(handle);
  switch (h.kind) {
    case HandleKind::kKernelCh:
      if (state != abi::kKernelChStop || args == nullptr) break;
      RecordKernelChStop(handle, args);
      return;
    case HandleKind::kKernelPhase:
      if (state != abi::kKernelPhaseStop) break;
      RecordKernelPhaseStop(handle, args);
      return;
    case HandleKind::kProxyStep: {
      const std::uint32_t index = StepStateIndex(state);
      if (index == kNoStepState) break;
      std::uint32_t sub = 0;
      ProxyOpState* po = FindProxyOp(handle, HandleKind::kProxyStep, nullptr, &sub);
      if (po == nullptr || Load(po->steps[sub].active) == 0) {
        Count(NCCLSCOPE_CTR_INVALID_HANDLE);
        return;
      }
      StepSlot& slot = po->steps[sub];
      const std::uint64_t now = clock::Now();
      CloseStepState(po, slot, now);
      Store(slot.state, index);
      Store(slot.state_since, now);
      if (args != nullptr && args->proxyStep.transSize > Load(slot.trans_size)) {
        Store(slot.trans_size, args->proxyStep.transSize);
      }
      return;
    }
    case HandleKind::kProxyOp: {
      if (state != abi::kProxyOpInProgress) return;  // deprecated v1-v3 op states: ignore
      std::uint32_t generation = 0;
      ProxyOpState* po = FindProxyOp(handle, HandleKind::kProxyOp, nullptr, nullptr, &generation);
      if (po == nullptr || !ClaimNetwork(po, generation)) {
        Count(NCCLSCOPE_CTR_INVALID_HANDLE);
        return;
      }
      if (Load(po->in_progress_ns) == 0) Store(po->in_progress_ns, clock::Now());
      return;
    }
    case HandleKind::kIgnored:
    case HandleKind::kApi:
    case HandleKind::kGroup:
      return;  // GroupApi states (23, 24), NetPluginUpdate and the like
    case HandleKind::kOp:
      break;
    default:
      if (handle != nullptr) Count(NCCLSCOPE_CTR_INVALID_HANDLE);
      return;
  }
  Count(NCCLSCOPE_CTR_UNKNOWN_EVENTS);
}

// noinline: StopKernelCh's tail call (see NoteKernelActivity).
__attribute__((noinline)) void CompleteKernel(std::uint32_t index, std::uint32_t generation,
                                              std::uint64_t when_ns) {
  Runtime& r = R();
  if (index >= r.ops.carved()) return;
  auto* op = reinterpret_cast<OpState*>(r.ops.At(index));
  const std::uint32_t old = SetStateBits(op, generation, kOpKernelDone);
  if (old != UINT32_MAX && !OpComplete(old) && OpComplete(old | kOpKernelDone)) {
    EmitAndFree(op, index, old | kOpKernelDone, 0, when_ns);
  }
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

void FlushProxyOp(std::uint32_t index, std::uint32_t generation) {
  Runtime& r = R();
  if (index >= r.proxy_ops.carved()) return;
  auto* po = reinterpret_cast<ProxyOpState*>(r.proxy_ops.At(index));
  if (po->slot.generation.load(std::memory_order_acquire) != generation) return;
  std::uint32_t expected = ProxyNetworkWord(generation, kProxyUnclassified);
  if (po->network.compare_exchange_strong(expected, ProxyNetworkWord(generation, kProxyReleased),
                                          std::memory_order_acq_rel)) {
    r.proxy_ops.Free(index);  // never did network work: no record
    Count(NCCLSCOPE_CTR_PROXY_OPS_NO_NETWORK);
    return;
  }
  if (expected == ProxyNetworkWord(generation, kProxyIsNetwork)) {
    EmitProxyOp(po, index, NCCLSCOPE_PROXY_FLUSHED);
  }
}

}  // namespace ncclscope::plugin
