#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tests/support/exposition.h"
#include "tests/support/http_client.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace ncclscope::testing {

// The real ncclscope-agent binary, started on 127.0.0.1 with a free port, for end-to-end tests.
class AgentProcess {
 public:
  // Starts the agent with `config_yaml` written to a temp file (plus any extra flags) and waits
  // until it serves metrics. Check ok() (and startup_log() when it is false). `launcher` is put
  // in front of the agent's command line (e.g. setpriv to drop capabilities).
  explicit AgentProcess(const std::string& config_yaml, std::vector<std::string> extra_args = {},
                        std::vector<std::string> extra_env = {},
                        std::vector<std::string> launcher = {});

  bool ok() const { return !base_url_.empty(); }
  const std::string& base_url() const { return base_url_; }
  const std::string& config_path() const { return config_path_; }
  Subprocess& process() { return *process_; }
  const TempDir& dir() const { return dir_; }
  std::string startup_log() const { return process_->Stderr(); }

  HttpResponse Get(const std::string& path) const { return HttpGet(base_url_ + path); }
  // The value of the first sample whose line starts with `series` (name plus labels), or NaN.
  double Sample(const std::string& series) const;

 private:
  TempDir dir_;
  std::string config_path_;
  std::unique_ptr<Subprocess> process_;
  std::string base_url_;
};

}  // namespace ncclscope::testing
