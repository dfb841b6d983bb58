// End to end: an NCCL-like job (tests/support/nccl-replay, driving the real plugin .so through its
// ABI) -> the plugin's shared-memory ring -> the real ncclscope-agent binary -> /metrics. Counts
// and bytes must equal what the job drove, drops must equal what overflowed, an agent killed and
// restarted mid-run must lose nothing that fit in the ring, and the config's controls must reach
// the job.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "tests/support/agent_process.h"
#include "tests/support/metrics_doc.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait_for.h"

namespace ncclscope::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

struct Expected {
  int phase = 0;
  std::string labels;  // comm="..",rank="..",func="..",algo="..",proto="..",size=".."
  std::uint64_t ops = 0;
  std::uint64_t bytes = 0;
};

// "expect phase=1 comm=0x.. rank=0 func=F algo=A proto=P size=S ops=N bytes=B" lines.
std::vector<Expected> ParseExpectations(const std::string& out) {
  std::vector<Expected> result;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("expect ", 0) != 0) continue;
    std::map<std::string, std::string> kv;
    std::istringstream fields(line.substr(7));
    for (std::string field; fields >> field;) {
      const std::size_t eq = field.find('=');
      kv[field.substr(0, eq)] = field.substr(eq + 1);
    }
    Expected e;
    e.phase = std::stoi(kv["phase"]);
    e.labels = "comm=\"" + kv["comm"] + "\",rank=\"" + kv["rank"] + "\",func=\"" + kv["func"] +
               "\",algo=\"" + kv["algo"] + "\",proto=\"" + kv["proto"] + "\",size=\"" + kv["size"] +
               "\"";
    e.ops = std::stoull(kv["ops"]);
    e.bytes = std::stoull(kv["bytes"]);
    result.push_back(e);
  }
  return result;
}

// Per series: ops and bytes summed over the phases in `phases` (all when empty).
std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> Sum(
    const std::vector<Expected>& expected, std::vector<int> phases = {}) {
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> sums;
  for (const Expected& e : expected) {
    if (!phases.empty() && std::find(phases.begin(), phases.end(), e.phase) == phases.end()) {
      continue;
    }
    sums[e.labels].first += e.ops;
    sums[e.labels].second += e.bytes;
  }
  return sums;
}

double Value(const std::string& body, const std::string& series) {
  const double v = SampleValue(body, series);
  return std::isnan(v) ? 0 : v;
}

// Sum of every sample of `family` in `body` (all label sets).
double Total(const std::string& body, const std::string& family) {
  double total = 0;
  std::istringstream lines(body);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(family + "{", 0) != 0 && line.rfind(family + " ", 0) != 0) continue;
    total += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return total;
}

// Whether /metrics shows exactly `sums` for ops and bytes (and nothing more in ops_total).
bool Matches(const std::string& body,
             const std::map<std::string, std::pair<std::uint64_t, std::uint64_t>>& sums,
             std::string* why) {
  std::uint64_t expected_total = 0;
  for (const auto& [labels, want] : sums) {
    expected_total += want.first;
    const double ops = Value(body, "ncclscope_nccl_ops_total{" + labels + "}");
    const double bytes = Value(body, "ncclscope_nccl_op_bytes_total{" + labels + "}");
    if (ops != static_cast<double>(want.first) || bytes != static_cast<double>(want.second)) {
      *why = labels + ": ops " + std::to_string(ops) + " want " + std::to_string(want.first) +
             ", bytes " + std::to_string(bytes) + " want " + std::to_string(want.second);
      return false;
    }
  }
  const double total = Total(body, "ncclscope_nccl_ops_total");
  if (total != static_cast<double>(expected_total)) {
    *why =
        "ops_total sums to " + std::to_string(total) + ", want " + std::to_string(expected_total);
    return false;
  }
  return true;
}

void Touch(const std::string& path) { std::ofstream(path) << "go\n"; }

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::string AgentConfig(const std::string& ring_dir, const std::string& extra = "") {
  return "plugin:\n  ring_dir: " + ring_dir +
         "\n  poll_interval: 20ms\n  kernel_duty_cycle: 1\n  proxy_duty_cycle: 1\n" + extra;
}

std::unique_ptr<Subprocess> StartJob(const TempDir& logs, const std::string& ring_dir,
                                     std::vector<std::string> args,
                                     std::vector<std::string> env = {}) {
  std::vector<std::string> argv = {NCCLSCOPE_REPLAY_PATH, "--plugin", NCCLSCOPE_PLUGIN_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  env.push_back("NCCLSCOPE_RING_DIR=" + ring_dir);
  // These tests count records: every op the replay drives must be one. The default
  // plugin.record_rate_limit (1,000 ops/s per process) records 1 in 2 once a phase runs 150 ms
  // above it, which a fast machine does (a CI run found 147 op records for 152 ops). The job's
  // environment wins over the agent's controls (plugin/src/settings.h), so this holds whichever
  // agent is up; the limit itself is tested in analytics_e2e_test.cc.
  env.push_back("NCCLSCOPE_RECORD_RATE_LIMIT=0");
  return std::make_unique<Subprocess>(argv, logs.path(), env);
}

TEST(PluginEndToEndTest, CountsAndBytesEqualWhatEachAbiVersionDrove) {
  TempDir ring_dir;
  AgentProcess agent(AgentConfig(ring_dir.path()));
  ASSERT_TRUE(agent.ok()) << agent.startup_log();
  std::vector<Expected> expected;
  for (const char* abi : {"4", "5", "6"}) {
    auto job = StartJob(agent.dir(), ring_dir.path(),
                        {"--abi", abi, "--comms", "2", "--ranks", "3", "--colls", "24", "--p2p",
                         "3", "--alltoall", "2", "--proxy"});
    ASSERT_EQ(job->Wait(seconds(60)), 0) << job->Stderr();
    const auto mine = ParseExpectations(job->Stdout());
    ASSERT_FALSE(mine.empty()) << job->Stdout();
    expected.insert(expected.end(), mine.begin(), mine.end());
  }
  const auto sums = Sum(expected);
  std::string why;
  std::string body;
  EXPECT_TRUE(WaitFor(
      [&] {
        body = agent.Get("/metrics").body;
        return Matches(body, sums, &why);
      },
      seconds(20), milliseconds(20)))
      << why;
  // Every op had GPU timing (KernelCh always on here) but the AlltoAlls' send and receive to the
  // rank itself, which NCCL gives no KernelCh (src/enqueue.cc:805 at v2.28.9-1):
  // 3 ABI versions x 2 comms x 3 ranks x 2 AlltoAlls x (Send + Recv).
  EXPECT_EQ(Total(body, "ncclscope_nccl_ops_timed_total"),
            Total(body, "ncclscope_nccl_ops_total") - 3 * 2 * 3 * 2 * 2);
  EXPECT_GT(Value(body, "ncclscope_nccl_records_total{type=\"proxy_op\"}"), 0);
  EXPECT_GT(Total(body, "ncclscope_nccl_channel_network_bytes_total"), 0);
  EXPECT_EQ(Total(body, "ncclscope_nccl_records_dropped_total"), 0);
  EXPECT_EQ(Total(body, "ncclscope_nccl_records_corrupt_total"), 0);
  // The three jobs exited: their rings were drained, then reclaimed.
  EXPECT_TRUE(WaitFor(
      [&] {
        return agent.Sample("ncclscope_nccl_rings_reclaimed_total") == 3 &&
               agent.Sample("ncclscope_nccl_rings{state=\"live\"}") == 0;
      },
      seconds(10), milliseconds(20)));
  body = agent.Get("/metrics").body;
  EXPECT_TRUE(Matches(body, sums, &why)) << why;  // reclaiming lost nothing, counted nothing twice
  const RunResult lint = RunCommand({NCCLSCOPE_PROMTOOL, "check", "metrics"}, body);
  EXPECT_EQ(lint.exit_code, 0) << lint.output;
  EXPECT_EQ(lint.output, "") << "promtool lint findings:\n" << lint.output;
  EXPECT_EQ(UndocumentedMetrics(body), std::vector<std::string>{}) << "add them to docs/metrics.md";
  // Nothing left to read: the reader's wait grows from poll_interval (20 ms) to the default
  // poll_interval_max (agent/profiler/pass_pacer.h).
  EXPECT_TRUE(WaitFor([&] { return agent.Sample("ncclscope_nccl_ring_poll_wait_seconds") == 0.5; },
                      seconds(10), milliseconds(20)))
      << agent.Sample("ncclscope_nccl_ring_poll_wait_seconds");
}

// plugin.record_one_in from the agent's config reaches a job through the controls file: the
// plugin writes 1 record in 4 (weight 4) and counts the rest; the op counts stay exact (the count
// table), and the per-op detail is the estimate of all ops: 4 x the records, which with the ops
// left out are exactly the ops driven.
TEST(PluginEndToEndTest, RecordOneInWeighsRecordsAndCountsEveryOp) {
  TempDir ring_dir;
  // A fixed 20 ms pace: the job's burst must not meet a reader resting at poll_interval_max.
  AgentProcess agent(AgentConfig(ring_dir.path(),
                                 "  record_one_in: 4\n  record_rate_limit: 0\n"
                                 "  poll_interval_max: 20ms\n"));
  ASSERT_TRUE(agent.ok()) << agent.startup_log();
  const std::string go = agent.dir().path() + "/go";
  auto job = StartJob(agent.dir(), ring_dir.path(),
                      {"--abi", "6", "--comms", "2", "--ranks", "3", "--colls", "200", "--p2p",
                       "20", "--proxy", "--phases", "2", "--go", go},
                      {"NCCLSCOPE_RING_SIZE=64MiB"});  // its burst fits: no drop to blur the sums
  ASSERT_TRUE(job->WaitForStderr("phase 1 done", seconds(60))) << job->Stderr();
  // The live process says what it records by: 1 in 4, as configured (no rate limit here).
  EXPECT_TRUE(WaitFor([&] { return agent.Sample("ncclscope_nccl_plugin_record_one_in") == 4; },
                      seconds(5), milliseconds(20)))
      << agent.Sample("ncclscope_nccl_plugin_record_one_in");
  // And the overhead governor's view of it: GPU timing always on, as configured.
  EXPECT_EQ(agent.Sample("ncclscope_nccl_plugin_duty_cycle_ratio{events=\"kernel_ch\"}"), 1);
  Touch(go + ".2");
  ASSERT_EQ(job->Wait(seconds(120)), 0) << job->Stderr();
  const auto expected = ParseExpectations(job->Stdout());
  ASSERT_FALSE(expected.empty()) << job->Stdout();
  std::uint64_t driven = 0;
  for (const Expected& e : expected) driven += e.ops;
  double counted = 0;
  double estimated = 0;
  double unrecorded = 0;
  EXPECT_TRUE(WaitFor(
      [&] {
        const std::string body = agent.Get("/metrics").body;
        counted = Total(body, "ncclscope_nccl_ops_total");
        estimated = Total(body, "ncclscope_nccl_ops_timed_total");
        unrecorded = Value(body, "ncclscope_nccl_plugin_events_total{event=\"unrecorded_op\"}");
        return counted == static_cast<double>(driven) &&
               Value(body, "ncclscope_nccl_records_total{type=\"op\"}") + unrecorded ==
                   static_cast<double>(driven);
      },
      seconds(20), milliseconds(20)))
      << "counted " << counted << ", unrecorded " << unrecorded << ", driven " << driven;
  EXPECT_GT(unrecorded, static_cast<double>(driven) / 2);
  // The estimate itself (timed ops, every op timed here): ~3,000 ops, but the ranks of a
  // collective (and both ends of a p2p op) share their draw (that is the point): a few hundred
  // independent draws of 1 in 4, ~10 % standard error. Within 50 %; its exactness is the identity
  // above.
  EXPECT_NEAR(estimated, static_cast<double>(driven), 0.5 * static_cast<double>(driven));
  EXPECT_EQ(Total(agent.Get("/metrics").body, "ncclscope_nccl_records_dropped_total"), 0);
}

TEST(PluginEndToEndTest, DropsEqualWhatOverflowedWhileNoAgentRan) {
  TempDir ring_dir;
  TempDir logs;
  // One lane of 256 records; no agent: 1 init + 400 ops + 1 finalize records are attempted.
  auto job =
      StartJob(logs, ring_dir.path(),
               {"--comms", "1", "--ranks", "1", "--colls", "400", "--p2p", "0", "--alltoall", "0"},
               {"NCCLSCOPE_RING_SIZE=64KiB", "NCCLSCOPE_RING_LANES=1"});
  ASSERT_EQ(job->Wait(seconds(60)), 0) << job->Stderr();
  AgentProcess agent(AgentConfig(ring_dir.path()));
  ASSERT_TRUE(agent.ok()) << agent.startup_log();
  EXPECT_TRUE(WaitFor([&] { return agent.Sample("ncclscope_nccl_rings_reclaimed_total") == 1; },
                      seconds(10), milliseconds(20)));
  const std::string body = agent.Get("/metrics").body;
  EXPECT_EQ(Value(body, "ncclscope_nccl_records_total{type=\"comm_init\"}"), 1);
  EXPECT_EQ(Value(body, "ncclscope_nccl_records_total{type=\"op\"}"), 255);
  // Every op counted all the same: the counts live in the ring's count table, not in records.
  EXPECT_EQ(Total(body, "ncclscope_nccl_ops_total"), 400);
  EXPECT_EQ(Value(body, "ncclscope_nccl_records_dropped_total{reason=\"ring_full\"}"),
            400 - 255 + 1);
  EXPECT_EQ(Value(body, "ncclscope_nccl_records_dropped_total{reason=\"lane_busy\"}"), 0);
}

// A job killed (SIGKILL: no finalize, no flush, nothing at exit) while no agent ran and its ring
// overflowed: every op it enqueued is still counted, from the count table the agent reads once
// the process is gone.
TEST(PluginEndToEndTest, KilledJobWithAFullRingLosesNoCount) {
  TempDir ring_dir;
  TempDir logs;
  const std::string hold = logs.path() + "/hold";
  auto job = StartJob(logs, ring_dir.path(),
                      {"--comms", "2", "--ranks", "2", "--colls", "300", "--p2p", "5", "--alltoall",
                       "0", "--hold", hold},
                      {"NCCLSCOPE_RING_SIZE=64KiB", "NCCLSCOPE_RING_LANES=1"});
  ASSERT_TRUE(job->WaitForStderr("phase 1 done", seconds(60))) << job->Stderr();
  const auto expected = Sum(ParseExpectations(job->Stdout()));
  job->Signal(SIGKILL);
  job->Wait(seconds(10));
  AgentProcess agent(AgentConfig(ring_dir.path()));
  ASSERT_TRUE(agent.ok()) << agent.startup_log();
  EXPECT_TRUE(WaitFor([&] { return agent.Sample("ncclscope_nccl_rings_reclaimed_total") == 1; },
                      seconds(10), milliseconds(20)));
  const std::string body = agent.Get("/metrics").body;
  EXPECT_GT(Value(body, "ncclscope_nccl_records_dropped_total{reason=\"ring_full\"}"), 0);
  std::string why;
  EXPECT_TRUE(Matches(body, expected, &why)) << why;
}

TEST(PluginEndToEndTest, DroppedRecordsNeverHideProgressFromTheCommTable) {
  TempDir ring_dir;
  TempDir logs;
  const std::string hold = logs.path() + "/hold";
  // 40 channels: each op is an op record plus a channel record; 255 of the 256 slots fill up.
  auto job = StartJob(logs, ring_dir.path(),
                      {"--comms", "1", "--ranks", "1", "--colls", "400", "--p2p", "0", "--alltoall",
                       "0", "--channels", "40", "--hold", hold},
                      {"NCCLSCOPE_RING_SIZE=64KiB", "NCCLSCOPE_RING_LANES=1"});
  ASSERT_TRUE(job->WaitForStderr("phase 1 done", seconds(60))) << job->Stderr();
  AgentProcess agent(AgentConfig(ring_dir.path()));
  ASSERT_TRUE(agent.ok()) << agent.startup_log();
  std::string body;
  EXPECT_TRUE(WaitFor(
      [&] {
        body = agent.Get("/metrics").body;
        return Value(body, "ncclscope_nccl_records_total{type=\"op\"}") == 127;
      },
      seconds(10), milliseconds(20)))
      << Value(body, "ncclscope_nccl_records_total{type=\"op\"}");
  EXPECT_EQ(Value(body, "ncclscope_nccl_records_total{type=\"op_channels\"}"), 127);
  EXPECT_EQ(Total(body, "ncclscope_nccl_ops_total"), 400);  // counted, recorded or not
  EXPECT_EQ(Value(body, "ncclscope_nccl_records_dropped_total{reason=\"ring_full\"}"),
            2 * (400 - 127));
  // Every op completed, recorded or not: nothing looks in flight, the last completion is known.
  EXPECT_EQ(Total(body, "ncclscope_nccl_ops_in_flight"), 0);
  EXPECT_GT(Total(body, "ncclscope_nccl_last_op_completion_timestamp_seconds"), 1e9);
  Touch(hold);
  EXPECT_EQ(job->Wait(seconds(30)), 0);
}

TEST(PluginEndToEndTest, AgentKilledAndRestartedMidRunLosesNothingThatFit) {
  TempDir ring_dir;
  TempDir logs;
  const std::string go = logs.path() + "/go";
  const std::string hold = logs.path() + "/hold";
  auto first = std::make_unique<AgentProcess>(AgentConfig(ring_dir.path()));
  ASSERT_TRUE(first->ok()) << first->startup_log();
  auto job = StartJob(logs, ring_dir.path(),
                      {"--comms", "2", "--ranks", "2", "--colls", "30", "--p2p", "2", "--alltoall",
                       "1", "--phases", "2", "--go", go, "--hold", hold});
  ASSERT_TRUE(job->WaitForStderr("phase 1 done", seconds(60))) << job->Stderr();
  auto phase1 = Sum(ParseExpectations(job->Stdout()), {1});
  ASSERT_FALSE(phase1.empty());
  std::string why;
  ASSERT_TRUE(WaitFor([&] { return Matches(first->Get("/metrics").body, phase1, &why); },
                      seconds(20), milliseconds(20)))
      << why;

  // The agent dies without warning; the job runs phase 2 meanwhile; a new agent comes up.
  first->process().Signal(SIGKILL);
  ASSERT_TRUE(first->process().Wait(seconds(10)));
  Touch(go + ".2");
  ASSERT_TRUE(job->WaitForStderr("phase 2 done", seconds(60))) << job->Stderr();
  AgentProcess second(AgentConfig(ring_dir.path()));
  ASSERT_TRUE(second.ok()) << second.startup_log();
  const auto both = Sum(ParseExpectations(job->Stdout()), {1, 2});
  std::uint64_t phase2_ops = 0;
  for (const auto& [labels, v] : Sum(ParseExpectations(job->Stdout()), {2})) phase2_ops += v.first;
  ASSERT_GT(phase2_ops, 0u);
  // The counts are the communicators' totals (the count table): the counters go on from where
  // the first agent left them (no reset for Prometheus to see). The records are exactly phase
  // 2's: the first agent's are not read again, none of the new ones is lost.
  EXPECT_TRUE(WaitFor([&] { return Matches(second.Get("/metrics").body, both, &why); }, seconds(20),
                      milliseconds(20)))
      << why;
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_TRUE(Matches(second.Get("/metrics").body, both, &why)) << why;
  const std::string live = second.Get("/metrics").body;
  EXPECT_EQ(Value(live, "ncclscope_nccl_records_total{type=\"op\"}"),
            static_cast<double>(phase2_ops));
  EXPECT_EQ(Total(live, "ncclscope_nccl_records_dropped_total"), 0);
  // With a job running: its communicators' info and progress, and the exposition still lints.
  EXPECT_EQ(Total(live, "ncclscope_nccl_comm_info"), 4);  // 2 communicators x 2 ranks
  EXPECT_EQ(Total(live, "ncclscope_nccl_ops_in_flight"), 0);
  const RunResult lint = RunCommand({NCCLSCOPE_PROMTOOL, "check", "metrics"}, live);
  EXPECT_EQ(lint.output, "") << "promtool lint findings:\n" << lint.output;
  EXPECT_EQ(UndocumentedMetrics(live), std::vector<std::string>{});

  Touch(hold);
  EXPECT_EQ(job->Wait(seconds(30)), 0) << job->Stderr();
  EXPECT_TRUE(WaitFor([&] { return second.Sample("ncclscope_nccl_rings_reclaimed_total") == 1; },
                      seconds(10), milliseconds(20)));
}

TEST(PluginEndToEndTest, ControlsFromTheConfigReachJobsAtStartAndWhileRunning) {
  TempDir ring_dir;
  // Start: no GPU timing, nothing under 2000 bytes.
  AgentProcess agent(AgentConfig(ring_dir.path(), "  events: [coll, p2p]\n  min_bytes: 2000\n"));
  ASSERT_TRUE(agent.ok()) << agent.startup_log();
  ASSERT_TRUE(Exists(ring_dir.path() + "/ncclscope.controls"));
  const std::string go = agent.dir().path() + "/go";
  auto job = StartJob(agent.dir(), ring_dir.path(),
                      {"--comms", "1", "--ranks", "2", "--colls", "12", "--p2p", "2", "--alltoall",
                       "1", "--phases", "2", "--go", go});
  ASSERT_TRUE(job->WaitForStderr("phase 1 done", seconds(60))) << job->Stderr();
  std::uint64_t big = 0;
  std::uint64_t small = 0;
  for (const Expected& e : ParseExpectations(job->Stdout())) {
    (e.bytes / e.ops >= 2000 ? big : small) += e.ops;
  }
  ASSERT_GT(small, 0u);
  std::string body;
  EXPECT_TRUE(WaitFor(
      [&] {
        body = agent.Get("/metrics").body;
        return Value(body, "ncclscope_nccl_records_total{type=\"op\"}") == static_cast<double>(big);
      },
      seconds(20), milliseconds(20)))
      << Value(body, "ncclscope_nccl_records_total{type=\"op\"}") << " != " << big;
  // Filtered ops are not recorded, but counted.
  EXPECT_TRUE(WaitFor(
      [&] {
        body = agent.Get("/metrics").body;
        return Total(body, "ncclscope_nccl_ops_total") == static_cast<double>(big + small);
      },
      seconds(5), milliseconds(20)));
  EXPECT_EQ(Value(body, "ncclscope_nccl_plugin_events_total{event=\"filtered\"}"),
            static_cast<double>(small));
  EXPECT_EQ(Total(body, "ncclscope_nccl_ops_timed_total"), 0);

  // While running: GPU timing on, no size filter (SIGHUP; the plugin applies it within ~200 ms).
  agent.dir().WriteFile("ncclscope.yaml", AgentConfig(ring_dir.path()));
  agent.process().Signal(SIGHUP);
  ASSERT_TRUE(agent.process().WaitForStderr("reload succeeded", seconds(10)));
  std::this_thread::sleep_for(milliseconds(800));
  Touch(go + ".2");
  ASSERT_TRUE(job->WaitForStderr("phase 2 done", seconds(60))) << job->Stderr();
  const auto phase2 = Sum(ParseExpectations(job->Stdout()), {2});
  std::uint64_t phase2_ops = 0;
  for (const auto& [labels, v] : phase2) phase2_ops += v.first;
  // The AlltoAll's send and receive to the rank itself get no KernelCh from NCCL (no proxy ops
  // for self p2p, src/enqueue.cc:805 at v2.28.9-1): 1 AlltoAll x 2 ranks x (Send + Recv).
  const std::uint64_t self_p2p = 1 * 2 * 2;
  EXPECT_TRUE(WaitFor(
      [&] {
        body = agent.Get("/metrics").body;
        return Total(body, "ncclscope_nccl_ops_timed_total") ==
               static_cast<double>(phase2_ops - self_p2p);
      },
      seconds(20), milliseconds(20)))
      << Total(body, "ncclscope_nccl_ops_timed_total") << " != " << phase2_ops - self_p2p;
  EXPECT_EQ(Total(body, "ncclscope_nccl_ops_total"), static_cast<double>(big + small + phase2_ops));
  EXPECT_EQ(job->Wait(seconds(30)), 0);
}

TEST(PluginEndToEndTest, HostileRingFilesAndTruncationDoNotHurtTheAgent) {
  TempDir ring_dir;
  ring_dir.WriteFile("ncclscope-1-1.ring", std::string(8192, 'x'));  // not a ring at all
  ring_dir.WriteFile("ncclscope-2-2.ring", "NCSCRNG1");              // too short
  AgentProcess agent(AgentConfig(ring_dir.path()));
  ASSERT_TRUE(agent.ok()) << agent.startup_log();
  EXPECT_TRUE(WaitFor(
      [&] {
        return agent.Sample("ncclscope_nccl_rings_rejected_total{reason=\"magic\"}") == 1 &&
               agent.Sample("ncclscope_nccl_rings_rejected_total{reason=\"size\"}") == 1;
      },
      seconds(10), milliseconds(20)));
  // Nobody owns them: they are removed, and not counted again.
  EXPECT_TRUE(WaitFor([&] { return !Exists(ring_dir.path() + "/ncclscope-1-1.ring"); }, seconds(10),
                      milliseconds(20)));

  // A live job whose ring is truncated under the agent's mapping.
  const std::string hold = agent.dir().path() + "/hold";
  auto job = StartJob(agent.dir(), ring_dir.path(),
                      {"--comms", "1", "--ranks", "1", "--colls", "10", "--p2p", "0", "--alltoall",
                       "0", "--hold", hold});
  ASSERT_TRUE(job->WaitForStderr("phase 1 done", seconds(60)));
  ASSERT_TRUE(WaitFor([&] { return agent.Sample("ncclscope_nccl_rings{state=\"live\"}") == 1; },
                      seconds(10), milliseconds(20)));
  const RunResult found = RunCommand({"/bin/sh", "-c", "ls " + ring_dir.path() + "/*.ring"});
  const std::string ring = found.output.substr(0, found.output.find('\n'));
  ASSERT_EQ(::truncate(ring.c_str(), 4096), 0) << ring;
  EXPECT_TRUE(WaitFor(
      [&] { return agent.Sample("ncclscope_nccl_rings_rejected_total{reason=\"fault\"}") == 1; },
      seconds(10), milliseconds(20)));
  EXPECT_TRUE(agent.process().Running());
  EXPECT_EQ(agent.Get("/healthz").status, 200);
  job->Signal(SIGKILL);  // its own mapping is broken too: end it without touching it
  job->Wait(seconds(10));
}

}  // namespace
}  // namespace ncclscope::testing
