// The facts behind coverage (agent/ebpf/process_facts.h) against a fake /proc: the NCCL version of
// the mapped library, the plugin's mapping, NCCL_PROFILER_PLUGIN from environ, what is read again
// and when, and processes that vanish or whose pid is reused.

#include "agent/ebpf/process_facts.h"

#include <gtest/gtest.h>

#include <fstream>
#include <memory>

#include "tests/support/fake_proc.h"
#include "tests/support/tiny_elf.h"

namespace ncclscope::ebpf {
namespace {

using testing::FakeProc;
using testing::MakeTinyElf;
using Clock = ProcessFactsReader::Clock;
using std::chrono::seconds;

constexpr const char* kNccl = "/lib/libnccl.so.2";
constexpr const char* kPlugin = "/opt/ncclscope/libnccl-profiler-ncclscope.so";
constexpr const char* kLibc = "/lib/libc.so.6";

class ProcessFactsTest : public ::testing::Test {
 protected:
  ProcessFactsTest() {
    proc_.AddFile(kNccl, MakeTinyElf({.data = "NCCL version 2.21.5+cuda12.4"}).bytes);
    proc_.AddFile(kPlugin, "the plugin");
    proc_.AddFile(kLibc, "libc");
  }

  std::unique_ptr<ProcessFactsReader> Make(std::size_t max_environ_bytes = 1 << 20) {
    ProcessFactsReader::Options options;
    options.proc_root = proc_.proc_root();
    options.max_environ_bytes = max_environ_bytes;
    return std::make_unique<ProcessFactsReader>(options, &errors_);
  }

  std::uint64_t Errors(const std::string& kind) const {
    for (const auto& [k, n] : errors_.Snapshot()) {
      if (k == kind) return n;
    }
    return 0;
  }

  FakeProc proc_;
  ErrorCounters errors_;
  const Clock::time_point t0_ = Clock::now();
};

TEST_F(ProcessFactsTest, ReadsTheLibrarysVersionThePluginAndTheRequest) {
  proc_.AddProcess(100, 5000, {kLibc, kNccl});
  proc_.SetEnviron(100, {"PATH=/bin", "NCCL_PROFILER_PLUGIN=ncclscope", "HOME=/root"});
  auto reader = Make();
  const auto facts = reader->Get({100, 5000}, false, t0_);
  ASSERT_TRUE(facts);
  ASSERT_TRUE(facts->nccl_version);
  EXPECT_EQ(facts->nccl_version->Text(), "2.21.5");
  EXPECT_EQ(facts->nccl_library, kNccl);
  EXPECT_FALSE(facts->plugin_mapped);
  EXPECT_EQ(facts->request, PluginRequest::kNcclscope);
  EXPECT_TRUE(errors_.Snapshot().empty());
}

TEST_F(ProcessFactsTest, MapsAreReadAgainWhileUncoveredAtGrowingIntervals) {
  proc_.AddProcess(100, 5000, {kNccl});
  proc_.SetEnviron(100, {"NCCL_PROFILER_PLUGIN=ncclscope"});
  auto reader = Make();
  EXPECT_FALSE(reader->Get({100, 5000}, false, t0_)->plugin_mapped);
  // NCCL loads the plugin at its first communicator init.
  proc_.AddProcess(100, 5000, {kNccl, kPlugin});
  EXPECT_FALSE(reader->Get({100, 5000}, false, t0_ + seconds(1))->plugin_mapped);  // not due
  EXPECT_TRUE(reader->Get({100, 5000}, false, t0_ + seconds(2))->plugin_mapped);
  // Next read 4 s after that one, then 8 s.
  proc_.AddProcess(100, 5000, {kNccl});
  EXPECT_TRUE(reader->Get({100, 5000}, false, t0_ + seconds(5))->plugin_mapped);
  EXPECT_FALSE(reader->Get({100, 5000}, false, t0_ + seconds(6))->plugin_mapped);
  proc_.AddProcess(100, 5000, {kNccl, kPlugin});
  EXPECT_FALSE(reader->Get({100, 5000}, false, t0_ + seconds(13))->plugin_mapped);
  EXPECT_TRUE(reader->Get({100, 5000}, false, t0_ + seconds(14))->plugin_mapped);
  // A covered process's maps are not read again, however long it runs.
  proc_.AddProcess(100, 5000, {kNccl});
  EXPECT_TRUE(reader->Get({100, 5000}, true, t0_ + seconds(3600))->plugin_mapped);
}

TEST_F(ProcessFactsTest, TheRequestFromNcclProfilerPlugin) {
  EXPECT_EQ(RequestFromValue(std::nullopt), PluginRequest::kNotRequested);
  EXPECT_EQ(RequestFromValue(""), PluginRequest::kNotRequested);
  EXPECT_EQ(RequestFromValue("none"), PluginRequest::kNotRequested);
  EXPECT_EQ(RequestFromValue("NONE"), PluginRequest::kNotRequested);
  EXPECT_EQ(RequestFromValue("ncclscope"), PluginRequest::kNcclscope);
  EXPECT_EQ(RequestFromValue(kPlugin), PluginRequest::kNcclscope);
  EXPECT_EQ(RequestFromValue("inspector"), PluginRequest::kOther);
  EXPECT_EQ(RequestFromValue("nonexistent"), PluginRequest::kOther);

  proc_.AddProcess(100, 5000, {kNccl});
  proc_.SetEnviron(100, {"NCCL_PROFILER_PLUGIN_X=ncclscope", "XNCCL_PROFILER_PLUGIN=ncclscope"});
  proc_.AddProcess(101, 5000, {kNccl});
  proc_.SetEnviron(101, {"NCCL_PROFILER_PLUGIN=/usr/lib/libnccl-profiler-inspector.so"});
  proc_.AddProcess(102, 5000, {kNccl});
  proc_.SetEnviron(102, {"NCCL_PROFILER_PLUGIN=none", "NCCL_PROFILER_PLUGIN=ncclscope"});
  auto reader = Make();
  EXPECT_EQ(reader->Get({100, 5000}, false, t0_)->request, PluginRequest::kNotRequested);
  EXPECT_EQ(reader->Get({101, 5000}, false, t0_)->request, PluginRequest::kOther);
  // The first entry wins, as for getenv().
  EXPECT_EQ(reader->Get({102, 5000}, false, t0_)->request, PluginRequest::kNotRequested);
}

TEST_F(ProcessFactsTest, AnUnreadableEnvironIsUnknownAndCountedThenReadAgain) {
  proc_.AddProcess(100, 5000, {kNccl});  // no environ file
  auto reader = Make();
  EXPECT_EQ(reader->Get({100, 5000}, false, t0_)->request, PluginRequest::kUnknown);
  EXPECT_EQ(Errors("environ_read"), 1u);
  proc_.SetEnviron(100, {"NCCL_PROFILER_PLUGIN=ncclscope"});
  EXPECT_EQ(reader->Get({100, 5000}, false, t0_ + seconds(1))->request, PluginRequest::kUnknown);
  EXPECT_EQ(reader->Get({100, 5000}, false, t0_ + seconds(2))->request, PluginRequest::kNcclscope);
  // Read: never again, since a process's initial environment does not change.
  proc_.SetEnviron(100, {});
  EXPECT_EQ(reader->Get({100, 5000}, false, t0_ + seconds(60))->request, PluginRequest::kNcclscope);
}

TEST_F(ProcessFactsTest, AnEnvironCutByTheLimitIsUnknownNotUnset) {
  proc_.AddProcess(100, 5000, {kNccl});
  proc_.SetEnviron(100, {"LONG=" + std::string(100, 'x'), "NCCL_PROFILER_PLUGIN=ncclscope"});
  proc_.AddProcess(101, 5000, {kNccl});
  proc_.SetEnviron(101, {"A=1", "NCCL_PROFILER_PLUGIN=ncclscope"});
  auto reader = Make(64);
  EXPECT_EQ(reader->Get({100, 5000}, false, t0_)->request, PluginRequest::kUnknown);
  EXPECT_EQ(reader->Get({101, 5000}, false, t0_)->request, PluginRequest::kNcclscope);
}

TEST_F(ProcessFactsTest, OneVersionReadPerLibraryFile) {
  proc_.AddFile("/lib/libnccl.so.1", MakeTinyElf({.data = "no version here"}).bytes);
  proc_.AddProcess(100, 5000, {kNccl});
  proc_.AddProcess(101, 5000, {kNccl});
  proc_.AddProcess(102, 5000, {"/lib/libnccl.so.1"});
  proc_.AddProcess(103, 5000, {"/lib/libnccl.so.1"});
  auto reader = Make();
  for (pid_t pid : {100, 101, 102, 103}) ASSERT_TRUE(reader->Get({pid, 5000}, false, t0_));
  EXPECT_EQ(reader->cached_files(), 2u);
  EXPECT_FALSE(reader->Get({102, 5000}, false, t0_)->nccl_version);
  // The file without a version was read (and counted) once.
  EXPECT_EQ(Errors("nccl_version_read"), 1u);
  reader->Retain({{100, 5000}});
  EXPECT_EQ(reader->cached_processes(), 1u);
  EXPECT_EQ(reader->cached_files(), 1u);
  reader->Retain({});
  EXPECT_EQ(reader->cached_files(), 0u);
}

TEST_F(ProcessFactsTest, ALibraryThatCannotBeOpenedIsTriedAgain) {
  // A deleted library: the fake /proc has no map_files to reach it.
  proc_.AddProcess(100, 5000, {kNccl});
  const std::string maps = proc_.proc_root() + "/100/maps";
  std::string text = testing::ReadFile(maps);
  text.insert(text.size() - 1, " (deleted)");
  std::ofstream(maps, std::ios::trunc) << text;
  auto reader = Make();
  EXPECT_FALSE(reader->Get({100, 5000}, false, t0_)->nccl_version);
  EXPECT_EQ(reader->cached_files(), 0u);
  proc_.AddProcess(100, 5000, {kNccl});
  EXPECT_EQ(reader->Get({100, 5000}, false, t0_ + seconds(2))->nccl_version->Text(), "2.21.5");
  EXPECT_EQ(Errors("nccl_version_read"), 1u);
}

TEST_F(ProcessFactsTest, GoneOrReusedPidsGiveNothing) {
  proc_.AddProcess(100, 5000, {kNccl});
  proc_.SetEnviron(100, {});
  auto reader = Make();
  EXPECT_FALSE(reader->Get({200, 5000}, false, t0_));  // no such process
  EXPECT_FALSE(reader->Get({100, 4000}, false, t0_));  // pid 100 is another process now
  ASSERT_TRUE(reader->Get({100, 5000}, false, t0_));
  proc_.RemoveProcess(100);
  EXPECT_FALSE(reader->Get({100, 5000}, false, t0_ + seconds(2)));
  EXPECT_EQ(reader->cached_processes(), 0u);
  EXPECT_TRUE(errors_.Snapshot().empty()) << "a vanished process is not an error";
}

}  // namespace
}  // namespace ncclscope::ebpf
