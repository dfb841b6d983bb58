// /proc parsing (maps, stat) and opening files confined to another process's root.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/ebpf/proc/maps.h"
#include "agent/ebpf/proc/root_path.h"
#include "tests/support/temp_dir.h"

namespace ncclscope::ebpf::proc {
namespace {

using testing::TempDir;

TEST(MapsTest, ParsesPathsWithSpacesDeletedFilesAndSkipsGarbage) {
  const std::string text =
      "7f1c00000000-7f1c00021000 r--p 00000000 fd:01 1048602                    "
      "/usr/local/cuda/lib/libnccl.so.2\n"
      "7f1c00021000-7f1c0a000000 r-xp 00021000 fd:01 1048602                    "
      "/usr/local/cuda/lib/libnccl.so.2\n"
      "55d0c0000000-55d0c0001000 r-xp 00000000 00:2a 77 /opt/my app/lib nccl.so (deleted)\n"
      "7ffd1000-7ffd2000 rw-p 00000000 00:00 0                          [stack]\n"
      "7f00-7e00 r-xp 00000000 00:00 0 /backwards\n"
      "this is not a maps line\n"
      "7f1c-7f1d r-xp zz 00:00 0 /bad/offset\n"
      "\n"
      "7f2000000000-7f2000001000 r-xp 00000000 00:00 0\n";
  std::size_t bad = 0;
  const auto maps = ParseMaps(text, &bad);
  ASSERT_EQ(maps.size(), 5u);
  EXPECT_EQ(bad, 3u);
  EXPECT_FALSE(maps[0].executable);
  EXPECT_TRUE(maps[1].executable);
  EXPECT_EQ(maps[1].start, 0x7f1c00021000u);
  EXPECT_EQ(maps[1].offset, 0x21000u);
  EXPECT_EQ(maps[1].dev_major, 0xfdu);
  EXPECT_EQ(maps[1].dev_minor, 1u);
  EXPECT_EQ(maps[1].inode, 1048602u);
  EXPECT_EQ(maps[1].path, "/usr/local/cuda/lib/libnccl.so.2");
  EXPECT_EQ(maps[2].path, "/opt/my app/lib nccl.so");
  EXPECT_TRUE(maps[2].deleted);
  EXPECT_EQ(maps[2].dev_minor, 0x2au);
  EXPECT_EQ(maps[3].path, "[stack]");
  EXPECT_EQ(maps[4].path, "");
}

TEST(MapsTest, StartTicksSurvivesHostileCommandNames) {
  const std::string fields = " S 1 1 1 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 987654 1000 10";
  EXPECT_EQ(ParseStartTicks("42 (python3)" + fields), 987654u);
  EXPECT_EQ(ParseStartTicks("42 (a) b) (c d)" + fields), 987654u);
  EXPECT_EQ(ParseStartTicks("42 (x) S 1 2"), std::nullopt);
  EXPECT_EQ(ParseStartTicks("no parenthesis at all"), std::nullopt);
  const auto self = StartTicks("/proc", getpid());
  ASSERT_TRUE(self.has_value());
  EXPECT_GT(*self, 0u);
  EXPECT_EQ(StartTicks("/proc", -5), std::nullopt);
}

TEST(RootPathTest, SymlinksResolveInsideTheRootAndMagicLinksAreRefused) {
  TempDir outside;
  const std::string secret = outside.WriteFile("secret.so", "outside the container");
  TempDir root;
  ASSERT_EQ(mkdir((root.path() + "/lib").c_str(), 0755), 0);
  root.WriteFile("lib/libnccl.so.2", "inside the container");
  // Absolute and escaping relative links, as a hostile image could contain.
  ASSERT_EQ(symlink("/lib/libnccl.so.2", (root.path() + "/abs.so").c_str()), 0);
  ASSERT_EQ(symlink(secret.c_str(), (root.path() + "/escape.so").c_str()), 0);
  ASSERT_EQ(symlink("../../../../../../lib/libnccl.so.2", (root.path() + "/dots.so").c_str()), 0);
  ASSERT_EQ(symlink("/proc/self/exe", (root.path() + "/magic.so").c_str()), 0);

  std::string error;
  auto read = [&](const std::string& path) -> std::string {
    OpenedFile f = OpenInRoot(root.path(), path, &error);
    if (!f.fd.valid()) return "<" + error + ">";
    char buffer[64] = {};
    return std::string(buffer, static_cast<std::size_t>(pread(f.fd.get(), buffer, 63, 0)));
  };
  EXPECT_EQ(read("/lib/libnccl.so.2"), "inside the container");
  EXPECT_EQ(read("/abs.so"), "inside the container");
  EXPECT_EQ(read("/dots.so"), "inside the container");
  EXPECT_EQ(read("/../../lib/libnccl.so.2"), "inside the container");
  // The secret's absolute path, taken inside the root, does not exist there.
  EXPECT_NE(read("/escape.so"), "outside the container");
  EXPECT_NE(read("/magic.so").find("<cannot open"), std::string::npos);
  EXPECT_EQ(read("/lib"), "<not a regular file>");
  EXPECT_EQ(read("relative"), "<not an absolute path>");
}

TEST(MapsTest, SelfPidIsThisProcessAndAbsentInATreeWithoutSelf) {
  EXPECT_EQ(SelfPid("/proc"), getpid());
  EXPECT_EQ(SelfPid("/nonexistent"), std::nullopt);
}

TEST(RootPathTest, MappedFileOfThisProcess) {
  const auto maps = ParseMaps(*ReadProcFile("/proc/self/maps"));
  for (const Mapping& m : maps) {
    if (!m.executable || m.path.empty() || m.path[0] != '/') continue;
    std::string error;
    OpenedFile f = OpenMappedFile("/proc", getpid(), m.start, m.end, &error);
    if (getuid() != 0 && !f.fd.valid()) GTEST_SKIP() << "map_files needs CAP_SYS_ADMIN: " << error;
    ASSERT_TRUE(f.fd.valid()) << error;
    EXPECT_EQ(f.st.st_ino, m.inode);
    return;
  }
  FAIL() << "no executable file mapping in /proc/self/maps";
}

}  // namespace
}  // namespace ncclscope::ebpf::proc
