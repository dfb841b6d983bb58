#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "tests/support/http_client.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace ncclscope::testing {

// A real Prometheus server (Debian's `prometheus`, path from NCCLSCOPE_PROMETHEUS) with the
// prometheus.yml `config_yaml`, its TSDB and config in `dir`, serving its API on a free port.
class PrometheusServer {
 public:
  // A prometheus.yml with one job, "ncclscope", scraping `target` (host:port) every second;
  // `job_settings` are more lines of that job, each indented four spaces (scheme, tls_config,
  // basic_auth).
  static std::string OneJobConfig(const std::string& target, const std::string& job_settings = "");

  PrometheusServer(const std::string& binary, const TempDir& dir, const std::string& config_yaml);

  // An instant query's answer (the API's JSON).
  HttpResponse Query(const std::string& promql) const;
  // Polls `promql` until its result is non-empty; false after `timeout` or when Prometheus exits,
  // with the last answer in *last.
  bool WaitForResult(const std::string& promql, std::chrono::seconds timeout, std::string* last);
  // Waits until the "ncclscope" job's target is up; a failure with Prometheus' last answer and its
  // log after `timeout`.
  ::testing::AssertionResult WaitForTargetUp(std::chrono::seconds timeout);
  std::string Log() const { return process_->Stderr(); }

 private:
  std::string api_;
  std::unique_ptr<Subprocess> process_;
};

}  // namespace ncclscope::testing
