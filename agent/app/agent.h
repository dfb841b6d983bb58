#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent/app/options.h"
#include "agent/config/config.h"
#include "agent/core/source_set.h"
#include "agent/exporter/agent_state.h"
#include "agent/exporter/alert_feed.h"
#include "agent/exporter/http_server.h"

namespace ncclscope {

class ScrapeCollector;
class SignalWaiter;

// The running daemon: owns the config, the sources and the HTTP server; reloads on SIGHUP and
// shuts down cleanly on SIGTERM/SIGINT.
class Agent {
 public:
  Agent(Options options, std::vector<std::shared_ptr<Source>> sources);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Loads the config, starts sources and the server, then serves until a stop signal.
  // Returns the process exit code.
  int Run(SignalWaiter& signals);

 private:
  // The config from --config (or defaults) with command-line overrides applied.
  config::LoadResult LoadConfig() const;
  void Reload();
  HealthReport Health() const;
  void SetHealthRequires(const std::vector<std::string>& names);

  Options options_;
  config::Config config_;
  SourceSet sources_;
  ReloadStats reload_;
  std::shared_ptr<ScrapeCollector> collector_;
  AlertFeed alerts_;  // before server_: the server's handler uses it until the server stops
  std::unique_ptr<HttpServer> server_;
  // server.healthz_requires, copied: /healthz runs on the server's threads while SIGHUP replaces
  // config_.
  mutable std::mutex health_mutex_;
  std::vector<std::string> healthz_requires_;
};

// node_page settings for the AlertFeed: the node's name from the config, else $NODE_NAME, else the
// host name (`environment_node` and `host_name` injected for tests).
AlertFeedSettings AlertFeedSettingsFor(const config::NodePageConfig& page,
                                       const char* environment_node, const std::string& host_name);

// Applies --web.listen-address and --log.level to a loaded config, validating them like file keys.
void ApplyOverrides(const Options& options, config::LoadResult& result);

}  // namespace ncclscope
