#pragma once

#include <functional>
#include <memory>
#include <string>

class CivetServer;

namespace ncclscope {

// The agent's HTTP endpoint (civetweb): `metrics_path` serves the Prometheus text the agent
// renders itself (ScrapeCollector::RenderText, agent/core/text_exposition.h: several times faster
// than prometheus-cpp's Exposer and serializer at tens of thousands of series), /healthz is
// liveness (200 "ok" while the agent runs, with one line per source), / a small landing page.
class HttpServer {
 public:
  // Text of /healthz after its first line; called per request.
  using HealthText = std::function<std::string()>;
  // The metrics page, in the Prometheus text format; called per scrape, possibly concurrently.
  using MetricsText = std::function<std::string()>;

  // Binds `listen_address` (HOST:PORT, :PORT or [IPv6]:PORT; port 0 picks a free port). Returns
  // null and sets *error when the address cannot be bound.
  static std::unique_ptr<HttpServer> Start(const std::string& listen_address,
                                           const std::string& metrics_path, MetricsText metrics,
                                           HealthText health, std::string* error);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The address actually bound, with the real port, e.g. "127.0.0.1:41234" or "0.0.0.0:9824".
  const std::string& bound_address() const { return bound_address_; }

 private:
  HttpServer() = default;

  std::unique_ptr<CivetServer> server_;
  std::string bound_address_;
};

// Translates our listen-address syntax to civetweb's listening_ports syntax; exposed for tests.
std::string ToCivetListeningPort(const std::string& listen_address);

}  // namespace ncclscope
