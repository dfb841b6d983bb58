// Discovery and the attach registry without root or BPF: a fake /proc tree (stat, maps, root) and
// an attacher that records what it was asked to attach.

#include "agent/ebpf/discovery.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "agent/config/config.h"
#include "tests/support/fake_proc.h"

namespace ncclscope::ebpf {
namespace {

using testing::FakeProc;

struct FakeAttacher : Attacher {
  struct Attached : AttachedFile {
    explicit Attached(int* live) : live_(live) { ++*live_; }
    ~Attached() override { --*live_; }
    std::size_t probe_count() const override { return 2; }
    int* live_;
  };
  std::unique_ptr<AttachedFile> Attach(const proc::OpenedFile& file, Library,
                                       const std::vector<const ProbedFunction*>&,
                                       std::vector<std::string>*, std::string* error) override {
    ++attaches;
    char buffer[16] = {};
    if (pread(file.fd.get(), buffer, 15, 0) <= 0 || std::string(buffer).rfind("good", 0) != 0) {
      *error = "no symbols";
      return nullptr;
    }
    return std::make_unique<Attached>(&live);
  }
  int attaches = 0;
  int live = 0;
};

class DiscoveryTest : public ::testing::Test {
 protected:
  DiscoveryTest()
      : registry_(&attacher_, {{Library::kNccl, {FindFunction("ncclAllReduce")}},
                               {Library::kIbverbs, {FindFunction("ibv_create_qp")}}}) {}

  std::unique_ptr<Discovery> Make(Discovery::RealFiles real = nullptr, pid_t self_pid = 0) {
    Discovery::Options options;
    options.self_pid = self_pid;
    options.proc_root = proc_.proc_root();
    options.library_patterns[Library::kNccl] = {R"(^libnccl\.so)"};
    options.library_patterns[Library::kIbverbs] = {R"(^libibverbs\.so)"};
    return std::make_unique<Discovery>(options, &registry_, std::move(real));
  }

  FakeProc proc_;
  FakeAttacher attacher_;
  AttachRegistry registry_;
};

TEST_F(DiscoveryTest, AttachesOncePerFileAndDetachesWhenTheLastUserExits) {
  proc_.AddFile("/lib/libnccl.so.2", "good nccl");
  proc_.AddFile("/lib/libibverbs.so.1", "good verbs");
  proc_.AddFile("/lib/libc.so.6", "good but not ours");
  proc_.AddProcess(100, 5000, {"/lib/libnccl.so.2", "/lib/libc.so.6", "/lib/libibverbs.so.1"});
  proc_.AddProcess(200, 6000, {"/lib/libnccl.so.2"});
  auto discovery = Make();
  discovery->Sweep();
  EXPECT_EQ(attacher_.attaches, 2);  // libnccl once for both processes, libibverbs once
  auto stats = registry_.stats();
  EXPECT_EQ(stats.files[0], 1u);
  EXPECT_EQ(stats.files[1], 1u);
  EXPECT_EQ(stats.processes[0], 2u);
  EXPECT_EQ(stats.probes[0], 2u);
  EXPECT_EQ(discovery->tracked().size(), 2u);

  proc_.RemoveProcess(100);
  discovery->OnExit(100, 5000);
  EXPECT_EQ(attacher_.live, 1);  // verbs gone with its only user; nccl still mapped by 200
  proc_.RemoveProcess(200);
  discovery->Sweep();  // exit event missed: the sweep notices
  EXPECT_EQ(attacher_.live, 0);
  EXPECT_TRUE(discovery->tracked().empty());
}

TEST_F(DiscoveryTest, TheAgentItselfIsNeverProbed) {
  proc_.AddFile("/lib/libibverbs.so.1", "good verbs");
  proc_.AddProcess(100, 5000, {"/lib/libibverbs.so.1"});  // the agent (its fabric source)
  proc_.AddProcess(200, 6000, {"/lib/libibverbs.so.1"});  // a job
  auto discovery = Make(nullptr, /*self_pid=*/100);
  EXPECT_TRUE(discovery->Scan(100));  // alive, but not tracked
  EXPECT_EQ(attacher_.attaches, 0);
  discovery->Sweep();
  EXPECT_EQ(attacher_.attaches, 1);
  ASSERT_EQ(discovery->tracked().size(), 1u);
  EXPECT_EQ(discovery->tracked().begin()->pid, 200);
}

TEST_F(DiscoveryTest, NonExecutableMappingsAndOtherLibrariesAreIgnored) {
  proc_.AddFile("/lib/libnccl.so.2", "good");
  proc_.AddFile("/lib/libnccl-net.so", "good");
  proc_.AddProcess(100, 1, {"/lib/libnccl.so.2"}, "r--p");
  proc_.AddProcess(101, 1, {"/lib/libnccl-net.so"});
  auto discovery = Make();
  discovery->Sweep();
  EXPECT_EQ(attacher_.attaches, 0);
}

TEST_F(DiscoveryTest, ProcessGoneOrFileReplacedBeforeAttachFailsCleanly) {
  proc_.AddFile("/lib/libnccl.so.2", "good");
  proc_.AddProcess(100, 1, {"/lib/libnccl.so.2"});
  // The library is replaced on disk (new inode) after the process mapped it: the path no longer
  // names the mapped file and there is no map_files link in the fake /proc to fall back on.
  const std::string lib = proc_.AddFile("/lib/libnccl.so.2.new", "good too");
  std::filesystem::rename(lib, std::filesystem::path(lib).replace_extension(""));
  auto discovery = Make();
  EXPECT_TRUE(discovery->Scan(100));
  EXPECT_EQ(attacher_.attaches, 0);
  EXPECT_EQ(registry_.stats().failures[0], 1u);
  EXPECT_TRUE(discovery->Scan(100));  // remembered: not retried on every scan
  EXPECT_EQ(registry_.stats().failures[0], 1u);
  // The process exits between listing and scanning.
  proc_.RemoveProcess(100);
  EXPECT_FALSE(discovery->Scan(100));
  EXPECT_TRUE(discovery->tracked().empty());
}

TEST_F(DiscoveryTest, ReusedPidIsANewProcess) {
  proc_.AddFile("/lib/libnccl.so.2", "good");
  proc_.AddProcess(100, 1, {"/lib/libnccl.so.2"});
  auto discovery = Make();
  discovery->Scan(100);
  EXPECT_EQ(attacher_.live, 1);
  proc_.AddProcess(100, 2, {});  // same pid, later start, no NCCL
  discovery->Scan(100);
  EXPECT_EQ(attacher_.live, 0);
  EXPECT_TRUE(discovery->tracked().empty());
}

TEST_F(DiscoveryTest, RealFileIdentityDedupesAcrossOverlayCopies) {
  // Two containers see two different (overlay) inodes; the kernel says both are one real file.
  proc_.AddFile("/lib/libnccl.so.2", "good a");
  proc_.AddFile("/lib/libnccl.so.2.b", "good b");
  std::filesystem::create_directories(proc_.proc_root() + "/../fs/b/lib");
  proc_.AddProcess(100, 1, {"/lib/libnccl.so.2"});
  proc_.AddProcess(200, 1, {"/lib/libnccl.so.2.b"});
  int calls = 0;
  auto discovery = Make([&](pid_t) {
    ++calls;
    ncclscope_vma_record r{};
    r.vm_start = 0x7f0000000000;
    r.ino = 4242;
    r.dev = (254u << 20) | 1;
    return std::optional<std::vector<ncclscope_vma_record>>({r});
  });
  discovery->Scan(100);
  discovery->Scan(200);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(attacher_.attaches, 1);
  EXPECT_EQ(registry_.stats().processes[0], 2u);
}

TEST_F(DiscoveryTest, ExecSchedulesRescansAtGrowingDelays) {
  proc_.AddFile("/lib/libnccl.so.2", "good");
  proc_.AddProcess(100, 1, {});
  auto discovery = Make();
  const auto t0 = Discovery::Clock::now();
  discovery->OnExec(100, 1, t0);
  discovery->RunDue(t0);
  EXPECT_EQ(discovery->scans(), 1u);                // at once
  proc_.AddProcess(100, 1, {"/lib/libnccl.so.2"});  // dlopen happens later
  discovery->RunDue(t0 + std::chrono::milliseconds(499));
  EXPECT_EQ(discovery->scans(), 1u);
  discovery->RunDue(t0 + std::chrono::milliseconds(500));
  EXPECT_EQ(discovery->scans(), 2u);
  EXPECT_EQ(attacher_.live, 1);
  discovery->RunDue(t0 + std::chrono::seconds(60));  // 2 s, 8 s, 32 s
  EXPECT_EQ(discovery->scans(), 5u);
}

TEST(EbpfFunctionsTest, ConfigListsMatchTheFunctionTable) {
  EXPECT_EQ(config::EbpfNcclFunctions(), DefaultFunctionNames(Library::kNccl));
  EXPECT_EQ(config::EbpfIbverbsFunctions(), DefaultFunctionNames(Library::kIbverbs));
  EXPECT_EQ(ResultName(0, 4), "ncclInvalidArgument");
  EXPECT_EQ(ResultName(64, -1), "null");
  EXPECT_EQ(ResultName(65, 22), "EINVAL");
  EXPECT_EQ(QpStateName(6), "ERR");
}

}  // namespace
}  // namespace ncclscope::ebpf
