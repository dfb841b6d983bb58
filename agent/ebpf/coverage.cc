#include "agent/ebpf/coverage.h"

#include "agent/ebpf/ebpf_metrics.h"

namespace ncclscope::ebpf {
namespace {

metrics::Labels PodLabelSet(const PodLabels& p) {
  return {{"namespace", p.namespace_name}, {"pod", p.pod}, {"container", p.container}};
}

}  // namespace

std::string_view ReasonName(UncoveredReason reason) {
  switch (reason) {
    case UncoveredReason::kNcclTooOld:
      return "nccl_too_old";
    case UncoveredReason::kNoRing:
      return "no_ring";
    case UncoveredReason::kLoadFailed:
      return "load_failed";
    case UncoveredReason::kOtherPlugin:
      return "other_plugin";
    case UncoveredReason::kNotRequested:
      return "not_requested";
    case UncoveredReason::kUnknown:
      break;
  }
  return "unknown";
}

std::string_view ReasonHelp(UncoveredReason reason) {
  switch (reason) {
    case UncoveredReason::kNcclTooOld:
      return "NCCL older than 2.23 has no profiler API; only the eBPF probes cover it";
    case UncoveredReason::kNoRing:
      return "the plugin is loaded but writes no ring: check the ring directory's mount, "
             "permissions and space, and NCCLSCOPE_DISABLE";
    case UncoveredReason::kLoadFailed:
      return "NCCL_PROFILER_PLUGIN names ncclscope but the plugin is not loaded: NCCL_DEBUG=INFO "
             "NCCL_DEBUG_SUBSYS=INIT shows why dlopen failed";
    case UncoveredReason::kOtherPlugin:
      return "NCCL_PROFILER_PLUGIN names another plugin: load ncclscope and chain it with "
             "NCCLSCOPE_CHAIN";
    case UncoveredReason::kNotRequested:
      return "NCCL_PROFILER_PLUGIN is unset, empty or none in the process's environment";
    case UncoveredReason::kUnknown:
      break;
  }
  return "the process's environment could not be read";
}

std::string ProcessCoverage::PluginLabel() const {
  if (!covered) return std::string(ReasonName(reason));
  return abi == 0 ? "loaded" : "v" + std::to_string(abi);
}

ProcessCoverage Classify(const ProcessFacts& facts, std::optional<std::uint32_t> ring_abi) {
  ProcessCoverage c;
  if (facts.nccl_version && *facts.nccl_version < kFirstProfilerNccl) {
    c.reason = UncoveredReason::kNcclTooOld;
  } else if (ring_abi) {
    c.covered = true;
    // The header is the pod's to write: an ABI outside what NCCL has shipped is unknown.
    c.abi = *ring_abi >= 1 && *ring_abi <= kMaxProfilerAbi ? *ring_abi : 0;
  } else if (facts.plugin_mapped) {
    c.reason = UncoveredReason::kNoRing;
  } else {
    switch (facts.request) {
      case PluginRequest::kNcclscope:
        c.reason = UncoveredReason::kLoadFailed;
        break;
      case PluginRequest::kOther:
        c.reason = UncoveredReason::kOtherPlugin;
        break;
      case PluginRequest::kNotRequested:
        c.reason = UncoveredReason::kNotRequested;
        break;
      case PluginRequest::kUnknown:
        c.reason = UncoveredReason::kUnknown;
        break;
    }
  }
  return c;
}

std::map<std::pair<PodLabels, UncoveredReason>, std::uint64_t> UncoveredByPod(
    const std::map<ProcessKey, NcclProcess>& processes) {
  std::map<std::pair<PodLabels, UncoveredReason>, std::uint64_t> uncovered;
  for (const auto& [process, p] : processes) {
    for (const UncoveredReason reason : kUncoveredReasons) uncovered[{p.labels, reason}];
    if (!p.coverage.covered) ++uncovered[{p.labels, p.coverage.reason}];
  }
  return uncovered;
}

void RenderCoverage(const std::map<ProcessKey, NcclProcess>& processes,
                    metrics::FamilySet& families) {
  metrics::Family& uncovered = families.Get(kEbpfUncoveredProcesses);
  for (const auto& [key, count] : UncoveredByPod(processes)) {
    metrics::Labels set = PodLabelSet(key.first);
    set.push_back({"reason", std::string(ReasonName(key.second))});
    uncovered.Add(set, static_cast<double>(count));
  }
  metrics::Family& info = families.Get(kEbpfNcclProcessInfo);
  for (const auto& [process, p] : processes) {
    metrics::Labels set = PodLabelSet(p.labels);
    set.push_back({"pid", std::to_string(process.pid)});
    set.push_back({"nccl_version", p.nccl_version ? p.nccl_version->Text() : "unknown"});
    set.push_back({"plugin", p.coverage.PluginLabel()});
    info.Add(set, 1);
  }
}

}  // namespace ncclscope::ebpf
