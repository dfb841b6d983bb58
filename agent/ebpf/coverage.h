#pragma once

// Coverage: which NCCL processes on the node load the profiler plugin, and why the others do not.
// The eBPF source sees every process that uses NCCL; the plugin holds a flock on its ring for its
// whole life (plugin/ring/ring_writer.h), so a process using NCCL that holds no ring's lock runs
// without the plugin: its ranks, channels and hangs are invisible, only the eBPF call counts cover
// it. Why, from what the agent reads itself (process_facts.h), one reason per process, first match:
//   nccl_too_old   its libnccl file says NCCL < 2.23: no profiler API at all (ABI v1 arrived in
//                  2.23.4, the first 2.23 release); only eBPF can cover it
//   (covered)      it holds a ring; through the profiler ABI NCCL chose, from the ring's header
//   no_ring        the plugin is mapped but made no ring: ring directory missing, unwritable or
//                  full, or NCCLSCOPE_DISABLE
//   load_failed    NCCL_PROFILER_PLUGIN names ncclscope but the plugin is not mapped: NCCL's
//                  dlopen failed (the path not mounted, a glibc older than the plugin needs)
//   other_plugin   NCCL_PROFILER_PLUGIN names another plugin (NCCLSCOPE_CHAIN runs both)
//   not_requested  NCCL_PROFILER_PLUGIN unset, empty or "none"
//   unknown        the process's environment could not be read
//
// "Uses NCCL" is a live process with a communicator or an NCCL API call counted by the probes, not
// one that merely maps libnccl: a PyTorch DataLoader worker is forked from the trainer with the
// library mapped but never calls it.

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "agent/core/metric_family.h"
#include "agent/ebpf/attach/registry.h"
#include "agent/ebpf/attribution.h"
#include "agent/ebpf/elf/nccl_version.h"
#include "agent/ebpf/process_facts.h"

namespace ncclscope::ebpf {

// Ring holders: host pid (as <proc_root> numbers it) -> the profiler ABI version its ring header
// names (nccl_abi: 1 to kMaxProfilerAbi; 0 when unknown: before the first communicator init, or
// a header that could not be read or made no sense).
using RingAbis = std::map<std::int32_t, std::uint32_t>;

// The holders of a ring's lock in `ring_dir`, read through `proc_root`; nullopt when that cannot
// be known (then coverage is not exported). Injected: the ring format is the profiler source's
// (agent/app/sources.cc wires profiler::RingWriterAbis).
using RingWriters = std::function<std::optional<RingAbis>(const std::string& ring_dir,
                                                          const std::string& proc_root)>;

// The newest profiler ABI the plugin exports (plugin/abi/: v1 in NCCL 2.23 to v7 in 2.31).
inline constexpr std::uint32_t kMaxProfilerAbi = 7;
// The oldest NCCL with a profiler API.
inline constexpr elf::NcclVersion kFirstProfilerNccl{2, 23, 0};

enum class UncoveredReason {
  kNcclTooOld,
  kNoRing,
  kLoadFailed,
  kOtherPlugin,
  kNotRequested,
  kUnknown,
};
inline constexpr std::array kUncoveredReasons = {
    UncoveredReason::kNcclTooOld,  UncoveredReason::kNoRing,       UncoveredReason::kLoadFailed,
    UncoveredReason::kOtherPlugin, UncoveredReason::kNotRequested, UncoveredReason::kUnknown};

// The `reason` label value ("nccl_too_old", ...).
std::string_view ReasonName(UncoveredReason reason);
// What the reason means and where to look, for the log line.
std::string_view ReasonHelp(UncoveredReason reason);

struct ProcessCoverage {
  bool covered = false;
  std::uint32_t abi = 0;                               // covered: 1..kMaxProfilerAbi, 0 unknown
  UncoveredReason reason = UncoveredReason::kUnknown;  // not covered: why
  // The `plugin` label: "v1".."v7" when covered, "loaded" when covered through an ABI not (yet)
  // known, else the reason.
  std::string PluginLabel() const;
  friend bool operator==(const ProcessCoverage&, const ProcessCoverage&) = default;
};

// `ring_abi`: the process holds a ring (with that header ABI), nullopt: it holds none.
ProcessCoverage Classify(const ProcessFacts& facts, std::optional<std::uint32_t> ring_abi);

// One live NCCL process as the worker last saw it.
struct NcclProcess {
  PodLabels labels;
  std::optional<elf::NcclVersion> nccl_version;
  ProcessCoverage coverage;
};

// Per pod, its NCCL processes that are not covered, by reason. Every reason of every pod with an
// NCCL process is there, 0 when none: the series exist while the pod uses NCCL, so an alert can
// tell "covered" from "gone", and a process moving from one reason to another moves a count.
std::map<std::pair<PodLabels, UncoveredReason>, std::uint64_t> UncoveredByPod(
    const std::map<ProcessKey, NcclProcess>& processes);

// ncclscope_ebpf_uncovered_processes and ncclscope_ebpf_nccl_process_info (docs/metrics.md).
void RenderCoverage(const std::map<ProcessKey, NcclProcess>& processes,
                    metrics::FamilySet& families);

}  // namespace ncclscope::ebpf
