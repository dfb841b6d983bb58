#include "tests/support/prometheus_server.h"

#include <thread>

namespace ncclscope::testing {

PrometheusServer::PrometheusServer(const std::string& binary, const TempDir& dir,
                                   const std::string& config_yaml) {
  const std::string config = dir.WriteFile("prometheus.yml", config_yaml);
  const int port = FreePort();
  process_ = std::make_unique<Subprocess>(
      std::vector<std::string>{binary, "--config.file=" + config,
                               "--storage.tsdb.path=" + dir.path() + "/data",
                               "--web.listen-address=127.0.0.1:" + std::to_string(port)},
      dir.path());
  api_ = "http://127.0.0.1:" + std::to_string(port) + "/api/v1/query?query=";
}

HttpResponse PrometheusServer::Query(const std::string& promql) const {
  return HttpGet(api_ + UrlEncode(promql));
}

bool PrometheusServer::WaitForResult(const std::string& promql, std::chrono::seconds timeout,
                                     std::string* last) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline && process_->Running()) {
    const HttpResponse answer = Query(promql);
    *last = answer.body;
    if (answer.status == 200 && answer.body.find("\"result\":[{") != std::string::npos) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  return false;
}

::testing::AssertionResult PrometheusServer::WaitForTargetUp(std::chrono::seconds timeout) {
  std::string last;
  if (WaitForResult("up{job=\"ncclscope\"} == 1", timeout, &last)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "last answer: " << last << "\nprometheus log:\n" << Log();
}

std::string PrometheusServer::OneJobConfig(const std::string& target,
                                           const std::string& job_settings) {
  return "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
         "scrape_configs:\n  - job_name: ncclscope\n" +
         job_settings + "    static_configs:\n      - targets: ['" + target + "']\n";
}

}  // namespace ncclscope::testing
