// Conformance with node_exporter: the real sysfs trees the Prometheus project captured for its
// own tests (../shared/fixtures/sysfs-infiniband, read in place), and node_exporter's exported
// values for one of them. Every node_infiniband_* sample must come out of our agent as the
// ncclscope_infiniband_* sample with the same labels and value (units, the x4 of the data
// counters, N/A (no PMA) files skipped), and we must not export samples node_exporter does not for
// the same families. Skipped when the fixtures are absent.

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "agent/rdma/rdma_source.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/rdma/source_test_util.h"

namespace ncclscope::rdma {
namespace {

// Outside the repository, next to it (fixtures are read in place, never copied in).
constexpr const char* kFixtures = NCCLSCOPE_SOURCE_DIR "/../shared/fixtures/sysfs-infiniband";

struct Series {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// Parses the sample lines of Prometheus text (label values without escapes, as here).
std::vector<Series> Parse(const std::string& text) {
  std::vector<Series> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    Series s;
    const std::size_t brace = line.find('{');
    const std::size_t space = line.rfind(' ');
    if (brace != std::string::npos && brace < space) {
      s.name = line.substr(0, brace);
      const std::size_t close = line.rfind('}');
      std::string body = line.substr(brace + 1, close - brace - 1);
      std::size_t pos = 0;
      while (pos < body.size()) {
        const std::size_t eq = body.find('=', pos);
        const std::size_t q2 = body.find('"', eq + 2);
        s.labels[body.substr(pos, eq - pos)] = body.substr(eq + 2, q2 - eq - 2);
        pos = q2 + 2;  // skip '",'
      }
    } else {
      s.name = line.substr(0, space);
    }
    s.value = std::stod(line.substr(space + 1));
    out.push_back(std::move(s));
  }
  return out;
}

std::string Scrape(const std::string& sysfs_root) {
  RdmaSource source;
  config::RdmaConfig config;
  config.sysfs_root = sysfs_root;
  config.verbs = false;
  config.packet_counters = true;  // node_exporter exports every PMA counter
  source.Configure(config);
  source.PollOnce();
  EXPECT_TRUE(source.Status().up) << source.Status().reason;
  EXPECT_TRUE(source.errors().Snapshot().empty());
  return rdma::testing::Exposition(source);
}

bool Subset(const std::map<std::string, std::string>& small,
            const std::map<std::string, std::string>& big) {
  for (const auto& [key, value] : small) {
    auto it = big.find(key);
    if (it == big.end() || it->second != value) return false;
  }
  return true;
}

TEST(ConformanceTest, MatchesNodeExporterOnItsOwnFixture) {
  const std::string expected_path = std::string(kFixtures) + "/node_exporter/expected-metrics.prom";
  if (!std::filesystem::exists(expected_path)) GTEST_SKIP() << "no fixtures at " << kFixtures;
  const std::vector<Series> expected = Parse(ncclscope::testing::ReadFile(expected_path));
  ASSERT_GT(expected.size(), 50u);
  const std::vector<Series> ours = Parse(Scrape(std::string(kFixtures) + "/node_exporter/sys"));

  std::map<std::string, int> families;
  for (const Series& want : expected) {
    ASSERT_EQ(want.name.rfind("node_infiniband_", 0), 0u) << want.name;
    const std::string name = "ncclscope_infiniband_" + want.name.substr(16);
    ++families[name];
    const bool info = name.ends_with("_info");
    const Series* match = nullptr;
    for (const Series& got : ours) {
      if (got.name != name) continue;
      if (info ? Subset(want.labels, got.labels) : got.labels == want.labels) {
        match = &got;
        break;
      }
    }
    ASSERT_NE(match, nullptr) << "missing " << name << " for " << want.labels.at("device");
    EXPECT_DOUBLE_EQ(match->value, want.value) << name << " " << want.labels.at("device");
  }
  // Nothing more in those families: N/A (no PMA) and absent files export nothing.
  for (const auto& [name, count] : families) {
    int got = 0;
    for (const Series& s : ours) got += s.name == name ? 1 : 0;
    EXPECT_EQ(got, count) << name;
  }
  EXPECT_GE(families.size(), 25u);
}

TEST(ConformanceTest, ReadsTheProcfsFixtureTrees) {
  const std::string root = std::string(kFixtures) + "/procfs/sys";
  if (!std::filesystem::exists(root)) GTEST_SKIP() << "no fixtures at " << kFixtures;
  const std::string text = Scrape(root);
  using rdma::testing::Sample;
  // hfi1 (Omni-Path): 64-bit data counters beyond 2^32, x4.
  EXPECT_EQ(
      Sample(text,
             R"(ncclscope_infiniband_port_data_received_bytes_total{device="hfi1_0",port="1"})"),
      345091702026.0 * 4);
  EXPECT_EQ(Sample(text, R"(ncclscope_infiniband_rate_bytes_per_second{device="hfi1_0",port="1"})"),
            12.5e9);
  // mlx5 hw_counters, and phys_state read as captured ("4: ACTIVE" there).
  EXPECT_EQ(
      Sample(text,
             R"(ncclscope_infiniband_duplicate_requests_packets_total{device="mlx5_0",port="1"})"),
      41);
  EXPECT_EQ(Sample(text, R"(ncclscope_infiniband_req_cqes_errors_total{device="mlx5_0",port="1"})"),
            3481);
  EXPECT_EQ(Sample(text, R"(ncclscope_infiniband_physical_state_id{device="mlx5_0",port="1"})"), 4);
  EXPECT_EQ(
      Sample(
          text,
          R"(ncclscope_infiniband_port_info{device="mlx5_0",port="1",link_layer="InfiniBand",width="1X",speed="EDR",netdev=""})"),
      1);
  EXPECT_EQ(
      Sample(text, R"(ncclscope_infiniband_port_transmit_wait_total{device="mlx4_0",port="2"})"),
      3846);
  EXPECT_EQ(Sample(text, R"(ncclscope_rdma_devices{state="monitored"})"), 3);
}

}  // namespace
}  // namespace ncclscope::rdma
