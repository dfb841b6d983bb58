// Lifecycle: the first init reads the settings, reserves the pools, creates the ring and starts
// the maintenance thread; each init/finalize adds or removes one communicator. Cold paths: they
// may allocate and take the lifecycle mutex, but finalize stays well under 50 ms (a scan of the
// op and proxy-op pools plus one record) and never waits for the maintenance thread.

#include "plugin/src/runtime.h"

#include <pthread.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>

#include "plugin/src/chain.h"
#include "plugin/src/clock.h"
#include "plugin/src/cuda_info.h"
#include "plugin/src/handle.h"
#include "plugin/src/log.h"

#ifndef NCCLSCOPE_PLUGIN_VERSION
#define NCCLSCOPE_PLUGIN_VERSION "0.0.0"
#endif

namespace ncclscope::plugin {

// In static storage, constructed when the library is loaded and never destroyed (no destructor is
// registered for a placement new): NCCL's threads and the maintenance thread may outlive static
// destructors.
alignas(Runtime) unsigned char g_runtime_storage[sizeof(Runtime)];
Runtime* const g_runtime = new (g_runtime_storage) Runtime();  // NOLINT(cert-err58-cpp)

namespace {

constexpr std::uint64_t kMaintenanceInterval = 200'000'000;  // ns
// A CollNet op does not say how many KernelCh it gets (nChannels 0): it is complete once every
// channel that started has stopped and none has started or stopped for this long. The channels of
// one op are the blocks of one kernel launch and start together.
constexpr std::uint64_t kUnknownChannelsQuiet = 500'000'000;  // ns
// An op that waits for KernelCh only because its mask copy is uncertain (KernelCh was switched
// off around its API call, or 2.27's copy at task append) stops waiting after this long without
// one, when no later plan has proved it sooner: with KernelCh off from then on, no timed plan may
// ever come. Ops whose copy surely had KernelCh never time out (a first kernel may start late).
constexpr std::uint64_t kUncertainMaskWait = 2'000'000'000;  // ns
// An unclassified ProxyOp with no proof (its parent had no KernelCh and no later plan was timed
// yet, or a PXN op of another process) is released after this long without network activity. A
// network receive queued behind other ops on its connection (nextPeer, src/proxy.cc:441-446 at
// v2.28.9-1) waits for them first. When ProxyOps ran out of slots, the wait is cut short: a
// network receive mistaken this way loses its record (counted as invalid_handle), while keeping
// the slots would lose every later network op.
constexpr std::uint64_t kUnclassifiedProxyMaxAge = 30'000'000'000;    // ns
constexpr std::uint64_t kUnclassifiedProxyMaxAgeTight = 100'000'000;  // ns

void Log(int level, const char* format, ...) __attribute__((format(printf, 2, 3)));
void Log(int level, const char* format, ...) {
  va_list args;
  va_start(args, format);
  LogVia(R().logger, level, __FILE__, __LINE__, "", format, args);
  va_end(args);
}

void CopyString(char* dst, std::size_t capacity, const char* src) {
  if (src == nullptr) {
    dst[0] = '\0';
    return;
  }
  const std::size_t n = strnlen(src, capacity - 1);
  std::memcpy(dst, src, n);
  dst[n] = '\0';
}

// The events each ABI version has: KernelCh and NetPlugin from v3 (NCCL 2.26), CE from v6 (2.29),
// KernelPhase from v7 (2.31). A bit NCCL does not know for the version it loaded would only
// reach its older gates (the P2p bit, for one, is never tested before 2.26: plugin/abi
// profiler_v1_v3.h).
std::uint32_t AbiEvents(int abi_version) {
  std::uint32_t events = kUsableEvents;
  if (abi_version < 7) events &= ~kEventKernelPhase;
  if (abi_version < 6) events &= ~kEventCeColl;
  if (abi_version < 3) events &= ~(kEventKernelCh | kEventNetPlugin);
  return events;
}

// Applies a new controls snapshot from the ring header (the agent's YAML), unless pinned.
void ApplyAgentControls(Runtime& r) {
  ncclscope_ring_header* header = r.ring.header();
  if (header == nullptr) return;
  std::atomic_ref<std::uint32_t> seq_ref(header->controls.seq);
  const std::uint32_t seq = seq_ref.load(std::memory_order_acquire);
  if (seq == 0 || (seq & 1) != 0 || seq == r.applied_control_seq) return;
  // Acquire loads of each field keep them before the re-check of seq (no fence needed).
  ncclscope_controls& shared = header->controls;
  ncclscope_controls snapshot{};
  snapshot.event_mask =
      std::atomic_ref<std::uint32_t>(shared.event_mask).load(std::memory_order_acquire);
  snapshot.min_bytes =
      std::atomic_ref<std::uint64_t>(shared.min_bytes).load(std::memory_order_acquire);
  snapshot.duty_period_ns =
      std::atomic_ref<std::uint64_t>(shared.duty_period_ns).load(std::memory_order_acquire);
  snapshot.kernel_duty_pm =
      std::atomic_ref<std::uint32_t>(shared.kernel_duty_pm).load(std::memory_order_acquire);
  snapshot.proxy_duty_pm =
      std::atomic_ref<std::uint32_t>(shared.proxy_duty_pm).load(std::memory_order_acquire);
  snapshot.overhead_budget_ppm =
      std::atomic_ref<std::uint32_t>(shared.overhead_budget_ppm).load(std::memory_order_acquire);
  snapshot.flags = std::atomic_ref<std::uint32_t>(shared.flags).load(std::memory_order_acquire);
  snapshot.record_one_in =
      std::atomic_ref<std::uint32_t>(shared.record_one_in).load(std::memory_order_acquire);
  snapshot.record_rate_limit =
      std::atomic_ref<std::uint32_t>(shared.record_rate_limit).load(std::memory_order_acquire);
  if (seq_ref.load(std::memory_order_relaxed) != seq) return;  // being rewritten: next pass
  r.applied_control_seq = seq;
  const std::uint32_t pinned = r.settings.pinned;
  if ((pinned & NCCLSCOPE_CONTROL_EVENT_MASK) == 0 && (snapshot.event_mask & ~kUsableEvents) == 0) {
    r.event_mask.store(snapshot.event_mask, std::memory_order_relaxed);
  }
  if ((pinned & NCCLSCOPE_CONTROL_MIN_BYTES) == 0) {
    r.min_bytes.store(snapshot.min_bytes, std::memory_order_relaxed);
  }
  if ((pinned & NCCLSCOPE_CONTROL_DUTY_PERIOD) == 0 && snapshot.duty_period_ns >= 1'000'000) {
    r.duty_period_ns.store(snapshot.duty_period_ns, std::memory_order_relaxed);
  }
  if ((pinned & NCCLSCOPE_CONTROL_KERNEL_DUTY) == 0 && snapshot.kernel_duty_pm <= 1000) {
    r.kernel_duty_pm.store(snapshot.kernel_duty_pm, std::memory_order_relaxed);
  }
  if ((pinned & NCCLSCOPE_CONTROL_PROXY_DUTY) == 0 && snapshot.proxy_duty_pm <= 1000) {
    r.proxy_duty_pm.store(snapshot.proxy_duty_pm, std::memory_order_relaxed);
  }
  // An agent that predates the budget leaves the flag clear: the plugin keeps its own.
  if ((pinned & NCCLSCOPE_CONTROL_OVERHEAD_BUDGET) == 0 &&
      (snapshot.flags & NCCLSCOPE_CONTROLS_HAS_BUDGET) != 0 &&
      snapshot.overhead_budget_ppm <= 1'000'000) {
    r.overhead_budget_ppm.store(snapshot.overhead_budget_ppm, std::memory_order_relaxed);
  }
  if ((pinned & NCCLSCOPE_CONTROL_RECORD_ONE_IN) == 0 &&
      (snapshot.flags & NCCLSCOPE_CONTROLS_HAS_RECORD_ONE_IN) != 0 && snapshot.record_one_in >= 1 &&
      snapshot.record_one_in <= NCCLSCOPE_MAX_RECORD_ONE_IN) {
    r.record_one_in.store(snapshot.record_one_in, std::memory_order_relaxed);
  }
  if ((pinned & NCCLSCOPE_CONTROL_RECORD_RATE_LIMIT) == 0 &&
      (snapshot.flags & NCCLSCOPE_CONTROLS_HAS_RECORD_RATE_LIMIT) != 0 &&
      snapshot.record_rate_limit <= 1'000'000'000) {
    r.record_rate_limit.store(snapshot.record_rate_limit, std::memory_order_relaxed);
  }
  std::atomic_ref<std::uint32_t>(header->applied_control_seq).store(seq, std::memory_order_relaxed);
}

void SweepOp(Runtime& r, std::uint32_t i, std::uint64_t now) {
  auto* op = reinterpret_cast<OpState*>(r.ops.At(i));
  if (op->slot.in_use.load(std::memory_order_acquire) == 0) return;
  const std::uint32_t generation = op->slot.generation.load(std::memory_order_acquire);
  const std::uint32_t state = op->state.load(std::memory_order_acquire);
  if ((state >> 8) != generation || OpComplete(state)) return;
  const std::uint32_t comm_index = Load(op->comm_index);
  if (comm_index >= r.comms.carved()) return;
  auto* comm = reinterpret_cast<CommState*>(r.comms.At(comm_index));
  if (comm->slot.generation.load(std::memory_order_acquire) != Load(op->comm_generation) ||
      comm->live.load(std::memory_order_acquire) == 0) {
    if (ForceFinalizeOp(i, generation, NCCLSCOPE_OP_FLUSHED)) {
      r.ring.Count(NCCLSCOPE_CTR_OPS_FLUSHED);
    }
    return;
  }
  if ((state & kOpEnqueued) == 0 || (state & kOpKernelDone) != 0) return;
  const bool later_plan_ran = PlanBefore(Load(op->plan), Load(comm->swept_timed_plan));
  const std::uint32_t started = Load(op->channels_started);
  if (started == 0) {
    const std::uint64_t enqueued = Load(op->enqueue_stop_ns);
    const bool gave_up = Load(op->mask_uncertain) != 0 && enqueued != 0 && now > enqueued &&
                         now - enqueued >= kUncertainMaskWait;
    if (later_plan_ran || gave_up) ForceFinalizeOp(i, generation, NCCLSCOPE_OP_KERNEL_NEVER_CAME);
    return;
  }
  if (Load(op->expect) != kExpectUnknown || Load(op->channels_stopped) != started) return;
  const std::uint64_t last = Load(op->last_kernel_ns);
  // Completed as of its last KernelCh event, not of this pass.
  if (later_plan_ran || (now > last && now - last >= kUnknownChannelsQuiet)) {
    CompleteKernel(i, generation, last);
  }
}

// Ops that NCCL will not complete by itself. An op whose kernel started and never stopped is left
// alone: that is what a hang looks like, and the agent must see it in flight.
//  - No KernelCh has come, yet a later plan of the communicator completed an op with GPU timing
//    at least one sweep ago (plans run in order, CommState): this op's kernel ran without
//    KernelCh, which happens only when the mask NCCL copied for it differed from what the plugin
//    could see (a write by another thread around the API call, 2.27's copy at task append).
//    Complete, without GPU timing, flagged KERNEL_NEVER_CAME. Such uncertain ops also stop
//    waiting after kUncertainMaskWait; an op whose copy surely had KernelCh is never cut short
//    (a late first kernel keeps its timing): only the GPU's own order ends its wait.
//  - CollNet ops (number of channels unknown): once every started channel stopped and the op's
//    channels have been quiet for kUnknownChannelsQuiet, or a later plan completed.
// At most this many op and ProxyOp slots are looked at per pass (round robin), so a process with a
// large in-flight high-water mark pays a bounded cost every 200 ms on this thread (about 1 ms for
// a full default arena); the default arenas are swept whole every pass, so what waits on the
// sweep (CollNet ops, ProxyOps without network work) is released within two passes.
constexpr std::uint32_t kSweepBatch = 65536;
constexpr std::uint32_t kProxySweepBatch = 65536;

void SweepStaleOps(Runtime& r, std::uint64_t now) {
  static std::uint32_t cursor = 0;  // maintenance thread only
  const std::uint32_t carved = r.ops.carved();
  if (carved != 0) {
    if (cursor >= carved) cursor = 0;
    const std::uint32_t end = carved - cursor > kSweepBatch ? cursor + kSweepBatch : carved;
    const std::uint32_t begin = cursor;
    cursor = end;
    for (std::uint32_t i = begin; i < end; ++i) SweepOp(r, i, now);
  }
  // Evidence for the next pass: what later plans had completed by now.
  const std::uint32_t comms = r.comms.carved();
  for (std::uint32_t i = 0; i < comms; ++i) {
    auto* comm = reinterpret_cast<CommState*>(r.comms.At(i));
    if (comm->live.load(std::memory_order_acquire) == 0) continue;
    Store(comm->swept_timed_plan, Load(comm->max_timed_plan));
  }
  static std::uint32_t proxy_cursor = 0;  // maintenance thread only
  const std::uint32_t proxies = r.proxy_ops.carved();
  if (proxies != 0) {
    if (proxy_cursor >= proxies) proxy_cursor = 0;
    const std::uint64_t max_age =
        Load(r.proxy_pressure) != 0 ? kUnclassifiedProxyMaxAgeTight : kUnclassifiedProxyMaxAge;
    Store(r.proxy_pressure, 0);
    const std::uint32_t end =
        proxies - proxy_cursor > kProxySweepBatch ? proxy_cursor + kProxySweepBatch : proxies;
    for (std::uint32_t i = proxy_cursor; i < end; ++i) {
      auto* po = reinterpret_cast<ProxyOpState*>(r.proxy_ops.At(i));
      if (po->slot.in_use.load(std::memory_order_acquire) == 0 ||
          ProxyNetworkState(po->network.load(std::memory_order_acquire)) != kProxyUnclassified) {
        continue;
      }
      ReleaseIfNoNetwork(i, po->slot.generation.load(std::memory_order_acquire), max_age,
                         PlanEvidence::kSwept);
    }
    proxy_cursor = end;
  }
}
void MaintenanceLoop(void* /*unused*/) {
  Runtime& r = R();
  std::uint64_t last_calibration = clock::RealtimeNow();
  platform::MutexLock lock(r.lifecycle);
  record_rate::Start(r, last_calibration);
  while (!r.stop_maintenance) {
    // Sleep until the next duty-cycle edge or the regular tick, whichever comes first.
    const std::uint64_t now = clock::RealtimeNow();
    std::uint64_t wait = kMaintenanceInterval;
    const std::uint64_t period = r.duty_period_ns.load(std::memory_order_relaxed);
    if (period != 0) {
      const std::uint64_t phase = now % period;
      for (std::uint32_t pm : {governor::KernelDutyPm(r), governor::ProxyDutyPm(r)}) {
        const std::uint64_t edge = period / 1000 * pm;
        const std::uint64_t until = phase < edge ? edge - phase : period - phase;
        if (until > 0 && until < wait) wait = until;
      }
    }
    r.wake.WaitFor(lock, wait + 1000);
    if (r.stop_maintenance) break;
    const bool active = r.active;
    lock.Unlock();
    const std::uint64_t tick = clock::RealtimeNow();
    if (tick - last_calibration > 1'000'000'000ull) {
      clock::Recalibrate();
      last_calibration = tick;
    }
    if (active) MaintenancePass(tick);
    lock.Lock();
  }
}

void AtForkChild() {
  // Only this thread survives in the child. Forget the parent's ring and thread; a later init in
  // the child (rare: NCCL after fork) starts over with a ring of its own.
  Runtime& r = R();
  // The parent's mutex may have been held and its thread does not exist here: start from fresh
  // objects (the old ones are abandoned, not destroyed).
  r.lifecycle.ResetAfterFork();
  r.wake.ResetAfterFork();
  r.maintenance.ForgetAfterFork();
  r.ring.DetachAfterFork();
  // The parent's communicators and events stay the parent's: a child that called the plugin with
  // what it inherited (a KernelCh stop of an op in flight at the fork, a finalize from the parent's
  // exit handlers) crashed on the detached ring's comm table, and once the child had a ring of its
  // own, wrote the parent's ops and COMM_FINALIZE there (the agent saw them twice, and the
  // communicator ended while the parent still used it). Found by
  // tests/unit/plugin/failure_modes_test.cc (FailureModesForkTest).
  for (std::uint32_t i = 0; i < r.comms.carved(); ++i) {
    reinterpret_cast<CommState*>(r.comms.At(i))->live.store(0, std::memory_order_relaxed);
  }
  r.comms.DisownAfterFork();
  r.ops.DisownAfterFork();
  // The parent's ops in flight as complete in their state words too: a KernelCh start finds its op
  // by that word alone, not by the slot's generation (kernel_events.cc, StartKernelCh).
  for (std::uint32_t i = 0; i < r.ops.carved(); ++i) {
    reinterpret_cast<OpState*>(r.ops.At(i))->state.fetch_or(kOpForced, std::memory_order_relaxed);
  }
  r.proxy_ops.DisownAfterFork();
  r.stop_maintenance = false;
  r.initialized = false;
  r.active = false;
  r.live_comms = 0;
  r.free_comm_slots.Clear();
  r.next_comm_slot = 0;
}

// First init: settings, clock, pools, ring, maintenance thread. Called with the lifecycle lock.
void InitializeLocked(Runtime& r) {
  r.initialized = true;
  r.pid = ::getpid();
  r.settings = LoadSettings(ProcessEnv());
  const Settings& s = r.settings;
  for (const WarningText& warning : s.warnings) Log(abi::kLogWarn, "%s", warning.c_str());
  if (s.warnings.dropped() != 0) {
    Log(abi::kLogWarn, "%zu more settings problems not shown", s.warnings.dropped());
  }
  r.event_mask.store(s.event_mask);
  r.min_bytes.store(s.min_bytes);
  r.duty_period_ns.store(s.duty_period_ns);
  r.kernel_duty_pm.store(s.kernel_duty_pm);
  r.proxy_duty_pm.store(s.proxy_duty_pm);
  r.overhead_budget_ppm.store(s.overhead_budget_ppm);
  r.record_one_in.store(s.record_one_in);
  r.record_rate_limit.store(s.record_rate_limit);
  if (s.disabled) {
    Log(abi::kLogInfo, "disabled by NCCLSCOPE_DISABLE");
    return;
  }
  clock::Init(s.clock.view());
  static_assert(std::is_trivially_destructible_v<OpState> &&
                std::is_trivially_destructible_v<ProxyOpState>);
  if (!r.ops.Reserve(kOpArena, sizeof(OpState), s.max_ops) ||
      !r.proxy_ops.Reserve(kProxyOpArena, sizeof(ProxyOpState), s.max_proxy_ops) ||
      !r.comms.Reserve(kCommArena, sizeof(CommState), NCCLSCOPE_MAX_COMM_SLOTS * 4)) {
    Log(abi::kLogWarn, "cannot reserve memory for event state; profiling off");
    return;
  }
  char host[65] = {};
  ::gethostname(host, sizeof(host) - 1);
  ring::RingIdentity identity{host, NCCLSCOPE_PLUGIN_VERSION, s.job_id.c_str(),
                              NCCLSCOPE_FEATURE_EXACT_COUNTS};
  const ring::RingGeometry geometry =
      ring::RingGeometry::ForRecordBytes(s.ring_bytes, s.lanes, s.comm_slots);
  ring::RingError error;
  if (!r.ring.Create(s.ring_dir.c_str(), geometry, identity, &error)) {
    Log(abi::kLogWarn, "%s; profiling off", error.c_str());
    return;
  }
  std::atomic_ref<std::uint32_t>(r.ring.header()->pinned_controls)
      .store(s.pinned, std::memory_order_relaxed);
  Log(abi::kLogInfo, "recording to %s (%u lanes x %u records, %s clock)", r.ring.path(),
      geometry.lanes, geometry.lane_capacity, clock::UsesTsc() ? "tsc" : "realtime");
  governor::Setup(r);
  if (!s.test_spin_file.empty()) {
    Log(abi::kLogWarn, "NCCLSCOPE_TEST_SPIN_FILE is set: calls are made slower on purpose (tests)");
  }
  static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
  pthread_once(&atfork_once, [] { pthread_atfork(nullptr, nullptr, AtForkChild); });
  r.stop_maintenance = false;
  if (const int rc = r.maintenance.Start(MaintenanceLoop, nullptr); rc != 0) {
    Log(abi::kLogWarn,
        "no maintenance thread (%s): agent controls, duty cycles and the sweep of "
        "ops NCCL never completes are off",
        std::strerror(rc));  // NOLINT(concurrency-mt-unsafe): init, under the lifecycle lock
  }
  r.active = true;
}

// `n` zeroed counters from malloc (never freed: see Runtime::p2p_arrays), or nullptr.
std::atomic<std::uint64_t>* NewCounters(std::uint32_t n) {
  void* memory = std::calloc(n, sizeof(std::atomic<std::uint64_t>));
  if (memory == nullptr) return nullptr;
  auto* counters = static_cast<std::atomic<std::uint64_t>*>(memory);
  for (std::uint32_t i = 0; i < n; ++i) new (counters + i) std::atomic<std::uint64_t>(0);
  return counters;
}

// A zeroed table of retired op identities (CommState::retired) from malloc, kept reachable in
// Runtime::retired_arrays.
RetiredOp* NewRetiredTable(Runtime& r) {
  void* memory = std::calloc(kRetiredOps, sizeof(RetiredOp));
  if (memory == nullptr) return nullptr;
  auto* table = static_cast<RetiredOp*>(memory);
  for (std::uint32_t i = 0; i < kRetiredOps; ++i) new (table + i) RetiredOp();
  if (!r.retired_arrays.PushBack(table)) {
    std::free(table);
    return nullptr;
  }
  return table;
}

std::uint32_t TakeCommSlot(Runtime& r) {
  if (r.next_comm_slot < r.ring.geometry().comm_slots) {
    const std::uint32_t slot = r.next_comm_slot++;
    // Published before the slot is written: the agent may read it still free (and skip it this
    // pass), never miss it for good.
    if (ncclscope_ring_header* header = r.ring.header()) {
      std::atomic_ref<std::uint32_t>(header->comm_slots_used)
          .store(r.next_comm_slot, std::memory_order_release);
    }
    return slot;
  }
  if (!r.free_comm_slots.empty() &&
      clock::RealtimeNow() - r.free_comm_slots.Front().freed_ns >= NCCLSCOPE_COMM_SLOT_REUSE_NS) {
    return r.free_comm_slots.Pop().index;
  }
  return UINT32_MAX;
}

void WriteCommInit(Runtime& r, const CommState& comm, std::uint64_t init_ns, const char* name,
                   const char* gpu_uuid, const char* pci_bus_id) {
  alignas(64) ncclscope_comm_init_record rec{};
  rec.h.type = NCCLSCOPE_REC_COMM_INIT;
  rec.comm_id = Load(comm.comm_id);
  rec.context = Load(comm.context_value);
  rec.init_ns = init_ns;
  rec.rank = Load(comm.rank);
  rec.nranks = Load(comm.nranks);
  rec.nnodes = Load(comm.nnodes);
  rec.cuda_device = Load(comm.cuda_device);
  rec.comm_slot = Load(comm.comm_slot);
  rec.nccl_abi = static_cast<std::uint32_t>(r.abi_version);
  CopyString(rec.name, sizeof(rec.name), name);
  CopyString(rec.gpu_uuid, sizeof(rec.gpu_uuid), gpu_uuid);
  CopyString(rec.pci_bus_id, sizeof(rec.pci_bus_id), pci_bus_id);
  r.ring.Write(&rec, 1, ThreadLaneHint());
}

// `counts`: the slot's part of the count table (null without one), reset inside the seqlock so
// the agent never takes a reset table for the previous communicator's.
void WriteCommSlot(ncclscope_comm_slot* slot, ncclscope_op_count* counts, const CommState& comm,
                   const char* name, const GpuInfo& gpu, std::uint64_t now) {
  // Seqlock writer: the odd-making read-modify-write (acquire) keeps the field stores after it.
  std::atomic_ref<std::uint32_t> version(slot->version);
  const std::uint32_t v = version.fetch_add(1, std::memory_order_acquire);
  std::atomic_ref<std::uint32_t>(slot->state).store(NCCLSCOPE_COMM_LIVE, std::memory_order_relaxed);
  slot->comm_id = Load(comm.comm_id);
  slot->context = Load(comm.context_value);
  slot->rank = Load(comm.rank);
  slot->nranks = Load(comm.nranks);
  slot->nnodes = Load(comm.nnodes);
  slot->cuda_device = gpu.cuda_device;
  slot->init_ns = now;
  std::atomic_ref<std::uint64_t>(slot->finalize_ns).store(0, std::memory_order_relaxed);
  CopyString(slot->name, sizeof(slot->name), name);
  CopyString(slot->gpu_uuid, sizeof(slot->gpu_uuid), gpu.uuid);
  CopyString(slot->pci_bus_id, sizeof(slot->pci_bus_id), gpu.pci_bus_id);
  std::atomic_ref<std::uint64_t>(slot->ops_enqueued).store(0, std::memory_order_relaxed);
  std::atomic_ref<std::uint64_t>(slot->ops_completed).store(0, std::memory_order_relaxed);
  std::atomic_ref<std::uint64_t>(slot->last_enqueue_ns).store(0, std::memory_order_relaxed);
  std::atomic_ref<std::uint64_t>(slot->last_complete_ns).store(0, std::memory_order_relaxed);
  for (std::uint32_t i = 0; counts != nullptr && i < NCCLSCOPE_COUNT_KEYS; ++i) {
    std::atomic_ref<std::uint32_t>(counts[i].key).store(0, std::memory_order_relaxed);
    std::atomic_ref<std::uint64_t>(counts[i].ops).store(0, std::memory_order_relaxed);
    std::atomic_ref<std::uint64_t>(counts[i].bytes).store(0, std::memory_order_relaxed);
  }
  version.store(v + 2, std::memory_order_release);
}

// NCCL 2.31's RAS can replace the event mask of every process of a job
// (ncclProfilerSetRasOverride, src/plugin/profiler.cc:316-328 at 2.31.2) and writes it back after
// every later plugin init (:349-354). Writing our own mask back would fight RAS at every
// communicator init, so once NCCL's int holds a value this plugin did not write, for two passes in
// a row with no write of ours in between (a write of ours in flight cannot look like one), the
// plugin follows it: current_mask becomes NCCL's value (every task's copy is that), nothing is
// written to NCCL's int again, and the governor state says so (NCCLSCOPE_GOVERNOR_NCCL_OVERRIDE).
// NCCLSCOPE_CHAIN keeps NCCL's int at the two plugins' union (chain.h): not checked then.
// The ring header's view of a mask NCCL imposed: the mask in force and the governor's level.
void PublishFollowedMask(Runtime& r) {
  if (ncclscope_ring_header* header = r.ring.header()) {
    std::atomic_ref<std::uint32_t>(header->effective_mask)
        .store(r.current_mask.load(std::memory_order_relaxed), std::memory_order_relaxed);
  }
  governor::PublishNcclOverride(r);
}

void CheckMaskOverride(Runtime& r) {
  const int* target = r.mask_ptr.load(std::memory_order_relaxed);
  if (target == nullptr || chain::Active()) return;
  const std::uint32_t writes = r.mask_writes.load(std::memory_order_acquire);
  const auto nccl = static_cast<std::uint32_t>(__atomic_load_n(target, __ATOMIC_ACQUIRE));
  if (Load(r.mask_overridden) != 0) {
    if (nccl != r.current_mask.load(std::memory_order_relaxed)) {  // a newer override: follow it
      r.current_mask.store(nccl, std::memory_order_release);
      PublishFollowedMask(r);
    }
    return;
  }
  if (nccl == r.current_mask.load(std::memory_order_acquire)) {
    r.override_suspect_passes = 0;
    return;
  }
  if (r.override_suspect_passes == 0 || r.override_suspect != nccl ||
      r.override_suspect_writes != writes) {
    r.override_suspect = nccl;
    r.override_suspect_writes = writes;
    r.override_suspect_passes = 1;
    return;
  }
  Store(r.mask_overridden, 1);
  r.current_mask.store(nccl, std::memory_order_release);
  PublishFollowedMask(r);
  Log(abi::kLogWarn,
      "NCCL replaced the profiler event mask (0x%x; NCCL RAS CONTROL PROFILER_MASK): following "
      "it; duty cycles, agent controls and the overhead governor no longer change it",
      nccl);
}

}  // namespace

std::uint32_t DesiredMask(std::uint64_t now_ns) {
  Runtime& r = R();
  std::uint32_t mask = r.event_mask.load(std::memory_order_relaxed) & AbiEvents(r.abi_version);
  const std::uint64_t period = r.duty_period_ns.load(std::memory_order_relaxed);
  if (period != 0) {
    // Phases are aligned to the realtime epoch, so every process on the node (and every node with
    // a synchronized clock) samples the same windows.
    const std::uint64_t phase = now_ns % period;
    // The duty cycles in force: the controls', capped by the overhead governor (governor.h).
    if (phase >= period / 1000 * governor::KernelDutyPm(r)) mask &= ~kKernelEvents;
    if (phase >= period / 1000 * governor::ProxyDutyPm(r)) mask &= ~kProxyEvents;
  }
  return mask;
}

void MaintenancePass(std::uint64_t now_ns) {
  Runtime& r = R();
  CheckMaskOverride(r);
  ApplyAgentControls(r);
  governor::Evaluate(r, now_ns);
  record_rate::Evaluate(r, now_ns);
  const std::uint32_t mask = DesiredMask(now_ns);
  r.pending_mask.store(mask, std::memory_order_relaxed);
  // With API events (v5+) the user threads apply the change right after NCCL's read of a call
  // (StartApi); this thread writes only when they are idle, or for 2.27, which has no API events.
  const bool api_threads_active = r.abi_version >= 5 && Load(r.api_events_seen) != 0;
  Store(r.api_events_seen, 0);
  if (mask != r.current_mask.load(std::memory_order_relaxed) && !api_threads_active) {
    WriteNcclMask(mask, MaskWriter::kIdleMaintenance);
  }
  SweepStaleOps(r, clock::Now());
  chain::Maintain();  // NCCLSCOPE_CHAIN: NCCL's mask = ours | the chained plugin's (chain.h)
}

namespace {

// Init's steps, all under the lifecycle lock.

// Nothing to record into: tell NCCL not to profile this communicator at all.
abi::Result DeclineComm(Runtime& r, void** context, int* mask) {
  *context = nullptr;
  if (mask != nullptr) __atomic_store_n(mask, 0, __ATOMIC_RELAXED);
  if (!r.warned) {
    r.warned = true;
    Log(abi::kLogInfo, "inactive; NCCL will run without profiler events");
  }
  return abi::kSuccess;
}

// A communicator slot's identity and counters, as of its init.
void ResetComm(CommState& comm, bool identity_now, std::uint64_t comm_id, int rank, int nranks,
               int nnodes, int cuda_device, void* handle) {
  Store(comm.identity_pending, identity_now ? 0 : 1);
  Store(comm.comm_id, identity_now ? comm_id : 0);
  Store(comm.rank, identity_now ? rank : -1);
  Store(comm.nranks, identity_now ? nranks : 0);
  Store(comm.nnodes, identity_now ? nnodes : 0);
  Store(comm.cuda_device, cuda_device);
  Store(comm.context_value, reinterpret_cast<std::uintptr_t>(handle));
  Store(comm.ops_enqueued, 0);
  Store(comm.ops_completed, 0);
  Store(comm.ops_flushed, 0);
  Store(comm.max_timed_plan, 0);
  Store(comm.swept_timed_plan, 0);
  Store(comm.latest_plan, 0);
}

// Per-peer p2p counters, reused from this slot's previous communicator when large enough. Under
// ABI v1-v3 the size is unknown: the first kUnknownSizePeers peers get counters (64 KiB), sends
// to farther peers go without a per-peer seq (no NCCLSCOPE_OP_P2P_SEQ_PER_PEER).
void ResetP2pCounters(Runtime& r, CommState& comm, bool identity_now, int nranks) {
  constexpr std::uint32_t kUnknownSizePeers = 4096;
  const std::uint32_t peers = !identity_now                   ? kUnknownSizePeers
                              : nranks > 0 && nranks <= 65536 ? static_cast<std::uint32_t>(nranks)
                                                              : 0;
  if (peers > Load(comm.p2p_peers) || comm.p2p_seq == nullptr) {
    comm.p2p_seq = peers != 0 ? NewCounters(2 * peers) : nullptr;
    if (comm.p2p_seq != nullptr && !r.p2p_arrays.PushBack(comm.p2p_seq)) {
      std::free(comm.p2p_seq);  // never handed out: nothing can read it
      comm.p2p_seq = nullptr;
    }
    Store(comm.p2p_peers, comm.p2p_seq != nullptr ? peers : 0);
  }
  if (comm.p2p_seq != nullptr) {
    for (std::uint32_t i = 0; i < 2 * Load(comm.p2p_peers); ++i) Store(comm.p2p_seq[i], 0);
  }
  Store(comm.p2p_peers, comm.p2p_seq != nullptr ? peers : 0);
}

// ABI v1/v2: every op completes at NCCL's stop, before its ProxyOps start (state.h,
// RetiredOp). The previous communicator's entries name handles of other generations, but are
// cleared all the same.
void ResetRetired(Runtime& r, CommState& comm, int abi_version) {
  if (comm.retired != nullptr) {
    for (std::uint32_t i = 0; i < kRetiredOps; ++i) Store(comm.retired[i].handle, 0);
  } else if (abi_version <= 2) {
    comm.retired = NewRetiredTable(r);  // zeroed
  }
}

// The communicator in the ring: its slot (or the count of those without one), live, its init
// record when its identity is known, and the header's ABI and state.
void PublishComm(Runtime& r, CommState& comm, bool identity_now, const char* name,
                 const GpuInfo& gpu, std::uint64_t now) {
  const std::uint32_t slot_index = TakeCommSlot(r);
  Store(comm.comm_slot, slot_index);
  if (ncclscope_comm_slot* slot = r.ring.comm_slot(slot_index)) {
    WriteCommSlot(slot, r.ring.count_table(slot_index), comm, name, gpu, now);
  } else {
    r.ring.Count(NCCLSCOPE_CTR_COMMS_WITHOUT_SLOT);
  }
  comm.live.store(1, std::memory_order_release);

  if (identity_now) {
    WriteCommInit(r, comm, now, name, gpu.uuid, gpu.pci_bus_id);
  }

  ncclscope_ring_header* header = r.ring.header();
  std::atomic_ref<std::uint32_t>(header->nccl_abi)
      .store(static_cast<std::uint32_t>(r.abi_version), std::memory_order_relaxed);
  std::atomic_ref<std::uint32_t>(header->state)
      .store(NCCLSCOPE_RING_LIVE, std::memory_order_relaxed);
  std::atomic_ref<std::uint64_t>(header->closed_ns).store(0, std::memory_order_relaxed);
}

}  // namespace

abi::Result Init(void** context, std::uint64_t comm_id, int* mask, const char* name, int nnodes,
                 int nranks, int rank, abi::DebugLogger logger, int abi_version) {
  Runtime& r = R();
  platform::MutexLock lock(r.lifecycle);
  if (logger != nullptr) r.logger = logger;
  // Constant in a real process (NCCL picks one version); the latest wins if a test mixes them.
  r.abi_version = abi_version;
  if (!r.initialized) InitializeLocked(r);
  if (!r.active) return DeclineComm(r, context, mask);
  const std::uint32_t index = r.comms.Allocate();
  if (index == UINT32_MAX) {
    *context = nullptr;
    r.ring.Count(NCCLSCOPE_CTR_HANDLES_EXHAUSTED);
    return abi::kSuccess;
  }
  auto* comm = reinterpret_cast<CommState*>(r.comms.At(index));
  const std::uint32_t generation = comm->slot.generation.load(std::memory_order_relaxed);
  void* handle = EncodeHandle(HandleKind::kContext, generation, index);
  const std::uint64_t now = clock::Now();
  const GpuInfo gpu = CurrentGpu();

  // ABI v1-v3 init carries no identity (src/misc/profiler.cc:223 at v2.23.4-1: init(context,
  // mask), called before NCCL has computed the hash, src/init.cc:341 vs :1452): it comes with
  // the first op (PublishCommIdentity); nranks and nnodes stay unknown (0).
  const bool identity_now = abi_version >= 4;
  ResetComm(*comm, identity_now, comm_id, rank, nranks, nnodes, gpu.cuda_device, handle);
  ResetP2pCounters(r, *comm, identity_now, nranks);
  Store(comm->count_keys, 0);
  ResetRetired(r, *comm, abi_version);
  PublishComm(r, *comm, identity_now, name, gpu, now);
  ++r.live_comms;

  // Every init gets the same process-global mask pointer; keep it to steer NCCL at run time.
  if (mask != nullptr) r.mask_ptr.store(mask, std::memory_order_relaxed);
  const std::uint32_t desired = DesiredMask(clock::RealtimeNow());
  r.pending_mask.store(desired, std::memory_order_relaxed);
  WriteNcclMask(desired);
  *context = handle;
  return abi::kSuccess;
}

namespace {

// Whatever of a communicator being finalized is still in flight is written out now, marked as
// such; returns the ops flushed.
std::uint64_t FlushInFlight(Runtime& r, std::uint32_t index, std::uint32_t comm_generation) {
  // An op that waited only for its channels to be quiet (kExpectUnknown: ABI v3's untimed KernelCh,
  // CollNet's unannounced ones) and whose every started channel has stopped is not in flight: NCCL
  // destroys a communicator after its work is done and its proxy thread (v3's KernelCh) is joined
  // (src/init.cc:188-193, :262 at v2.23.4-1; the profiler thread is drained first at 2.31.2), so
  // no further KernelCh can come. It completes as of its last KernelCh.
  std::uint64_t flushed = 0;
  const std::uint32_t ops = r.ops.carved();
  for (std::uint32_t i = 0; i < ops; ++i) {
    auto* op = reinterpret_cast<OpState*>(r.ops.At(i));
    if (op->slot.in_use.load(std::memory_order_acquire) == 0 || Load(op->comm_index) != index ||
        Load(op->comm_generation) != comm_generation) {
      continue;
    }
    const std::uint32_t generation = op->slot.generation.load(std::memory_order_acquire);
    const std::uint32_t state = op->state.load(std::memory_order_acquire);
    const std::uint32_t started = Load(op->channels_started);
    if ((state >> 8) == generation && (state & kOpEnqueued) != 0 &&
        Load(op->expect) == kExpectUnknown && started != 0 &&
        Load(op->channels_stopped) == started) {
      CompleteKernel(i, generation, Load(op->last_kernel_ns));
      continue;
    }
    if (ForceFinalizeOp(i, generation, NCCLSCOPE_OP_FLUSHED)) ++flushed;
  }
  const std::uint32_t proxy_ops = r.proxy_ops.carved();
  for (std::uint32_t i = 0; i < proxy_ops; ++i) {
    auto* po = reinterpret_cast<ProxyOpState*>(r.proxy_ops.At(i));
    if (po->slot.in_use.load(std::memory_order_acquire) == 0 || Load(po->comm_index) != index ||
        Load(po->comm_generation) != comm_generation ||
        (Load(po->flags) & NCCLSCOPE_PROXY_FOREIGN) != 0) {
      continue;
    }
    FlushProxyOp(i, po->slot.generation.load(std::memory_order_acquire));
  }
  return flushed;
}

}  // namespace

abi::Result Finalize(void* context) {
  // NCCL 2.23-2.27 call finalize for every communicator while the plugin is loaded, NULL
  // contexts included (src/misc/profiler.cc:235-237 at v2.23.4-1, src/plugin/profiler.cc:182-184
  // at v2.27.7-1): the communicators this plugin opted out of.
  if (context == nullptr) return abi::kSuccess;
  Runtime& r = R();
  platform::MutexLock lock(r.lifecycle);
  std::uint32_t index = 0;
  CommState* comm = FindComm(context, &index);
  if (comm == nullptr) {
    r.ring.Count(NCCLSCOPE_CTR_INVALID_HANDLE);
    return abi::kSuccess;
  }
  const std::uint32_t comm_generation = comm->slot.generation.load(std::memory_order_relaxed);
  comm->live.store(0, std::memory_order_release);

  const std::uint64_t flushed = FlushInFlight(r, index, comm_generation);
  if (flushed != 0) r.ring.Count(NCCLSCOPE_CTR_OPS_FLUSHED, flushed);

  const std::uint64_t now = clock::Now();
  const std::uint32_t slot_index = Load(comm->comm_slot);
  // ABI v1-v3: a communicator finalized before its first op never had an identity (commHash and
  // rank come with the first Coll/P2p, PublishCommIdentity), so no COMM_INIT: its end is nothing
  // the agent could close, and with rank -1 the agent would count the record corrupt.
  if (Load(comm->identity_pending) == 0) {
    alignas(64) ncclscope_comm_finalize_record rec{};
    rec.h.type = NCCLSCOPE_REC_COMM_FINALIZE;
    rec.comm_id = Load(comm->comm_id);
    rec.context = Load(comm->context_value);
    rec.finalize_ns = now;
    rec.ops_enqueued = Load(comm->ops_enqueued);
    rec.ops_completed = Load(comm->ops_completed);
    rec.ops_flushed = flushed;
    rec.rank = Load(comm->rank);
    rec.comm_slot = slot_index;
    r.ring.Write(&rec, 1, ThreadLaneHint());
  }
  if (ncclscope_comm_slot* slot = r.ring.comm_slot(slot_index)) {
    std::atomic_ref<std::uint64_t>(slot->finalize_ns).store(now, std::memory_order_relaxed);
    std::atomic_ref<std::uint32_t>(slot->state)
        .store(NCCLSCOPE_COMM_FINALIZED, std::memory_order_release);
    // No memory: the slot is lost, the comm still recorded.
    r.free_comm_slots.Push({slot_index, clock::RealtimeNow()});
  }
  r.comms.Free(index);
  if (r.live_comms > 0 && --r.live_comms == 0) {
    ncclscope_ring_header* header = r.ring.header();
    std::atomic_ref<std::uint64_t>(header->closed_ns).store(now, std::memory_order_relaxed);
    std::atomic_ref<std::uint32_t>(header->state)
        .store(NCCLSCOPE_RING_CLOSED, std::memory_order_release);
  }
  return abi::kSuccess;
}

void PublishCommIdentity(CommState* comm, std::uint64_t comm_id, int rank) {
  Runtime& r = R();
  Store(comm->comm_id, comm_id);
  Store(comm->rank, rank);
  ncclscope_comm_slot* slot = r.ring.comm_slot(Load(comm->comm_slot));
  std::uint64_t init_ns = clock::Now();
  char name[sizeof(slot->name)] = {};
  char uuid[sizeof(slot->gpu_uuid)] = {};
  char pci[sizeof(slot->pci_bus_id)] = {};
  if (slot != nullptr) {
    // Seqlock writer (as WriteCommSlot): only the identity changes; the rest, written at init by
    // this plugin, is read back for the record.
    std::atomic_ref<std::uint32_t> version(slot->version);
    const std::uint32_t v = version.fetch_add(1, std::memory_order_acquire);
    slot->comm_id = comm_id;
    slot->rank = rank;
    version.store(v + 2, std::memory_order_release);
    init_ns = slot->init_ns;
    std::memcpy(name, slot->name, sizeof(name) - 1);
    std::memcpy(uuid, slot->gpu_uuid, sizeof(uuid) - 1);
    std::memcpy(pci, slot->pci_bus_id, sizeof(pci) - 1);
  }
  WriteCommInit(r, *comm, init_ns, name, uuid, pci);
}

}  // namespace ncclscope::plugin
