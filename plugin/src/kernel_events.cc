// Kernel channels (KernelCh) and, under v7, their kernel phases: the GPU's own timestamps of each
// channel of an op, taken from NCCL's proxy thread (src/transport/profiler.cc at v2.28.9-1). The
// last expected channel to stop completes its op (CompleteKernel, op_events.cc).

#include "plugin/src/kernel_events.h"

#include <atomic>
#include <cstdint>

#include "plugin/src/clock.h"
#include "plugin/src/event_helpers.h"
#include "plugin/src/handle.h"
#include "plugin/src/runtime.h"

namespace ncclscope::plugin {
namespace {

// The KernelCh handlers call nothing on their common path: a call there makes the compiler save
// registers on every KernelCh event (exports.cc, "KernelCh entry"). What needs a call (the clock,
// completing the op) is in these, reached by a tail call.
__attribute__((noinline)) void NoteKernelActivity(OpState* op) {
  Store(op->last_kernel_ns, clock::Now());
}

// What a KernelCh stop does besides its bookkeeping, for the op's last expected channel or an op
// that waits for an unknown number (kExpectUnknown, CollNet, leaves expected_channels 0: it
// completes by the clock). One call site, so that the common stop (a channel of a known number,
// not the last) returns without a stack frame (the frame cost 2 instructions per KernelCh stop).
// Called for expected == 0 or stopped == expected (StopKernelCh). A known number first: an op
// expects channels of a number exactly when it is kExpectKnown (PublishOp), so the channel that
// reaches it completes the op without `expect` being read (measured: 3 instructions per op).
__attribute__((noinline)) void FinishKernelChStop(OpState* op, std::uint32_t index,
                                                  std::uint32_t generation, std::uint32_t stopped,
                                                  std::uint32_t expected) {
  if (expected != 0 && stopped == expected) return CompleteKernelOf(op, index, generation);
  if (Load(op->expect) == kExpectUnknown) NoteKernelActivity(op);
}

}  // namespace

void StartKernelCh(void* /*context*/, void** handle, void* parent, std::uint8_t channel,
                   std::uint64_t ptimer) {
  // Not FindOp: its test of the slot's generation is left to the op's state word, which carries
  // the generation of the op it belongs to (PublishOp) and has a completion bit set from the moment
  // the op completes until the slot's next op is published (EmitAndFree frees a completed op; Free
  // bumps the slot's generation), and on every op a forked child inherited (AtForkChild). So "open,
  // of this generation" refuses every stale parent the slot's generation did, and counts it the
  // same (measured: 3 instructions a KernelCh start, 24 per 8-channel collective).
  const Handle h = DecodeHandle(parent);
  Runtime& r = R();
  if (h.kind != HandleKind::kOp || h.index >= r.ops.carved()) {
    *handle = nullptr;
    if (parent != nullptr) Count(NCCLSCOPE_CTR_LATE_EVENT);
    return;
  }
  const std::uint32_t index = h.index;
  const std::uint32_t generation = h.generation;
  auto* op = reinterpret_cast<OpState*>(r.ops.At(index));
  const std::uint32_t state = op->state.load(std::memory_order_acquire);
  if (!OpOpen(state, generation) || channel >= NCCLSCOPE_MAX_CHANNELS) {
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
  // EncodeHandle(kKernelCh, generation, index, channel), built from the parent's bits, which hold
  // kOp, this generation and this index (tested above): the kind flipped from kOp to kKernelCh and
  // the sub-index replaced by the channel (measured: 3 instructions per KernelCh start).
  static_assert(static_cast<std::uint32_t>(HandleKind::kOp) == 1 &&
                static_cast<std::uint32_t>(HandleKind::kKernelCh) == 2);
  const auto parent_bits = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(parent));
  // NOLINTNEXTLINE(performance-no-int-to-ptr): a handle, never dereferenced (handle.h)
  *handle = reinterpret_cast<void*>(static_cast<std::uintptr_t>(
      ((parent_bits ^ std::uint64_t{3} << 60) & ~std::uint64_t{0xFF}) | channel));
  if (Load(op->expect) == kExpectUnknown) NoteKernelActivity(op);
}

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
  if (__builtin_expect(stop != 0 && stop >= Load(ch.start), 1)) {
    Store(op->timed_mask, Load(op->timed_mask) | (1ull << h.sub));
  }
  const std::uint32_t stopped = Load(op->channels_stopped) + 1;
  Store(op->channels_stopped, stopped);
  // An op expects a known number of channels exactly when expected_channels is not 0 (PublishOp:
  // kExpectKnown, n_channels > 0); every channel of it but the last is done here.
  const std::uint32_t expected = Load(op->expected_channels);
  if (__builtin_expect(expected != 0 && stopped != expected, 1)) return;
  FinishKernelChStop(op, index, generation, stopped, expected);
}

void RecordKernelChStop(void* handle, const abi::StateArgsV4* args) {
  const Handle h = DecodeHandle(handle);
  std::uint32_t generation = 0;
  OpState* op = FindOp(handle, nullptr, &generation);
  if (op == nullptr || h.sub >= NCCLSCOPE_MAX_CHANNELS) {
    Count(NCCLSCOPE_CTR_LATE_EVENT);
    return;
  }
  ChannelTime& ch = op->channels[h.sub];
  if (Load(ch.tag) != ChannelTag(generation, kChannelStarted)) {
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

}  // namespace ncclscope::plugin
