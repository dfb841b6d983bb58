#include "agent/ebpf/coverage.h"

namespace ncclscope::ebpf {

std::map<PodLabels, std::uint64_t> UncoveredByPod(
    const std::map<ProcessKey, PodLabels>& nccl_processes,
    const std::set<std::int32_t>& ring_writers) {
  std::map<PodLabels, std::uint64_t> uncovered;
  for (const auto& [process, labels] : nccl_processes) {
    std::uint64_t& count = uncovered[labels];
    if (ring_writers.count(process.pid) == 0) ++count;
  }
  return uncovered;
}

}  // namespace ncclscope::ebpf
