// The plugin never breaks the job in the conditions of the job's own container (issue #41): the
// real libnccl-profiler-ncclscope.so, loaded as NCCL loads it (dlopen RTLD_NOW, ncclProfiler_vN,
// tools/replay), with a ring directory that is missing, read-only or full, a tiny /dev/shm, a
// fork after init (without and with exec), the library closed and opened again, and 10,000
// communicators over a job's life. In each, init returns success (NCCL 2.29+ unloads a plugin whose
// init fails: src/plugin/profiler.cc:223-227 at v2.30.3-1), every call returns, and what the
// plugin could not record is counted where there is a ring to count it in.
//
// Each scenario runs in a child process of its own: the plugin reads its settings once per process
// (at its first init) and is never unloaded (-z nodelete), so a scenario needs a fresh process, and
// one whose mounts (a private mount namespace: tmpfs, read-only) vanish with it. The test process
// itself never loads the plugin. Scenarios that mount skip, saying why, when the process is not
// root or may not make a mount namespace.

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/profiler/ring_file.h"
#include "platform/clock.h"
#include "plugin/abi/nccl_profiler_abi.h"
#include "plugin/ring/ncclscope_ring.h"
#include "tests/support/plugin_environment.h"
#include "tests/support/ring_records.h"
#include "tests/support/temp_dir.h"
#include "tools/replay/nccl_replay.h"

#if defined(__SANITIZE_ADDRESS__)
#define NCCLSCOPE_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NCCLSCOPE_TEST_ASAN 1
#endif
#endif
#ifdef NCCLSCOPE_TEST_ASAN
#include <sanitizer/lsan_interface.h>
// ASan's allocator statistics (sanitizer/allocator_interface.h, which GCC 12 does not install).
extern "C" std::size_t __sanitizer_get_current_allocated_bytes();
#endif

namespace ncclscope::testing {
namespace {

using replay::CollSpec;
using replay::ProfilerPlugin;
using replay::ReplayComm;
using replay::ReplayProcess;

constexpr int kAbi = 6;  // NCCL 2.29/2.30, the newest released NCCL's choice
constexpr const char* kExecChildVariable = "NCCLSCOPE_FAILURE_MODES_EXEC_CHILD";

// ---- Processes ----

// Exit codes of a scenario's child.
constexpr int kChildFailed = 1;
constexpr int kChildLeaked = 3;

// Runs `body` in a forked child and returns its wait status. The child exits with the failures of
// its gtest assertions, and (under ASan) after LeakSanitizer found no leak.
int RunInChild(const std::function<void()>& body) {
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    body();
    int code = ::testing::Test::HasFailure() ? kChildFailed : 0;
#ifdef NCCLSCOPE_TEST_ASAN
    if (code == 0 && __lsan_do_recoverable_leak_check() != 0) code = kChildLeaked;
#endif
    std::fflush(stdout);
    std::fflush(stderr);
    ::_exit(code);
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid) return -1;
  return status;
}

std::string Describe(int status) {
  if (status == -1) return "fork/wait failed";
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  if (WIFEXITED(status)) {
    switch (WEXITSTATUS(status)) {
      case 0:
        return "ok";
      case kChildFailed:
        return "assertions failed, or a sanitizer report (above)";
      case kChildLeaked:
        return "LeakSanitizer found leaks (above)";
      default:
        return "exit " + std::to_string(WEXITSTATUS(status));
    }
  }
  return "status " + std::to_string(status);
}

#define EXPECT_CHILD_OK(body)                  \
  do {                                         \
    const int child_status = RunInChild(body); \
    EXPECT_EQ(Describe(child_status), "ok");   \
  } while (0)

// In a child: a mount namespace of our own, so what it mounts is gone when it exits and no other
// process on the machine sees it. False when not permitted (not root, or no CAP_SYS_ADMIN).
bool PrivateMounts() {
  return ::unshare(CLONE_NEWNS) == 0 &&
         ::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0;
}

bool MountTmpfs(const std::string& at, const char* options, unsigned long flags = 0) {
  return ::mount("tmpfs", at.c_str(), "tmpfs", flags, options) == 0;
}

// Why mount scenarios cannot run here ("" when they can): tried in a child.
std::string MountUnavailable() {
  if (::geteuid() != 0) return "needs root (mounts a tmpfs in a private mount namespace)";
  const TempDir dir;
  const int status = RunInChild([&] {
    if (!PrivateMounts() || !MountTmpfs(dir.path(), "size=64k")) ::_exit(2);
  });
  if (status != 0) return "cannot make a mount namespace and mount a tmpfs here";
  return "";
}

// ---- The plugin, as NCCL drives it ----

// The agent's reader, keeping which process's ring each op came from.
class OriginRecords : public RingRecords {
 public:
  using RingRecords::RingRecords;
  void OnOp(const profiler::RingOrigin& origin, const profiler::OpView& op) override {
    RingRecords::OnOp(origin, op);
    op_pids.push_back(origin.pid);
  }
  std::vector<std::int32_t> op_pids;  // per entry of ops
};

// The ring header's comm_slots_used: the comm table slots the plugin ever took.
std::uint32_t CommSlotsUsed(const std::string& ring) {
  ncclscope_ring_header header{};
  const int fd = ::open(ring.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  const bool ok = ::pread(fd, &header, sizeof(header), 0) == static_cast<ssize_t>(sizeof(header));
  ::close(fd);
  return ok ? std::atomic_ref<std::uint32_t>(header.comm_slots_used).load() : 0;
}

// The settings every scenario starts from (in the child, before the plugin's first init).
void SetUpEnvironment(const std::string& ring_dir) {
  SetPluginEnvironment(ring_dir, {{"OVERHEAD_BUDGET", "0"}});
}

std::uint64_t CommId(std::uint64_t n) { return 0xFA11000000000000ull + n; }

// Entries of `dir` (without . and ..); empty when it does not exist.
std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    ::closedir(d);
  }
  return names;
}

std::vector<std::string> Rings(const std::string& dir) {
  std::vector<std::string> rings;
  for (const std::string& name : Entries(dir)) {
    if (name.size() > 5 && name.compare(name.size() - 5, 5, ".ring") == 0) {
      rings.push_back(dir + "/");
      rings.back() += name;
    }
  }
  return rings;
}

// NCCL's side of a job on a plugin that cannot record: init returns success with no context and
// the process-global mask at 0, so NCCL raises no event (every API call copies the mask into its
// tasks, src/plugin/profiler.cc:252 at v2.30.3-1, and every event is gated by that copy); the
// job's ops still "run". Through every table, v1 (NCCL 2.23) to v7: NCCL 2.23-2.27 call finalize
// even for a NULL context (src/plugin/profiler.cc:182-184 at v2.27.7-1).
// `after_load` runs once the library is loaded, before its first init.
void ExpectInitOptsOut(const std::string& ring_dir,
                       const std::function<void()>& after_load = nullptr) {
  SetUpEnvironment(ring_dir);
  const ProfilerPlugin plugin(NCCLSCOPE_PLUGIN_PATH);
  ASSERT_TRUE(plugin.ok()) << plugin.error();
  if (after_load) after_load();
  if (::testing::Test::HasFatalFailure()) return;
  for (int version = 1; version <= 7; ++version) {
    int* mask = ReplayProcess::mask();
    __atomic_store_n(mask, -1, __ATOMIC_RELAXED);
    void* context = &context;  // must be overwritten
    EXPECT_EQ(plugin.Init(version, &context, CommId(1), mask, "opted-out", 1, 2, 0), 0);
    EXPECT_EQ(context, nullptr);
    EXPECT_EQ(__atomic_load_n(mask, __ATOMIC_RELAXED), 0) << "NCCL would still raise events";
    EXPECT_EQ(plugin.Finalize(version, nullptr), 0);
    ReplayProcess process(plugin, version);
    ReplayComm comm(process, CommId(2), "job", 1, 2, 0, nullptr);
    EXPECT_FALSE(comm.Init());  // success, without a context
    CollSpec spec;
    for (std::uint64_t seq = 0; seq < 100; ++seq) comm.Collective(spec, seq);
    comm.P2pGroup({replay::P2pSpec{}});
    comm.Finalize();
  }
}

// ---- a) The ring directory missing, read-only or full ----

// A missing directory whose parent exists is created (mode 01777, like /tmp), and recorded into.
TEST(FailureModesRingDirectoryTest, MissingIsCreatedWorldWritableAndSticky) {
  const TempDir parent;
  const std::string dir = parent.path() + "/ncclscope";
  EXPECT_CHILD_OK([&] {
    SetUpEnvironment(dir);
    const ProfilerPlugin plugin(NCCLSCOPE_PLUGIN_PATH);
    ASSERT_TRUE(plugin.ok()) << plugin.error();
    ReplayProcess process(plugin, kAbi);
    ReplayComm comm(process, CommId(1), "job", 1, 2, 0, nullptr);
    ASSERT_TRUE(comm.Init());
    comm.Collective(CollSpec{}, 0);
    comm.Finalize();
    struct stat st {};
    ASSERT_EQ(::stat(dir.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 01777u);
    RingRecords records(dir);
    EXPECT_TRUE(records.PollUntil([&] { return records.CountOps(CommId(1)) == 1; }));
  });
}

// Not creatable (its parent is missing): init succeeds, the job runs without profiler events, and
// nothing is written anywhere.
TEST(FailureModesRingDirectoryTest, UncreatableLeavesTheJobWithoutEvents) {
  const TempDir parent;
  const std::string dir = parent.path() + "/missing/ncclscope";
  EXPECT_CHILD_OK([&] { ExpectInitOptsOut(dir); });
  EXPECT_TRUE(Entries(parent.path()).empty());
}

// Not writable by the job's user (an agent that made the directory without mode 01777, a job
// that runs as another user): the same. As root, the child drops to nobody once the library is
// loaded (so the build tree need not be readable by nobody).
TEST(FailureModesRingDirectoryTest, NotWritableByTheJobsUserLeavesTheJobWithoutEvents) {
  const TempDir dir;  // mode 0700, owned by this test's user
  EXPECT_CHILD_OK([&] {
    if (::geteuid() != 0) {
      ASSERT_EQ(::chmod(dir.path().c_str(), 0555), 0);
      ExpectInitOptsOut(dir.path());
      return;
    }
    ExpectInitOptsOut(dir.path(), [] {
      ASSERT_EQ(::setresgid(65534, 65534, 65534), 0) << "errno " << errno;
      ASSERT_EQ(::setresuid(65534, 65534, 65534), 0) << "errno " << errno;
      ::prctl(PR_SET_DUMPABLE, 1);  // LeakSanitizer attaches to this process
    });
  });
  ::chmod(dir.path().c_str(), 0700);
  EXPECT_TRUE(Entries(dir.path()).empty());
}

// A read-only mount (root's write permission does not help there): the same.
TEST(FailureModesRingDirectoryTest, ReadOnlyLeavesTheJobWithoutEvents) {
  if (const std::string why = MountUnavailable(); !why.empty()) GTEST_SKIP() << why;
  const TempDir dir;
  EXPECT_CHILD_OK([&] {
    ASSERT_TRUE(PrivateMounts());
    ASSERT_TRUE(MountTmpfs(dir.path(), "size=1m", MS_RDONLY));
    ExpectInitOptsOut(dir.path());
    EXPECT_TRUE(Entries(dir.path()).empty());
  });
}

// A full file system: posix_fallocate fails (ENOSPC) before the ring is mapped, so a full tmpfs is
// never a SIGBUS at a later first touch; the half-made file is removed (it would hold the space).
TEST(FailureModesRingDirectoryTest, FullLeavesTheJobWithoutEventsAndNoFileBehind) {
  if (const std::string why = MountUnavailable(); !why.empty()) GTEST_SKIP() << why;
  const TempDir dir;
  EXPECT_CHILD_OK([&] {
    ASSERT_TRUE(PrivateMounts());
    ASSERT_TRUE(MountTmpfs(dir.path(), "size=256k"));
    // Most of it taken by someone else; the default ring (8 MiB of records) cannot fit.
    const std::string filler = dir.path() + "/other";
    const int fd = ::open(filler.c_str(), O_WRONLY | O_CREAT, 0600);
    ASSERT_GE(fd, 0);
    EXPECT_EQ(::posix_fallocate(fd, 0, 200 << 10), 0);
    ::close(fd);
    ExpectInitOptsOut(dir.path());
    EXPECT_EQ(Entries(dir.path()), std::vector<std::string>{"other"});
  });
}

// The file system filling up after the ring was made: the ring's pages were reserved when it was
// created, so writing every one of them later (the ring wraps several times) is no SIGBUS.
TEST(FailureModesRingDirectoryTest, FillingUpAfterTheRingWasMadeIsNoSigbus) {
  if (const std::string why = MountUnavailable(); !why.empty()) GTEST_SKIP() << why;
  constexpr std::uint64_t kOps = 12'000;  // about three laps of a 1 MiB ring
  const TempDir dir;
  EXPECT_CHILD_OK([&] {
    ASSERT_TRUE(PrivateMounts());
    ASSERT_TRUE(MountTmpfs(dir.path(), "size=8m"));
    SetUpEnvironment(dir.path());
    setenv("NCCLSCOPE_RING_SIZE", "1MiB", 1);  // NOLINT(concurrency-mt-unsafe)
    setenv("NCCLSCOPE_RING_LANES", "1", 1);    // NOLINT(concurrency-mt-unsafe)
    const ProfilerPlugin plugin(NCCLSCOPE_PLUGIN_PATH);
    ASSERT_TRUE(plugin.ok()) << plugin.error();
    ReplayProcess process(plugin, kAbi);
    ReplayComm comm(process, CommId(1), "job", 1, 2, 0, nullptr);
    ASSERT_TRUE(comm.Init());
    // Someone else takes every byte left.
    const int fd = ::open((dir.path() + "/other").c_str(), O_WRONLY | O_CREAT, 0600);
    ASSERT_GE(fd, 0);
    static char chunk[64 << 10];
    while (::write(fd, chunk, sizeof(chunk)) > 0) {
    }
    EXPECT_EQ(errno, ENOSPC);
    ::close(fd);
    RingRecords records(dir.path());
    CollSpec spec;
    spec.channels = 2;
    replay::ProxyPlan no_network;
    no_network.enabled = false;
    for (std::uint64_t seq = 0; seq < kOps; ++seq) {
      comm.Collective(spec, seq, {}, no_network);
      if (seq % 1000 == 999) records.Poll();  // the agent drains
    }
    comm.Finalize();
    records.Poll();
    EXPECT_EQ(records.CountOps(CommId(1)), kOps);
    EXPECT_EQ(records.snapshot().dropped_ring_full, 0u);
  });
}

// ---- b) A tiny /dev/shm ----

// The plugin needs nothing from /dev/shm (its ring is a file in its ring directory, NCCL's own SHM
// transport is NCCL's business): with /dev/shm 64 KiB and full, it records as usual. With the ring
// directory on that /dev/shm, it cannot: the job runs without events (as a full directory).
TEST(FailureModesDevShmTest, TinyAndFullChangesNothing) {
  if (const std::string why = MountUnavailable(); !why.empty()) GTEST_SKIP() << why;
  const TempDir dir;
  EXPECT_CHILD_OK([&] {
    ASSERT_TRUE(PrivateMounts());
    ASSERT_TRUE(MountTmpfs("/dev/shm", "size=64k"));
    const int fd = ::open("/dev/shm/fill", O_WRONLY | O_CREAT, 0600);
    ASSERT_GE(fd, 0);
    EXPECT_NE(::posix_fallocate(fd, 0, 1 << 20), 0);  // 64 KiB: more does not fit
    EXPECT_EQ(::posix_fallocate(fd, 0, 60 << 10), 0);
    ::close(fd);
    SetUpEnvironment(dir.path());
    const ProfilerPlugin plugin(NCCLSCOPE_PLUGIN_PATH);
    ASSERT_TRUE(plugin.ok()) << plugin.error();
    ReplayProcess process(plugin, kAbi);
    ReplayComm comm(process, CommId(1), "job", 1, 2, 0, nullptr);
    ASSERT_TRUE(comm.Init());
    for (std::uint64_t seq = 0; seq < 10; ++seq) comm.Collective(CollSpec{}, seq);
    comm.Finalize();
    RingRecords records(dir.path());
    EXPECT_TRUE(records.PollUntil([&] { return records.CountOps(CommId(1)) == 10; }));
  });
}

TEST(FailureModesDevShmTest, RingDirectoryOnATinyDevShmLeavesTheJobWithoutEvents) {
  if (const std::string why = MountUnavailable(); !why.empty()) GTEST_SKIP() << why;
  EXPECT_CHILD_OK([&] {
    ASSERT_TRUE(PrivateMounts());
    ASSERT_TRUE(MountTmpfs("/dev/shm", "size=64k"));
    ExpectInitOptsOut("/dev/shm/ncclscope");
    // The directory was made; no ring, and no half-made file, in it.
    EXPECT_TRUE(Entries("/dev/shm/ncclscope").empty());
  });
}

// The ring full while the job runs (the agent absent, stopped or slow): records are dropped, never
// waited for, and each one counted; the count table, which needs no room, stays exact.
TEST(FailureModesRingFullTest, AgentAbsentEveryRecordIsDeliveredOrCountedAndCountsStayExact) {
  constexpr std::uint64_t kOps = 2000;
  const TempDir dir;
  EXPECT_CHILD_OK([&] {
    SetUpEnvironment(dir.path());
    setenv("NCCLSCOPE_RING_SIZE", "64KiB", 1);  // NOLINT(concurrency-mt-unsafe): 256 records
    setenv("NCCLSCOPE_RING_LANES", "1", 1);     // NOLINT(concurrency-mt-unsafe)
    const ProfilerPlugin plugin(NCCLSCOPE_PLUGIN_PATH);
    ASSERT_TRUE(plugin.ok()) << plugin.error();
    ReplayProcess process(plugin, kAbi);
    ReplayComm comm(process, CommId(1), "job", 1, 2, 0, nullptr);
    ASSERT_TRUE(comm.Init());
    CollSpec spec;
    spec.channels = 2;
    replay::ProxyPlan no_network;
    no_network.enabled = false;
    for (std::uint64_t seq = 0; seq < kOps; ++seq) comm.Collective(spec, seq, {}, no_network);
    // Read once, after the fact (nothing drained meanwhile): what fitted, and what did not.
    RingRecords records(dir.path());
    records.Poll();
    const std::uint64_t delivered = records.ops.size() + records.inits.size();
    const std::uint64_t dropped =
        records.snapshot().dropped_ring_full +
        records.snapshot().plugin_counters[NCCLSCOPE_CTR_DROPPED_CONTENTION];
    EXPECT_GT(dropped, 0u) << "the ring never filled";
    EXPECT_EQ(delivered + dropped, kOps + 1) << "COMM_INIT and one OP per op";
    EXPECT_EQ(records.CountedOps(CommId(1), 0), kOps);
    // And once drained, the ring takes records again.
    comm.Collective(spec, kOps, {}, no_network);
    comm.Finalize();
    records.Poll();
    EXPECT_EQ(records.CountOps(CommId(1)) + records.inits.size() + dropped, kOps + 2);
    EXPECT_EQ(records.finalizes.size(), 1u);
  });
}

// ---- c) fork() after init ----

// Whether `pid` holds `file` open or mapped (/proc/<pid>/fd, /proc/<pid>/maps).
bool ProcessHolds(pid_t pid, const std::string& file) {
  const std::string fd_dir = "/proc/" + std::to_string(pid) + "/fd";
  for (const std::string& fd : Entries(fd_dir)) {
    char target[4096] = {};
    std::string link = fd_dir + "/";
    link += fd;
    if (::readlink(link.c_str(), target, sizeof(target) - 1) > 0 && file == target) return true;
  }
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find(file) != std::string::npos) return true;
  }
  return false;
}

// Whether a live process holds `ring`'s shared flock (the agent's "owner alive").
bool OwnerAlive(const std::string& ring) {
  const int fd = ::open(ring.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool alive = ::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);
  return alive;
}

struct ForkFixture {
  TempDir dir;
  std::unique_ptr<ProfilerPlugin> plugin;
  std::unique_ptr<ReplayProcess> process;
  std::unique_ptr<ReplayComm> world;
  std::unique_ptr<ReplayComm> comm;
  std::uint64_t seq = 0;
  std::string ring;

  // A process with two live communicators (the second in comm table slot 1) and ops recorded.
  void Start() {
    SetUpEnvironment(dir.path());
    plugin = std::make_unique<ProfilerPlugin>(NCCLSCOPE_PLUGIN_PATH);
    ASSERT_TRUE(plugin->ok()) << plugin->error();
    process = std::make_unique<ReplayProcess>(*plugin, kAbi);
    world = std::make_unique<ReplayComm>(*process, CommId(0), "world", 1, 2, 0, nullptr);
    ASSERT_TRUE(world->Init());
    comm = std::make_unique<ReplayComm>(*process, CommId(1), "parent", 1, 2, 0, nullptr);
    ASSERT_TRUE(comm->Init());
    for (; seq < 5; ++seq) comm->Collective(CollSpec{}, seq);
    const std::vector<std::string> rings = Rings(dir.path());
    ASSERT_EQ(rings.size(), 1u);
    ring = rings[0];
  }
};

// A forked child (PyTorch's DataLoader workers) that never execs: whatever it does with the
// plugin state it inherited, the parent's ring is the parent's. The child calls the plugin on
// inherited handles and contexts (even finalize: a child running the parent's exit handlers) and
// starts a communicator of its own; it holds no descriptor or mapping of the parent's ring, so the
// ring's flock follows the parent alone, and writes nothing into it; its own communicator goes to
// a ring of its own. The parent records on, every op once.
TEST(FailureModesForkTest, ChildWithoutExecLeavesTheParentsRingAlone) {
  EXPECT_CHILD_OK([&] {
    ForkFixture f;
    f.Start();
    if (::testing::Test::HasFatalFailure()) return;
    const replay::EnqueuedOp in_flight = f.comm->StartColl(CollSpec{}, f.seq++);
    f.comm->StopTask(in_flight);  // enqueued; its KernelCh come later, in the parent
    // A child without a ring of its own (a DataLoader worker that runs the parent's exit
    // handlers): the in-flight op's kernels and the communicator's destruction on what it
    // inherited.
    std::fflush(stdout);
    const pid_t worker = ::fork();
    if (worker == 0) {
      const std::uint64_t now = platform::RealtimeNs();
      for (int c = 0; c < in_flight.channels; ++c) {
        f.comm->KernelChannelStop(f.comm->KernelChannelStart(in_flight, c, now), now + 1000);
      }
      f.plugin->Finalize(kAbi, f.comm->context());
      f.plugin->Finalize(kAbi, f.world->context());
      ::_exit(0);
    }
    ASSERT_GT(worker, 0);
    int worker_status = 0;
    ASSERT_EQ(::waitpid(worker, &worker_status, 0), worker);
    EXPECT_EQ(Describe(worker_status), "ok") << "a child without a ring of its own";
    int to_child[2];
    int from_child[2];
    ASSERT_EQ(::pipe(to_child), 0);
    ASSERT_EQ(::pipe(from_child), 0);
    std::fflush(stdout);
    const pid_t child = ::fork();
    if (child == 0) {
      char go = 0;
      (void)::write(from_child[1], "r", 1);  // forked: the parent looks at our descriptors
      (void)::read(to_child[0], &go, 1);
      // A communicator of its own, and so a ring of its own.
      ReplayComm own(*f.process, CommId(2), "child", 1, 2, 1, nullptr);
      const bool ok = own.Init();
      // The inherited communicator and op, as a child that ran the parent's code would: the
      // in-flight op's kernels, another op, and the communicator's destruction.
      const std::uint64_t now = platform::RealtimeNs();
      for (int c = 0; c < in_flight.channels; ++c) {
        f.comm->KernelChannelStop(f.comm->KernelChannelStart(in_flight, c, now), now + 1000);
      }
      f.comm->Collective(CollSpec{}, 1000);
      f.plugin->Finalize(kAbi, f.comm->context());
      own.Collective(CollSpec{}, 0);
      own.Finalize();
      ::_exit(ok ? 0 : 4);
    }
    ASSERT_GT(child, 0);
    char ready = 0;
    ASSERT_EQ(::read(from_child[0], &ready, 1), 1);
    EXPECT_FALSE(ProcessHolds(child, f.ring)) << "the child still holds the parent's ring";
    ASSERT_EQ(::write(to_child[1], "g", 1), 1);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_EQ(Describe(status), "ok");
    EXPECT_TRUE(OwnerAlive(f.ring));

    // The parent goes on: its in-flight op completes here, then more ops, then its finalize.
    const std::uint64_t base = platform::RealtimeNs();
    void* kernel = f.comm->KernelChannelStart(in_flight, 0, base);
    for (int c = 1; c < in_flight.channels; ++c) {
      f.comm->KernelChannelStop(f.comm->KernelChannelStart(in_flight, c, base), base + 1000);
    }
    f.comm->KernelChannelStop(kernel, base + 1000);
    for (int i = 0; i < 5; ++i) f.comm->Collective(CollSpec{}, f.seq++);
    f.comm->Finalize();
    f.world->Finalize();

    OriginRecords records(f.dir.path());
    ASSERT_TRUE(records.PollUntil([&] {
      return records.CountOps(CommId(1)) >= 11 && records.CountOps(CommId(2)) >= 1;
    })) << records.CountOps(CommId(1))
        << " " << records.CountOps(CommId(2));
    records.Poll();
    std::set<std::uint64_t> seqs;
    for (std::size_t i = 0; i < records.ops.size(); ++i) {
      const ncclscope_op_record& op = records.ops[i].op;
      if (op.comm_id == CommId(2)) {
        EXPECT_EQ(records.op_pids[i], child);
      }
      if (op.comm_id != CommId(1)) continue;
      EXPECT_EQ(records.op_pids[i], ::getpid())
          << "the parent's op " << op.seq << " from " << records.op_pids[i];
      EXPECT_TRUE(seqs.insert(op.seq).second) << "seq " << op.seq << " twice";
      EXPECT_EQ(op.flags & NCCLSCOPE_OP_FLUSHED, 0u) << "seq " << op.seq;
    }
    EXPECT_EQ(seqs.size(), 11u);
    std::size_t parent_finalizes = 0;
    for (const auto& fin : records.finalizes) parent_finalizes += fin.comm_id == CommId(1);
    EXPECT_EQ(parent_finalizes, 1u);
    // The child's calls on what it inherited were refused, and counted in its own ring only.
    std::string reason;
    const auto parent_ring = profiler::RingFile::Open(f.ring, &reason);
    ASSERT_NE(parent_ring, nullptr) << reason;
    profiler::RingHeaderSnapshot header;
    ASSERT_TRUE(parent_ring->ReadHeader(&header));
    EXPECT_EQ(header.counters[NCCLSCOPE_CTR_INVALID_HANDLE], 0u);
    EXPECT_GE(records.snapshot().plugin_counters[NCCLSCOPE_CTR_INVALID_HANDLE], 1u);
  });
}

// After exec the child is a new process: the ring's descriptor is close-on-exec and its mapping
// gone; a plugin loaded there makes a ring of its own (checked by the exec'd child itself, which
// is this test program again: ExecChildMain below). The parent's ring is untouched.
int ExecChildMain(const char* parent_ring) {
  if (ProcessHolds(::getpid(), parent_ring)) return 10;
  const ProfilerPlugin plugin(NCCLSCOPE_PLUGIN_PATH);
  if (!plugin.ok()) return 11;
  ReplayProcess process(plugin, kAbi);
  ReplayComm comm(process, CommId(3), "exec", 1, 2, 1, nullptr);
  if (!comm.Init()) return 12;
  comm.Collective(CollSpec{}, 0);
  comm.Finalize();
  return 0;
}
const int kExecChild = [] {  // NOLINT(cert-err58-cpp): before main, with no other thread yet
  if (const char* ring = ::getenv(kExecChildVariable)) ::_exit(ExecChildMain(ring));
  return 0;
}();

TEST(FailureModesForkTest, ChildWithExecMakesARingOfItsOwn) {
  ASSERT_EQ(kExecChild, 0);
  EXPECT_CHILD_OK([&] {
    ForkFixture f;
    f.Start();
    if (::testing::Test::HasFatalFailure()) return;
    std::fflush(stdout);
    const pid_t child = ::fork();
    if (child == 0) {
      setenv(kExecChildVariable, f.ring.c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
      ::execl("/proc/self/exe", "failure_modes_exec_child", nullptr);
      ::_exit(20);
    }
    ASSERT_GT(child, 0);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_EQ(Describe(status), "ok");
    for (; f.seq < 10; ++f.seq) f.comm->Collective(CollSpec{}, f.seq);
    f.comm->Finalize();
    f.world->Finalize();
    OriginRecords records(f.dir.path());
    ASSERT_TRUE(records.PollUntil(
        [&] { return records.CountOps(CommId(1)) == 10 && records.CountOps(CommId(3)) == 1; }));
    for (std::size_t i = 0; i < records.ops.size(); ++i) {
      EXPECT_EQ(records.op_pids[i], records.ops[i].op.comm_id == CommId(3) ? child : ::getpid());
    }
    EXPECT_TRUE(OwnerAlive(f.ring));
  });
}

// ---- d) Closed and opened again ----

// NCCL closes the plugin when its last communicator is destroyed (src/plugin/profiler.cc:240 and
// :114-125 at v2.30.3-1: dlclose in src/plugin/plugin_open.cc:160-163) and opens it again at the
// next communicator's init (:46-97). The library is linked -z nodelete: the same instance, with
// the same ring, records on; nothing leaks (LeakSanitizer, in RunInChild).
TEST(FailureModesReloadTest, ClosedAndOpenedAgainRecordsIntoTheSameRing) {
  const TempDir dir;
  EXPECT_CHILD_OK([&] {
    SetUpEnvironment(dir.path());
    const void* first_table = nullptr;
    for (std::uint64_t round = 0; round < 20; ++round) {
      const ProfilerPlugin plugin(NCCLSCOPE_PLUGIN_PATH);
      ASSERT_TRUE(plugin.ok()) << plugin.error();
      void* lib = ::dlopen(NCCLSCOPE_PLUGIN_PATH, RTLD_NOW | RTLD_NOLOAD);
      ASSERT_NE(lib, nullptr);
      const void* table = ::dlsym(lib, "ncclProfiler_v6");
      ::dlclose(lib);
      if (round == 0) first_table = table;
      EXPECT_EQ(table, first_table) << "round " << round;
      ReplayProcess process(plugin, kAbi);
      ReplayComm comm(process, CommId(round), "layer", 1, 2, 0, nullptr);
      ASSERT_TRUE(comm.Init()) << "round " << round;
      comm.Collective(CollSpec{}, 0);
      comm.Finalize();
    }  // dlclose: the plugin stays mapped (-z nodelete)
    EXPECT_EQ(Rings(dir.path()).size(), 1u);
    RingRecords records(dir.path());
    EXPECT_TRUE(records.PollUntil([&] {
      for (std::uint64_t round = 0; round < 20; ++round) {
        if (records.CountOps(CommId(round)) != 1) return false;
      }
      return true;
    }));
  });
}

// ---- e) 10,000 communicators over a job's life ----

std::uint64_t MappingCount() {
  std::ifstream maps("/proc/self/maps");
  std::uint64_t n = 0;
  std::string line;
  while (std::getline(maps, line)) ++n;
  return n;
}

// Heap in use (ASan: its allocator's live bytes, not counting its quarantine).
std::uint64_t HeapInUse() {
#ifdef NCCLSCOPE_TEST_ASAN
  return __sanitizer_get_current_allocated_bytes();
#else
  const struct mallinfo2 info = ::mallinfo2();
  return info.uordblks + info.hblkhd;
#endif
}

// A job that makes one communicator per layer (init, an op, destroy), 10,000 times, NCCL closing
// the plugin after each destroy and opening it at the next init as 2.30 does (see
// FailureModesReloadTest). The agent (this test's process) drains the ring meanwhile. Memory and
// mappings stay flat, comm table slots are reused NCCLSCOPE_COMM_SLOT_REUSE_NS after their
// finalize, every op is recorded, and every communicator that went without a slot is counted.
TEST(FailureModesManyCommunicatorsTest, TenThousandOverAJobsLifeStayBounded) {
  constexpr std::uint64_t kComms = 10'000;
  const TempDir dir;
  RingRecords records(dir.path());
  std::fflush(stdout);
  const pid_t job = ::fork();
  if (job == 0) {
    SetUpEnvironment(dir.path());
    // Room for every record even if the agent fell behind (30,000 records; 4 lanes tried each).
    setenv("NCCLSCOPE_RING_SIZE", "32MiB", 1);  // NOLINT(concurrency-mt-unsafe)
    std::uint64_t heap_before = 0;
    std::uint64_t maps_before = 0;
    bool ok = true;
    for (std::uint64_t i = 0; i < kComms && ok; ++i) {
      if (i == 1000) {
        heap_before = HeapInUse();
        maps_before = MappingCount();
      }
      const ProfilerPlugin plugin(NCCLSCOPE_PLUGIN_PATH);
      ReplayProcess process(plugin, kAbi);
      ReplayComm comm(process, CommId(i), "layer", 1, 8, static_cast<int>(i % 8), nullptr);
      ok = comm.Init();
      CollSpec spec;
      spec.channels = 2;
      comm.Collective(spec, 0);
      comm.Finalize();
    }
    const std::uint64_t heap_growth = HeapInUse() - heap_before;
    const std::uint64_t maps_after = MappingCount();
    std::printf("heap growth %llu bytes, mappings %llu -> %llu\n",
                static_cast<unsigned long long>(heap_growth),
                static_cast<unsigned long long>(maps_before),
                static_cast<unsigned long long>(maps_after));
    if (!ok) ::_exit(30);
    if (heap_growth > (1u << 20)) ::_exit(31);
    if (maps_after > maps_before + 4) ::_exit(32);
    // A slot freed now is reused 2 s later: after that wait, a new communicator gets one.
    std::this_thread::sleep_for(
        std::chrono::nanoseconds(NCCLSCOPE_COMM_SLOT_REUSE_NS + 100'000'000));
    const ProfilerPlugin plugin(NCCLSCOPE_PLUGIN_PATH);
    ReplayProcess process(plugin, kAbi);
    ReplayComm last(process, CommId(kComms), "last", 1, 8, 0, nullptr);
    if (!last.Init()) ::_exit(33);
    last.Collective(CollSpec{}, 0);
    // Still live: the agent sees its slot.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    last.Finalize();
    std::fflush(stdout);
#ifdef NCCLSCOPE_TEST_ASAN
    if (__lsan_do_recoverable_leak_check() != 0) ::_exit(kChildLeaked);
#endif
    ::_exit(0);
  }
  ASSERT_GT(job, 0);
  int status = 0;
  bool saw_last_in_a_slot = false;
  std::uint32_t max_slots_used = 0;
  while (::waitpid(job, &status, WNOHANG) == 0) {
    records.Poll();
    for (const auto& comm : records.snapshot().comms) {
      saw_last_in_a_slot = saw_last_in_a_slot || comm.slot.comm_id == CommId(kComms);
    }
    for (const std::string& ring : Rings(dir.path())) {
      max_slots_used = std::max(max_slots_used, CommSlotsUsed(ring));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(Describe(status), "ok") << "30: an init without a context, 31: heap grew, "
                                       "32: mappings grew, 33: no context after the wait";
  records.Poll();
  std::uint64_t recorded = 0;
  std::uint64_t counted = 0;
  std::set<std::uint64_t> comms;
  for (const auto& op : records.ops) {
    if (op.op.comm_id >= CommId(0) && op.op.comm_id <= CommId(kComms)) {
      ++recorded;
      comms.insert(op.op.comm_id);
      counted += (op.op.flags & NCCLSCOPE_OP_COUNTED) != 0;
    }
  }
  EXPECT_EQ(recorded, kComms + 1);
  EXPECT_EQ(comms.size(), kComms + 1);
  const auto& counters = records.snapshot().plugin_counters;
  EXPECT_EQ(records.snapshot().dropped_ring_full, 0u);
  EXPECT_EQ(counters[NCCLSCOPE_CTR_DROPPED_CONTENTION], 0u);
  EXPECT_EQ(counters[NCCLSCOPE_CTR_HANDLES_EXHAUSTED], 0u);
  // Slots: at most the table's 256, reused; those that found none (all freed within the last
  // 2 s) are counted, and every op of a communicator with a slot is in the count table.
  EXPECT_LE(max_slots_used, 256u);
  EXPECT_EQ(counted + counters[NCCLSCOPE_CTR_COMMS_WITHOUT_SLOT], kComms + 1);
  EXPECT_GT(counted, 256u) << "slots were never reused";
  EXPECT_TRUE(saw_last_in_a_slot);
  EXPECT_EQ(records.inits.size(), kComms + 1);
  EXPECT_EQ(records.finalizes.size(), kComms + 1);
}

}  // namespace
}  // namespace ncclscope::testing
