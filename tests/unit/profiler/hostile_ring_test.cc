// What a hostile pod can put in the shared ring directory, against the agent's ring reader
// (docs/trust-model.md): headers whose offsets wrap 64-bit arithmetic, FIFOs, devices and symlinks
// named like rings, sparse and hole-punched files, floods of rings and of bad names, communicator
// tables full of live slots, counters set to wrap. Each is one test; each failed (crashed, hung or
// grew without bound) on the reader before issue 11.

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "agent/profiler/ring_attribution.h"
#include "agent/profiler/ring_directory.h"
#include "agent/profiler/ring_file.h"
#include "plugin/ring/ring_writer.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait_for.h"

namespace ncclscope::testing {
namespace {

using profiler::DirectoryLimit;
using profiler::RingDirectory;
using profiler::RingFile;

struct Discard : profiler::RecordSink {
  std::size_t ops = 0;
  void OnCommInit(const profiler::RingOrigin&, const ncclscope_comm_init_record&) override {}
  void OnCommFinalize(const profiler::RingOrigin&, const ncclscope_comm_finalize_record&) override {
  }
  void OnOp(const profiler::RingOrigin&, const profiler::OpView&) override { ++ops; }
  void OnProxyOp(const profiler::RingOrigin&, const ncclscope_proxy_op_record&) override {}
};

ring::RingGeometry Small(std::uint32_t lanes = 1, std::uint32_t slots = 2) {
  return ring::RingGeometry{.lanes = lanes, .lane_capacity = 16, .comm_slots = slots};
}

// The bytes of a real ring of geometry `g` (written by the plugin's writer), for crafting.
std::vector<unsigned char> RealRingBytes(const ring::RingGeometry& g) {
  TempDir scratch;
  ring::RingWriter writer;
  ncclscope::ring::RingError error;
  EXPECT_TRUE(writer.Create(scratch.path().c_str(), g, {"pod-a", "1", "job"}, &error)) << error;
  const std::string content = ReadFile(writer.path());
  return {content.begin(), content.end()};
}

ncclscope_ring_header& HeaderOf(std::vector<unsigned char>& bytes) {
  return *reinterpret_cast<ncclscope_ring_header*>(bytes.data());
}

// Writes `bytes` as <dir>/<name> (fully allocated, like a real ring) and returns the path.
std::string Plant(const TempDir& dir, const std::string& name,
                  const std::vector<unsigned char>& bytes) {
  return dir.WriteFile(name, std::string(bytes.begin(), bytes.end()));
}

std::string RejectReason(const std::string& path) {
  std::string reason;
  auto file = RingFile::Open(path, &reason);
  return file ? "accepted" : reason;
}

// Runs `body` in a child process and reports whether it finished (exit 0) within `timeout`: a
// blocking open() in the reader would otherwise hang the test itself.
bool FinishesWithin(const std::function<void()>& body, std::chrono::milliseconds timeout) {
  const pid_t child = ::fork();
  if (child == 0) {
    body();
    ::_exit(0);
  }
  int status = 0;
  if (WaitFor([&] { return ::waitpid(child, &status, WNOHANG) == child; }, timeout,
              std::chrono::milliseconds(10))) {
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, &status, 0);
  return false;
}

int OpenFds() {
  int n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  while (d != nullptr && ::readdir(d) != nullptr) ++n;
  if (d != nullptr) ::closedir(d);
  return n;
}

TEST(HostileRingTest, LaneOffsetsThatWrapAreRejectedNotMapped) {
  // lanes_offset + lanes * 128 wraps to 4096: the old check passed and the reader wrote lane tails
  // 4 KiB before its mapping (a crash, or a write into whatever was mapped there).
  TempDir dir;
  std::vector<unsigned char> bytes = RealRingBytes(Small(64));
  HeaderOf(bytes).lanes_offset = ~0ull - 4095;  // 2^64 - 4096, 64-byte aligned
  const std::string path = Plant(dir, "ncclscope-1-1.ring", bytes);
  EXPECT_EQ(RejectReason(path), "geometry");
  std::string reason;
  auto file = RingFile::Open(path, &reason);
  if (file != nullptr) {  // the old reader: this is where it died
    Discard sink;
    file->Drain(sink);
  }
}

TEST(HostileRingTest, CommTableOffsetsThatWrapAreRejected) {
  TempDir dir;
  std::vector<unsigned char> bytes = RealRingBytes(Small(1, 2));
  HeaderOf(bytes).comm_table_offset = ~0ull - 511;  // + 2 x 512 wraps to 512
  const std::string path = Plant(dir, "ncclscope-1-1.ring", bytes);
  EXPECT_EQ(RejectReason(path), "geometry");
  std::string reason;
  if (auto file = RingFile::Open(path, &reason)) file->ReadCommTable();
}

TEST(HostileRingTest, HugeOffsetsAndSizesAreRejectedBeforeAnyArithmetic) {
  TempDir dir;
  const std::vector<unsigned char> base = RealRingBytes(Small(1, 2));
  auto reason_with = [&](const std::function<void(ncclscope_ring_header&)>& patch) {
    std::vector<unsigned char> bytes = base;
    patch(HeaderOf(bytes));
    return RejectReason(Plant(dir, "ncclscope-2-2.ring", bytes));
  };
  EXPECT_EQ(reason_with([](ncclscope_ring_header&) {}), "accepted");
  EXPECT_EQ(reason_with([](ncclscope_ring_header& h) { h.data_offset = ~0ull - 63; }), "geometry");
  EXPECT_EQ(reason_with([](ncclscope_ring_header& h) { h.file_size = ~0ull; }), "geometry");
  EXPECT_EQ(reason_with([](ncclscope_ring_header& h) { h.lanes_offset = h.comm_table_offset; }),
            "geometry");  // regions overlap
  EXPECT_EQ(reason_with([](ncclscope_ring_header& h) {
              h.lane_capacity = NCCLSCOPE_MAX_LANE_CAPACITY;
              h.lane_count = NCCLSCOPE_MAX_LANES;  // 64 GiB of records: over the mapping cap
              h.file_size = h.data_offset + (1ull << 36);
            }),
            "geometry");
}

TEST(HostileRingTest, FifoNamedLikeARingNeverBlocksTheReader) {
  // The old reader opened a rejected ring's name O_RDONLY to test its lock: on a FIFO that blocks
  // until a writer shows up, with the analytics lock held (every scrape hung behind it).
  TempDir dir;
  ASSERT_EQ(::mkfifo((dir.path() + "/ncclscope-7-7.ring").c_str(), 0666), 0);
  ASSERT_EQ(::mkfifo((dir.path() + "/.ncclscope-8-8.tmp").c_str(), 0666), 0);
  const timespec old_times[2] = {{1, 0}, {1, 0}};  // a stale temporary file, as far as mtime goes
  ASSERT_EQ(::utimensat(AT_FDCWD, (dir.path() + "/.ncclscope-8-8.tmp").c_str(), old_times, 0), 0);
  EXPECT_TRUE(FinishesWithin(
      [&] {
        RingDirectory directory(dir.path());
        Discard sink;
        for (int pass = 0; pass < 3; ++pass) directory.Poll(sink);
        if (directory.snapshot().rings_rejected.at("not_regular") != 1) ::_exit(3);
      },
      std::chrono::seconds(5)));
}

TEST(HostileRingTest, DeviceNodeNamedLikeARingIsNeverOpened) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (mknod)";
  // A pod with CAP_MKNOD can name any device; the root agent used to open it read-write.
  TempDir dir;
  const std::string node = dir.path() + "/ncclscope-9-9.ring";
  ASSERT_EQ(::mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 3)), 0) << "errno " << errno;
  const int watch = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  ASSERT_GE(watch, 0);
  ASSERT_GE(::inotify_add_watch(watch, node.c_str(), IN_OPEN | IN_CLOSE_WRITE), 0);
  RingDirectory directory(dir.path());
  Discard sink;
  for (int pass = 0; pass < 3; ++pass) directory.Poll(sink);
  EXPECT_EQ(directory.snapshot().rings_rejected.at("not_regular"), 1u);
  char events[4096];
  EXPECT_LT(::read(watch, events, sizeof(events)), 0) << "the device node was opened";
  ::close(watch);
}

TEST(HostileRingTest, SymlinkNamedLikeARingIsNotFollowed) {
  TempDir dir;
  TempDir elsewhere;
  ring::RingWriter writer;
  ncclscope::ring::RingError error;
  ASSERT_TRUE(writer.Create(elsewhere.path().c_str(), Small(), {"p", "1", "j"}, &error)) << error;
  ASSERT_EQ(::symlink(writer.path(), (dir.path() + "/ncclscope-3-3.ring").c_str()), 0);
  EXPECT_EQ(RejectReason(dir.path() + "/ncclscope-3-3.ring"), "not_regular");
}

TEST(HostileRingTest, SparseAndHolePunchedRingsAreDropped) {
  TempDir dir;
  // A ring-sized file made with ftruncate: no page allocated.
  const std::vector<unsigned char> bytes = RealRingBytes(Small(4));
  const std::string sparse = dir.path() + "/ncclscope-4-4.ring";
  const int fd = ::open(sparse.c_str(), O_CREAT | O_WRONLY, 0644);
  ASSERT_EQ(::pwrite(fd, bytes.data(), 4096, 0), 4096);
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(bytes.size())), 0);
  ::close(fd);
  EXPECT_EQ(RejectReason(sparse), "sparse");

  // A real ring whose owner punches a hole into its record data after the agent opened it.
  ring::RingWriter writer;
  ncclscope::ring::RingError error;
  ASSERT_TRUE(writer.Create(dir.path().c_str(), Small(4), {"p", "1", "j"}, &error)) << error;
  std::string reason;
  auto file = RingFile::Open(writer.path(), &reason);
  ASSERT_NE(file, nullptr) << reason;
  const int punch = ::open(writer.path(), O_RDWR);
  ASSERT_EQ(::fallocate(punch, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                        static_cast<off_t>(writer.header()->data_offset), 4096),
            0);
  ::close(punch);
  Discard sink;
  file->Drain(sink);
  EXPECT_FALSE(file->healthy());
}

TEST(HostileRingTest, MappingsCoverMetadataOnly) {
  TempDir dir;
  ring::RingWriter writer;
  ncclscope::ring::RingError error;
  ASSERT_TRUE(writer.Create(dir.path().c_str(),
                            ring::RingGeometry::ForRecordBytes(8u << 20, 16, 256), {"p", "1", "j"},
                            &error))
      << error;
  std::string reason;
  auto file = RingFile::Open(writer.path(), &reason);
  ASSERT_NE(file, nullptr) << reason;
  EXPECT_EQ(file->mapped_bytes(), writer.header()->data_offset);
  EXPECT_LT(file->mapped_bytes(), 1u << 20);  // of an 8 MiB ring
}

TEST(HostileRingTest, ThousandsOfRingsFromOneProcessAreCapped) {
  // 20,000 rings from one pod used to take one descriptor and one mapping each, until the agent
  // ran out of descriptors. Here 200 rings against a cap of 16.
  TempDir dir;
  std::vector<std::unique_ptr<ring::RingWriter>> writers;
  for (int i = 0; i < 200; ++i) {
    auto writer = std::make_unique<ring::RingWriter>();
    ncclscope::ring::RingError error;
    ASSERT_TRUE(writer->Create(dir.path().c_str(), Small(), {"p", "1", "j"}, &error)) << error;
    writers.push_back(std::move(writer));
  }
  profiler::DirectoryLimits limits;
  limits.max_rings = 16;
  limits.opens_per_pass = 8;
  RingDirectory directory(dir.path(), limits);
  Discard sink;
  const int fds_before = OpenFds();
  for (int pass = 0; pass < 5; ++pass) directory.Poll(sink);
  const auto& s = directory.snapshot();
  EXPECT_EQ(s.rings_live, 16u);
  EXPECT_LE(OpenFds(), fds_before + 16);
  EXPECT_GT(s.limited[static_cast<std::size_t>(DirectoryLimit::kRings)], 0u);
  EXPECT_GT(s.limited[static_cast<std::size_t>(DirectoryLimit::kOpens)], 0u);
}

TEST(HostileRingTest, RejectedNamesAndRechecksAreBounded) {
  TempDir dir;
  // 300 junk files whose "owner" (this process) holds a lock on each, so none can be removed.
  std::vector<int> held;
  for (int i = 0; i < 300; ++i) {
    const std::string path =
        dir.WriteFile("ncclscope-5-" + std::to_string(i) + ".ring", std::string(8192, 'x'));
    const int fd = ::open(path.c_str(), O_RDONLY);
    ASSERT_EQ(::flock(fd, LOCK_SH), 0);
    held.push_back(fd);
  }
  // Names that are not rings are never opened, however many.
  for (int i = 0; i < 50; ++i) dir.WriteFile("ncclscope-x" + std::to_string(i) + ".ring", "x");
  profiler::DirectoryLimits limits;
  limits.max_rejected = 100;
  limits.opens_per_pass = 1000;
  RingDirectory directory(dir.path(), limits);
  Discard sink;
  for (int pass = 0; pass < 3; ++pass) directory.Poll(sink);
  const auto& s = directory.snapshot();
  EXPECT_LE(s.rejected_remembered, 100u);
  EXPECT_GT(s.limited[static_cast<std::size_t>(DirectoryLimit::kRejected)], 0u);
  EXPECT_EQ(s.rings_rejected.count("magic"), 1u);
  for (int fd : held) ::close(fd);
}

TEST(HostileRingTest, RingNamesAreMatchedBeforeOpening) {
  EXPECT_TRUE(profiler::IsRingName("ncclscope-12-1700000000000000000.ring"));
  EXPECT_FALSE(profiler::IsRingName("ncclscope-12.ring"));
  EXPECT_FALSE(profiler::IsRingName("ncclscope--1.ring"));
  EXPECT_FALSE(profiler::IsRingName("ncclscope-1-1.ring.tmp"));
  EXPECT_FALSE(profiler::IsRingName("ncclscope-1-a.ring"));
  EXPECT_FALSE(profiler::IsRingName("ncclscope-1-" + std::string(80, '1') + ".ring"));
}

TEST(HostileRingTest, LiveCommSlotsAreCappedPerRingAndInTotal) {
  TempDir dir;
  ring::RingWriter writer;
  ncclscope::ring::RingError error;
  ASSERT_TRUE(writer.Create(dir.path().c_str(), Small(1, 64), {"p", "1", "j"}, &error)) << error;
  for (std::uint32_t i = 0; i < 64; ++i) {  // every slot live: a table full of fake communicators
    ncclscope_comm_slot* slot = writer.comm_slot(i);
    slot->comm_id = 1000 + i;
    slot->rank = 0;
    slot->nranks = 2;
    slot->nnodes = 1;
    slot->state = NCCLSCOPE_COMM_LIVE;
  }
  profiler::DirectoryLimits limits;
  limits.ring.max_live_slots = 10;
  RingDirectory directory(dir.path(), limits);
  Discard sink;
  directory.Poll(sink);
  EXPECT_EQ(directory.snapshot().comms.size(), 10u);
  EXPECT_EQ(directory.snapshot().limited[static_cast<std::size_t>(DirectoryLimit::kSlotsPerRing)],
            54u);
}

TEST(HostileRingTest, CommSlotsClaimingHugeCommunicatorsAreSkipped) {
  TempDir dir;
  ring::RingWriter writer;
  ncclscope::ring::RingError error;
  ASSERT_TRUE(writer.Create(dir.path().c_str(), Small(1, 2), {"p", "1", "j"}, &error)) << error;
  ncclscope_comm_slot* slot = writer.comm_slot(0);
  slot->comm_id = 1;
  slot->rank = (1 << 24) + 1;
  slot->nranks = INT32_MAX;
  slot->nnodes = 1;
  slot->state = NCCLSCOPE_COMM_LIVE;
  std::string reason;
  auto file = RingFile::Open(writer.path(), &reason);
  ASSERT_NE(file, nullptr) << reason;
  EXPECT_TRUE(file->ReadCommTable().empty());
}

TEST(HostileRingTest, PluginCountersCannotWrapTheNodeTotals) {
  TempDir dir;
  ring::RingWriter writer;
  ncclscope::ring::RingError error;
  ASSERT_TRUE(writer.Create(dir.path().c_str(), Small(4), {"p", "1", "j"}, &error)) << error;
  auto* base = reinterpret_cast<unsigned char*>(writer.header());
  for (std::uint32_t i = 0; i < 4; ++i) {
    reinterpret_cast<ncclscope_lane*>(base + writer.header()->lanes_offset +
                                      i * NCCLSCOPE_LANE_SIZE)
        ->dropped = UINT64_MAX / 2;
  }
  RingDirectory directory(dir.path());
  Discard sink;
  directory.Poll(sink);
  EXPECT_EQ(directory.snapshot().dropped_ring_full, UINT64_MAX);
}

// A plugin whose mask NCCL's RAS took over (NCCL 2.31+) says so in its governor state: counted
// apart from the governed levels, its duty cycles and load left out of the node's figures.
TEST(HostileRingTest, AMaskTakenOverByNcclIsCountedApartFromTheGovernor) {
  TempDir dir;
  ring::RingWriter taken;
  ring::RingWriter governed;
  ncclscope::ring::RingError error;
  ASSERT_TRUE(taken.Create(dir.path().c_str(), Small(4), {"p", "1", "j"}, &error)) << error;
  ASSERT_TRUE(governed.Create(dir.path().c_str(), Small(4), {"q", "1", "j"}, &error)) << error;
  ncclscope_governor_state& t = taken.header()->governor;
  t.level = NCCLSCOPE_GOVERNOR_NCCL_OVERRIDE;
  t.sample_every = 256;
  t.kernel_duty_pm = 0;  // whatever it says, NCCL's mask rules
  ncclscope_governor_state& g = governed.header()->governor;
  g.level = NCCLSCOPE_GOVERNOR_PROXY;
  g.sample_every = 256;
  g.kernel_duty_pm = 1000;
  g.proxy_duty_pm = 500;
  RingDirectory directory(dir.path());
  Discard sink;
  directory.Poll(sink);
  const auto& gov = directory.snapshot().governor;
  EXPECT_EQ(gov.nccl_override, 1u);
  EXPECT_EQ(gov.rings, 1u);
  EXPECT_EQ(gov.by_level[NCCLSCOPE_GOVERNOR_PROXY], 1u);
  EXPECT_EQ(gov.min_kernel_duty_pm, 1000u);
  EXPECT_EQ(gov.min_proxy_duty_pm, 500u);
}

TEST(HostileRingTest, EachRingIsAttributedToItsLockHolder) {
  TempDir dir;
  ring::RingWriter writer;
  ncclscope::ring::RingError error;
  ASSERT_TRUE(writer.Create(dir.path().c_str(), Small(), {"someone-else", "1", "j"}, &error))
      << error;
  RingDirectory directory(dir.path());
  Discard sink;
  directory.Poll(sink);
  ASSERT_EQ(directory.snapshot().rings_live, 1u);
  // Found through /proc/locks: this process holds the ring's flock.
  struct stat st {};
  ASSERT_EQ(::stat(writer.path(), &st), 0);
  const std::string locks = ReadFile("/proc/locks");
  const auto holder = profiler::RingLockHolder(locks, st.st_dev, st.st_ino);
  ASSERT_TRUE(holder.has_value()) << locks;
  EXPECT_EQ(*holder, ::getpid());
  profiler::RingAttribution owners("/proc", {});
  profiler::RingOrigin origin;
  origin.owner_uid = st.st_uid;
  owners.Refresh();
  owners.Attribute(st, origin);
  EXPECT_EQ(origin.holder_pid, ::getpid());
  EXPECT_NE(origin.attribution, "claimed");
  EXPECT_EQ(origin.principal.rfind("uid:", 0) == 0 || origin.principal.rfind("pod:", 0) == 0 ||
                origin.principal.rfind("ns:", 0) == 0,
            true);
}

// Coverage (ncclscope_ebpf_uncovered_processes) asks which processes hold a ring: the holders of
// ring files' flocks, nothing else; and ncclscope_ebpf_nccl_process_info the ABI each ring's header
// names.
TEST(HostileRingTest, RingWritersAreTheLockHoldersOfRingFiles) {
  using Writers = std::map<std::int32_t, std::uint32_t>;
  TempDir dir;
  ring::RingWriter writer;
  ncclscope::ring::RingError error;
  ASSERT_TRUE(writer.Create(dir.path().c_str(), Small(), {"host", "1", "j"}, &error)) << error;
  // Before the first communicator init NCCL has chosen no ABI yet.
  EXPECT_EQ(profiler::RingWriterAbis(dir.path(), "/proc"), (Writers{{::getpid(), 0}}));
  writer.header()->nccl_abi = 5;
  EXPECT_EQ(profiler::RingWriterAbis(dir.path(), "/proc"), (Writers{{::getpid(), 5}}));
  // The header is the pod's: an ABI NCCL never shipped is unknown.
  writer.header()->nccl_abi = 8;
  EXPECT_EQ(profiler::RingWriterAbis(dir.path(), "/proc"), (Writers{{::getpid(), 0}}));

  // A locked file that is not named like a ring, a symlink to the ring: not writers.
  TempDir other;
  const std::string plain = other.path() + "/ncclscope-1-2.txt";
  std::ofstream(plain) << "x";
  const int fd = ::open(plain.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_SH), 0);
  ASSERT_EQ(::symlink(writer.path(), (other.path() + "/ncclscope-3-4.ring").c_str()), 0);
  EXPECT_EQ(profiler::RingWriterAbis(other.path(), "/proc"), Writers{});
  ::close(fd);
  // No ring directory yet: nobody writes one. No /proc/locks: unknown.
  EXPECT_EQ(profiler::RingWriterAbis(dir.path() + "/missing", "/proc"), Writers{});
  EXPECT_FALSE(profiler::RingWriterAbis(dir.path(), other.path()).has_value());
}

// The ABI is read from the header's identity fields only, and only from a header of this format.
TEST(HostileRingTest, RingHeaderAbiTrustsNothing) {
  TempDir dir;
  ncclscope_ring_header header{};
  header.magic = NCCLSCOPE_RING_MAGIC;
  header.version = NCCLSCOPE_RING_VERSION;
  header.nccl_abi = 3;
  auto abi_of = [&](const std::string& bytes) {
    const std::string path = dir.WriteFile("ring", bytes);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    const std::uint32_t abi = profiler::RingHeaderAbi(fd);
    ::close(fd);
    return abi;
  };
  const std::string good(reinterpret_cast<const char*>(&header), sizeof(header));
  EXPECT_EQ(abi_of(good), 3u);
  // Only the identity fields are needed: a file cut after nccl_abi still has them.
  EXPECT_EQ(abi_of(good.substr(0, offsetof(ncclscope_ring_header, created_ns))), 3u);
  EXPECT_EQ(abi_of(good.substr(0, offsetof(ncclscope_ring_header, nccl_abi) + 2)), 0u);
  EXPECT_EQ(abi_of(""), 0u);
  std::string bytes = good;
  bytes[0] ^= 1;  // magic
  EXPECT_EQ(abi_of(bytes), 0u);
  bytes = good;
  bytes[offsetof(ncclscope_ring_header, version)] = 2;
  EXPECT_EQ(abi_of(bytes), 0u);
  EXPECT_EQ(profiler::RingHeaderAbi(-1), 0u);
}

TEST(HostileRingTest, ProcLocksParsing) {
  const std::string text =
      "1: POSIX  ADVISORY  WRITE 77 00:1a:99 0 EOF\n"
      "2: FLOCK  ADVISORY  READ  1234 00:1a:4242 0 EOF\n"
      "2: -> FLOCK  ADVISORY  WRITE 999 00:1a:4242 0 EOF\n"
      "3: FLOCK  ADVISORY  READ  55 fd:01:4242 0 EOF\n"
      "garbage line\n"
      "4: FLOCK ADVISORY READ -1 00:1a:5 0 EOF\n";
  EXPECT_EQ(profiler::RingLockHolder(text, makedev(0, 0x1a), 4242), 1234);
  EXPECT_EQ(profiler::RingLockHolder(text, makedev(0xfd, 1), 4242), 55);
  EXPECT_FALSE(profiler::RingLockHolder(text, makedev(0, 0x1a), 99).has_value());  // POSIX lock
  EXPECT_FALSE(profiler::RingLockHolder(text, makedev(0, 0x1a), 5).has_value());
}

}  // namespace
}  // namespace ncclscope::testing
