// The real ncclscope-agent binary, end to end: --check-config, /metrics through promtool, SIGHUP
// reload (good and bad), SIGTERM.

#include <gtest/gtest.h>
#include <signal.h>

#include <cmath>
#include <thread>

#include "tests/support/agent_process.h"
#include "tests/support/metrics_doc.h"

namespace ncclscope::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

RunResult CheckConfig(const TempDir& dir, const std::string& yaml) {
  const std::string path = dir.WriteFile("check.yaml", yaml);
  return RunCommand({NCCLSCOPE_AGENT_PATH, "--check-config", "--config", path});
}

TEST(AgentBinaryTest, CheckConfigReportsEachClassOfBadInput) {
  TempDir dir;
  const std::string file = dir.path() + "/check.yaml";
  struct Case {
    const char* yaml;
    std::string expected;  // one line of the output
  };
  const Case cases[] = {
      {"rdma:\n  intervall: 5s\n", file + ":2:3: rdma.intervall: unknown key"},
      {"plugin:\n  enabled: 3\n", file + ":2:12: plugin.enabled: expected true or false"},
      {"rdma:\n  interval: 1ms\n", file + ":2:13: rdma.interval: value 1ms is out of range"},
      {"rdma:\n  interval: 5 seconds\n", file + ":2:13: rdma.interval: duration \"5 seconds\""},
      {"log: [\n", file + ":2:1: YAML syntax error"},
  };
  for (const Case& c : cases) {
    const RunResult result = CheckConfig(dir, c.yaml);
    EXPECT_EQ(result.exit_code, 1) << c.yaml;
    EXPECT_NE(result.output.find(c.expected), std::string::npos)
        << "expected: " << c.expected << "\ngot: " << result.output;
  }
  const RunResult missing =
      RunCommand({NCCLSCOPE_AGENT_PATH, "--check-config", "--config", dir.path() + "/absent.yaml"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find(dir.path() + "/absent.yaml: cannot read: No such file"),
            std::string::npos)
      << missing.output;
}

TEST(AgentBinaryTest, CheckConfigPrintsEffectiveConfig) {
  TempDir dir;
  const RunResult result = CheckConfig(dir, "rdma:\n  interval: 30s\n");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("interval: 30s"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("listen_address: :9824"), std::string::npos) << result.output;

  const RunResult shipped =
      RunCommand({NCCLSCOPE_AGENT_PATH, "--check-config", "--config",
                  std::string(NCCLSCOPE_SOURCE_DIR) + "/config/ncclscope.yaml"});
  EXPECT_EQ(shipped.exit_code, 0) << shipped.output;
}

TEST(AgentBinaryTest, UsageErrorsExitTwo) {
  EXPECT_EQ(RunCommand({NCCLSCOPE_AGENT_PATH, "--bogus"}).exit_code, 2);
  const RunResult version = RunCommand({NCCLSCOPE_AGENT_PATH, "--version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_NE(version.output.find("ncclscope-agent 0."), std::string::npos);
}

TEST(AgentBinaryTest, MetricsPassPromtoolAndHealthzAnswers) {
  AgentProcess agent("");
  ASSERT_TRUE(agent.ok()) << agent.startup_log();
  const HttpResponse metrics = agent.Get("/metrics");
  ASSERT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("ncclscope_build_info{"), std::string::npos);
  const RunResult lint = RunCommand({NCCLSCOPE_PROMTOOL, "check", "metrics"}, metrics.body);
  EXPECT_EQ(lint.exit_code, 0) << lint.output;
  EXPECT_EQ(lint.output, "") << "promtool lint findings:\n" << lint.output;
  EXPECT_EQ(UndocumentedMetrics(metrics.body), std::vector<std::string>{})
      << "add them to docs/metrics.md";

  const HttpResponse health = agent.Get("/healthz");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body.rfind("ok\n", 0), 0u);
}

TEST(AgentBinaryTest, SighupWithBadFileKeepsServingOldConfig) {
  AgentProcess agent("log:\n  level: info\n");
  ASSERT_TRUE(agent.ok()) << agent.startup_log();
  EXPECT_EQ(agent.Sample("ncclscope_config_last_reload_successful"), 1);

  // Break the file, reload: the agent keeps serving and says so.
  agent.dir().WriteFile("ncclscope.yaml", "log:\n  level: loud\n");
  agent.process().Signal(SIGHUP);
  ASSERT_TRUE(agent.process().WaitForStderr("reload failed", seconds(10)))
      << agent.process().Stderr();
  EXPECT_NE(agent.process().Stderr().find(agent.config_path() + ":2:10: log.level:"),
            std::string::npos)
      << agent.process().Stderr();
  EXPECT_EQ(agent.Sample("ncclscope_config_last_reload_successful"), 0);
  EXPECT_EQ(agent.Sample("ncclscope_config_reloads_total{result=\"failure\"}"), 1);
  EXPECT_TRUE(agent.process().Running());

  // Fix it, reload: success again, and the new level applies.
  agent.dir().WriteFile("ncclscope.yaml", "log:\n  level: debug\n");
  agent.process().Signal(SIGHUP);
  ASSERT_TRUE(agent.process().WaitForStderr("reload succeeded", seconds(10)));
  EXPECT_EQ(agent.Sample("ncclscope_config_last_reload_successful"), 1);
  EXPECT_EQ(agent.Sample("ncclscope_config_reloads_total{result=\"success\"}"), 1);
}

TEST(AgentBinaryTest, SigtermAndSigintExitZero) {
  for (int signal : {SIGTERM, SIGINT}) {
    AgentProcess agent("");
    ASSERT_TRUE(agent.ok()) << agent.startup_log();
    agent.process().Signal(signal);
    const auto code = agent.process().Wait(seconds(10));
    ASSERT_TRUE(code) << "agent did not exit on signal " << signal;
    EXPECT_EQ(*code, 0) << agent.process().Stderr();
    EXPECT_NE(agent.process().Stderr().find("level=info component=agent msg=\"stopped\""),
              std::string::npos);
  }
}

TEST(AgentBinaryTest, InvalidConfigOrBusyPortRefusesToStart) {
  TempDir dir;
  const std::string bad = dir.WriteFile("bad.yaml", "server:\n  listen_address: nowhere\n");
  Subprocess invalid({NCCLSCOPE_AGENT_PATH, "--config", bad}, dir.path());
  EXPECT_EQ(invalid.Wait(seconds(10)), 1);
  EXPECT_NE(invalid.Stderr().find(bad + ":2:19: server.listen_address:"), std::string::npos)
      << invalid.Stderr();

  AgentProcess first("");
  ASSERT_TRUE(first.ok());
  const std::string taken = first.base_url().substr(std::string("http://").size());
  Subprocess second({NCCLSCOPE_AGENT_PATH, "--web.listen-address", taken}, dir.path());
  EXPECT_EQ(second.Wait(seconds(10)), 1);
  EXPECT_NE(second.Stderr().find("cannot listen on " + taken), std::string::npos)
      << second.Stderr();
}

}  // namespace
}  // namespace ncclscope::testing
