#pragma once

// What the plugin is told to do: built-in defaults, overridden by the agent's controls file in the
// ring directory (the fleet policy from the agent's YAML), overridden by the job's environment
// (NCCLSCOPE_*; a variable that is set pins that control, so the agent cannot change it at run
// time). Parsed once, at the first communicator init: cold path, no exceptions and no libstdc++
// run-time part (platform/README.md), like all of the plugin.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "platform/fixed_text.h"
#include "platform/pod_vector.h"
#include "plugin/abi/nccl_profiler_abi.h"
#include "plugin/ring/ncclscope_ring.h"

namespace ncclscope::plugin {

// NCCL event bits the plugin knows how to use: abi::EventType's, which the ring header's event
// groups (ncclscope_event_group_bits) ask for (SettingsTest holds the two equal).
inline constexpr std::uint32_t kEventColl = abi::kColl;
inline constexpr std::uint32_t kEventP2p = abi::kP2p;
inline constexpr std::uint32_t kEventProxyOp = abi::kProxyOp;
inline constexpr std::uint32_t kEventProxyStep = abi::kProxyStep;
inline constexpr std::uint32_t kEventKernelCh = abi::kKernelCh;
inline constexpr std::uint32_t kEventNetPlugin = abi::kNetPlugin;
inline constexpr std::uint32_t kEventCeColl = abi::kCeColl;
inline constexpr std::uint32_t kEventKernelPhase = abi::kKernelPhase;
inline constexpr std::uint32_t kUsableEvents = kEventColl | kEventP2p | kEventProxyOp |
                                               kEventProxyStep | kEventKernelCh | kEventNetPlugin |
                                               kEventCeColl | kEventKernelPhase;
// GPU timing per channel, sampled together by the kernel duty cycle: phases come only with their
// KernelCh (NCCL raises them between its start and stop, src/plugin/profiler.cc:898-977 at 2.31.2).
inline constexpr std::uint32_t kKernelEvents = kEventKernelCh | kEventKernelPhase;
// Sampled together by the proxy duty cycle: NCCL raises all three from its proxy thread, per
// network op, step and work request.
inline constexpr std::uint32_t kProxyEvents = kEventProxyOp | kEventProxyStep | kEventNetPlugin;

using PathText = platform::FixedText<4096>;
using WarningText = platform::FixedText<320>;

// Problems found while parsing, in order; beyond kMax they are counted in dropped().
class Warnings {
 public:
  static constexpr std::size_t kMax = 16;
  void Add(const char* format, ...) __attribute__((format(printf, 2, 3)));
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::size_t dropped() const { return dropped_; }
  const WarningText& operator[](std::size_t i) const { return items_[i]; }
  const WarningText* begin() const { return items_; }
  const WarningText* end() const { return items_ + size_; }

 private:
  WarningText items_[kMax];
  std::size_t size_ = 0;
  std::size_t dropped_ = 0;
};

struct Settings {
  bool disabled = false;                           // NCCLSCOPE_DISABLE=1
  PathText ring_dir = PathText("/run/ncclscope");  // NCCLSCOPE_RING_DIR
  std::uint64_t ring_bytes = 8u << 20;             // NCCLSCOPE_RING_SIZE: record space, all lanes
  std::uint32_t lanes = 16;                        // NCCLSCOPE_RING_LANES
  std::uint32_t comm_slots = 256;                  // NCCLSCOPE_COMM_SLOTS
  std::uint32_t max_ops = 65536;                   // NCCLSCOPE_MAX_OPS: ops in flight per process
  std::uint32_t max_proxy_ops = 65536;             // NCCLSCOPE_MAX_PROXY_OPS
  platform::FixedText<64> job_id;                  // NCCLSCOPE_JOB_ID, else SLURM_JOB_ID
  platform::FixedText<16> clock = platform::FixedText<16>("auto");  // NCCLSCOPE_CLOCK

  // Runtime controls (also settable by the agent through the ring header unless pinned).
  std::uint32_t event_mask = kUsableEvents;          // NCCLSCOPE_EVENTS
  std::uint64_t min_bytes = 0;                       // NCCLSCOPE_MIN_BYTES
  std::uint64_t duty_period_ns = 10'000'000'000ull;  // NCCLSCOPE_DUTY_PERIOD
  std::uint32_t kernel_duty_pm = 1000;               // NCCLSCOPE_KERNEL_DUTY (fraction 0..1)
  std::uint32_t proxy_duty_pm = 100;                 // NCCLSCOPE_PROXY_DUTY (fraction 0..1)
  // NCCLSCOPE_OVERHEAD_BUDGET: the overhead governor's budget, the plugin's share of one core per
  // local GPU in parts per million (governor.h); 0 turns the governor off.
  std::uint32_t overhead_budget_ppm = 10'000;
  // NCCLSCOPE_RECORD_ONE_IN: records (and network records) for 1 op in this many, chosen by
  // ncclscope_op_recorded(); every op is still counted in the comm table.
  std::uint32_t record_one_in = 1;
  // NCCLSCOPE_RECORD_RATE_LIMIT: ops per second the process records at most (0: no limit); above
  // it record_one_in is multiplied by a power of two (record_rate.h). The agent's default applies
  // once it wrote the controls; a job alone records every op.
  std::uint32_t record_rate_limit = 0;
  std::uint32_t pinned = 0;  // ncclscope_control_bit set by the environment

  // The governor times every call of 1 op in this many (a power of two, 1..65536), environment
  // only (NCCLSCOPE_OVERHEAD_SAMPLE): for tests and diagnosis.
  std::uint32_t overhead_sample = 256;
  // TEST ONLY (NCCLSCOPE_TEST_SPIN_FILE): a file the maintenance thread re-reads every pass, with
  // busy-wait times to add to the calls the governor times ("proxy=20us kernel=0 op=0"), to
  // make the plugin artificially expensive in tests of the governor. Never set it in a job.
  PathText test_spin_file;

  // Problems found while parsing (bad values keep the previous value); logged at init.
  Warnings warnings;
};

// Looks up one variable: its value, or nullptr when unset. Injected so tests need no real
// environment: a function and the context it is called with.
class EnvLookup {
 public:
  using Fn = const char* (*)(const void* context, const char* name);
  constexpr EnvLookup(Fn fn, const void* context) : fn_(fn), context_(context) {}
  const char* operator()(const char* name) const { return fn_(context_, name); }

 private:
  Fn fn_;
  const void* context_;
};

// Reads the process environment.
EnvLookup ProcessEnv();

// Applies the controls file text ("key=value" lines, written by the agent) and then the
// environment to `settings`.
void ApplyControlsFile(std::string_view text, Settings& settings);
void ApplyEnvironment(const EnvLookup& env, Settings& settings);

// Full resolution for the plugin: defaults, <ring_dir>/ncclscope.controls, environment. The ring
// directory itself can only come from the environment.
Settings LoadSettings(const EnvLookup& env);

// NCCLSCOPE_CHAIN: the profiler plugin to chain behind ncclscope (chain.h), a path or a library
// name as dlopen takes it; "" when unset or blank. Environment only: chaining is the job's choice,
// not the fleet's, and is decided before the ring (and its controls) exist.
PathText ChainPath(const EnvLookup& env);

// Parsers shared with the controls file (exposed for tests). All return nullopt on bad input.
std::optional<std::uint64_t> ParseBytes(std::string_view text);        // "8MiB", "65536", "64k"
std::optional<std::uint64_t> ParseDurationNs(std::string_view text);   // "10s", "250ms", "1m"
std::optional<std::uint32_t> ParseFractionPm(std::string_view text);   // "0.25", "1", "25%"
std::optional<std::uint32_t> ParseFractionPpm(std::string_view text);  // "0.005", "0.5%", "0"
std::optional<std::uint32_t> ParseEvents(std::string_view text);       // "coll,p2p,kernel_ch"

// Name of the controls file inside the ring directory.
inline constexpr const char* kControlsFileName = NCCLSCOPE_CONTROLS_FILE;
inline constexpr std::size_t kMaxControlsFileBytes = 64 << 10;

// The text of <dir>/ncclscope.controls, read so that whatever a pod put there cannot block or
// bloat the job's NCCL init: only a regular file is opened (never followed through a symlink,
// never a FIFO or a device: plugin/ring/regular_file.h), only one owned by root, this process's
// user or the directory's owner and not writable by group or others, at most
// kMaxControlsFileBytes. False when absent or refused (*problem says why, empty when absent).
bool ReadControlsFile(const char* dir, platform::PodVector<char>* text, WarningText* problem);

}  // namespace ncclscope::plugin
