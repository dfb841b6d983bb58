#include "plugin/src/clock.h"

#include <time.h>

#include <atomic>
#include <string_view>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "platform/clock.h"
#include "plugin/src/small_file.h"

namespace ncclscope::plugin::clock {
namespace {

__extension__ typedef unsigned __int128 U128;

// The anchor is published with a sequence lock: Recalibrate() (one thread) makes `version` odd,
// updates the fields, and makes it even again; readers retry while it is odd or changed. Field
// stores are release and field loads acquire (plain moves on x86), which orders them against the
// version without a fence: a reader that sees a new field value also sees the odd version.
struct Anchor {
  std::atomic<std::uint32_t> version{0};
  std::atomic<std::uint64_t> tsc{0};
  std::atomic<std::uint64_t> ns{0};
  std::atomic<std::uint64_t> ns_per_tick_q32{0};  // ns per TSC tick, 32.32 fixed point
};

Anchor g_anchor;
std::atomic<bool> g_use_tsc{false};
std::atomic<bool> g_initialized{false};
// First anchor: the long baseline from it gives the TSC rate precisely.
std::uint64_t g_base_tsc = 0;
std::uint64_t g_base_ns = 0;

std::uint64_t ReadTsc() {
#if defined(__x86_64__)
  return __rdtsc();
#else
  return 0;
#endif
}

// The first processor's "flags" line of /proc/cpuinfo names constant_tsc and nonstop_tsc. It is
// within the first few KiB (one processor's block: ~3 KiB with today's longest flag lists), so
// 16 KiB are read at most.
bool CpuHasInvariantTsc() {
#if defined(__x86_64__)
  char text[16 << 10];
  const long got = ReadSmallFile("/proc/cpuinfo", text, sizeof(text));
  if (got < 0) return false;
  std::string_view rest(text, static_cast<std::size_t>(got));
  while (!rest.empty()) {
    const std::size_t end = rest.find('\n');
    const std::string_view line = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    if (line.rfind("flags", 0) != 0) continue;
    return line.find(" constant_tsc") != std::string_view::npos &&
           line.find(" nonstop_tsc") != std::string_view::npos;
  }
#endif
  return false;
}

void Publish(std::uint64_t tsc, std::uint64_t ns, std::uint64_t rate_q32) {
  const std::uint32_t v = g_anchor.version.load(std::memory_order_relaxed);
  g_anchor.version.store(v + 1, std::memory_order_relaxed);
  g_anchor.tsc.store(tsc, std::memory_order_release);
  g_anchor.ns.store(ns, std::memory_order_release);
  g_anchor.ns_per_tick_q32.store(rate_q32, std::memory_order_release);
  g_anchor.version.store(v + 2, std::memory_order_release);
}

// One (tsc, realtime) pair, taking the tightest of a few tries so a preemption between the two
// reads does not skew the anchor.
void SamplePair(std::uint64_t* tsc, std::uint64_t* ns) {
  std::uint64_t best_width = UINT64_MAX;
  for (int i = 0; i < 5; ++i) {
    const std::uint64_t t0 = ReadTsc();
    const std::uint64_t now = RealtimeNow();
    const std::uint64_t t1 = ReadTsc();
    if (t1 - t0 < best_width) {
      best_width = t1 - t0;
      *tsc = t0 + (t1 - t0) / 2;
      *ns = now;
    }
  }
}

std::uint64_t RateQ32(std::uint64_t dtsc, std::uint64_t dns) {
  if (dtsc == 0) return 0;
  return static_cast<std::uint64_t>((static_cast<U128>(dns) << 32) / dtsc);
}

}  // namespace

std::uint64_t RealtimeNow() { return platform::RealtimeNs(); }

void Init(std::string_view mode) {
  if (g_initialized.exchange(true)) return;
  const bool want_tsc = mode == "tsc" || (mode == "auto" && CpuHasInvariantTsc());
  if (!want_tsc) return;
  // A 2 ms baseline for the first rate estimate; Recalibrate() lengthens it over time.
  std::uint64_t t0 = 0;
  std::uint64_t n0 = 0;
  SamplePair(&t0, &n0);
  const timespec pause{0, 2'000'000};
  nanosleep(&pause, nullptr);
  std::uint64_t t1 = 0;
  std::uint64_t n1 = 0;
  SamplePair(&t1, &n1);
  const std::uint64_t rate = RateQ32(t1 - t0, n1 - n0);
  if (rate == 0 || t1 <= t0) return;
  g_base_tsc = t0;
  g_base_ns = n0;
  Publish(t1, n1, rate);
  g_use_tsc.store(true, std::memory_order_release);
}

void Recalibrate() {
  if (!g_use_tsc.load(std::memory_order_acquire)) return;
  std::uint64_t tsc = 0;
  std::uint64_t ns = 0;
  SamplePair(&tsc, &ns);
  if (tsc <= g_base_tsc || ns <= g_base_ns) return;  // clock stepped back: keep the old rate
  const std::uint64_t rate = RateQ32(tsc - g_base_tsc, ns - g_base_ns);
  if (rate != 0) Publish(tsc, ns, rate);
}

bool UsesTsc() { return g_use_tsc.load(std::memory_order_relaxed); }

std::uint64_t Ticks() {
  if (!g_use_tsc.load(std::memory_order_relaxed)) return RealtimeNow();
  return ReadTsc();
}

std::uint64_t TicksToNs(std::uint64_t ticks) {
  if (!g_use_tsc.load(std::memory_order_relaxed)) return ticks;
  const std::uint64_t rate = g_anchor.ns_per_tick_q32.load(std::memory_order_acquire);
  return static_cast<std::uint64_t>((static_cast<U128>(ticks) * rate) >> 32);
}

std::uint64_t NsToTicks(std::uint64_t ns) {
  if (!g_use_tsc.load(std::memory_order_relaxed)) return ns;
  const std::uint64_t rate = g_anchor.ns_per_tick_q32.load(std::memory_order_acquire);
  if (rate == 0) return ns;
  return static_cast<std::uint64_t>((static_cast<U128>(ns) << 32) / rate);
}

std::uint64_t Now() {
  if (!g_use_tsc.load(std::memory_order_relaxed)) return RealtimeNow();
  while (true) {
    const std::uint32_t v = g_anchor.version.load(std::memory_order_acquire);
    const std::uint64_t tsc = g_anchor.tsc.load(std::memory_order_acquire);
    const std::uint64_t ns = g_anchor.ns.load(std::memory_order_acquire);
    const std::uint64_t rate = g_anchor.ns_per_tick_q32.load(std::memory_order_acquire);
    if ((v & 1) != 0 || v != g_anchor.version.load(std::memory_order_relaxed)) continue;
    const std::uint64_t now = ReadTsc();
    if (now >= tsc) {
      return ns + static_cast<std::uint64_t>((static_cast<U128>(now - tsc) * rate) >> 32);
    }
    return ns - static_cast<std::uint64_t>((static_cast<U128>(tsc - now) * rate) >> 32);
  }
}

}  // namespace ncclscope::plugin::clock
