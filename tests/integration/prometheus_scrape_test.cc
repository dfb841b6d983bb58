// A real Prometheus server scrapes the real agent: the target is up and our series are queryable.

#include <gtest/gtest.h>

#include "tests/support/agent_process.h"
#include "tests/support/prometheus_server.h"

namespace ncclscope::testing {
namespace {

using std::chrono::seconds;

TEST(PrometheusScrapeTest, RealPrometheusScrapesTheAgent) {
  AgentProcess agent("");
  ASSERT_TRUE(agent.ok()) << agent.startup_log();
  const std::string target = agent.base_url().substr(std::string("http://").size());

  TempDir dir;
  PrometheusServer prometheus(NCCLSCOPE_PROMETHEUS, dir, PrometheusServer::OneJobConfig(target));
  ASSERT_TRUE(prometheus.WaitForTargetUp(seconds(60)));

  // Our own series made it into the TSDB with their labels.
  const HttpResponse build = prometheus.Query("ncclscope_build_info");
  EXPECT_NE(build.body.find("\"version\":\"0."), std::string::npos) << build.body;
  // And the scrape itself reported no sample errors.
  const HttpResponse samples = prometheus.Query("scrape_samples_scraped{job=\"ncclscope\"} > 0");
  EXPECT_NE(samples.body.find("\"result\":[{"), std::string::npos) << samples.body;
}

}  // namespace
}  // namespace ncclscope::testing
