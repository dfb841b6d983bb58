// The host process behind a ring: /proc/locks and /proc/<pid>/status as the kernel writes them,
// then the real /proc with real flocks: this process, a "container" (a child that is pid 1 of its
// own pid namespace, as a job in a pod is), two containers whose writers are both pid 1, and
// thread ids mapped to their process.

#include "agent/profiler/ring_owner.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <thread>

#include "tests/support/temp_dir.h"

namespace ncclscope::profiler {
namespace {

TEST(RingOwnerTest, ParsesFlockHoldersOfProcLocks) {
  // fs/locks.c lock_get_status, with a waiter ("->"), POSIX, OFD and lease lines around.
  const std::string text =
      "1: POSIX  ADVISORY  WRITE 812 00:19:1437 0 EOF\n"
      "2: FLOCK  ADVISORY  READ 4242 fe:00:10953155 0 EOF\n"
      "2: -> FLOCK  ADVISORY  WRITE 99 fe:00:10953155 0 EOF\n"
      "3: OFDLCK ADVISORY  READ -1 00:05:12 0 EOF\n"
      "4: FLOCK  ADVISORY  WRITE 17 103:0a:7 0 EOF\n"
      "5: LEASE  ACTIVE    READ 300 00:19:55 0 EOF\n"
      "6: FLOCK  ADVISORY  READ 0 fe:00:1 0 EOF\n"            // owner not visible
      "7: FLOCK  ADVISORY  READ 12 zz:00:1 0 EOF\n"           // garbage
      "8: FLOCK  ADVISORY  READ 99999999999 fe:00:1 0 EOF\n"  // overflows a pid
      "9: FLOCK  ADVISORY  READ 13 fe:00\n"                   // truncated
      "10: FLOCK  ADVISORY  READ 4243 fe:00:10953155 0 EOF";  // last line, no \n
  const std::vector<FlockHolder> holders = ParseProcLocks(text);
  ASSERT_EQ(holders.size(), 3u);
  EXPECT_EQ(holders[0].pid, 4242);
  EXPECT_EQ(holders[0].major, 0xfeu);
  EXPECT_EQ(holders[0].minor, 0u);
  EXPECT_EQ(holders[0].inode, 10953155u);
  EXPECT_EQ(holders[1].pid, 17);
  EXPECT_EQ(holders[1].major, 0x103u);
  EXPECT_EQ(holders[1].minor, 0x0au);
  EXPECT_EQ(holders[2].pid, 4243);
  EXPECT_TRUE(ParseProcLocks("").empty());
  EXPECT_TRUE(ParseProcLocks(std::string(100000, ':')).empty());
}

TEST(RingOwnerTest, ReadsStatusFields) {
  const std::string status =
      "Name:\tpt_main_thread\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t31337\nNgid:\t0\n"
      "Pid:\t31340\nPPid:\t1\nNSpid:\t31340\t58\t7\nNSpgid:\t31337\t55\t1\n";
  EXPECT_EQ(StatusField(status, "Tgid"), 31337);
  EXPECT_EQ(StatusField(status, "Pid"), 31340);
  EXPECT_EQ(StatusField(status, "Tgi"), std::nullopt);  // whole names only
  EXPECT_EQ(StatusField(status, "Name"), std::nullopt);
  EXPECT_EQ(InnermostPid(status), 7);
  EXPECT_EQ(InnermostPid("NSpid:\t12\n"), 12);
  EXPECT_EQ(InnermostPid("Pid:\t12\n"), std::nullopt);
  EXPECT_EQ(InnermostPid("NSpid:\n"), std::nullopt);
}

// A file holding a shared flock for as long as it lives, as the plugin holds its ring.
class LockedFile {
 public:
  explicit LockedFile(const std::string& path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    locked_ = fd_ >= 0 && ::flock(fd_, LOCK_SH | LOCK_NB) == 0;
  }
  ~LockedFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  LockedFile(const LockedFile&) = delete;
  LockedFile& operator=(const LockedFile&) = delete;
  bool locked() const { return locked_; }

 private:
  int fd_ = -1;
  bool locked_ = false;
};

RingOrigin Origin(const std::string& ring, std::int32_t pid) {
  RingOrigin o;
  o.ring = ring;
  o.pid = pid;
  return o;
}

TEST(RingOwnerTest, FindsThisProcessAsTheHolderOfItsRing) {
  testing::TempDir dir;
  const std::string name = "ncclscope-" + std::to_string(::getpid()) + "-1.ring";
  LockedFile ring(dir.path() + "/" + name);
  ASSERT_TRUE(ring.locked());
  ProcRingOwners owners(dir.path(), "/proc");
  const RingOwner owner = owners.OwnerOf(Origin(name, ::getpid()));
  EXPECT_EQ(owner.status, OwnerStatus::kOk);
  EXPECT_EQ(owner.pid, ::getpid());
  // The header's pid must be the holder's own: a ring claiming another pid has no owner.
  EXPECT_EQ(owners.OwnerOf(Origin(name, ::getpid() + 1)).status, OwnerStatus::kUnknown);
  // Nobody holds this one; this one does not exist; these are no plain names.
  dir.WriteFile("ncclscope-1-2.ring", "x");
  EXPECT_EQ(owners.OwnerOf(Origin("ncclscope-1-2.ring", ::getpid())).status, OwnerStatus::kUnknown);
  EXPECT_EQ(owners.OwnerOf(Origin("ncclscope-9-9.ring", ::getpid())).status, OwnerStatus::kUnknown);
  for (const char* bad : {"../"
                          "x",
                          "a/b", "..", ""}) {
    EXPECT_EQ(owners.OwnerOf(Origin(bad, ::getpid())).status, OwnerStatus::kUnknown);
  }
  ProcRingOwners no_proc(dir.path(), dir.path() + "/no-proc");
  EXPECT_EQ(no_proc.OwnerOf(Origin(name, ::getpid())).status, OwnerStatus::kUnknown);
}

// A process that is pid 1 of a new pid namespace (as a job's main process in a pod), holding a
// shared flock on `path` until released.
class Container {
 public:
  explicit Container(const std::string& path) {
    int ready[2];
    int release[2];
    if (::pipe2(ready, O_CLOEXEC) != 0 || ::pipe2(release, O_CLOEXEC) != 0) return;
    const pid_t intermediate = ::fork();
    if (intermediate == 0) {
      ::close(ready[0]);
      ::close(release[1]);
      std::int32_t report = 0;
      if (::unshare(CLONE_NEWPID) != 0) {
        report = -errno;
        (void)!::write(ready[1], &report, sizeof(report));
        ::_exit(1);
      }
      const pid_t inner = ::fork();  // pid 1 of the new namespace
      if (inner == 0) {
        const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
        std::int32_t ok = fd >= 0 && ::flock(fd, LOCK_SH | LOCK_NB) == 0 ? ::getpid() : 0;
        (void)!::write(ready[1], &ok, sizeof(ok));
        char c;
        (void)!::read(release[0], &c, 1);  // until released (or the test dies: EOF)
        ::_exit(0);
      }
      report = inner;  // its pid here, in the host's namespace
      (void)!::write(ready[1], &report, sizeof(report));
      int status = 0;
      ::waitpid(inner, &status, 0);
      ::_exit(0);
    }
    ::close(ready[1]);
    ::close(release[0]);
    release_ = release[1];
    intermediate_ = intermediate;
    std::int32_t first = 0;
    std::int32_t second = 0;
    if (::read(ready[0], &first, sizeof(first)) != sizeof(first)) first = 0;
    if (first < 0) {
      error_ = -first;
    } else if (::read(ready[0], &second, sizeof(second)) == sizeof(second)) {
      // The two reports may come in either order: the inner pid (1) and the host pid.
      inner_pid_ = first == 1 || second == 1 ? 1 : 0;
      host_pid_ = first == 1 ? second : first;
    }
    ::close(ready[0]);
  }
  ~Container() {
    if (release_ >= 0) ::close(release_);  // EOF releases the inner process
    if (intermediate_ > 0) ::waitpid(intermediate_, nullptr, 0);
  }
  Container(const Container&) = delete;
  Container& operator=(const Container&) = delete;

  int error() const { return error_; }
  std::int32_t inner_pid() const { return inner_pid_; }
  std::int32_t host_pid() const { return host_pid_; }

 private:
  int release_ = -1;
  pid_t intermediate_ = -1;
  int error_ = 0;
  std::int32_t inner_pid_ = 0;
  std::int32_t host_pid_ = 0;
};

TEST(RingOwnerTest, FindsTheHostPidOfAWriterInItsOwnPidNamespace) {
  testing::TempDir dir;
  const std::string name = "ncclscope-1-123.ring";  // pid 1, as the header says
  dir.WriteFile(name, "ring");
  Container job(dir.path() + "/" + name);
  if (job.error() == EPERM || job.error() == EINVAL) {
    GTEST_SKIP() << "no pid namespaces here (unshare: " << job.error() << ")";
  }
  ASSERT_EQ(job.error(), 0);
  ASSERT_EQ(job.inner_pid(), 1);
  ASSERT_GT(job.host_pid(), 1);
  ProcRingOwners owners(dir.path(), "/proc");
  const RingOwner owner = owners.OwnerOf(Origin(name, 1));
  EXPECT_EQ(owner.status, OwnerStatus::kOk);
  EXPECT_EQ(owner.pid, job.host_pid());

  // A second "container" whose writer is pid 1 too, holding the same file (a hostile pod
  // locking another job's ring): no way to tell which wrote it.
  Container other(dir.path() + "/" + name);
  ASSERT_EQ(other.error(), 0);
  EXPECT_EQ(owners.OwnerOf(Origin(name, 1)).status, OwnerStatus::kAmbiguous);
}

TEST(RingOwnerTest, ThreadsMapToTheirProcess) {
  ProcRingOwners owners("/nonexistent", "/proc");
  std::atomic<pid_t> tid{0};
  std::atomic<bool> done{false};
  std::thread thread([&] {
    tid = ::gettid();
    while (!done) std::this_thread::yield();
  });
  while (tid == 0) std::this_thread::yield();
  EXPECT_NE(tid.load(), ::getpid());
  EXPECT_EQ(owners.ThreadGroupOf(tid), ::getpid());  // the proxy thread that made a QP
  EXPECT_EQ(owners.ThreadGroupOf(::getpid()), ::getpid());
  done = true;
  thread.join();
  EXPECT_EQ(owners.ThreadGroupOf(0), std::nullopt);
  EXPECT_EQ(owners.ThreadGroupOf(0x7ffffff0), std::nullopt);  // beyond any pid_max
}

}  // namespace
}  // namespace ncclscope::profiler
