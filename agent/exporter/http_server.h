#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>

struct MHD_Daemon;

namespace ncclscope {

// The agent's HTTP endpoint (GNU libmicrohttpd): `metrics_path` serves the Prometheus text the
// agent renders itself (ScrapeCollector::RenderText, agent/core/text_exposition.h), /healthz is
// liveness (200 "ok" while the agent runs, with one line per source), / a small landing page.
//
// Any pod on the node can connect, so no client can hold the server (docs/trust-model.md):
// connections are multiplexed with epoll on a small thread pool, an idle or slow connection costs
// one descriptor and no thread, and is closed after Limits::idle_timeout_s without traffic (the
// header-read timeout); there are at most max_connections, and at most per_ip_connections from one
// address, so one pod cannot take the slots Prometheus needs. Only GET and HEAD are served (HEAD
// without a body); other methods get 405.
// (civetweb, used before, gives every connection a worker thread from the moment it is accepted:
// one idle TCP connection per second kept all four workers waiting out their read timeouts and
// every scrape timed out.)
class HttpServer {
 public:
  // Text of /healthz after its first line; called per request.
  using HealthText = std::function<std::string()>;
  // The metrics page, in the Prometheus text format; called per scrape, possibly concurrently.
  using MetricsText = std::function<std::string()>;

  // A node runs at most ~110 pods: 110 x 8 connections stay under the total, and each connection
  // costs one descriptor and at most 8 KiB (16 MiB at the limit).
  struct Limits {
    unsigned threads = 4;
    unsigned max_connections = 2048;
    unsigned per_ip_connections = 8;
    unsigned idle_timeout_s = 10;
    std::size_t connection_memory = 8 << 10;  // request headers; responses are not in it
  };

  // Binds `listen_address` (HOST:PORT, :PORT or [IPv6]:PORT; port 0 picks a free port). Returns
  // null and sets *error when the address cannot be bound.
  static std::unique_ptr<HttpServer> Start(const std::string& listen_address,
                                           const std::string& metrics_path, MetricsText metrics,
                                           HealthText health, std::string* error);
  static std::unique_ptr<HttpServer> Start(const std::string& listen_address,
                                           const std::string& metrics_path, MetricsText metrics,
                                           HealthText health, const Limits& limits,
                                           std::string* error);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The address actually bound, with the real port, e.g. "127.0.0.1:41234" or "0.0.0.0:9824".
  const std::string& bound_address() const { return bound_address_; }

  struct Handlers {
    std::string metrics_path;
    MetricsText metrics;
    HealthText health;
  };

 private:
  HttpServer() = default;

  Handlers handlers_;
  MHD_Daemon* daemon_ = nullptr;
  int listen_fd_ = -1;
  std::string bound_address_;
};

// Our listen-address syntax split into host ("" for every IPv4 interface) and port; exposed for
// tests. nullopt when malformed.
struct ListenAddress {
  std::string host;
  std::string port;
};
std::optional<ListenAddress> ParseListenAddress(const std::string& listen_address);

}  // namespace ncclscope
