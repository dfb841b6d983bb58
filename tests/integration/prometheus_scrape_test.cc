// A real Prometheus server scrapes the real agent: the target is up and our series are queryable.

#include <gtest/gtest.h>

#include <thread>

#include "tests/support/agent_process.h"

namespace ncclscope::testing {
namespace {

using std::chrono::seconds;

TEST(PrometheusScrapeTest, RealPrometheusScrapesTheAgent) {
  AgentProcess agent("");
  ASSERT_TRUE(agent.ok()) << agent.startup_log();
  const std::string target = agent.base_url().substr(std::string("http://").size());

  TempDir dir;
  const std::string config =
      dir.WriteFile("prometheus.yml",
                    "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    "scrape_configs:\n  - job_name: ncclscope\n    static_configs:\n"
                    "      - targets: ['" +
                        target + "']\n");
  const int port = FreePort();
  Subprocess prometheus({NCCLSCOPE_PROMETHEUS, "--config.file=" + config,
                         "--storage.tsdb.path=" + dir.path() + "/data",
                         "--web.listen-address=127.0.0.1:" + std::to_string(port)},
                        dir.path());
  const std::string api = "http://127.0.0.1:" + std::to_string(port) + "/api/v1/query?query=";

  std::string last;
  bool scraped = false;
  const auto deadline = std::chrono::steady_clock::now() + seconds(60);
  while (std::chrono::steady_clock::now() < deadline && prometheus.Running()) {
    const HttpResponse up = HttpGet(api + UrlEncode("up{job=\"ncclscope\"} == 1"));
    last = up.body;
    if (up.status == 200 && up.body.find("\"result\":[{") != std::string::npos) {
      scraped = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  ASSERT_TRUE(scraped) << "last answer: " << last << "\nprometheus log:\n" << prometheus.Stderr();

  // Our own series made it into the TSDB with their labels.
  const HttpResponse build = HttpGet(api + UrlEncode("ncclscope_build_info"));
  EXPECT_NE(build.body.find("\"version\":\"0."), std::string::npos) << build.body;
  // And the scrape itself reported no sample errors.
  const HttpResponse samples =
      HttpGet(api + UrlEncode("scrape_samples_scraped{job=\"ncclscope\"} > 0"));
  EXPECT_NE(samples.body.find("\"result\":[{"), std::string::npos) << samples.body;
}

}  // namespace
}  // namespace ncclscope::testing
