// A hostile pod against the real ncclscope-agent binary (docs/trust-model.md): what it puts in the
// shared ring directory and what it does to the HTTP port must neither crash, blind nor bloat the
// agent, and a job's own label values must not break the node's scrape.

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <thread>

#include "plugin/ring/ring_writer.h"
#include "tests/support/agent_process.h"
#include "tests/support/op_record.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait_for.h"

namespace ncclscope::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// The eBPF source is off: not under test, and stopping it detaches the uprobes it attached to every
// NCCL and verbs process on the machine (other tests' too), which can take longer than the
// shutdown these tests time.
std::string AgentConfig(const std::string& ring_dir) {
  return "plugin:\n  ring_dir: " + ring_dir + "\n  poll_interval: 20ms\nebpf:\n  enabled: false\n";
}

double RssMiB(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return NAN;
}

int PortOf(const AgentProcess& agent) {
  const std::string& url = agent.base_url();
  return std::stoi(url.substr(url.rfind(':') + 1));
}

// An idle TCP connection to 127.0.0.1:port from another loopback address (another pod).
int IdleConnection(int port, const std::string& source) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  ::inet_pton(AF_INET, source.c_str(), &from.sin_addr);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<std::uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

TEST(HostilePodTest, FifoAndIdleConnectionsDoNotBlindTheAgent) {
  TempDir ring_dir;
  // A FIFO named like a ring (the reader used to block on it, holding every scrape), and a ring
  // whose lane offset wraps (the agent used to crash on it at every start).
  ASSERT_EQ(::mkfifo((ring_dir.path() + "/ncclscope-1-1.ring").c_str(), 0666), 0);
  {
    TempDir scratch;
    ring::RingWriter writer;
    ncclscope::ring::RingError error;
    ring::RingGeometry g{.lanes = 64, .lane_capacity = 16, .comm_slots = 2};
    ASSERT_TRUE(writer.Create(scratch.path().c_str(), g, {"p", "1", "j"}, &error)) << error;
    writer.header()->lanes_offset = ~0ull - 4095;
    std::string bytes = ReadFile(writer.path());
    ring_dir.WriteFile("ncclscope-2-2.ring", bytes);
  }
  AgentProcess agent(AgentConfig(ring_dir.path()));
  ASSERT_TRUE(agent.ok()) << agent.startup_log();
  // 100 idle connections from two other "pods", opened one after another.
  std::vector<int> idle;
  for (int i = 0; i < 100; ++i) {
    const int fd = IdleConnection(PortOf(agent), i % 2 == 0 ? "127.0.0.2" : "127.0.0.3");
    if (fd >= 0) idle.push_back(fd);
  }
  EXPECT_TRUE(WaitFor(
      [&] {
        return agent.Sample("ncclscope_nccl_rings_rejected_total{reason=\"not_regular\"}") == 1 &&
               agent.Sample("ncclscope_nccl_rings_rejected_total{reason=\"geometry\"}") == 1;
      },
      seconds(10)));
  double worst = 0;
  for (int i = 0; i < 10; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const HttpResponse metrics = agent.Get("/metrics");
    worst = std::max(
        worst, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    EXPECT_EQ(metrics.status, 200) << metrics.error;
    EXPECT_EQ(agent.Get("/healthz").status, 200);
  }
  std::printf("worst /metrics latency with %zu idle connections: %.1f ms\n", idle.size(),
              worst * 1e3);
  EXPECT_LT(worst, 2.0);
  EXPECT_TRUE(agent.process().Running());
  for (int fd : idle) ::close(fd);
}

TEST(HostilePodTest, InvalidUtf8JobIdKeepsTheScrapeValid) {
  TempDir ring_dir;
  AgentProcess agent(AgentConfig(ring_dir.path()));
  ASSERT_TRUE(agent.ok()) << agent.startup_log();
  const std::string hold = agent.dir().path() + "/hold";
  // NCCLSCOPE_JOB_ID is any environment variable of the job: here one invalid UTF-8 byte.
  Subprocess job({NCCLSCOPE_REPLAY_PATH, "--plugin", NCCLSCOPE_PLUGIN_PATH, "--comms", "1",
                  "--ranks", "1", "--colls", "5", "--p2p", "0", "--alltoall", "0", "--hold", hold},
                 agent.dir().path(),
                 {"NCCLSCOPE_RING_DIR=" + ring_dir.path(), "NCCLSCOPE_JOB_ID=train-\xff-7"});
  ASSERT_TRUE(job.WaitForStderr("phase 1 done", seconds(60))) << job.Stderr();
  std::string body;
  ASSERT_TRUE(WaitFor(
      [&] {
        body = agent.Get("/metrics").body;
        return body.find("ncclscope_nccl_comm_info{") != std::string::npos;
      },
      seconds(10)));
  EXPECT_NE(body.find("job_id=\"train-\xEF\xBF\xBD-7\""), std::string::npos);
  const RunResult lint = RunCommand({NCCLSCOPE_PROMTOOL, "check", "metrics"}, body);
  EXPECT_EQ(lint.output, "") << "promtool:\n" << lint.output;
  std::ofstream(hold).put('\n');
  EXPECT_EQ(job.Wait(seconds(30)), 0);
}

// Valid records with hostile contents, written straight into a ring as a pod could.
struct Flood {
  ring::RingWriter writer;
  std::mt19937_64 random{42};
  std::uint64_t written = 0;

  bool Write(const void* record) {
    for (std::uint32_t lane = 0; lane < writer.geometry().lanes; ++lane) {
      if (writer.Write(record, 1, lane)) {
        ++written;
        return true;
      }
    }
    return false;
  }
  void Init(std::uint64_t comm, int rank) {
    ncclscope_comm_init_record r{};
    r.h.type = NCCLSCOPE_REC_COMM_INIT;
    r.comm_id = comm;
    r.rank = rank;
    r.nranks = NCCLSCOPE_MAX_NRANKS;
    r.nnodes = 1;
    Write(&r);
  }
  void Op(std::uint64_t comm, int rank) {
    ncclscope_op_record op = AllReduceRecord(comm, written);
    op.rank = rank;
    op.count = 1 + random() % 100000;
    op.bytes = op.count * 4;
    op.func = static_cast<std::uint8_t>(1 + random() % 5);
    op.algo = static_cast<std::uint8_t>(random() % NCCLSCOPE_ALGO_COUNT);
    op.proto = static_cast<std::uint8_t>(random() % NCCLSCOPE_PROTO_COUNT);
    Write(&op);
  }
};

TEST(HostilePodTest, RingFloodsKeepTheAgentSmallAndServing) {
  // Random communicator ids (RSS went from 7 to 614 MB) and random ranks (minutes of CPU, 15 MB
  // scrapes) from one ring, for ~10 s.
  TempDir ring_dir;
  AgentProcess agent(AgentConfig(ring_dir.path()));
  ASSERT_TRUE(agent.ok()) << agent.startup_log();
  const double rss_before = RssMiB(agent.process().pid());
  Flood flood;
  ncclscope::ring::RingError error;
  ASSERT_TRUE(flood.writer.Create(ring_dir.path().c_str(),
                                  ring::RingGeometry::ForRecordBytes(16u << 20, 16, 256),
                                  {"evil", "1", "flood"}, &error))
      << error;
  const auto until = std::chrono::steady_clock::now() + seconds(10);
  while (std::chrono::steady_clock::now() < until) {
    for (int i = 0; i < 2000; ++i) {
      const std::uint64_t comm = flood.random() | 1;
      flood.Init(comm, static_cast<int>(flood.random() % NCCLSCOPE_MAX_NRANKS));
      flood.Op(comm, static_cast<int>(flood.random() % NCCLSCOPE_MAX_NRANKS));
      flood.Op(0x5EED, static_cast<int>(flood.random() % NCCLSCOPE_MAX_NRANKS));
    }
    std::this_thread::sleep_for(milliseconds(5));
  }
  ASSERT_TRUE(WaitFor(
      [&] {
        double records = 0;
        for (const char* type : {"op", "comm_init"}) {
          records +=
              agent.Sample(std::string("ncclscope_nccl_records_total{type=\"") + type + "\"}");
        }
        return records >= static_cast<double>(flood.written);
      },
      seconds(30)));
  std::this_thread::sleep_for(seconds(2));  // a snapshot after the last pass
  const auto start = std::chrono::steady_clock::now();
  const HttpResponse metrics = agent.Get("/metrics");
  const double scrape_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(metrics.status, 200);
  const double rss = RssMiB(agent.process().pid());
  std::printf(
      "flood: %llu records; agent RSS %.1f MiB before, %.1f MiB after; scrape %.1f ms, "
      "%zu bytes; comms tracked %.0f\n",
      static_cast<unsigned long long>(flood.written), rss_before, rss, scrape_ms,
      metrics.body.size(), SampleValue(metrics.body, "ncclscope_nccl_comms_tracked"));
#if defined(__SANITIZE_ADDRESS__)
  std::printf("(ASan build: its shadow memory and quarantine make RSS meaningless; not checked)\n");
#else
  EXPECT_LT(rss, 150.0);  // the DaemonSet's limit is 256 MiB
#endif
  EXPECT_LT(metrics.body.size(), 4u << 20);
  EXPECT_LE(SampleValue(metrics.body, "ncclscope_nccl_comms_tracked"), 4096);
  EXPECT_GT(
      SampleValue(metrics.body, "ncclscope_nccl_analytics_limits_total{limit=\"comms_evicted\"}"),
      0);
  EXPECT_TRUE(agent.process().Running());
}

TEST(HostilePodTest, SigtermLosesNothingSilently) {
  // The HTTP server used to stop first while the reader went on consuming records for ~2 s, which
  // then were neither exported nor left for the next agent. Now: what the first agent exported,
  // plus what it logged as read but not scraped, plus what the next agent finds, is everything.
  TempDir ring_dir;
  Flood flood;
  ncclscope::ring::RingError error;
  ASSERT_TRUE(flood.writer.Create(ring_dir.path().c_str(),
                                  ring::RingGeometry::ForRecordBytes(8u << 20, 4, 8),
                                  {"job", "1", "j"}, &error))
      << error;
  // Ops as the analytics export them (rendered by the reader, served by scrapes).
  auto records = [](const AgentProcess& a) {
    const std::string body = a.Get("/metrics").body;
    double sum = 0;
    for (std::size_t at = body.find("\nncclscope_nccl_ops_total{"); at != std::string::npos;
         at = body.find("\nncclscope_nccl_ops_total{", at + 1)) {
      const std::size_t end = body.find('\n', at + 1);
      sum += std::stod(body.substr(body.rfind(' ', end) + 1, end - body.rfind(' ', end) - 1));
    }
    return sum;
  };
  std::uint64_t exported = 0;
  std::uint64_t unscraped = 0;
  {
    AgentProcess first(AgentConfig(ring_dir.path()));
    ASSERT_TRUE(first.ok()) << first.startup_log();
    for (int i = 0; i < 1000; ++i) flood.Op(0xAB, 0);
    ASSERT_TRUE(WaitFor([&] { return records(first) == 1000; }, seconds(10)));
    exported = 1000;
    for (int i = 0; i < 500; ++i) flood.Op(0xAB, 0);
    first.process().Signal(SIGTERM);
    ASSERT_EQ(first.process().Wait(seconds(20)), 0);
    const std::string log = first.process().Stderr();
    const std::size_t note = log.find("stopped reading rings; ");
    if (note != std::string::npos) {
      unscraped = std::stoull(log.substr(note + 23));
      EXPECT_LT(note, log.find("msg=\"stopped\"")) << log;  // before the server went
    }
  }
  AgentProcess second(AgentConfig(ring_dir.path()));
  ASSERT_TRUE(second.ok()) << second.startup_log();
  ASSERT_TRUE(WaitFor([&] { return exported + unscraped + records(second) >= 1500; }, seconds(10)));
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_EQ(exported + unscraped + static_cast<std::uint64_t>(records(second)), 1500u)
      << "exported " << exported << ", logged unscraped " << unscraped << ", next agent "
      << records(second);
}

TEST(HostilePodTest, SighupWithPlantedSymlinksTouchesNothingElse) {
  TempDir ring_dir;
  TempDir victim_dir;
  const std::string victim = victim_dir.WriteFile("important", "keep me\n");
  ASSERT_EQ(::chmod(victim.c_str(), 0600), 0);
  AgentProcess agent(AgentConfig(ring_dir.path()));
  ASSERT_TRUE(agent.ok()) << agent.startup_log();
  // Symlinks at every name the old writer would have used (it used its own pid), and at the
  // controls file itself.
  const std::string planted =
      ring_dir.path() + "/ncclscope.controls.tmp." + std::to_string(agent.process().pid());
  ASSERT_EQ(::symlink(victim.c_str(), planted.c_str()), 0);
  const std::string controls = ring_dir.path() + "/ncclscope.controls";
  ASSERT_EQ(::unlink(controls.c_str()), 0);
  ASSERT_EQ(::symlink(victim.c_str(), controls.c_str()), 0);
  agent.process().Signal(SIGHUP);
  EXPECT_TRUE(WaitFor(
      [&] {
        struct stat st {};
        return ::lstat(controls.c_str(), &st) == 0 && S_ISREG(st.st_mode);
      },
      seconds(10)));
  EXPECT_EQ(ReadFile(victim), "keep me\n");
  struct stat st {};
  ASSERT_EQ(::stat(victim.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(ReadFile(controls).rfind("# Written by ncclscope-agent", 0), 0u);
  // Without a SIGHUP too: a pod replacing the file is repaired, and counted.
  ASSERT_EQ(::unlink(controls.c_str()), 0);
  ASSERT_EQ(::symlink(victim.c_str(), controls.c_str()), 0);
  EXPECT_TRUE(
      WaitFor([&] { return agent.Sample("ncclscope_nccl_controls_file_repairs_total") >= 1; },
              seconds(10)));
  EXPECT_EQ(ReadFile(victim), "keep me\n");
}

}  // namespace
}  // namespace ncclscope::testing
