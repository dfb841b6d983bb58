// The plugin's side of ncclscope.controls: a pod can write the ring directory, so what it puts at
// the controls file's name must never block, bloat or steer a job's NCCL init (issue 11).

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include "plugin/src/settings.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait_for.h"

namespace ncclscope::testing {
namespace {

using plugin::LoadSettings;
using plugin::Settings;

// An environment with NCCLSCOPE_RING_DIR=dir, alive for the full expression that uses it.
struct Env {
  explicit Env(std::string d) : dir(std::move(d)) {}
  operator plugin::EnvLookup() const {  // NOLINT(google-explicit-constructor)
    return plugin::EnvLookup(
        [](const void* context, const char* name) -> const char* {
          if (std::string(name) != "NCCLSCOPE_RING_DIR") return nullptr;
          return static_cast<const Env*>(context)->dir.c_str();
        },
        this);
  }
  std::string dir;
};

bool HasWarning(const Settings& s, const std::string& part) {
  for (const auto& w : s.warnings) {
    if (w.view().find(part) != std::string_view::npos) return true;
  }
  return false;
}

TEST(PluginControlsReadTest, TheAgentsFileIsApplied) {
  TempDir dir;
  const std::string path = dir.WriteFile("ncclscope.controls", "min_bytes=4096\nlanes=4\n");
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  const Settings s = LoadSettings(Env(dir.path()));
  EXPECT_EQ(s.min_bytes, 4096u);
  EXPECT_EQ(s.lanes, 4u);
  EXPECT_TRUE(s.warnings.empty());
}

TEST(PluginControlsReadTest, AFifoNeverBlocksInit) {
  TempDir dir;
  ASSERT_EQ(::mkfifo((dir.path() + "/ncclscope.controls").c_str(), 0666), 0);
  // In a child: the old reader (an ifstream) blocked in open() until a writer came.
  const pid_t child = ::fork();
  if (child == 0) {
    const Settings s = LoadSettings(Env(dir.path()));
    ::_exit(HasWarning(s, "not a regular file") ? 0 : 3);
  }
  int status = 0;
  if (!WaitFor([&] { return ::waitpid(child, &status, WNOHANG) == child; }, std::chrono::seconds(5),
               std::chrono::milliseconds(10))) {
    ::kill(child, SIGKILL);
    ::waitpid(child, &status, 0);
    FAIL() << "LoadSettings blocked on a FIFO";
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(PluginControlsReadTest, SymlinksToDevicesAreNotFollowed) {
  TempDir dir;
  ASSERT_EQ(::symlink("/dev/zero", (dir.path() + "/ncclscope.controls").c_str()), 0);
  const auto start = std::chrono::steady_clock::now();
  const Settings s = LoadSettings(Env(dir.path()));  // the old reader read /dev/zero forever
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_TRUE(HasWarning(s, "not a regular file"));
  EXPECT_EQ(s.lanes, Settings{}.lanes);
}

TEST(PluginControlsReadTest, HugeFilesAreNotRead) {
  TempDir dir;
  std::string big = "lanes=2\n" + std::string(10 << 20, '#');
  ASSERT_EQ(::chmod(dir.WriteFile("ncclscope.controls", big).c_str(), 0644), 0);
  const Settings s = LoadSettings(Env(dir.path()));
  EXPECT_TRUE(HasWarning(s, "larger than"));
  EXPECT_EQ(s.lanes, Settings{}.lanes);
}

TEST(PluginControlsReadTest, FilesOthersCanWriteOrOwnAreIgnored) {
  TempDir dir;
  const std::string path = dir.WriteFile("ncclscope.controls", "lanes=2\n");
  ASSERT_EQ(::chmod(path.c_str(), 0666), 0);
  Settings s = LoadSettings(Env(dir.path()));
  EXPECT_TRUE(HasWarning(s, "writable by others"));
  EXPECT_EQ(s.lanes, Settings{}.lanes);
  if (::geteuid() != 0) GTEST_SKIP() << "the owner check needs root (chown)";
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  ASSERT_EQ(::chown(path.c_str(), 65534, 65534), 0);  // a pod running as nobody wrote it
  s = LoadSettings(Env(dir.path()));
  EXPECT_TRUE(HasWarning(s, "owned by uid 65534"));
  EXPECT_EQ(s.lanes, Settings{}.lanes);
}

}  // namespace
}  // namespace ncclscope::testing
