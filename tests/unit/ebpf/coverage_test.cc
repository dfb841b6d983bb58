// Coverage (agent/ebpf/coverage.h): why each NCCL process is covered or not, the per-pod counts by
// reason, and the two families as rendered.

#include "agent/ebpf/coverage.h"

#include <gtest/gtest.h>

#include <cmath>

#include "agent/core/text_exposition.h"
#include "tests/support/exposition.h"

namespace ncclscope::ebpf {
namespace {

using testing::SampleValue;

ProcessFacts Facts(std::optional<elf::NcclVersion> version, bool mapped, PluginRequest request) {
  ProcessFacts f;
  f.nccl_version = version;
  f.plugin_mapped = mapped;
  f.request = request;
  return f;
}

ProcessCoverage Uncovered(UncoveredReason reason) {
  ProcessCoverage c;
  c.reason = reason;
  return c;
}

ProcessCoverage Covered(std::uint32_t abi) {
  ProcessCoverage c;
  c.covered = true;
  c.abi = abi;
  return c;
}

TEST(CoverageTest, OneReasonPerProcessInOrder) {
  const elf::NcclVersion v2_28{2, 28, 9};
  const elf::NcclVersion v2_22{2, 22, 3};
  const auto ncclscope = PluginRequest::kNcclscope;
  // Too old first: NCCL before 2.23 cannot load a profiler, whatever the environment asks.
  EXPECT_EQ(Classify(Facts(v2_22, false, ncclscope), std::nullopt),
            Uncovered(UncoveredReason::kNcclTooOld));
  EXPECT_EQ(Classify(Facts(v2_22, true, ncclscope), 5), Uncovered(UncoveredReason::kNcclTooOld));
  EXPECT_EQ(Classify(Facts(elf::NcclVersion{2, 23, 4}, false, ncclscope), 1), Covered(1));
  // A ring: covered, through the header's ABI when it is one NCCL has shipped.
  EXPECT_EQ(Classify(Facts(v2_28, true, ncclscope), 5), Covered(5));
  EXPECT_EQ(Classify(Facts(std::nullopt, false, PluginRequest::kUnknown), 7), Covered(7));
  EXPECT_EQ(Classify(Facts(v2_28, true, ncclscope), 0), Covered(0));
  EXPECT_EQ(Classify(Facts(v2_28, true, ncclscope), 8), Covered(0));
  EXPECT_EQ(Classify(Facts(v2_28, true, ncclscope), 0xffffffffu), Covered(0));
  // No ring: the plugin's mapping, then the environment.
  EXPECT_EQ(Classify(Facts(v2_28, true, PluginRequest::kNotRequested), std::nullopt),
            Uncovered(UncoveredReason::kNoRing));
  EXPECT_EQ(Classify(Facts(v2_28, false, ncclscope), std::nullopt),
            Uncovered(UncoveredReason::kLoadFailed));
  EXPECT_EQ(Classify(Facts(std::nullopt, false, PluginRequest::kOther), std::nullopt),
            Uncovered(UncoveredReason::kOtherPlugin));
  EXPECT_EQ(Classify(Facts(v2_28, false, PluginRequest::kNotRequested), std::nullopt),
            Uncovered(UncoveredReason::kNotRequested));
  EXPECT_EQ(Classify(Facts(v2_28, false, PluginRequest::kUnknown), std::nullopt),
            Uncovered(UncoveredReason::kUnknown));

  EXPECT_EQ(Covered(5).PluginLabel(), "v5");
  EXPECT_EQ(Covered(0).PluginLabel(), "loaded");
  EXPECT_EQ(Uncovered(UncoveredReason::kLoadFailed).PluginLabel(), "load_failed");
  for (const UncoveredReason reason : kUncoveredReasons) {
    EXPECT_EQ(Uncovered(reason).PluginLabel(), ReasonName(reason));
    EXPECT_FALSE(ReasonHelp(reason).empty());
  }
}

TEST(CoverageTest, CountsPerPodAndReasonWithEveryReasonPresent) {
  const PodLabels train{"ml", "train-0", "trainer"};
  const PodLabels eval{"ml", "eval-0", "eval"};
  const PodLabels host{};  // a process outside any pod (Slurm)
  const std::map<ProcessKey, NcclProcess> processes = {
      {{100, 1}, {train, elf::NcclVersion{2, 28, 9}, Covered(5)}},
      {{101, 1}, {train, elf::NcclVersion{2, 28, 9}, Uncovered(UncoveredReason::kLoadFailed)}},
      {{102, 1}, {train, elf::NcclVersion{2, 28, 9}, Uncovered(UncoveredReason::kLoadFailed)}},
      {{200, 5}, {eval, std::nullopt, Covered(0)}},
      {{300, 9}, {host, elf::NcclVersion{2, 21, 5}, Uncovered(UncoveredReason::kNcclTooOld)}}};
  const auto uncovered = UncoveredByPod(processes);
  EXPECT_EQ(uncovered.size(), 3 * kUncoveredReasons.size());
  EXPECT_EQ(uncovered.at({train, UncoveredReason::kLoadFailed}), 2u);
  EXPECT_EQ(uncovered.at({train, UncoveredReason::kNotRequested}), 0u);
  EXPECT_EQ(uncovered.at({eval, UncoveredReason::kLoadFailed}), 0u);
  EXPECT_EQ(uncovered.at({host, UncoveredReason::kNcclTooOld}), 1u);
  std::uint64_t total = 0;
  for (const auto& [key, count] : uncovered) total += count;
  EXPECT_EQ(total, 3u);
  EXPECT_TRUE(UncoveredByPod({}).empty());
}

TEST(CoverageTest, RendersBothFamilies) {
  const PodLabels train{"ml", "train-0", "trainer"};
  const std::map<ProcessKey, NcclProcess> processes = {
      {{100, 1}, {train, elf::NcclVersion{2, 28, 9}, Covered(5)}},
      {{101, 1}, {train, std::nullopt, Uncovered(UncoveredReason::kNotRequested)}},
      {{102, 1}, {train, elf::NcclVersion{2, 23, 4}, Covered(0)}}};
  metrics::FamilySet families;
  RenderCoverage(processes, families);
  const std::string text = families.Text();
  const std::string pod = R"(namespace="ml",pod="train-0",container="trainer")";
  EXPECT_EQ(SampleValue(
                text, "ncclscope_ebpf_uncovered_processes{" + pod + R"(,reason="not_requested"})"),
            1);
  EXPECT_EQ(
      SampleValue(text, "ncclscope_ebpf_uncovered_processes{" + pod + R"(,reason="load_failed"})"),
      0);
  EXPECT_EQ(SampleValue(text, "ncclscope_ebpf_nccl_process_info{" + pod +
                                  R"(,pid="100",nccl_version="2.28.9",plugin="v5"})"),
            1);
  EXPECT_EQ(SampleValue(text, "ncclscope_ebpf_nccl_process_info{" + pod +
                                  R"(,pid="101",nccl_version="unknown",plugin="not_requested"})"),
            1);
  EXPECT_EQ(SampleValue(text, "ncclscope_ebpf_nccl_process_info{" + pod +
                                  R"(,pid="102",nccl_version="2.23.4",plugin="loaded"})"),
            1);
  EXPECT_NE(text.find("# TYPE ncclscope_ebpf_nccl_process_info gauge"), std::string::npos);

  // No NCCL process: neither family has a series (nor a header).
  metrics::FamilySet empty;
  RenderCoverage({}, empty);
  EXPECT_EQ(empty.Text(), "");
}

}  // namespace
}  // namespace ncclscope::ebpf
