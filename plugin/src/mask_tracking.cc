// NCCL's event mask and the copies NCCL takes of it: writing the mask (WriteNcclMask), the API and
// Group events at which NCCL's copy for a call is known (StartApi, StartGroup), and what an op's
// copy was (MaskOfTask) — exact from the API handle under 2.28+, inferred under 2.27. What an op
// expects (op_events.cc) depends on that copy, not on the mask at its own start.

#include "plugin/src/mask_tracking.h"

#include <atomic>
#include <cstdint>

#include "plugin/src/chain.h"
#include "plugin/src/clock.h"
#include "plugin/src/handle.h"
#include "plugin/src/names.h"
#include "plugin/src/runtime.h"

namespace ncclscope::plugin {
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

bool KernelOnWithin(const Runtime& r, std::uint64_t now, std::uint64_t window) {
  const std::uint64_t off = Load(r.kernel_off_ns);
  return off != 0 && now >= off && now - off < window;
}

}  // namespace

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

}  // namespace ncclscope::plugin
