#include "agent/app/agent.h"

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>

#include "agent/app/health.h"
#include "agent/core/log.h"
#include "agent/core/signals.h"
#include "agent/exporter/http_server.h"
#include "agent/exporter/scrape_collector.h"
#include "platform/clock.h"

namespace ncclscope {
namespace {

void LogErrors(const std::vector<config::ConfigError>& errors) {
  for (const config::ConfigError& error : errors) {
    NCCLSCOPE_LOG(kError, "config") << error.ToString();
  }
}

std::string HostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

}  // namespace

AlertFeedSettings AlertFeedSettingsFor(const config::NodePageConfig& page,
                                       const char* environment_node, const std::string& host_name) {
  AlertFeedSettings settings;
  settings.prometheus_url = page.prometheus_url;
  settings.runbook_url = page.runbook_url;
  settings.refresh =
      std::chrono::duration_cast<std::chrono::milliseconds>(page.alerts_refresh.value());
  if (!page.node.empty()) {
    settings.node = page.node;
  } else if (environment_node != nullptr && *environment_node != '\0') {
    settings.node = environment_node;
  } else {
    settings.node = host_name;
  }
  return settings;
}

void ApplyOverrides(const Options& options, config::LoadResult& result) {
  if (options.listen_address) {
    if (auto bad = config::checks::ListenAddress()(*options.listen_address)) {
      result.errors.push_back({"--web.listen-address", 0, 0, "", *bad});
    } else {
      result.config.server.listen_address = *options.listen_address;
    }
  }
  if (options.log_level) {
    if (auto bad = config::checks::OneOf({"debug", "info", "warn", "error"})(*options.log_level)) {
      result.errors.push_back({"--log.level", 0, 0, "", *bad});
    } else {
      result.config.log.level = *options.log_level;
    }
  }
}

Agent::Agent(Options options, std::vector<std::shared_ptr<Source>> sources)
    : options_(std::move(options)), sources_(std::move(sources)) {}

Agent::~Agent() {
  server_.reset();
  sources_.StopAll();
}

config::LoadResult Agent::LoadConfig() const {
  config::LoadResult result =
      options_.config_file ? config::LoadFile(*options_.config_file) : config::LoadResult{};
  ApplyOverrides(options_, result);
  return result;
}

int Agent::Run(SignalWaiter& signals) {
  config::LoadResult loaded = LoadConfig();
  if (!loaded.ok()) {
    LogErrors(loaded.errors);
    NCCLSCOPE_LOG(kError, "agent") << "invalid configuration, not starting";
    return 1;
  }
  config_ = loaded.config;
  log::SetLevel(*log::ParseLevel(config_.log.level));
  reload_.RecordInitialLoad(platform::UnixSeconds());
  NCCLSCOPE_LOG(kInfo, "agent") << "starting ncclscope-agent, config "
                                << options_.config_file.value_or("(built-in defaults)");

  SetHealthRequires(config_.server.healthz_requires);
  sources_.Apply(config_);
  collector_ = std::make_shared<ScrapeCollector>(&sources_, &reload_);
  std::string error;
  WebConfig web;
  if (!config_.server.web_config_file.empty()) {
    std::optional<WebConfig> loaded_web = LoadWebConfig(config_.server.web_config_file, &error);
    if (!loaded_web) {
      NCCLSCOPE_LOG(kError, "exporter") << "server.web_config_file: " << error;
      sources_.StopAll();
      return 1;
    }
    web = std::move(*loaded_web);
  }
  alerts_.Configure(AlertFeedSettingsFor(config_.node_page, std::getenv("NODE_NAME"), HostName()));
  server_ = HttpServer::Start(
      config_.server.listen_address, config_.server.metrics_path,
      [collector = collector_] { return collector->RenderText(); }, [this] { return Health(); },
      HttpServer::Limits{}, web, [this] { return alerts_.Json(); }, &error);
  if (!server_) {
    NCCLSCOPE_LOG(kError, "exporter") << error;
    sources_.StopAll();
    return 1;
  }
  NCCLSCOPE_LOG(kInfo, "exporter")
      << "serving metrics on " << (web.tls() ? "https://" : "http://") << server_->bound_address()
      << config_.server.metrics_path << (web.basic_auth() ? " (basic auth)" : "");

  while (true) {
    const int signal = signals.Wait(std::chrono::milliseconds(1000));
    if (signal == SIGHUP) {
      Reload();
    } else if (signal == SIGTERM || signal == SIGINT) {
      NCCLSCOPE_LOG(kInfo, "agent")
          << "received " << (signal == SIGTERM ? "SIGTERM" : "SIGINT") << ", shutting down";
      break;
    }
  }
  // Sources stop consuming first (a ring's records left unread go to the next agent, exactly
  // once), while the server still serves what they read; then the server, then the rest.
  for (const auto& entry : sources_.entries()) {
    if (!entry->running.load()) continue;
    const std::string note = entry->source->Quiesce();
    if (!note.empty()) {
      NCCLSCOPE_LOG(kWarn, entry->source->name()) << note;
    }
  }
  server_.reset();
  sources_.StopAll();
  NCCLSCOPE_LOG(kInfo, "agent") << "stopped";
  return 0;
}

void Agent::Reload() {
  NCCLSCOPE_LOG(kInfo, "config") << "SIGHUP: reloading "
                                 << options_.config_file.value_or("(built-in defaults)");
  config::LoadResult loaded = LoadConfig();
  if (!loaded.ok()) {
    LogErrors(loaded.errors);
    reload_.RecordFailure();
    NCCLSCOPE_LOG(kError, "config") << "reload failed; keeping the running configuration";
    return;
  }
  const config::Config& next = loaded.config;
  if (next.server.listen_address != config_.server.listen_address ||
      next.server.metrics_path != config_.server.metrics_path) {
    NCCLSCOPE_LOG(kWarn, "config")
        << "server.listen_address and server.metrics_path take effect only after a restart";
  }
  config_ = next;
  log::SetLevel(*log::ParseLevel(config_.log.level));
  SetHealthRequires(config_.server.healthz_requires);
  alerts_.Configure(AlertFeedSettingsFor(config_.node_page, std::getenv("NODE_NAME"), HostName()));
  sources_.Apply(config_);
  reload_.RecordSuccess(platform::UnixSeconds());
  NCCLSCOPE_LOG(kInfo, "config") << "reload succeeded";
}

HealthReport Agent::Health() const {
  std::vector<std::string> required;
  {
    std::lock_guard<std::mutex> lock(health_mutex_);
    required = healthz_requires_;
  }
  return SourcesHealth(sources_, required);
}

void Agent::SetHealthRequires(const std::vector<std::string>& names) {
  std::lock_guard<std::mutex> lock(health_mutex_);
  healthz_requires_ = names;
}

}  // namespace ncclscope
