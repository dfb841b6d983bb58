// Recording fewer ops when a process starts more than plugin.record_rate_limit per second
// (record_rate.h says how and why).
#include "plugin/src/record_rate.h"

#include <algorithm>
#include <atomic>

#include "plugin/ring/ncclscope_ring.h"
#include "plugin/src/runtime.h"

namespace ncclscope::plugin::record_rate {
namespace {

// The smallest power of two n (1..65536) with rate / n <= limit.
std::uint32_t Needed(std::uint64_t rate, std::uint64_t limit) {
  std::uint32_t n = 1;
  while (n < NCCLSCOPE_MAX_RECORD_ONE_IN && rate > limit * n) n *= 2;
  return n;
}

// Starts a window at `now_ns` from the communicators' current counts.
void Snapshot(Runtime& r, std::uint64_t now_ns) {
  Window& w = r.record_window;
  for (std::uint32_t i = 0; i < w.comms.size() && i < r.comms.carved(); ++i) {
    auto* comm = reinterpret_cast<CommState*>(r.comms.At(i));
    w.comms[i].generation = comm->slot.generation.load(std::memory_order_acquire);
    w.comms[i].ops = Load(comm->ops_enqueued);
  }
  w.start_ns = now_ns;
}

// The factor in force and the rate it was decided at, in the ring header for the agent.
void Publish(Runtime& r, std::uint64_t rate) {
  if (ncclscope_governor_state* s =
          r.ring.header() != nullptr ? &r.ring.header()->governor : nullptr) {
    std::atomic_ref<std::uint32_t>(s->record_one_in).store(OneIn(r), std::memory_order_relaxed);
    std::atomic_ref<std::uint32_t>(s->op_rate)
        .store(static_cast<std::uint32_t>(std::min<std::uint64_t>(rate, UINT32_MAX)),
               std::memory_order_relaxed);
  }
}

}  // namespace

std::uint32_t NextFactor(std::uint64_t rate, std::uint32_t limit, std::uint32_t current) {
  if (limit == 0) return 1;
  const std::uint32_t up = Needed(rate, limit);
  if (up > current) return up;
  // Down only as far as keeps the rate under half the limit.
  const std::uint32_t down = limit >= 2 ? Needed(rate, limit / 2) : up;
  return std::min(current, std::max(down, std::uint32_t{1}));
}

void Evaluate(Runtime& r, std::uint64_t now_ns) {
  Window& w = r.record_window;
  const std::uint32_t carved = r.comms.carved();
  if (w.comms.size() < carved && !w.comms.Resize(carved)) return;  // no memory: next pass
  if (w.start_ns == 0 || now_ns <= w.start_ns) return Snapshot(r, now_ns);
  std::uint64_t started = 0;
  for (std::uint32_t i = 0; i < carved; ++i) {
    auto* comm = reinterpret_cast<CommState*>(r.comms.At(i));
    Window::Seen& seen = w.comms[i];
    seen.generation_now = comm->slot.generation.load(std::memory_order_acquire);
    seen.ops_now = Load(comm->ops_enqueued);
    // A slot reused since (new generation) started from 0; a finalized one adds nothing.
    if (comm->live.load(std::memory_order_acquire) != 0) {
      started += seen.generation == seen.generation_now && seen.ops_now >= seen.ops
                     ? seen.ops_now - seen.ops
                     : seen.ops_now;
    }
  }
  const std::uint64_t elapsed = now_ns - w.start_ns;
  const std::uint64_t rate = started * 1'000'000'000ull / elapsed;
  const std::uint32_t limit = r.record_rate_limit.load(std::memory_order_relaxed);
  const std::uint32_t current = r.record_rate_factor.load(std::memory_order_relaxed);
  // A burst is met within a maintenance pass or two, not a second: at 50,000 ops/s a window of
  // a second would record 50,000 before the factor moved. Lowering waits for a full window.
  const bool raise_now = elapsed >= kMinRaiseWindowNs && NextFactor(rate, limit, current) > current;
  if (elapsed < kWindowNs && !raise_now) return;
  for (std::uint32_t i = 0; i < carved; ++i) {
    Window::Seen& seen = w.comms[i];
    seen.generation = seen.generation_now;
    seen.ops = seen.ops_now;
  }
  w.start_ns = now_ns;
  const std::uint32_t factor = NextFactor(rate, limit, current);
  r.record_rate_factor.store(factor, std::memory_order_relaxed);
  Publish(r, rate);
}

void Start(Runtime& r, std::uint64_t now_ns) {
  Window& w = r.record_window;
  const std::uint32_t carved = r.comms.carved();
  if (w.comms.size() < carved && !w.comms.Resize(carved)) return;
  Snapshot(r, now_ns);
}

std::uint32_t OneIn(const Runtime& r) {
  const std::uint64_t n = std::uint64_t{r.record_one_in.load(std::memory_order_relaxed)} *
                          r.record_rate_factor.load(std::memory_order_relaxed);
  return static_cast<std::uint32_t>(std::min<std::uint64_t>(n, NCCLSCOPE_MAX_RECORD_ONE_IN));
}

}  // namespace ncclscope::plugin::record_rate
