#include "tests/support/agent_process.h"

#include <chrono>

namespace ncclscope::testing {

AgentProcess::AgentProcess(const std::string& config_yaml, std::vector<std::string> extra_args,
                           std::vector<std::string> extra_env, std::vector<std::string> launcher) {
  config_path_ = dir_.WriteFile("ncclscope.yaml", config_yaml);
  std::vector<std::string> argv = std::move(launcher);
  for (const char* arg : {NCCLSCOPE_AGENT_PATH, "--config", config_path_.c_str(),
                          "--web.listen-address", "127.0.0.1:0"}) {
    argv.emplace_back(arg);
  }
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  process_ = std::make_unique<Subprocess>(argv, dir_.path(), std::move(extra_env));
  const auto address = process_->WaitForStderr("serving metrics on ", std::chrono::seconds(30));
  if (!address) return;
  // "http://127.0.0.1:41234/metrics\"" -> "http://127.0.0.1:41234" (https with a web config)
  const std::size_t scheme = address->find("://");
  if (scheme == std::string::npos) return;
  const std::size_t host = scheme + 3;
  base_url_ = address->substr(0, host) + address->substr(host, address->find('/', host) - host);
}

double AgentProcess::Sample(const std::string& series) const {
  return SampleValue(Get("/metrics").body, series);
}

}  // namespace ncclscope::testing
