// The agent's process_* metrics from a /proc tree the test writes: values, units, and the limits
// that are absent when unlimited.

#include "agent/exporter/process_metrics.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "agent/core/text_exposition.h"
#include "tests/support/exposition.h"
#include "tests/support/temp_dir.h"

namespace ncclscope {
namespace {

using testing::SampleValue;

std::string Limits(const std::string& open_files, const std::string& address_space) {
  return "Limit                     Soft Limit           Hard Limit           Units     \n"
         "Max cpu time              unlimited            unlimited            seconds   \n"
         "Max open files            " +
         open_files + "                20000                files     \n" +
         "Max address space         " + address_space +
         "            unlimited            bytes     \n";
}

class ProcessMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(proc_.path() + "/self/fd");
    for (int fd = 0; fd < 3; ++fd) proc_.WriteFile("self/fd/" + std::to_string(fd), "");
    proc_.WriteFile("stat", "cpu  1 2 3\nbtime 1700000000\nprocesses 9\n");
    // Fields 3..24 after the command (which has a space and a parenthesis in it): utime 250,
    // stime 150, starttime 1000 ticks, vsize 4096000 bytes, rss 100 pages.
    proc_.WriteFile("self/stat",
                    "4242 (agent (x) y) S 1 0 0 0 0 0 0 0 0 0 250 150 0 0 0 0 0 0 1000 4096000 100 "
                    "0 0\n");
  }

  std::string Render() const {
    std::string text;
    metrics::TextWriter writer(text);
    CollectProcessMetrics(writer, proc_.path());
    return text;
  }

  testing::TempDir proc_;
};

TEST_F(ProcessMetricsTest, ReadsTheProcessFromProc) {
  proc_.WriteFile("self/limits", Limits("1024", "8589934592"));
  const std::string text = Render();
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  EXPECT_DOUBLE_EQ(SampleValue(text, "process_cpu_seconds_total"), 400 / ticks) << text;
  EXPECT_DOUBLE_EQ(SampleValue(text, "process_resident_memory_bytes"), 100 * page);
  EXPECT_DOUBLE_EQ(SampleValue(text, "process_virtual_memory_bytes"), 4096000);
  EXPECT_DOUBLE_EQ(SampleValue(text, "process_start_time_seconds"), 1700000000 + 1000 / ticks);
  EXPECT_DOUBLE_EQ(SampleValue(text, "process_open_fds"), 3);
  EXPECT_DOUBLE_EQ(SampleValue(text, "process_max_fds"), 1024);
  EXPECT_DOUBLE_EQ(SampleValue(text, "process_virtual_memory_max_bytes"), 8589934592);
  EXPECT_NE(text.find("# TYPE process_cpu_seconds_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE process_virtual_memory_max_bytes gauge\n"), std::string::npos);
}

TEST_F(ProcessMetricsTest, UnlimitedLimitsAreAbsent) {
  proc_.WriteFile("self/limits", Limits("unlimited", "unlimited"));
  const std::string text = Render();
  EXPECT_EQ(text.find("process_max_fds"), std::string::npos) << text;
  EXPECT_EQ(text.find("process_virtual_memory_max_bytes"), std::string::npos);
  EXPECT_DOUBLE_EQ(SampleValue(text, "process_open_fds"), 3);
}

TEST_F(ProcessMetricsTest, AnUnreadableProcWritesNothing) {
  std::filesystem::remove(proc_.path() + "/self/stat");
  EXPECT_EQ(Render(), "");
  proc_.WriteFile("self/stat", "4242 (truncated");
  EXPECT_EQ(Render(), "");
}

}  // namespace
}  // namespace ncclscope
