// The simulator's job model: coherent timestamps (the late rank arrives last and spends the least
// time inside, every rank's channel ends together, network steps fit inside their op), the slow
// channel, the hang, determinism, and the command line.

#include "tools/sim/job_model.h"

#include <gtest/gtest.h>

#include <algorithm>

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
  const Options o = Parse({"--duration", "1m30s", "--slow-by", "250us"});
  EXPECT_DOUBLE_EQ(o.duration_s, 90);
  EXPECT_EQ(o.slow_by_ns, 250'000u);
}

}  // namespace
}  // namespace ncclscope::sim
