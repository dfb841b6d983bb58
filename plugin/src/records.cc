// Op and network-op records: what an op that completed (or was forced out) leaves behind — its
// record(s) built in place in the ring, its progress in the comm table, its retired identity for
// late ProxyOps — and the ProxyOp record. Called by whoever completes the op or stops the
// network op (op_events.cc, kernel_events.cc, proxy_events.cc, runtime.cc's sweep and finalize).

#include "plugin/src/records.h"

#include <cstddef>
#include <cstring>

#include "plugin/src/clock.h"
#include "plugin/src/event_helpers.h"
#include "plugin/src/handle.h"
#include "plugin/src/runtime.h"

namespace ncclscope::plugin {
namespace {

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

// The timed channels' times (OpState::timed_mask), read once for a recorded op, before its slot
// is reserved: their number, which the record's size and flags need, comes with them instead of
// from a bit count (~20 instructions).
struct GpuTimes {
  std::uint64_t first;  // earliest start (UINT64_MAX without timed channels)
  std::uint64_t last;   // latest stop
  std::uint32_t timed;
  // Each timed channel's start and stop truncated to 32 bits, ascending channel order (the first
  // `timed` entries; not zeroed): ch[] once rebased on `first`.
  ncclscope_channel_time low[NCCLSCOPE_MAX_CHANNELS];
};

__attribute__((always_inline)) inline void ReadGpuTimes(const OpState* op, std::uint64_t mask,
                                                        GpuTimes* t) {
  std::uint64_t first = UINT64_MAX;
  std::uint64_t last = 0;
  ncclscope_channel_time* out = t->low;
  for (std::uint64_t m = mask; m != 0; m &= m - 1, ++out) {
    const ChannelTime& ch = op->channels[__builtin_ctzll(m)];
    const std::uint64_t start = Load(ch.start);
    const std::uint64_t stop = Load(ch.stop);
    first = start < first ? start : first;
    last = stop > last ? stop : last;
    *out =
        ncclscope_channel_time{static_cast<std::uint32_t>(start), static_cast<std::uint32_t>(stop)};
  }
  t->first = first;
  t->last = last;
  t->timed = static_cast<std::uint32_t>(out - t->low);
}

// The first `n` channel times of `t` into ch[] as offsets from t.first: the offset
// static_cast<uint32_t>(time - first) is the difference of the low halves modulo 2^32. Two channels
// a step in vector registers (SSE2 on x86-64, NEON on Arm): ~4 instructions a channel, against ~21
// for reading each channel's times again by its mask bit (WriteInlineChannels).
void CopyInlineChannels(ncclscope_op_record* rec, const GpuTimes& t, std::uint32_t n) {
  using Pair2 [[gnu::vector_size(16)]] = std::uint32_t;  // two channel_times
  static_assert(sizeof(Pair2) == 2 * sizeof(ncclscope_channel_time));
  const auto first = static_cast<std::uint32_t>(t.first);
  const Pair2 base = {first, first, first, first};
  // Counted in pairs, then the odd one by n's low bit: a loop on i + 2 <= n left the compiler to
  // work out where it stopped (~10 instructions per op).
  const std::uint32_t pairs = n / 2;
  for (std::uint32_t pair = 0; pair < pairs; ++pair) {
    Pair2 v;
    std::memcpy(&v, t.low + 2 * pair, sizeof(v));
    v -= base;
    std::memcpy(rec->ch + 2 * pair, &v, sizeof(v));
  }
  if ((n & 1) != 0) {
    const std::uint32_t i = n - 1;
    rec->ch[i] = ncclscope_channel_time{t.low[i].start_off_ns - first, t.low[i].end_off_ns - first};
  }
}

// The op record's header (its type; Commit sets layout, position and checksum) and ch[] zeroed.
// Every other byte of the record is written by WriteOpRecords, as if the record were zeroed first
// and its fields set (it has no padding): a memset of all of it and the stores over it cost ~45
// instructions more per op. ch[] is zeroed for the entries past n_inline, as eight 16-byte
// stores: GCC 12 makes a memset of its 128 bytes a rep stos of 16 steps with its setup (~26
// instructions in callgrind's count, and a start-up cost in time).
void StartOpRecord(ncclscope_op_record* rec) {
  static_assert(sizeof(ncclscope_op_record) == offsetof(ncclscope_op_record, ch) + sizeof(rec->ch));
  static_assert(offsetof(ncclscope_op_record, weight) + sizeof(rec->weight) ==
                offsetof(ncclscope_op_record, ch));
  std::memset(&rec->h, 0, sizeof(rec->h));
  rec->h.type = NCCLSCOPE_REC_OP;
  using Zero [[gnu::vector_size(16)]] = std::uint64_t;
  static_assert(sizeof(rec->ch) == 8 * sizeof(Zero));
  const Zero zero = {};
  auto* p = reinterpret_cast<unsigned char*>(rec->ch);
  std::memcpy(p, &zero, sizeof(zero));
  std::memcpy(p + 16, &zero, sizeof(zero));
  std::memcpy(p + 32, &zero, sizeof(zero));
  std::memcpy(p + 48, &zero, sizeof(zero));
  std::memcpy(p + 64, &zero, sizeof(zero));
  std::memcpy(p + 80, &zero, sizeof(zero));
  std::memcpy(p + 96, &zero, sizeof(zero));
  std::memcpy(p + 112, &zero, sizeof(zero));
}

// A record that follows the op record in its group (channels, detail, phases), zeroed in its
// reserved slot and stamped with the op's identity, by which the agent joins it to the op.
template <typename Follower>
Follower* StartFollower(unsigned char* raw, std::uint16_t type, const ncclscope_op_record& rec) {
  std::memset(raw, 0, NCCLSCOPE_RECORD_SIZE);
  auto* f = reinterpret_cast<Follower*>(raw);
  f->h.type = type;
  f->comm_id = rec.comm_id;
  f->seq = rec.seq;
  f->op_index = rec.op_index;
  f->rank = rec.rank;
  f->func = rec.func;
  return f;
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
      cont = StartFollower<ncclscope_op_channels_record>(slots.slots[part],
                                                         NCCLSCOPE_REC_OP_CHANNELS, rec);
      cont->part = static_cast<std::uint8_t>(part);
      cont->first = static_cast<std::uint8_t>(position);
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
  auto* d = StartFollower<ncclscope_op_detail_record>(raw, NCCLSCOPE_REC_OP_DETAIL, rec);
  d->user_tag = Load(op->user_tag);
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
      p = StartFollower<ncclscope_op_phases_record>(slots.slots[first + part],
                                                    NCCLSCOPE_REC_OP_PHASES, rec);
      p->part = static_cast<std::uint8_t>(part + 1);
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

// The op's GPU timing (`mask`: its timed channels, at least one; `t`: their times): its span on
// the GPU, and each timed channel's start and end as offsets from the first start, the first 16 in
// the op record and the rest in continuation records (ch[] arrives zeroed). Returns the flags it
// adds. always_inline, as WriteOpRecords.
__attribute__((always_inline)) inline std::uint16_t WriteGpuTiming(
    const OpState* op, ncclscope_op_record* rec, std::uint64_t mask, const GpuTimes& t,
    bool reserved, const ring::RingWriter::Reservation& slots) {
  const std::uint64_t first = t.first;
  rec->gpu_start_ns = first;
  rec->gpu_end_ns = t.last;
  rec->channel_mask = mask;
  rec->n_timed = static_cast<std::uint8_t>(t.timed);
  std::uint16_t flags = NCCLSCOPE_OP_GPU_TIMING;

  const std::uint32_t n_inline =
      t.timed < NCCLSCOPE_OP_INLINE_CHANNELS ? t.timed : NCCLSCOPE_OP_INLINE_CHANNELS;
  rec->n_inline = static_cast<std::uint8_t>(n_inline);
  // Every timed channel has first <= start <= stop <= last (StopKernelCh times only those), so
  // an offset saturates only if last - first does: one test for the whole op, and the common
  // path converts without clamping.
  const bool saturated = ((t.last - first) >> 32) != 0;
  std::uint64_t rest = 0;
  if (saturated) {
    rest = WriteInlineChannels<true>(op, rec, mask, first);
  } else {
    CopyInlineChannels(rec, t, n_inline);
    if (t.timed > NCCLSCOPE_OP_INLINE_CHANNELS) {  // the channels after the first 16
      rest = mask;
      for (std::uint32_t i = 0; i < NCCLSCOPE_OP_INLINE_CHANNELS; ++i) rest &= rest - 1;
    }
  }
  // Dropped without a reservation: no continuation to build (and `spare` holds rec).
  if (rest != 0 && reserved) WriteContinuations(op, *rec, rest, first, slots);
  if (saturated) flags |= NCCLSCOPE_OP_TIME_SATURATED;
  return flags;
}

// Builds the op's record(s) in place in the ring (or, without room, on the stack: dropped and
// counted, the code path one). always_inline, with CompleteInCommTable: as calls they cost 27
// instructions more per recorded collective (callgrind, docs/benchmarks.md, "record_one_in").
__attribute__((always_inline)) inline void WriteOpRecords(
    Runtime& r, const OpState* op, std::uint32_t weight, std::uint64_t mask, const GpuTimes& t,
    bool partial, std::uint32_t final_state, std::uint16_t extra_flags, std::uint64_t complete_ns) {
  const std::uint32_t timed = t.timed;
  // How many records the timed channels need, in ascending channel order.
  const std::uint32_t continuations =
      timed > NCCLSCOPE_OP_INLINE_CHANNELS
          ? (timed - NCCLSCOPE_OP_INLINE_CHANNELS + NCCLSCOPE_OP_CONT_CHANNELS - 1) /
                NCCLSCOPE_OP_CONT_CHANNELS
          : 0;
  // v7: the tag and kernel variant (OP_DETAIL), the kernel phases (OP_PHASES).
  const std::uint64_t phase_mask = Load(op->phase_mask);
  const bool detail = Load(op->user_tag) != 0 || Load(op->kernel_variant) != NCCLSCOPE_KV_NONE;
  // Phases are v7's and sampled: most ops have none, and skip the bit count (~17 instructions).
  const std::uint32_t phase_records =
      phase_mask == 0
          ? 0
          : (PopCount(phase_mask) + NCCLSCOPE_OP_PHASE_CHANNELS - 1) / NCCLSCOPE_OP_PHASE_CHANNELS;
  // Filled by Reserve when it returns true, and read only then (ring_writer.h, Reservation).
  ring::RingWriter::Reservation slots;  // NOLINT(cppcoreguidelines-pro-type-member-init)
  const bool reserved = r.ring.Reserve(1 + continuations + (detail ? 1 : 0) + phase_records,
                                       ThreadLaneHint(), &slots);
  // The record's own alignment: 64 made the compiler realign the stack in every call.
  alignas(ncclscope_op_record) unsigned char spare[NCCLSCOPE_RECORD_SIZE];
  unsigned char* raw = reserved ? slots.slots[0] : spare;
  auto* rec = reinterpret_cast<ncclscope_op_record*>(raw);
  StartOpRecord(rec);  // and every other field below
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
    flags |= WriteGpuTiming(op, rec, mask, t, reserved, slots);
  } else {
    rec->gpu_start_ns = 0;
    rec->gpu_end_ns = 0;
    rec->channel_mask = 0;
    rec->n_timed = 0;
    rec->n_inline = 0;
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

}  // namespace

// Records the op (unless record_one_in left it out), completes it in the comm table and frees it.
void EmitAndFree(OpState* op, std::uint32_t index, std::uint32_t final_state,
                 std::uint16_t extra_flags, std::uint64_t now) {
  Runtime& r = R();
  const std::uint64_t mask = Load(op->timed_mask);  // channels that reported both ends
  // An op left out by record_one_in (weight 0) builds no record: it is counted, and completes in
  // the comm table like every op. A recorded op reads its channels' times now (GpuTimes).
  const std::uint32_t weight = Load(op->weight);
  // Filled below, either way (zeroing its 512-byte array would cost more than the pass).
  GpuTimes times;  // NOLINT(cppcoreguidelines-pro-type-member-init)
  if (weight != 0) {
    ReadGpuTimes(op, mask, &times);
  } else {
    times.first = UINT64_MAX;
    times.last = 0;
    times.timed = PopCount(mask);
  }
  const std::uint32_t timed = times.timed;
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
  if (weight == 0) {
    Count(NCCLSCOPE_CTR_OPS_NOT_RECORDED);
  } else {
    WriteOpRecords(r, op, weight, mask, times, partial, final_state, extra_flags, complete_ns);
  }
  if (partial || (extra_flags & NCCLSCOPE_OP_FLUSHED) != 0) Count(NCCLSCOPE_CTR_OPS_INCOMPLETE);
  // Evidence that the op's kernel ran (CompleteInCommTable): GPU timing, or under ABI v3 every
  // channel NCCL's proxy saw end.
  const bool kernel_ran = mask != 0 || (untimed_by_abi && Load(op->channels_stopped) != 0 &&
                                        Load(op->channels_stopped) == Load(op->channels_started));
  CompleteInCommTable(r, op, index, kernel_ran, final_state, complete_ns);
  // Channel tags carry the generation: freeing (which bumps it) makes them all idle.
  r.ops.Free(index, &op->slot);
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

}  // namespace ncclscope::plugin
