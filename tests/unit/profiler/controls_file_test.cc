// <ring_dir>/ncclscope.controls against a pod that can write ring_dir: the agent (root) writes it
// without ever opening a name the pod chose, and puts it back when the pod changes it.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/profiler/ring_directory.h"
#include "tests/support/temp_dir.h"

namespace ncclscope::testing {
namespace {

struct Discard : profiler::RecordSink {
  void OnCommInit(const profiler::RingOrigin&, const ncclscope_comm_init_record&) override {}
  void OnCommFinalize(const profiler::RingOrigin&, const ncclscope_comm_finalize_record&) override {
  }
  void OnOp(const profiler::RingOrigin&, const profiler::OpView&) override {}
  void OnProxyOp(const profiler::RingOrigin&, const ncclscope_proxy_op_record&) override {}
};

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 ? st.st_mode : 0;
}

TEST(ControlsFileTest, PlantedSymlinksAreNeverFollowed) {
  // The old writer opened "ncclscope.controls.tmp.<pid>" with O_CREAT | O_TRUNC and fchmod'ed it:
  // a symlink planted there made the root agent truncate, rewrite and chmod its target.
  TempDir ring_dir;
  TempDir victim_dir;
  const std::string victim = victim_dir.WriteFile("shadow", "root:secret\n");
  ASSERT_EQ(::chmod(victim.c_str(), 0600), 0);
  const std::string planted =
      ring_dir.path() + "/ncclscope.controls.tmp." + std::to_string(::getpid());
  ASSERT_EQ(::symlink(victim.c_str(), planted.c_str()), 0);
  ASSERT_EQ(::symlink(victim.c_str(), (ring_dir.path() + "/ncclscope.controls").c_str()), 0);

  std::string error;
  ASSERT_TRUE(profiler::WriteControlsFile(ring_dir.path(), "events=coll\n", &error)) << error;
  EXPECT_EQ(ReadFile(victim), "root:secret\n");
  EXPECT_EQ(ModeOf(victim) & 07777, 0600u);
  // The symlink at the final name was replaced by our file, not written through.
  const std::string controls = ring_dir.path() + "/ncclscope.controls";
  EXPECT_TRUE(S_ISREG(ModeOf(controls)));
  EXPECT_EQ(ModeOf(controls) & 07777, 0644u);
  EXPECT_EQ(ReadFile(controls), "events=coll\n");
}

TEST(ControlsFileTest, ARewrittenControlsFileIsRepaired) {
  TempDir ring_dir;
  const std::string controls = ring_dir.path() + "/ncclscope.controls";
  profiler::RingDirectory directory(ring_dir.path());
  directory.SetControlsFileText("events=coll\nmin_bytes=0\n");
  Discard sink;
  directory.Poll(sink);
  ASSERT_EQ(ReadFile(controls), "events=coll\nmin_bytes=0\n");
  EXPECT_EQ(directory.snapshot().controls_file_repairs, 0u);

  // A pod rewrites it in place, replaces it with a symlink, a FIFO, removes it.
  {
    const int fd = ::open(controls.c_str(), O_WRONLY | O_TRUNC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, "ring_size=1GiB\n", 15), 15);
    ::close(fd);
  }
  directory.Poll(sink);
  EXPECT_EQ(ReadFile(controls), "events=coll\nmin_bytes=0\n");
  EXPECT_EQ(directory.snapshot().controls_file_repairs, 1u);

  ASSERT_EQ(::unlink(controls.c_str()), 0);
  ASSERT_EQ(::symlink("/dev/zero", controls.c_str()), 0);
  directory.Poll(sink);
  EXPECT_TRUE(S_ISREG(ModeOf(controls)));
  EXPECT_EQ(directory.snapshot().controls_file_repairs, 2u);

  ASSERT_EQ(::unlink(controls.c_str()), 0);
  ASSERT_EQ(::mkfifo(controls.c_str(), 0666), 0);
  directory.Poll(sink);
  EXPECT_TRUE(S_ISREG(ModeOf(controls)));
  EXPECT_EQ(ReadFile(controls), "events=coll\nmin_bytes=0\n");

  ASSERT_EQ(::unlink(controls.c_str()), 0);
  directory.Poll(sink);
  EXPECT_EQ(ReadFile(controls), "events=coll\nmin_bytes=0\n");
  EXPECT_EQ(directory.snapshot().controls_file_repairs, 4u);

  // Left alone, it is left alone.
  directory.Poll(sink);
  directory.Poll(sink);
  EXPECT_EQ(directory.snapshot().controls_file_repairs, 4u);
}

}  // namespace
}  // namespace ncclscope::testing
