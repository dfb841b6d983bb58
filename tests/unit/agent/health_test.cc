#include "agent/app/health.h"

#include <gtest/gtest.h>

#include "agent/app/sources.h"
#include "agent/config/config.h"
#include "tests/unit/agent/fake_source.h"

namespace ncclscope {
namespace {

struct Node {
  std::shared_ptr<testing::FakeSource> up = std::make_shared<testing::FakeSource>("profiler");
  std::shared_ptr<testing::FakeSource> down = std::make_shared<testing::FakeSource>("rdma");
  std::shared_ptr<testing::FakeSource> off = std::make_shared<testing::FakeSource>("ebpf", false);
  SourceSet sources{{up, down, off}};

  Node() {
    down->start_ok = false;  // Down("no device")
    sources.Apply(config::Config{});
  }
};

TEST(HealthTest, NothingRequiredIsHealthyWhateverTheSources) {
  Node node;
  const HealthReport report = SourcesHealth(node.sources, {});
  EXPECT_TRUE(report.healthy);
  EXPECT_EQ(report.text,
            "source profiler: up\nsource rdma: down (no device)\nsource ebpf: disabled\n");
}

TEST(HealthTest, ARequiredSourceDownIsUnhealthyAndNamed) {
  Node node;
  const HealthReport report = SourcesHealth(node.sources, {"profiler", "rdma"});
  EXPECT_FALSE(report.healthy);
  EXPECT_EQ(report.text,
            "required source rdma is down: no device\n"
            "source profiler: up\nsource rdma: down (no device)\nsource ebpf: disabled\n");
}

// Disabled by the config is a choice, not a failure; required and up is healthy.
TEST(HealthTest, RequiredButDisabledOrUpIsHealthy) {
  Node node;
  EXPECT_TRUE(SourcesHealth(node.sources, {"ebpf", "profiler"}).healthy);
}

// A source that comes up again makes the node healthy again (the start status is re-read).
TEST(HealthTest, FollowsTheSourcesState) {
  Node node;
  EXPECT_FALSE(SourcesHealth(node.sources, {"rdma"}).healthy);
  node.sources.Apply(config::Config{});  // a reload: FakeSource's Reconfigure reports Up
  EXPECT_TRUE(SourcesHealth(node.sources, {"rdma"}).healthy);
}

// server.healthz_requires accepts exactly the names the agent's sources have.
TEST(HealthTest, ConfigNamesAreTheAgentsSources) {
  std::vector<std::string> names;
  for (const auto& source : MakeSources()) names.push_back(source->name());
  EXPECT_EQ(names, config::SourceNames());
}

}  // namespace
}  // namespace ncclscope
