// The overhead governor's cold half: reading the test knob, evaluating windows, choosing the duty
// cycle limits and publishing the state (governor.h says how and why).

#include "plugin/src/governor.h"

#include <fcntl.h>

#include <algorithm>
#include <string_view>

#include "plugin/src/clock.h"
#include "plugin/src/runtime.h"
#include "plugin/src/settings.h"
#include "plugin/src/small_file.h"

namespace ncclscope::plugin::governor {
namespace {

// A window needs this many timed ops before it is judged (else it grows, up to kMaxPeriods duty
// periods, after which whatever was timed is judged: a process that runs so few ops costs little).
constexpr std::uint64_t kMinTimedOps = 8;
constexpr std::uint64_t kMaxPeriods = 8;
// Windows are at least this long even with a very short duty period.
constexpr std::uint64_t kMinWindowNs = 200'000'000;
constexpr std::uint32_t kHoldBase = 3;
constexpr std::uint32_t kHoldMax = 64;
// Limits are set so that the projected share is this fraction of the budget (room for noise).
constexpr std::uint64_t kTargetPercent = 80;
// Test knob re-read at most this often.
constexpr std::uint64_t kSpinFileCheckNs = 100'000'000;

__extension__ typedef unsigned __int128 U128;

std::uint64_t SharePpm(std::uint64_t ns, std::uint64_t window_ns, std::uint32_t gpus) {
  const std::uint64_t denominator = window_ns * gpus;
  if (denominator == 0) return 0;
  return static_cast<std::uint64_t>(static_cast<U128>(ns) * 1'000'000 / denominator);
}

// Distinct CUDA devices of the live communicators (devices above 63 and unknown ones count once
// each as a group); at least 1.
std::uint32_t LocalGpus(Runtime& r) {
  std::uint64_t devices = 0;
  bool other = false;
  const std::uint32_t comms = r.comms.carved();
  for (std::uint32_t i = 0; i < comms; ++i) {
    auto* comm = reinterpret_cast<CommState*>(r.comms.At(i));
    if (comm->live.load(std::memory_order_acquire) == 0) continue;
    const std::int32_t device = Load(comm->cuda_device);
    if (device >= 0 && device < 64) {
      devices |= 1ull << device;
    } else {
      other = true;
    }
  }
  std::uint32_t n = other ? 1 : 0;
  for (std::uint64_t m = devices; m != 0; m &= m - 1) ++n;
  return n == 0 ? 1 : n;
}

// "proxy=20us kernel=0 op=1us": busy-wait per timed call of each class (tests only).
void ReadSpinFile(State& g) {
  std::uint32_t spin[kClasses] = {};
  char text[512];
  const long got = ReadSmallFile(g.spin_file.c_str(), text, sizeof(text), O_NONBLOCK);
  std::string_view rest(text, got > 0 ? static_cast<std::size_t>(got) : 0);
  while (!rest.empty()) {
    const std::size_t start = rest.find_first_not_of(" \t\r\n");
    if (start == std::string_view::npos) break;
    rest.remove_prefix(start);
    const std::size_t end = rest.find_first_of(" \t\r\n");
    const std::string_view word = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end);
    const std::size_t eq = word.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view key = word.substr(0, eq);
    const auto ns = ParseDurationNs(word.substr(eq + 1));
    const std::uint32_t value =
        ns ? static_cast<std::uint32_t>(std::min<std::uint64_t>(*ns, 100'000)) : 0;
    if (key == "op") spin[kOpCalls] = value;
    if (key == "kernel") spin[kKernelCalls] = value;
    if (key == "proxy") spin[kProxyCalls] = value;
  }
  for (std::uint32_t c = 0; c < kClasses; ++c) {
    g.spin_ns[c].store(spin[c], std::memory_order_relaxed);
  }
}

void Publish(Runtime& r, std::uint32_t level, std::uint64_t load_ppm, std::uint32_t gpus,
             std::uint64_t op_ns, std::uint64_t now_ns) {
  ncclscope_ring_header* header = r.ring.header();
  if (header == nullptr) return;
  ncclscope_governor_state& s = header->governor;
  const auto put32 = [](std::uint32_t& field, std::uint64_t value) {
    std::atomic_ref<std::uint32_t>(field).store(
        static_cast<std::uint32_t>(std::min<std::uint64_t>(value, UINT32_MAX)),
        std::memory_order_relaxed);
  };
  // NCCL's own mask override (runtime.cc, CheckMaskOverride) outranks every level: the mask is
  // NCCL's, not governed.
  put32(s.level, Load(r.mask_overridden) != 0
                     ? static_cast<std::uint32_t>(NCCLSCOPE_GOVERNOR_NCCL_OVERRIDE)
                     : level);
  put32(s.nccl_mask, r.current_mask.load(std::memory_order_relaxed));
  put32(s.budget_ppm, r.overhead_budget_ppm.load(std::memory_order_relaxed));
  put32(s.kernel_duty_pm, KernelDutyPm(r));
  put32(s.proxy_duty_pm, ProxyDutyPm(r));
  put32(s.load_ppm, load_ppm);
  put32(s.local_gpus, gpus);
  put32(s.sample_every, r.gov.sample_mask.load(std::memory_order_relaxed) + 1);
  put32(s.windows, r.gov.windows);
  std::atomic_ref<std::uint64_t>(s.op_ns).store(op_ns, std::memory_order_relaxed);
  std::atomic_ref<std::uint64_t>(s.evaluated_ns).store(now_ns, std::memory_order_relaxed);
}

std::uint32_t CurrentLevel(const Runtime& r, bool over_at_floor) {
  if (r.overhead_budget_ppm.load(std::memory_order_relaxed) == 0) return NCCLSCOPE_GOVERNOR_OFF;
  const State& g = r.gov;
  const std::uint32_t kernel_asked = r.kernel_duty_pm.load(std::memory_order_relaxed);
  const std::uint32_t proxy_asked = r.proxy_duty_pm.load(std::memory_order_relaxed);
  const bool kernel_lowered = g.kernel_limit_pm.load(std::memory_order_relaxed) < kernel_asked;
  const bool proxy_lowered = g.proxy_limit_pm.load(std::memory_order_relaxed) < proxy_asked;
  if (over_at_floor) return NCCLSCOPE_GOVERNOR_FLOOR;
  if (kernel_lowered) return NCCLSCOPE_GOVERNOR_KERNEL;
  if (proxy_lowered) return NCCLSCOPE_GOVERNOR_PROXY;
  return NCCLSCOPE_GOVERNOR_AS_ASKED;
}

// The next step up from `limit` towards `asked` (per mille): double, at least asked/16.
std::uint32_t StepUp(std::uint32_t limit, std::uint32_t asked) {
  const std::uint32_t next = std::max({limit * 2, asked / 16, 1u});
  return next >= asked ? 1000 : next;  // 1000: no limit
}

}  // namespace

void PublishNcclOverride(Runtime& r) {
  ncclscope_ring_header* header = r.ring.header();
  if (header == nullptr) return;
  std::atomic_ref<std::uint32_t>(header->governor.nccl_mask)
      .store(r.current_mask.load(std::memory_order_relaxed), std::memory_order_relaxed);
  std::atomic_ref<std::uint32_t>(header->governor.level)
      .store(NCCLSCOPE_GOVERNOR_NCCL_OVERRIDE, std::memory_order_relaxed);
}

void Spin(std::uint32_t ns) {
  const std::uint64_t start = clock::Ticks();
  while (clock::TicksToNs(clock::Ticks() - start) < ns) {
  }
}

std::uint64_t Begin(State& g, Class c) {
  const std::uint64_t t0 = clock::Ticks();
  const std::uint32_t spin = g.spin_ns[c].load(std::memory_order_relaxed);
  if (spin != 0) Spin(spin);
  return t0;
}

std::uint32_t KernelDutyPm(const Runtime& r) {
  return std::min(r.kernel_duty_pm.load(std::memory_order_relaxed),
                  r.gov.kernel_limit_pm.load(std::memory_order_relaxed));
}

std::uint32_t ProxyDutyPm(const Runtime& r) {
  return std::min(r.proxy_duty_pm.load(std::memory_order_relaxed),
                  r.gov.proxy_limit_pm.load(std::memory_order_relaxed));
}

void Setup(Runtime& r) {
  State& g = r.gov;
  g.sample_mask.store(r.settings.overhead_sample - 1, std::memory_order_relaxed);
  g.max_call_ticks.store(clock::NsToTicks(kMaxCallNs), std::memory_order_relaxed);
  g.spin_file = r.settings.test_spin_file;
  g.hold = kHoldBase;
  if (!g.spin_file.empty()) ReadSpinFile(g);
  Publish(r, CurrentLevel(r, false), 0, 1, 0, 0);
}

// Over budget: lowers what costs, proxy events first, to kTargetPercent of the budget. `ns`: the
// window's estimated time per class. True when nothing is left to lower (the floor: only ops).
bool StepDown(Runtime& r, State& g, const std::uint64_t (&ns)[kClasses], std::uint64_t elapsed,
              std::uint32_t gpus, std::uint64_t budget, bool was_probing) {
  // Lower what costs, proxy events first: shares scale with their duty cycle.
  const std::uint64_t target = budget * kTargetPercent / 100;
  const std::uint64_t op_share = SharePpm(ns[kOpCalls], elapsed, gpus);
  const std::uint64_t kernel_share = SharePpm(ns[kKernelCalls], elapsed, gpus);
  const std::uint64_t proxy_share = SharePpm(ns[kProxyCalls], elapsed, gpus);
  const std::uint32_t proxy_now = ProxyDutyPm(r);
  const std::uint32_t kernel_now = KernelDutyPm(r);
  std::uint32_t proxy_new = proxy_now;
  std::uint32_t kernel_new = kernel_now;
  if (proxy_now > 0 && proxy_share > 0) {
    const std::uint64_t rest = op_share + kernel_share;
    proxy_new =
        rest < target ? static_cast<std::uint32_t>(proxy_now * (target - rest) / proxy_share) : 0;
    proxy_new = std::min(proxy_new, proxy_now - 1);
  }
  const std::uint64_t projected =
      op_share + kernel_share + (proxy_now != 0 ? proxy_share * proxy_new / proxy_now : 0);
  if (projected > target && kernel_now > 0 && kernel_share > 0) {
    // Proxy events alone cannot bring it under: no proxy events, and less GPU timing.
    proxy_new = 0;
    kernel_new = op_share < target
                     ? static_cast<std::uint32_t>(kernel_now * (target - op_share) / kernel_share)
                     : 0;
    kernel_new = std::min(kernel_new, kernel_now - 1);
  }
  if (proxy_new == proxy_now && kernel_new == kernel_now) {
    return true;  // only ops themselves are left, and they are always recorded
  }
  g.proxy_limit_pm.store(proxy_new, std::memory_order_relaxed);
  if (kernel_new != kernel_now) g.kernel_limit_pm.store(kernel_new, std::memory_order_relaxed);
  r.ring.Count(NCCLSCOPE_CTR_GOVERNOR_DOWN);
  if (was_probing) g.hold = std::min(g.hold * 2, kHoldMax);  // that step up was one too many
  return false;
}

// Well under budget: after `hold` good windows, raises one limit a step towards what is asked.
void MaybeStepUp(Runtime& r, State& g) {
  const std::uint32_t kernel_asked = r.kernel_duty_pm.load(std::memory_order_relaxed);
  const std::uint32_t proxy_asked = r.proxy_duty_pm.load(std::memory_order_relaxed);
  const std::uint32_t kernel_limit = g.kernel_limit_pm.load(std::memory_order_relaxed);
  const std::uint32_t proxy_limit = g.proxy_limit_pm.load(std::memory_order_relaxed);
  const bool lowered = kernel_limit < kernel_asked || proxy_limit < proxy_asked;
  if (lowered && ++g.good_windows >= g.hold) {
    // Back up in the reverse order: GPU timing first, then the network steps.
    if (kernel_limit < kernel_asked) {
      g.kernel_limit_pm.store(StepUp(kernel_limit, kernel_asked), std::memory_order_relaxed);
    } else {
      g.proxy_limit_pm.store(StepUp(proxy_limit, proxy_asked), std::memory_order_relaxed);
    }
    r.ring.Count(NCCLSCOPE_CTR_GOVERNOR_UP);
    g.good_windows = 0;
    g.probing = true;
    if (KernelDutyPm(r) >= kernel_asked && ProxyDutyPm(r) >= proxy_asked) g.hold = kHoldBase;
  } else if (!lowered) {
    g.good_windows = 0;
  }
}

void Evaluate(Runtime& r, std::uint64_t now_ns) {
  State& g = r.gov;
  if (!g.spin_file.empty() && now_ns - g.spin_checked_ns >= kSpinFileCheckNs) {
    ReadSpinFile(g);
    g.spin_checked_ns = now_ns;
  }
  g.max_call_ticks.store(clock::NsToTicks(kMaxCallNs), std::memory_order_relaxed);  // new rate
  std::uint64_t ticks[kClasses];
  for (std::uint32_t c = 0; c < kClasses; ++c) {
    ticks[c] = g.classes[c].ticks.load(std::memory_order_relaxed);
  }
  const std::uint64_t timed_ops = g.timed_ops.load(std::memory_order_relaxed);
  if (g.window_start_ns == 0 || now_ns < g.window_start_ns) {
    g.window_start_ns = now_ns;
    for (std::uint32_t c = 0; c < kClasses; ++c) g.last_ticks[c] = ticks[c];
    g.last_timed_ops = timed_ops;
    return;
  }
  const std::uint64_t period = r.duty_period_ns.load(std::memory_order_relaxed);
  const std::uint64_t min_window = std::max(period, kMinWindowNs);
  const std::uint64_t elapsed = now_ns - g.window_start_ns;
  const std::uint64_t ops = timed_ops - g.last_timed_ops;
  if (elapsed < min_window || (ops < kMinTimedOps && elapsed < kMaxPeriods * min_window)) return;

  // The window's estimate: timed time x sample_every, per class.
  const std::uint64_t every = g.sample_mask.load(std::memory_order_relaxed) + 1;
  std::uint64_t ns[kClasses];
  std::uint64_t timed_ns = 0;
  std::uint64_t total_ns = 0;
  for (std::uint32_t c = 0; c < kClasses; ++c) {
    const std::uint64_t t = clock::TicksToNs(ticks[c] - g.last_ticks[c]);
    timed_ns += t;
    ns[c] = t * every;
    total_ns += ns[c];
    g.last_ticks[c] = ticks[c];
  }
  g.last_timed_ops = timed_ops;
  g.window_start_ns = now_ns;
  ++g.windows;
  r.ring.Count(NCCLSCOPE_CTR_PLUGIN_TIME_NS, total_ns);
  const std::uint32_t gpus = LocalGpus(r);
  const std::uint64_t load = SharePpm(total_ns, elapsed, gpus);
  const std::uint64_t op_ns = ops != 0 ? timed_ns / ops : 0;
  const std::uint64_t budget = r.overhead_budget_ppm.load(std::memory_order_relaxed);

  bool at_floor = false;
  const bool was_probing = g.probing;  // the previous window stepped up
  g.probing = false;
  // NCCL holding the mask (RAS) leaves nothing to govern: measure and publish, step nothing.
  const bool nccl_override = Load(r.mask_overridden) != 0;
  if (budget == 0 || nccl_override) {
    // Governor off: measure and publish, limit nothing.
    if (budget == 0) {
      g.kernel_limit_pm.store(1000, std::memory_order_relaxed);
      g.proxy_limit_pm.store(1000, std::memory_order_relaxed);
    }
    g.good_windows = 0;
    g.hold = kHoldBase;
  } else if (load > budget) {
    at_floor = StepDown(r, g, ns, elapsed, gpus, budget, was_probing);
    g.good_windows = 0;
  } else if (load * 2 < budget) {
    MaybeStepUp(r, g);
  } else {
    g.good_windows = 0;  // between half the budget and the budget: stay
  }
  Publish(r, CurrentLevel(r, at_floor), load, gpus, op_ns, now_ns);
}

}  // namespace ncclscope::plugin::governor
