// The eBPF source for real, through the agent binary: BPF programs on the real libnccl.so.2 (no
// GPU: its calls fail fast, the probes fire), a fake NCCL whose communicators succeed, a fake
// libibverbs with rdma-core's versioned symbols, processes in their own mount and PID namespaces
// on overlayfs, a library replaced on disk, processes that exit while being attached, and the
// agent without BPF privileges. Every workload runs in its own fake pod (cgroup + runtime names),
// so the counts are exact even while other processes on the machine use NCCL.
// Needs root; skips with the reason otherwise.

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>
#include <tuple>

#include "tests/ebpf/fake_pod.h"
#include "tests/support/agent_process.h"
#include "tests/support/metrics_doc.h"

namespace ncclscope::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr const char* kRealNccl = "/usr/local/cuda/lib/libnccl.so.2";

// A test program (tests/ebpf/testprogs) that loads a library, says "ready", waits for its go
// file, makes its calls, says "done", and (optionally) waits for its exit file.
class Workload {
 public:
  Workload(const TempDir& dir, std::vector<std::string> argv, const std::string& name,
           std::vector<std::string> env = {})
      : go_(dir.path() + "/" + name + ".go"), exit_(dir.path() + "/" + name + ".exit") {
    argv.push_back(go_);
    argv.push_back(exit_);
    std::filesystem::create_directories(dir.path() + "/" + name);
    process_ = std::make_unique<Subprocess>(argv, dir.path() + "/" + name, std::move(env));
  }
  bool WaitReady() { return WaitStdout("ready", seconds(20)); }
  void Go() { std::ofstream(go_) << "go\n"; }
  bool WaitDone() { return WaitStdout("done", seconds(20)); }
  void Exit() {
    std::ofstream(exit_) << "exit\n";
    process_->Wait(seconds(20));
  }
  pid_t pid() const { return process_->pid(); }
  std::string Stdout() const { return process_->Stdout(); }
  std::string Stderr() const { return process_->Stderr(); }

 private:
  bool WaitStdout(const std::string& what, milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (process_->Stdout().find(what) != std::string::npos) return true;
      if (!process_->Running()) return process_->Stdout().find(what) != std::string::npos;
      std::this_thread::sleep_for(milliseconds(10));
    }
    return false;
  }
  std::string go_, exit_;
  std::unique_ptr<Subprocess> process_;
};

std::size_t Count(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

class EbpfProbeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) {
      GTEST_SKIP() << "needs root (loads BPF programs, attaches uprobes, creates cgroups and "
                      "mount namespaces); CI runs it as root";
    }
    if (access(kRealNccl, R_OK) != 0) GTEST_SKIP() << kRealNccl << " not installed";
    state_dir_ = dir_.path() + "/runtime-state";
    std::filesystem::create_directories(state_dir_);
  }

  // `plugin_ring_dir` empty: the profiler source is off.
  std::unique_ptr<AgentProcess> StartAgent(const std::string& plugin_ring_dir = "") {
    const std::string plugin = plugin_ring_dir.empty() ? "plugin:\n  enabled: false\n"
                                                       : "plugin:\n  ring_dir: " + plugin_ring_dir +
                                                             "\n  poll_interval: 20ms\n";
    auto agent =
        std::make_unique<AgentProcess>("log:\n  level: debug\n" + plugin +
                                       "rdma:\n  enabled: false\nnvlink:\n  enabled: false\n"
                                       "ebpf:\n  sweep_interval: 1s\n  rescan_delay: 100ms\n"
                                       "  runtime_state_files: [\"" +
                                       state_dir_ + "/{id}/config.json\"]\n");
    return agent;
  }

  std::unique_ptr<FakePod> Pod(const std::string& pod, bool v1 = false) {
    auto p = std::make_unique<FakePod>(state_dir_, "ncclscope-test", pod, "worker", v1);
    return p;
  }

  // Polls the agent until `series` has `value` (or the timeout passes); returns the last value.
  static double WaitFor(const AgentProcess& agent, const std::string& series, double value,
                        milliseconds timeout = seconds(15)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    double last = std::nan("");
    while (std::chrono::steady_clock::now() < deadline) {
      last = agent.Sample(series);
      if (last == value) return last;
      std::this_thread::sleep_for(milliseconds(100));
    }
    return last;
  }

  // Waits until the agent's log says that it found the library in process `pid` (attaching
  // the file then, or having attached it for another process before).
  static bool WaitAttached(AgentProcess& agent, pid_t pid) {
    return WaitCount(agent, "process " + std::to_string(pid) + " maps ", 1);
  }

  // Waits until `needle` occurs at least `n` times in the agent's log.
  static bool WaitCount(AgentProcess& agent, const std::string& needle, std::size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + seconds(15);
    while (std::chrono::steady_clock::now() < deadline) {
      if (Count(agent.process().Stderr(), needle) >= n) return true;
      std::this_thread::sleep_for(milliseconds(50));
    }
    return false;
  }

  TempDir dir_;
  std::string state_dir_;
};

// The collectives scenario of nccl_calls.c, per round: function -> bytes.
constexpr std::pair<const char*, double> kCollectives[] = {
    {"ncclAllReduce", 1000 * 4}, {"ncclBroadcast", 10 * 8}, {"ncclBcast", 3 * 2},
    {"ncclReduce", 7 * 8},       {"ncclAllGather", 5 * 1},  {"ncclReduceScatter", 8 * 2},
    {"ncclAlltoAll", 2 * 4},     {"ncclGather", 4 * 8},     {"ncclScatter", 6 * 1},
    {"ncclSend", 16 * 1},        {"ncclRecv", 32 * 4}};

TEST_F(EbpfProbeTest, RealNcclCallsAndBytesAreCountedExactly) {
  auto agent = StartAgent();
  ASSERT_TRUE(agent->ok()) << agent->startup_log();
  ASSERT_EQ(agent->Sample("ncclscope_source_up{source=\"ebpf\"}"), 1) << agent->startup_log();
  auto pod = Pod("real-nccl");
  ASSERT_TRUE(pod->ok()) << pod->error();

  constexpr int kRounds = 25;
  Workload w(dir_, {NCCLSCOPE_NCCL_CALLS, kRealNccl, "collectives", std::to_string(kRounds)},
             "real");
  ASSERT_TRUE(w.WaitReady()) << w.Stderr();
  ASSERT_TRUE(pod->Adopt(w.pid()));
  ASSERT_TRUE(WaitAttached(*agent, w.pid())) << agent->process().Stderr();
  w.Go();
  ASSERT_TRUE(w.WaitDone()) << w.Stderr();

  const std::string l = pod->Labels();
  for (const auto& [function, bytes] : kCollectives) {
    const std::string labels = l + ",function=\"" + function + "\"";
    EXPECT_EQ(WaitFor(*agent, "ncclscope_ebpf_nccl_calls_total{" + labels + "}", kRounds), kRounds)
        << function;
    EXPECT_EQ(agent->Sample("ncclscope_ebpf_nccl_bytes_total{" + labels + "}"), kRounds * bytes)
        << function;
    // comm = NULL: NCCL refuses each one.
    EXPECT_EQ(agent->Sample("ncclscope_ebpf_nccl_errors_total{" + labels +
                            ",result=\"ncclInvalidArgument\"}"),
              kRounds)
        << function;
  }
  // ncclBcast calls ncclBroadcast inside NCCL: counted once, as ncclBcast (checked above).
  for (const char* function :
       {"ncclGroupStart", "ncclGroupEnd", "ncclCommInitRank", "ncclCommDestroy", "ncclCommAbort"}) {
    EXPECT_EQ(
        agent->Sample("ncclscope_ebpf_nccl_calls_total{" + l + ",function=\"" + function + "\"}"),
        kRounds)
        << function;
  }
  EXPECT_EQ(agent->Sample("ncclscope_ebpf_nccl_errors_total{" + l +
                          ",function=\"ncclCommInitRank\",result=\"ncclUnhandledCudaError\"}"),
            kRounds);
  // The init arguments, decoded from registers (rank is PARM3: the unique id is on the stack).
  // Logged from ring-buffer events, asynchronously to the counters above.
  EXPECT_TRUE(WaitCount(
      *agent, "ncclCommInitRank failed: ncclUnhandledCudaError pid=" + std::to_string(w.pid()),
      kRounds))
      << agent->process().Stderr();
  EXPECT_NE(agent->process().Stderr().find("pod=ncclscope-test/real-nccl/worker nranks=4 rank=3"),
            std::string::npos)
      << agent->process().Stderr();
  EXPECT_EQ(agent->Sample("ncclscope_ebpf_nccl_communicator_aborts_total{" + l + "}"), kRounds);

  // The scrape is clean and documented.
  w.Exit();
  const std::string metrics = agent->Get("/metrics").body;
  const RunResult lint = RunCommand({NCCLSCOPE_PROMTOOL, "check", "metrics"}, metrics);
  EXPECT_EQ(lint.exit_code, 0) << lint.output;
  EXPECT_EQ(lint.output, "") << lint.output;
  EXPECT_EQ(UndocumentedMetrics(metrics), std::vector<std::string>{}) << "add to docs/metrics.md";
  // Counts of an exited process are kept (folded into totals), not lost.
  EXPECT_EQ(WaitFor(*agent, "ncclscope_ebpf_nccl_calls_total{" + l + ",function=\"ncclAllReduce\"}",
                    kRounds),
            kRounds);
}

// Two fake pods on the real libnccl.so.2: one job loads the profiler plugin (its ring is in the
// agent's ring directory), the other does not. The agent names the pod of the ring's writer on
// comm_info (found from the ring's lock holder and its cgroup, not from anything in the ring)
// and counts the job without a ring as uncovered, in its own pod.
TEST_F(EbpfProbeTest, RingWritersArePodAttributedAndJobsWithoutThePluginAreUncovered) {
  const std::string ring_dir = dir_.path() + "/rings";
  std::filesystem::create_directories(ring_dir);
  auto agent = StartAgent(ring_dir);
  ASSERT_TRUE(agent->ok()) << agent->startup_log();
  ASSERT_EQ(agent->Sample("ncclscope_source_up{source=\"ebpf\"}"), 1) << agent->startup_log();
  auto profiled_pod = Pod("profiled");
  auto plain_pod = Pod("plain");
  ASSERT_TRUE(profiled_pod->ok()) << profiled_pod->error();
  ASSERT_TRUE(plain_pod->ok()) << plain_pod->error();

  Workload profiled(dir_, {NCCLSCOPE_PROFILED_NCCL_CALLS, NCCLSCOPE_PLUGIN_PATH, kRealNccl, "3"},
                    "profiled", {"NCCLSCOPE_RING_DIR=" + ring_dir});
  Workload plain(dir_, {NCCLSCOPE_NCCL_CALLS, kRealNccl, "collectives", "3"}, "plain");
  ASSERT_TRUE(profiled.WaitReady()) << profiled.Stderr();
  ASSERT_TRUE(plain.WaitReady()) << plain.Stderr();
  // Into their pods before the plugin creates its ring: the agent attributes a ring when it
  // first opens it.
  ASSERT_TRUE(profiled_pod->Adopt(profiled.pid()));
  ASSERT_TRUE(plain_pod->Adopt(plain.pid()));
  ASSERT_TRUE(WaitAttached(*agent, profiled.pid())) << agent->process().Stderr();
  ASSERT_TRUE(WaitAttached(*agent, plain.pid())) << agent->process().Stderr();
  profiled.Go();
  plain.Go();
  ASSERT_TRUE(profiled.WaitDone()) << profiled.Stderr();
  ASSERT_TRUE(plain.WaitDone()) << plain.Stderr();

  // The plain job sets no NCCL_PROFILER_PLUGIN; the profiled one drives the plugin through ABI v5.
  const std::string uncovered = "ncclscope_ebpf_uncovered_processes{";
  const std::string not_requested = ",reason=\"not_requested\"}";
  EXPECT_EQ(WaitFor(*agent, uncovered + plain_pod->Labels() + not_requested, 1), 1);
  EXPECT_EQ(WaitFor(*agent, uncovered + profiled_pod->Labels() + not_requested, 0), 0);
  EXPECT_EQ(agent->Sample(uncovered + plain_pod->Labels() + ",reason=\"load_failed\"}"), 0);
  const std::string process_info = "ncclscope_ebpf_nccl_process_info{";
  const std::string scraped = agent->Get("/metrics").body;
  for (const auto& [pod, pid, plugin] : {std::tuple{plain_pod.get(), plain.pid(), "not_requested"},
                                         std::tuple{profiled_pod.get(), profiled.pid(), "v5"}}) {
    // The version is the real library's, whichever is installed: only its shape is checked here
    // (tests/unit/ebpf/nccl_version_test.cc checks it against nccl.h).
    const std::string prefix =
        process_info + pod->Labels() + ",pid=\"" + std::to_string(pid) + "\",nccl_version=\"2.";
    const std::size_t at = scraped.find(prefix);
    ASSERT_NE(at, std::string::npos) << prefix << "\n" << scraped;
    const std::string line = scraped.substr(at, scraped.find('\n', at) - at);
    EXPECT_NE(line.find(std::string(",plugin=\"") + plugin + "\"} 1"), std::string::npos) << line;
  }
  std::string body;
  const std::string info = "ncclscope_nccl_comm_info{comm=\"";
  const auto deadline = std::chrono::steady_clock::now() + seconds(15);
  while (std::chrono::steady_clock::now() < deadline) {
    body = agent->Get("/metrics").body;
    if (body.find(info) != std::string::npos) break;
    std::this_thread::sleep_for(milliseconds(100));
  }
  const std::size_t at = body.find(info);
  ASSERT_NE(at, std::string::npos) << body;
  const std::string line = body.substr(at, body.find('\n', at) - at);
  EXPECT_NE(line.find("comm_name=\"coverage-test\""), std::string::npos) << line;
  EXPECT_NE(line.find(profiled_pod->Labels() + ",attribution=\"verified\""), std::string::npos)
      << line;
  EXPECT_EQ(Count(body, "ncclscope_nccl_comm_info{"), 1u) << body;

  // When the uncovered job exits, its pod's series goes (its counts stay, folded into totals).
  plain.Exit();
  const std::string plain_series = uncovered + plain_pod->Labels() + not_requested;
  bool gone = false;
  for (int i = 0; i < 150 && !gone; ++i) {
    gone = std::isnan(agent->Sample(plain_series));
    if (!gone) std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_TRUE(gone);
  profiled.Exit();
  const RunResult lint =
      RunCommand({NCCLSCOPE_PROMTOOL, "check", "metrics"}, agent->Get("/metrics").body);
  EXPECT_EQ(lint.output, "") << lint.output;
}

TEST_F(EbpfProbeTest, FakeNcclCommunicatorLifecycle) {
  auto agent = StartAgent();
  ASSERT_TRUE(agent->ok()) << agent->startup_log();
  auto pod_open = Pod("comms-open");
  auto pod_closed = Pod("comms-closed", /*v1=*/true);
  ASSERT_TRUE(pod_open->ok()) << pod_open->error();
  ASSERT_TRUE(pod_closed->ok()) << pod_closed->error();

  Workload open(dir_, {NCCLSCOPE_NCCL_CALLS, NCCLSCOPE_FAKE_NCCL, "communicators", "1"}, "open");
  Workload closed(dir_, {NCCLSCOPE_NCCL_CALLS, NCCLSCOPE_FAKE_NCCL, "lifecycle", "1"}, "closed");
  // Calls left by longjmp (their return probes never fire) in a pod of their own.
  auto pod_escape = Pod("escape");
  ASSERT_TRUE(pod_escape->ok()) << pod_escape->error();
  constexpr int kEscapes = 3;
  Workload escape(dir_,
                  {NCCLSCOPE_NCCL_CALLS, NCCLSCOPE_FAKE_NCCL, "escape", std::to_string(kEscapes)},
                  "escape");
  ASSERT_TRUE(open.WaitReady()) << open.Stderr();
  ASSERT_TRUE(closed.WaitReady()) << closed.Stderr();
  ASSERT_TRUE(escape.WaitReady()) << escape.Stderr();
  ASSERT_TRUE(pod_open->Adopt(open.pid()));
  ASSERT_TRUE(pod_closed->Adopt(closed.pid()));
  ASSERT_TRUE(pod_escape->Adopt(escape.pid()));
  ASSERT_TRUE(WaitAttached(*agent, open.pid()));
  ASSERT_TRUE(WaitAttached(*agent, closed.pid()));
  ASSERT_TRUE(WaitAttached(*agent, escape.pid()));
  open.Go();
  closed.Go();
  escape.Go();
  ASSERT_TRUE(open.WaitDone()) << open.Stderr();
  ASSERT_TRUE(closed.WaitDone()) << closed.Stderr();
  ASSERT_TRUE(escape.WaitDone()) << escape.Stderr();

  // Each round's escaped AllReduce and the one after it are both API calls: a call that never
  // returned must not make every later call of its thread look nested (uncounted).
  const std::string escape_calls = "ncclscope_ebpf_nccl_calls_total{" + pod_escape->Labels();
  EXPECT_EQ(WaitFor(*agent, escape_calls + ",function=\"ncclAllReduce\"}", 2 * kEscapes),
            2 * kEscapes);
  EXPECT_EQ(agent->Sample(escape_calls + ",function=\"ncclCommInitRank\"}"), kEscapes);
  EXPECT_EQ(agent->Sample(escape_calls + ",function=\"ncclCommDestroy\"}"), kEscapes);

  auto comm = [&](const FakePod& pod, pid_t pid, const char* nranks, const char* rank) {
    return "ncclscope_ebpf_nccl_communicators{" + pod.Labels() + ",pid=\"" + std::to_string(pid) +
           "\",nranks=\"" + nranks + "\",rank=\"" + rank + "\"}";
  };
  // Open: InitRank(8, 5), InitAll(2) -> ranks 0 and 1 of 2, Split -> size and rank filled in
  // from ncclCommCount / ncclCommUserRank (4 ranks, rank = key 0).
  EXPECT_EQ(WaitFor(*agent, comm(*pod_open, open.pid(), "8", "5"), 1), 1);
  EXPECT_EQ(agent->Sample(comm(*pod_open, open.pid(), "2", "0")), 1);
  EXPECT_EQ(agent->Sample(comm(*pod_open, open.pid(), "2", "1")), 1);
  EXPECT_EQ(WaitFor(*agent, comm(*pod_open, open.pid(), "4", "0"), 1), 1);
  // Closed (a cgroup v1 pod, attributed through /proc/<pid>/cgroup): the destroyed and the
  // aborted communicators are gone, InitAll's two remain; one abort.
  EXPECT_EQ(WaitFor(*agent, comm(*pod_closed, closed.pid(), "2", "0"), 1), 1);
  EXPECT_TRUE(std::isnan(agent->Sample(comm(*pod_closed, closed.pid(), "8", "5"))));
  EXPECT_TRUE(std::isnan(agent->Sample(comm(*pod_closed, closed.pid(), "4", "0"))));
  EXPECT_EQ(
      agent->Sample("ncclscope_ebpf_nccl_communicator_aborts_total{" + pod_closed->Labels() + "}"),
      1);
  EXPECT_EQ(agent->Sample("ncclscope_ebpf_nccl_calls_total{" + pod_closed->Labels() +
                          ",function=\"ncclCommSplit\"}"),
            1);
  // A process that exits takes its communicators with it.
  open.Exit();
  closed.Exit();
  escape.Exit();
  const auto deadline = std::chrono::steady_clock::now() + seconds(15);
  while ((!std::isnan(agent->Sample(comm(*pod_open, open.pid(), "8", "5"))) ||
          !std::isnan(agent->Sample(comm(*pod_closed, closed.pid(), "2", "0")))) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_TRUE(std::isnan(agent->Sample(comm(*pod_open, open.pid(), "8", "5"))));
  EXPECT_TRUE(std::isnan(agent->Sample(comm(*pod_closed, closed.pid(), "2", "0"))));
}

TEST_F(EbpfProbeTest, FakeVerbsWithVersionedSymbols) {
  auto agent = StartAgent();
  ASSERT_TRUE(agent->ok()) << agent->startup_log();
  auto pod = Pod("verbs");
  ASSERT_TRUE(pod->ok()) << pod->error();
  Workload w(dir_, {NCCLSCOPE_VERBS_CALLS, NCCLSCOPE_FAKE_VERBS, "3"}, "verbs");
  ASSERT_TRUE(w.WaitReady()) << w.Stderr();
  ASSERT_TRUE(pod->Adopt(w.pid()));
  ASSERT_TRUE(WaitAttached(*agent, w.pid())) << agent->process().Stderr();
  w.Go();
  ASSERT_TRUE(w.WaitDone()) << w.Stderr();

  const std::string l = pod->Labels();
  auto calls = [&](const char* f) {
    return "ncclscope_ebpf_ibv_calls_total{" + l + ",function=\"" + f + "\"}";
  };
  // ibv_create_qp@IBVERBS_1.0 (the compat version) is another function: not counted.
  EXPECT_EQ(WaitFor(*agent, calls("ibv_create_qp"), 6), 6);
  EXPECT_EQ(agent->Sample(calls("ibv_modify_qp")), 18);
  EXPECT_EQ(agent->Sample(calls("ibv_destroy_qp")), 3);
  // ibv_reg_mr and ibv_reg_dmabuf_mr call ibv_reg_mr_iova2 inside: not counted twice.
  EXPECT_EQ(agent->Sample(calls("ibv_reg_mr")), 3);
  EXPECT_EQ(agent->Sample(calls("ibv_reg_mr_iova2")), 3);
  EXPECT_EQ(agent->Sample(calls("ibv_reg_dmabuf_mr")), 3);
  EXPECT_EQ(agent->Sample(calls("ibv_dereg_mr")), 9);
  auto bytes = [&](const char* f) {
    return "ncclscope_ebpf_ibv_registered_bytes_total{" + l + ",function=\"" + f + "\"}";
  };
  EXPECT_EQ(agent->Sample(bytes("ibv_reg_mr")), 3 * 4096);
  EXPECT_EQ(agent->Sample(bytes("ibv_reg_mr_iova2")), 3 * 8192);
  EXPECT_EQ(agent->Sample(bytes("ibv_reg_dmabuf_mr")), 3 * 1024);
  EXPECT_EQ(agent->Sample("ncclscope_ebpf_ibv_errors_total{" + l +
                          ",function=\"ibv_create_qp\",result=\"null\"}"),
            3);
  EXPECT_EQ(agent->Sample("ncclscope_ebpf_ibv_errors_total{" + l +
                          ",function=\"ibv_modify_qp\",result=\"EINVAL\"}"),
            3);
  for (const char* state : {"INIT", "RTR", "RTS", "ERR"}) {
    EXPECT_EQ(
        agent->Sample("ncclscope_ebpf_ibv_qp_transitions_total{" + l + ",state=\"" + state + "\"}"),
        3)
        << state;
  }
  EXPECT_TRUE(std::isnan(
      agent->Sample("ncclscope_ebpf_ibv_qp_transitions_total{" + l + ",state=\"RESET\"}")));
  // Logged from ring-buffer events, asynchronously to the counters above.
  EXPECT_TRUE(WaitCount(
      *agent, "queue pair 4667 moved to the error state pid=" + std::to_string(w.pid()), 3))
      << agent->process().Stderr();
}

TEST_F(EbpfProbeTest, OverlayContainersSharingALayerAreAttachedOnceAndCountedOnce) {
  auto agent = StartAgent();
  ASSERT_TRUE(agent->ok()) << agent->startup_log();
  const std::string lower = dir_.path() + "/image-layer";
  std::filesystem::create_directories(lower);
  std::filesystem::copy_file(kRealNccl, lower + "/libnccl.so.2");

  constexpr int kRounds = 7;
  std::vector<std::unique_ptr<FakePod>> pods;
  std::vector<std::unique_ptr<Workload>> workloads;
  for (const std::string name : {"container-a", "container-b"}) {
    pods.push_back(Pod(name));
    ASSERT_TRUE(pods.back()->ok()) << pods.back()->error();
    const std::string root = dir_.path() + "/" + name;
    // Own mount + PID namespace; the overlay (and so the library path) is invisible outside.
    workloads.push_back(std::make_unique<Workload>(
        dir_,
        std::vector<std::string>{NCCLSCOPE_CONTAINER_RUN, lower, root + "/upper", root + "/work",
                                 root + "/merged", NCCLSCOPE_NCCL_CALLS,
                                 root + "/merged/libnccl.so.2", "collectives",
                                 std::to_string(kRounds)},
        name));
  }
  // The workload is the child of unshare (the subprocess): pid 1 inside its namespace.
  for (std::size_t i = 0; i < workloads.size(); ++i) {
    ASSERT_TRUE(workloads[i]->WaitReady()) << workloads[i]->Stderr();
    const RunResult child =
        RunCommand({"/usr/bin/pgrep", "-P", std::to_string(workloads[i]->pid())});
    ASSERT_EQ(child.exit_code, 0) << child.output;
    const pid_t host_pid = std::stoi(child.output);
    ASSERT_TRUE(pods[i]->Adopt(host_pid));
    ASSERT_TRUE(WaitAttached(*agent, host_pid)) << agent->process().Stderr();
  }
  const std::string merged_a = dir_.path() + "/container-a/merged/libnccl.so.2";
  const std::string merged_b = dir_.path() + "/container-b/merged/libnccl.so.2";
  const std::string log = agent->process().Stderr();
  // One attach for the one real file, whichever container was seen first.
  EXPECT_EQ(Count(log, "attached nccl probes to " + merged_a) +
                Count(log, "attached nccl probes to " + merged_b),
            1u)
      << log;
  for (auto& w : workloads) w->Go();
  for (auto& w : workloads) ASSERT_TRUE(w->WaitDone()) << w->Stderr();
  for (auto& pod : pods) {
    const std::string l = pod->Labels();
    EXPECT_EQ(WaitFor(*agent, "ncclscope_ebpf_nccl_calls_total{" + l + ",function=\"ncclSend\"}",
                      kRounds),
              kRounds)
        << l;
    EXPECT_EQ(
        agent->Sample("ncclscope_ebpf_nccl_bytes_total{" + l + ",function=\"ncclAllReduce\"}"),
        kRounds * 4000.0)
        << l;
  }
  for (auto& w : workloads) w->Exit();
}

TEST_F(EbpfProbeTest, LibraryReplacedOnDiskAndProcessesExitingWhileAttached) {
  auto agent = StartAgent();
  ASSERT_TRUE(agent->ok()) << agent->startup_log();
  const std::string lib = dir_.path() + "/lib/libnccl.so.2";
  std::filesystem::create_directories(dir_.path() + "/lib");
  std::filesystem::copy_file(kRealNccl, lib);

  // Processes that map the library and exit at once, racing their own discovery and attach.
  std::ofstream(dir_.path() + "/flash.go") << "go\n";
  std::ofstream(dir_.path() + "/flash.exit") << "exit\n";
  std::vector<std::unique_ptr<Subprocess>> flashes;
  flashes.reserve(20);
  for (int i = 0; i < 20; ++i) {
    flashes.push_back(std::make_unique<Subprocess>(
        std::vector<std::string>{NCCLSCOPE_NCCL_CALLS, lib, "none", "0", dir_.path() + "/flash.go",
                                 dir_.path() + "/flash.exit"},
        dir_.path()));
  }
  for (auto& f : flashes) EXPECT_EQ(f->Wait(seconds(20)), 0);

  auto pod_old = Pod("old-library");
  auto pod_new = Pod("new-library");
  ASSERT_TRUE(pod_old->ok() && pod_new->ok());
  Workload old_w(dir_, {NCCLSCOPE_NCCL_CALLS, lib, "collectives", "4"}, "old");
  ASSERT_TRUE(old_w.WaitReady()) << old_w.Stderr();
  ASSERT_TRUE(pod_old->Adopt(old_w.pid()));
  ASSERT_TRUE(WaitAttached(*agent, old_w.pid())) << agent->process().Stderr();

  // Replace the file as package managers do: write a new one, rename it over the old.
  std::filesystem::copy_file(kRealNccl, lib + ".new");
  std::filesystem::rename(lib + ".new", lib);
  Workload new_w(dir_, {NCCLSCOPE_NCCL_CALLS, lib, "collectives", "6"}, "new");
  ASSERT_TRUE(new_w.WaitReady()) << new_w.Stderr();
  ASSERT_TRUE(pod_new->Adopt(new_w.pid()));
  ASSERT_TRUE(WaitAttached(*agent, new_w.pid())) << agent->process().Stderr();

  old_w.Go();
  new_w.Go();
  ASSERT_TRUE(old_w.WaitDone());
  ASSERT_TRUE(new_w.WaitDone());
  const std::string series = ",function=\"ncclAllReduce\"}";
  EXPECT_EQ(WaitFor(*agent, "ncclscope_ebpf_nccl_calls_total{" + pod_old->Labels() + series, 4), 4);
  EXPECT_EQ(WaitFor(*agent, "ncclscope_ebpf_nccl_calls_total{" + pod_new->Labels() + series, 6), 6);
  // The old file's probes go when its last user does (the short-lived processes above may
  // have attached and detached it already: count).
  const std::string detached = "detached nccl probes from " + lib + " (dev";
  const std::size_t before = Count(agent->process().Stderr(), detached);
  old_w.Exit();
  EXPECT_TRUE(WaitCount(*agent, detached, before + 1)) << agent->process().Stderr();
  new_w.Exit();
  EXPECT_TRUE(agent->process().Running());
  EXPECT_EQ(agent->Sample("ncclscope_source_up{source=\"ebpf\"}"), 1);
}

TEST_F(EbpfProbeTest, WithoutBpfPrivilegeTheSourceIsDownAndTheAgentRuns) {
  AgentProcess agent("ebpf:\n  enabled: true\n", {}, {},
                     {"/usr/bin/setpriv", "--bounding-set=-bpf,-perfmon,-sys_admin", "--"});
  ASSERT_TRUE(agent.ok()) << agent.startup_log();
  EXPECT_EQ(agent.Sample("ncclscope_source_up{source=\"ebpf\"}"), 0);
  EXPECT_EQ(agent.Sample("ncclscope_source_enabled{source=\"ebpf\"}"), 1);
  EXPECT_NE(agent.process().Stderr().find("eBPF source down: not permitted to load BPF programs"),
            std::string::npos)
      << agent.process().Stderr();
  EXPECT_EQ(agent.Get("/metrics").status, 200);
}

}  // namespace
}  // namespace ncclscope::testing
