// End to end: channel -> NIC through the real agent binary. Two "jobs", each the pid 1 of its own
// pid namespace as a training process in a pod is, write real rings (the plugin's ring writer,
// holding its real flock) with network records carrying the QP numbers of NCCL's IB net-plugin
// events; the QPs were "created" by a second thread of each job, as NCCL's proxy service thread
// creates them. The one part that cannot exist here, the HCAs' QP table, is a recorded rdma
// netlink dump (plugin.qp_table: a file of the kernel's replies, built byte by byte from the uapi
// layout) naming those threads by their host ids. The agent must find each ring's writer on the
// host (/proc/locks, NSpid), map the threads to it, and name each channel's device and port,
// where both jobs use the same QP numbers on different HCAs; an unknown QP must trigger one more
// dump (not one per record), and /metrics must be documented and promtool-clean.

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <thread>

#include "plugin/ring/ring_writer.h"
#include "tests/support/agent_process.h"
#include "tests/support/metrics_doc.h"
#include "tests/support/nldev_messages.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait_for.h"

namespace ncclscope::testing {
namespace {

namespace nl = nldev;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr std::uint64_t kComm = 0x5eedf00d12345678ull;
constexpr char kCommLabel[] = "comm=\"0x5eedf00d12345678\"";

// What a job writes: its communicator rank and, per phase, network records.
struct JobScript {
  int rank = 0;
  // Phase 1 records: (channel, send, qp0, qp1); phase 2 likewise, written on command.
  std::vector<std::tuple<int, bool, std::uint32_t, std::uint32_t>> phase1, phase2;
};

void WriteRecord(ring::RingWriter& writer, const void* record) {
  if (!writer.Write(record, 1, 0)) ::_exit(3);
}

void WriteProxy(ring::RingWriter& writer, int rank, int channel, bool send, std::uint32_t qp0,
                std::uint32_t qp1) {
  ncclscope_proxy_op_record r{};
  r.h.type = NCCLSCOPE_REC_PROXY_OP;
  r.comm_id = kComm;
  r.rank = rank;
  r.peer = rank + 8;  // a rank on the other node
  r.channel = static_cast<std::uint8_t>(channel);
  r.is_send = send ? 1 : 0;
  r.bytes = 1 << 20;
  r.start_ns = 1'000'000;
  r.end_ns = 1'400'000;
  r.n_steps = r.steps_done = 8;
  r.chunk_size = 1 << 17;
  r.comm_slot = 0;
  r.func = NCCLSCOPE_FUNC_ALL_REDUCE;
  r.flags = NCCLSCOPE_PROXY_PARENT_KNOWN;
  r.net_type = NCCLSCOPE_NET_IB;
  r.net_dev_index = 0;
  r.qp_num[0] = qp0;
  r.qp_num[1] = qp1;
  WriteRecord(writer, &r);
}

// The body of a job: pid 1 of its namespace. Never returns.
[[noreturn]] void RunJob(const std::string& ring_dir, const JobScript& script, int ready_fd,
                         int command_fd) {
  // The "proxy service thread" that owns the job's QPs; it lives as long as the job.
  int park[2];
  if (::pipe(park) != 0) ::_exit(2);
  std::thread proxy([fd = park[0]] {
    char c;
    (void)!::read(fd, &c, 1);
  });
  ring::RingWriter writer;
  ncclscope::ring::RingError error;
  ring::RingGeometry geometry{.lanes = 2, .lane_capacity = 64, .comm_slots = 4};
  const std::string host = "job-" + std::to_string(script.rank);
  if (!writer.Create(ring_dir.c_str(), geometry, {host.c_str(), "test", "j1"}, &error)) {
    ::_exit(4);
  }
  ncclscope_comm_slot* slot = writer.comm_slot(0);
  slot->version = 1;
  slot->state = NCCLSCOPE_COMM_LIVE;
  slot->comm_id = kComm;
  slot->context = 0xC0 + static_cast<std::uint64_t>(script.rank);
  slot->rank = script.rank;
  slot->nranks = 16;
  slot->nnodes = 2;
  slot->cuda_device = script.rank;
  slot->version = 2;
  ncclscope_comm_init_record init{};
  init.h.type = NCCLSCOPE_REC_COMM_INIT;
  init.comm_id = kComm;
  init.context = slot->context;
  init.rank = script.rank;
  init.nranks = 16;
  init.nnodes = 2;
  init.cuda_device = script.rank;
  init.comm_slot = 0;
  init.nccl_abi = 5;
  WriteRecord(writer, &init);
  for (const auto& [channel, send, qp0, qp1] : script.phase1) {
    WriteProxy(writer, script.rank, channel, send, qp0, qp1);
  }
  const std::int32_t me = ::getpid();
  (void)!::write(ready_fd, &me, sizeof(me));
  for (char c = 0; ::read(command_fd, &c, 1) == 1 && c == 'w';) {
    for (const auto& [channel, send, qp0, qp1] : script.phase2) {
      WriteProxy(writer, script.rank, channel, send, qp0, qp1);
    }
    (void)!::write(ready_fd, &me, sizeof(me));
  }
  (void)!::write(park[1], "x", 1);
  proxy.join();
  ::_exit(0);
}

// A job in its own pid namespace; its host pid and its proxy thread's host id.
class Job {
 public:
  Job(const std::string& ring_dir, const JobScript& script) {
    int ready[2];
    int command[2];
    if (::pipe2(ready, O_CLOEXEC) != 0 || ::pipe2(command, O_CLOEXEC) != 0) return;
    intermediate_ = ::fork();
    if (intermediate_ == 0) {
      ::close(ready[0]);
      ::close(command[1]);
      if (::unshare(CLONE_NEWPID) != 0) {
        const std::int32_t failed = -errno;
        (void)!::write(ready[1], &failed, sizeof(failed));
        ::_exit(1);
      }
      const pid_t inner = ::fork();
      if (inner == 0) RunJob(ring_dir, script, ready[1], command[0]);
      const std::int32_t host = inner;
      (void)!::write(ready[1], &host, sizeof(host));
      ::waitpid(inner, nullptr, 0);
      ::_exit(0);
    }
    ::close(ready[1]);
    ::close(command[0]);
    ready_ = ready[0];
    command_ = command[1];
    std::int32_t a = 0;
    std::int32_t b = 0;
    if (::read(ready_, &a, sizeof(a)) != sizeof(a)) return;
    if (a < 0) {
      error_ = -a;
      return;
    }
    if (::read(ready_, &b, sizeof(b)) != sizeof(b)) return;
    // The job's own report says 1 (its pid in its namespace); the other is its host pid.
    if (a != 1 && b != 1) return;
    host_pid_ = a == 1 ? b : a;
    // Its second thread, seen from the host: /proc/<pid>/task lists every thread.
    for (int tries = 0; tries < 200 && proxy_tid_ == 0; ++tries) {
      if (DIR* d = ::opendir(("/proc/" + std::to_string(host_pid_) + "/task").c_str())) {
        while (dirent* e = ::readdir(d)) {
          const std::string_view name(e->d_name);
          int tid = 0;
          const auto [end, error] = std::from_chars(name.data(), name.data() + name.size(), tid);
          if (error == std::errc() && end == name.data() + name.size() && tid > 0 &&
              tid != host_pid_) {
            proxy_tid_ = tid;
          }
        }
        ::closedir(d);
      }
      if (proxy_tid_ == 0) std::this_thread::sleep_for(milliseconds(5));
    }
  }
  ~Job() {
    if (command_ >= 0) ::close(command_);  // EOF ends the job
    if (ready_ >= 0) ::close(ready_);
    if (intermediate_ > 0) ::waitpid(intermediate_, nullptr, 0);
  }
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  // Writes the phase 2 records and waits until they are in the ring.
  bool WritePhase2() {
    std::int32_t me = 0;
    return ::write(command_, "w", 1) == 1 && ::read(ready_, &me, sizeof(me)) == sizeof(me);
  }

  int error() const { return error_; }
  std::int32_t host_pid() const { return host_pid_; }
  std::int32_t proxy_tid() const { return proxy_tid_; }

 private:
  pid_t intermediate_ = -1;
  int ready_ = -1;
  int command_ = -1;
  int error_ = 0;
  std::int32_t host_pid_ = 0;
  std::int32_t proxy_tid_ = 0;
};

nl::Qp Qp(std::uint32_t lqpn, std::int32_t task) {
  nl::Qp qp;
  qp.lqpn = lqpn;
  qp.pid = task;
  qp.rqpn = lqpn + 0x1000;
  return qp;
}

std::string Info(int rank, int channel, const std::string& direction, const std::string& device) {
  return std::string("ncclscope_nccl_channel_nic_info{") + kCommLabel + ",rank=\"" +
         std::to_string(rank) + "\",channel=\"" + std::to_string(channel) + "\",direction=\"" +
         direction + "\",device=\"" + device + "\",port=\"1\"}";
}

TEST(ChannelNicE2eTest, AgentNamesTheHcaPortOfEachChannelOfJobsInPods) {
  TempDir ring_dir;
  TempDir tables;
  // Rank 0: channel 0 send on QPs 0x1a0/0x1a1, channel 0 recv on 0x1a2; channel 1 send on 0x1a7,
  // a QP that is not its own (the table lists it for another process). Rank 1: channel 0 send on
  // 0x1a0 too - the same number, on another HCA. Phase 2: rank 0 channel 2 on a new QP 0x1b0.
  JobScript rank0{0, {{0, true, 0x1a0, 0x1a1}, {0, false, 0x1a2, 0}, {1, true, 0x1a7, 0}}, {}};
  rank0.phase2 = {{2, true, 0x1b0, 0}, {2, true, 0x1b0, 0}, {2, true, 0x1b0, 0}};
  JobScript rank1{1, {{0, true, 0x1a0, 0}, {0, true, 0x1a0, 0}}, {}};
  Job job0(ring_dir.path(), rank0);
  if (job0.error() == EPERM || job0.error() == EINVAL) {
    GTEST_SKIP() << "no pid namespaces here (unshare: " << job0.error() << ")";
  }
  Job job1(ring_dir.path(), rank1);
  ASSERT_GT(job0.host_pid(), 1);
  ASSERT_GT(job1.host_pid(), 1);
  ASSERT_GT(job0.proxy_tid(), 0);
  ASSERT_GT(job1.proxy_tid(), 0);

  // The QP table as the kernel would list it: QPs named by the thread that created them.
  nl::Qp kernel_qp = Qp(0x1a7, 0);
  kernel_qp.kernel_name = "ib_core";
  auto write_table = [&](bool with_new_qp) {
    std::vector<nl::Qp> mlx5_0 = {Qp(0x1a0, job0.proxy_tid()), Qp(0x1a1, job0.proxy_tid()),
                                  Qp(0x1a2, job0.proxy_tid()), kernel_qp};
    if (with_new_qp) mlx5_0.push_back(Qp(0x1b0, job0.proxy_tid()));
    // Replaced atomically: the agent may read it at any time.
    const std::string path = tables.path() + "/qps.nl";
    nl::WriteFile(path + ".tmp",
                  nl::Concat({nl::QpDumpReply(0, "mlx5_0", mlx5_0, 11, 77, 2),
                              nl::QpDumpReply(1, "mlx5_1", {Qp(0x1a0, job1.proxy_tid())}, 12, 77),
                              nl::QpDumpReply(3, "mlx5_3", {Qp(0x1a7, ::getpid())}, 13, 77)}));
    ASSERT_EQ(::rename((path + ".tmp").c_str(), path.c_str()), 0);
  };
  write_table(false);

  AgentProcess agent("plugin:\n  ring_dir: " + ring_dir.path() +
                     "\n  poll_interval: 20ms\n  qp_table: " + tables.path() + "/qps.nl\n" +
                     "ebpf:\n  enabled: false\n");
  ASSERT_TRUE(agent.ok()) << agent.startup_log();

  std::string body;
  ASSERT_TRUE(WaitFor(
      [&] {
        body = agent.Get("/metrics").body;
        return SampleValue(body, Info(1, 0, "send", "mlx5_1")) == 1 &&
               SampleValue(body, Info(0, 0, "send", "mlx5_0")) == 1 &&
               SampleValue(body, Info(0, 0, "recv", "mlx5_0")) == 1;
      },
      seconds(10)))
      << body << agent.startup_log();
  // Exactly those three: the same QP number never crosses processes or HCAs, and 0x1a7 (another
  // process's QP, and a kernel QP) is not rank 0's.
  std::size_t series = 0;
  for (std::size_t at = body.find("\nncclscope_nccl_channel_nic_info{"); at != std::string::npos;
       at = body.find("\nncclscope_nccl_channel_nic_info{", at + 1)) {
    ++series;
  }
  EXPECT_EQ(series, 3u) << body;
  EXPECT_EQ(SampleValue(body,
                        "ncclscope_nccl_channel_nic_lookup_failures_total{reason="
                        "\"qp_not_found\"}"),
            1);
  EXPECT_TRUE(std::isnan(SampleValue(body,
                                     "ncclscope_nccl_channel_nic_lookup_failures_total{reason="
                                     "\"owner_unknown\"}")))
      << "no failure: no series";
  // 6 QP numbers in 5 records: 0x1a0, 0x1a1, 0x1a2, 0x1a7 of rank 0, 0x1a0 twice of rank 1.
  EXPECT_EQ(SampleValue(body, "ncclscope_nccl_channel_nic_lookups_total"), 6);
  EXPECT_EQ(SampleValue(body, "ncclscope_nccl_qp_table_refreshes_total{result=\"ok\"}"), 1);
  EXPECT_EQ(SampleValue(body, "ncclscope_nccl_network_ops_by_net_type_total{net_type=\"ib\"}"), 5);
  EXPECT_EQ(SampleValue(body, "ncclscope_nccl_qp_table_skipped_total{reason=\"no_owner\"}"), 1);

  // A new connection's QP: one more dump, no sooner than 5 s after the last one, then named.
  write_table(true);
  ASSERT_TRUE(job0.WritePhase2());
  ASSERT_TRUE(WaitFor(
      [&] {
        body = agent.Get("/metrics").body;
        return SampleValue(body, Info(0, 2, "send", "mlx5_0")) == 1;
      },
      seconds(15)))
      << body;
  EXPECT_EQ(SampleValue(body, "ncclscope_nccl_qp_table_refreshes_total{result=\"ok\"}"), 2);
  EXPECT_EQ(SampleValue(body, "ncclscope_nccl_channel_nic_lookups_total"), 9);

  EXPECT_TRUE(UndocumentedMetrics(body).empty())
      << "undocumented in docs/metrics.md: " << UndocumentedMetrics(body)[0];
  const RunResult lint = RunCommand({NCCLSCOPE_PROMTOOL, "check", "metrics"}, body);
  EXPECT_EQ(lint.exit_code, 0) << lint.output;
}

}  // namespace
}  // namespace ncclscope::testing
