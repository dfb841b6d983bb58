// The eBPF source on kernels this machine is not: the feature probe is injected, so the paths of a
// kernel without BPF privilege, without a uprobe PMU or without the task_vma iterator run here.

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <string>

#include "agent/config/config.h"
#include "agent/core/text_exposition.h"
#include "agent/ebpf/bpf_objects.h"
#include "agent/ebpf/ebpf_source.h"

namespace ncclscope::ebpf {
namespace {

TEST(FeaturesTest, TheVerdictNamesWhatIsMissing) {
  FeatureFacts denied;
  denied.load_error = "not permitted to load BPF programs (EPERM)";
  denied.uprobe_pmu = true;
  const Features no_privilege = DecideFeatures(denied);
  EXPECT_FALSE(no_privilege.can_load);
  EXPECT_EQ(no_privilege.reason, denied.load_error);

  FeatureFacts no_pmu;
  no_pmu.objects_loaded = true;
  no_pmu.vma_iterator = true;
  const Features without_pmu = DecideFeatures(no_pmu);
  EXPECT_FALSE(without_pmu.can_load);
  EXPECT_FALSE(without_pmu.has_uprobe_pmu);
  EXPECT_NE(without_pmu.reason.find("CONFIG_UPROBE_EVENTS"), std::string::npos)
      << without_pmu.reason;

  FeatureFacts old_kernel;
  old_kernel.objects_loaded = true;
  old_kernel.uprobe_pmu = true;
  const Features without_iterator = DecideFeatures(old_kernel);
  EXPECT_TRUE(without_iterator.can_load);
  EXPECT_FALSE(without_iterator.has_vma_iterator);
  EXPECT_TRUE(without_iterator.reason.empty());
}

TEST(FeaturesTest, ASourceThatCannotLoadIsDownWithTheReasonAndRendersNothing) {
  std::atomic<int> asked{0};
  EbpfSource source({}, [&] {
    ++asked;
    Features f;
    f.reason = "the kernel has no uprobe PMU (CONFIG_UPROBE_EVENTS)";
    return f;
  });
  const SourceStatus status = source.Start(config::Config{});
  EXPECT_FALSE(status.up);
  EXPECT_EQ(status.reason, "the kernel has no uprobe PMU (CONFIG_UPROBE_EVENTS)");
  EXPECT_EQ(asked.load(), 1);
  EXPECT_FALSE(source.Status().up);
  std::string text;
  metrics::TextWriter writer(text);
  source.Collect(writer);
  EXPECT_EQ(text, "");
  source.Stop();
}

// Without the task_vma iterator (Linux < 6.1) the source runs on, identifying files by the inode
// the process sees. Loads the real BPF objects: root only.
TEST(FeaturesTest, WithoutTheVmaIteratorTheSourceRunsOn) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (loads BPF programs); CI runs it as root";
  const Features kernel = ProbeKernelFeatures();
  if (!kernel.can_load) GTEST_SKIP() << "BPF unavailable here: " << kernel.reason;
  Features without_iterator = kernel;
  without_iterator.has_vma_iterator = false;
  EbpfSource source({}, [&] { return without_iterator; });
  const SourceStatus status = source.Start(config::Config{});
  ASSERT_TRUE(status.up) << status.reason;
  std::string text;
  metrics::TextWriter writer(text);
  source.Collect(writer);
  EXPECT_NE(text.find("ncclscope_ebpf_attached_files{library=\"nccl\"}"), std::string::npos)
      << text;
  source.Stop();
  EXPECT_FALSE(source.Status().up);
}

}  // namespace
}  // namespace ncclscope::ebpf
