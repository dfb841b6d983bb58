// The simulator's job model: coherent timestamps (the late rank arrives last and spends the least
// time inside, every rank's channel ends together, network steps fit inside their op), the slow
// channel, the hang, determinism, and the command line.

#include "tools/sim/job_model.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

namespace ncclscope::sim {
namespace {

Options Parse(std::vector<std::string> args) {
  std::vector<char*> argv = {const_cast<char*>("ncclscope-sim")};
  for (std::string& a : args) argv.push_back(a.data());
  std::string error;
  auto o = ParseOptions(static_cast<int>(argv.size()), argv.data(), &error);
  EXPECT_TRUE(o.has_value()) << error;
  return o.value_or(Options{});
}

constexpr std::uint64_t kT0 = 1'000'000'000'000;

TEST(JobModelTest, SlowRankArrivesLastAndSpendsTheLeastTimeInside) {
  JobModel model(Parse({"--nodes", "2", "--gpus", "4", "--workload", "AllReduce:world:32MiB",
                        "--slow-rank", "1", "--slow-by", "5ms"}),
                 kT0);
  const auto ops = model.NextIteration();
  ASSERT_EQ(ops.size(), 4u);
  std::uint64_t end = 0;
  for (int l = 0; l < 4; ++l) {
    ASSERT_EQ(ops[l].size(), 1u);
    const RankOp& op = ops[l][0];
    EXPECT_TRUE(op.finishes());
    EXPECT_EQ(op.comm->nranks(), 8);
    EXPECT_LT(op.enqueue_ns, op.arrival_ns);
    if (l == 0) end = op.channel_end[0];
    EXPECT_EQ(op.channel_end[0], end) << "every member's channel ends together";
    if (l != 1) {
      EXPECT_GT(ops[1][0].arrival_ns, op.arrival_ns + 4'900'000);
    }
  }
  auto inside = [](const RankOp& op) {
    return *std::max_element(op.channel_end.begin(), op.channel_end.end()) - op.arrival_ns;
  };
  for (int l : {0, 2, 3}) {
    EXPECT_GT(inside(ops[l][0]), inside(ops[1][0]) + 4'900'000);
  }
}

TEST(JobModelTest, NetworkStepsFitTheirOpAndTheSlowChannelIsSlower) {
  JobModel model(Parse({"--nodes", "2", "--gpus", "4", "--workload", "AllReduce:world:32MiB",
                        "--slow-channel", "3", "--slow-factor", "4"}),
                 kT0);
  const auto ops = model.NextIteration();
  const RankOp& op = ops[2][0];  // the exit GPU of channels 3 and 7
  ASSERT_EQ(op.net.size(), 4u);  // sends on 3 and 7, receives on 2 and 6
  std::uint64_t wire3 = 0;
  std::uint64_t wire7 = 0;
  for (const NetOp& net : op.net) {
    EXPECT_EQ(net.steps.size(), 8u);
    std::uint64_t previous = op.arrival_ns;
    for (const StepTimes& s : net.steps) {
      EXPECT_LE(previous, s.start);
      EXPECT_LE(s.start, s.t1);
      EXPECT_LE(s.t1, s.t2);
      EXPECT_LE(s.t2, s.end);
      previous = s.end;
      if (net.send && net.channel == 3) wire3 += s.end - s.t2;
      if (net.send && net.channel == 7) wire7 += s.end - s.t2;
    }
    EXPECT_LE(previous, op.channel_end[static_cast<std::size_t>(net.channel)]);
    EXPECT_EQ(net.peer, net.send ? 4 + (net.channel % 4) : 4 + ((net.channel + 3) % 4));
  }
  EXPECT_NEAR(static_cast<double>(wire3) / static_cast<double>(wire7), 4.0, 0.01);
  EXPECT_GT(op.channel_end[3] - op.channel_start[3], 3 * (op.channel_end[7] - op.channel_start[7]));
}

TEST(JobModelTest, HungRankNeverArrivesAndItsPeersNeverFinish) {
  JobModel model(Parse({"--nodes", "1", "--gpus", "4", "--workload", "AllReduce:tp:1MiB",
                        "--hang-rank", "2", "--hang-iteration", "1"}),
                 kT0);
  auto first = model.NextIteration();
  for (const auto& ops : first) EXPECT_TRUE(ops.at(0).finishes());
  auto second = model.NextIteration();
  EXPECT_TRUE(second[2].empty()) << "the hung rank issues nothing";
  for (int l : {0, 1, 3}) {
    ASSERT_EQ(second[l].size(), 1u);
    EXPECT_FALSE(second[l][0].finishes());
    EXPECT_EQ(second[l][0].seq, 1u);
  }
  for (const auto& ops : model.NextIteration()) EXPECT_TRUE(ops.empty());
}

TEST(JobModelTest, EveryNodesModelAgreesOnCommunicatorsAndTimes) {
  JobModel node0(Parse({"--nodes", "2", "--gpus", "2", "--node", "0"}), kT0);
  JobModel node1(Parse({"--nodes", "2", "--gpus", "2", "--node", "1"}), kT0);
  EXPECT_EQ(node0.comms()[0].id, node1.comms()[0].id);
  const auto a = node0.NextIteration();
  const auto b = node1.NextIteration();
  // The world AllReduce ends at the same time on both nodes.
  EXPECT_EQ(a[0][0].channel_end[0], b[0][0].channel_end[0]);
  EXPECT_EQ(a[0][0].comm_rank, 0);
  EXPECT_EQ(b[0][0].comm_rank, 2);
}

// One slow link: only the hop node 1 sends on channel 1 is slow. Its sender is on the wire 4x
// longer per step; the other hops of the ring move at its pace, their senders waiting for the
// GPU (the ring's data) instead of on the wire; every member's channel 1 ends together.
TEST(JobModelTest, OneSlowHopSlowsItsRingButOnlyItsSenderWaitsOnTheWire) {
  const std::vector<std::string> common = {
      "--nodes",        "3", "--gpus",      "2", "--workload", "AllReduce:dp:32MiB",
      "--slow-channel", "1", "--slow-node", "1"};
  auto model = [&](int node) {
    std::vector<std::string> args = common;
    args.insert(args.end(), {"--node", std::to_string(node)});
    return JobModel(Parse(args), kT0);
  };
  // The models outlive their iterations: a RankOp points at its model's communicator.
  JobModel node0 = model(0);
  JobModel node1 = model(1);
  const auto n0 = node0.NextIteration();
  const auto n1 = node1.NextIteration();
  auto send = [](const RankOp& op, int channel) -> const NetOp& {
    for (const NetOp& net : op.net) {
      if (net.send && net.channel == channel) return net;
    }
    ADD_FAILURE() << "no send on channel " << channel;
    return op.net.front();
  };
  auto wire = [](const NetOp& net) {
    std::uint64_t t = 0;
    for (const StepTimes& s : net.steps) t += s.end - s.t2;
    return t;
  };
  auto gpu_wait = [](const NetOp& net) {
    std::uint64_t t = 0;
    for (const StepTimes& s : net.steps) t += s.t1 - s.start;
    return t;
  };
  const RankOp& healthy = n0[0][0];  // dp group 0: ranks 0 (node 0), 2 (node 1), 4 (node 2)
  const RankOp& culprit = n1[0][0];
  EXPECT_EQ(culprit.comm->id, healthy.comm->id);
  EXPECT_NEAR(
      static_cast<double>(wire(send(culprit, 1))) / static_cast<double>(wire(send(healthy, 1))),
      4.0, 0.01);
  EXPECT_NEAR(static_cast<double>(wire(send(culprit, 0))),
              static_cast<double>(wire(send(healthy, 0))), 1.0);
  EXPECT_GT(gpu_wait(send(healthy, 1)), 2 * wire(send(healthy, 1)))
      << "a healthy hop of the slow ring waits for the ring's data, not on the wire";
  EXPECT_EQ(healthy.channel_end[1], culprit.channel_end[1]);
  EXPECT_GT(healthy.channel_end[1] - healthy.channel_start[1],
            3 * (healthy.channel_end[0] - healthy.channel_start[0]));
}

TEST(JobModelTest, FaultsHoldOnlyInTheirWindow) {
  // 10 iterations/s: iteration i starts i x 100 ms after t0; the fault holds from 250 to 550 ms.
  JobModel model(Parse({"--nodes", "1", "--gpus", "2", "--workload", "AllReduce:tp:1MiB", "--rate",
                        "10", "--jitter", "0s", "--slow-rank", "1", "--slow-by", "5ms",
                        "--fault-start", "250ms", "--fault-end", "550ms"}),
                 kT0);
  for (int i = 0; i < 8; ++i) {
    const auto ops = model.NextIteration();
    const std::int64_t lag = static_cast<std::int64_t>(ops[1][0].arrival_ns) -
                             static_cast<std::int64_t>(ops[0][0].arrival_ns);
    const bool on = i >= 3 && i <= 5;
    EXPECT_EQ(lag, on ? 5'000'000 : 0) << "iteration " << i;
  }
}

TEST(JobModelTest, TheFaultEndsAtTheTimeItsEndFileNamesOnceItAppears) {
  // The fault benchmark's ci matrix ends a fault once its alert fired: from 250 ms on, open-ended,
  // until the file says 450 ms (written before iteration 4, at 400 ms); no later rewrite counts.
  const std::string file = ::testing::TempDir() + "/fault-end-" + std::to_string(::getpid());
  std::remove(file.c_str());
  JobModel model(Parse({"--nodes", "1", "--gpus", "2", "--workload", "AllReduce:tp:1MiB", "--rate",
                        "10", "--jitter", "0s", "--slow-rank", "1", "--slow-by", "5ms",
                        "--fault-start", "250ms", "--fault-end-file", file}),
                 kT0);
  for (int i = 0; i < 8; ++i) {
    if (i == 4) std::ofstream(file) << "450\n";
    if (i == 6) std::ofstream(file) << "10000\n";
    const auto ops = model.NextIteration();
    const std::int64_t lag = static_cast<std::int64_t>(ops[1][0].arrival_ns) -
                             static_cast<std::int64_t>(ops[0][0].arrival_ns);
    const bool on = i == 3 || i == 4;
    EXPECT_EQ(lag, on ? 5'000'000 : 0) << "iteration " << i;
  }
  std::remove(file.c_str());
}

TEST(JobModelTest, AnEndFileThatIsNoNumberLeavesTheFaultItsCommandLineEnd) {
  const std::string file = ::testing::TempDir() + "/fault-end-bad-" + std::to_string(::getpid());
  std::ofstream(file) << "soon\n";
  JobModel model(
      Parse(
          {"--nodes",          "1",   "--gpus",        "2",     "--workload",  "AllReduce:tp:1MiB",
           "--rate",           "10",  "--jitter",      "0s",    "--slow-rank", "1",
           "--slow-by",        "5ms", "--fault-start", "250ms", "--fault-end", "550ms",
           "--fault-end-file", file}),
      kT0);
  for (int i = 0; i < 8; ++i) {
    const auto ops = model.NextIteration();
    const std::int64_t lag = static_cast<std::int64_t>(ops[1][0].arrival_ns) -
                             static_cast<std::int64_t>(ops[0][0].arrival_ns);
    EXPECT_EQ(lag, i >= 3 && i <= 5 ? 5'000'000 : 0) << "iteration " << i;
  }
  std::remove(file.c_str());
}

TEST(JobModelTest, PausesResizesComputeAndHangAtApplyToEveryNodeAlike) {
  const Options o = Parse({"--nodes",         "2",
                           "--gpus",          "1",
                           "--rate",          "10",
                           "--jitter",        "0s",
                           "--workload",      "AllReduce:dp:1MiB:7ms",
                           "--pause-every",   "300ms",
                           "--pause-for",     "50ms",
                           "--resize-every",  "200ms",
                           "--resize-factor", "4",
                           "--hang-rank",     "1",
                           "--hang-at",       "700ms"});
  JobModel model(o, kT0);
  std::uint64_t previous_end = 0;
  for (int i = 0; i < 8; ++i) {
    const auto ops = model.NextIteration();
    const std::uint64_t start = kT0 + static_cast<std::uint64_t>(i) * 100'000'000;
    if (i >= 7) {
      ASSERT_EQ(ops[0].size(), 1u);
      EXPECT_FALSE(ops[0][0].finishes()) << "rank 1 hangs from 700 ms on";
      continue;
    }
    ASSERT_EQ(ops[0].size(), 1u) << i;
    const RankOp& op = ops[0][0];
    // The item's own 7 ms of compute before the op, after the pause when one is due (at 300 and
    // 600 ms; the iterations after start on time again).
    const std::uint64_t paused = i == 3 || i == 6 ? 50'000'000 : 0;
    EXPECT_EQ(op.arrival_ns, std::max(start, previous_end) + paused + 7'000'000) << i;
    EXPECT_EQ(op.bytes, ((op.arrival_ns - kT0) / 200'000'000) % 2 == 1 ? 4u << 20 : 1u << 20) << i;
    previous_end = std::max(previous_end, op.channel_end[0]);
  }
}

TEST(SimOptionsTest, BadCommandLinesAreRefusedWithAReason) {
  std::string error;
  std::vector<std::string> args = {"ncclscope-sim", "--workload", "AllReduce:moon:1MiB"};
  std::vector<char*> argv;
  argv.reserve(args.size());
  for (std::string& a : args) argv.push_back(a.data());
  EXPECT_FALSE(ParseOptions(static_cast<int>(argv.size()), argv.data(), &error));
  EXPECT_NE(error.find("bad --workload"), std::string::npos) << error;
  args = {"ncclscope-sim", "--slow-rank", "99", "--nodes", "2", "--gpus", "4"};
  argv.clear();
  for (std::string& a : args) argv.push_back(a.data());
  EXPECT_FALSE(ParseOptions(static_cast<int>(argv.size()), argv.data(), &error));
  args = {"ncclscope-sim", "--fault-start", "2m", "--fault-end", "1m"};
  argv.clear();
  for (std::string& a : args) argv.push_back(a.data());
  EXPECT_FALSE(ParseOptions(static_cast<int>(argv.size()), argv.data(), &error));
  EXPECT_NE(error.find("--fault-end"), std::string::npos) << error;
  args = {"ncclscope-sim", "--workload", "AllReduce:dp:1MiB:soon"};
  argv.clear();
  for (std::string& a : args) argv.push_back(a.data());
  EXPECT_FALSE(ParseOptions(static_cast<int>(argv.size()), argv.data(), &error));
  const Options o = Parse({"--duration", "1m30s", "--slow-by", "250us", "--workload",
                           "AllReduce:dp:1MiB:20ms,AllGather:tp:1MiB"});
  EXPECT_DOUBLE_EQ(o.duration_s, 90);
  EXPECT_EQ(o.slow_by_ns, 250'000u);
  EXPECT_EQ(o.workload[0].compute_ns, 20'000'000u);
  EXPECT_FALSE(o.workload[1].compute_ns.has_value());
}

}  // namespace
}  // namespace ncclscope::sim
