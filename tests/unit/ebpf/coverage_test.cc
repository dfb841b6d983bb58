// Coverage: per pod, NCCL processes holding no profiler ring (agent/ebpf/coverage.h).

#include "agent/ebpf/coverage.h"

#include <gtest/gtest.h>

namespace ncclscope::ebpf {
namespace {

TEST(CoverageTest, CountsProcessesWithoutARingPerPodAndKeepsCoveredPodsAtZero) {
  const PodLabels train{"ml", "train-0", "trainer"};
  const PodLabels eval{"ml", "eval-0", "eval"};
  const PodLabels host{};  // a process outside any pod (Slurm)
  const std::map<ProcessKey, PodLabels> processes = {
      {{100, 1}, train}, {{101, 1}, train}, {{200, 5}, eval}, {{300, 9}, host}};
  // 100 holds a ring; 101 (same pod) does not; eval's process holds one; the host process not.
  const auto uncovered = UncoveredByPod(processes, {100, 200, 4242});
  const std::map<PodLabels, std::uint64_t> expected = {{train, 1}, {eval, 0}, {host, 1}};
  EXPECT_EQ(uncovered, expected);
  EXPECT_TRUE(UncoveredByPod({}, {100}).empty());
}

}  // namespace
}  // namespace ncclscope::ebpf
