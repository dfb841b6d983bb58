#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "agent/exporter/node_page.h"
#include "agent/exporter/web_config.h"

struct MHD_Daemon;

namespace ncclscope {

// What /healthz answers: 200 "ok" or 503 "unhealthy", then `text`.
struct HealthReport {
  bool healthy = true;
  std::string text;
};

// The agent's HTTP endpoint (GNU libmicrohttpd): `metrics_path` serves the Prometheus text the
// agent renders itself (ScrapeCollector::RenderText, agent/core/text_exposition.h), /healthz is
// liveness (200 "ok" while the agent runs, with one line per source; 503 "unhealthy" while a
// source the config requires is down), / the node page (node_page.h: a static page whose script
// renders `metrics_path` in the browser, so that it costs the server nothing per view), and
// /api/alerts the node's alerts from Prometheus for that page (alert_feed.h).
//
// Any pod on the node can connect, so no client can hold the server (docs/trust-model.md):
// connections are multiplexed with epoll on a small thread pool, an idle or slow connection costs
// one descriptor and no thread, and is closed after Limits::idle_timeout_s without traffic (the
// header-read timeout); there are at most max_connections, and at most per_ip_connections from one
// address, so one pod cannot take the slots Prometheus needs. Only GET and HEAD are served (HEAD
// without a body); other methods get 405.
//
// As Prometheus exporters do it: the metrics page is gzip-compressed when the scraper accepts it
// (Prometheus always does), ":PORT" listens on IPv6 and IPv4 alike (one dual-stack socket; IPv4
// only where the kernel has no IPv6), and TLS, client certificates and basic auth come from a
// web-config file in exporter-toolkit's format (web_config.h). Basic auth covers every path but
// /healthz, which kubelet probes without credentials and which tells nothing but "ok" and the
// sources' states.
// (civetweb, used before, gives every connection a worker thread from the moment it is accepted:
// one idle TCP connection per second kept all four workers waiting out their read timeouts and
// every scrape timed out.)
class HttpServer {
 public:
  // The state /healthz reports; called per request.
  using HealthCheck = std::function<HealthReport()>;
  // The metrics page, in the Prometheus text format; called per scrape, possibly concurrently.
  using MetricsText = std::function<std::string()>;
  // GET /api/alerts for the node page (AlertFeed::Json); never waits on another server.
  using AlertsJson = std::function<std::string()>;

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
                                           HealthCheck health, std::string* error);
  static std::unique_ptr<HttpServer> Start(const std::string& listen_address,
                                           const std::string& metrics_path, MetricsText metrics,
                                           HealthCheck health, const Limits& limits,
                                           std::string* error);
  static std::unique_ptr<HttpServer> Start(const std::string& listen_address,
                                           const std::string& metrics_path, MetricsText metrics,
                                           HealthCheck health, const Limits& limits,
                                           const WebConfig& web, std::string* error);
  static std::unique_ptr<HttpServer> Start(const std::string& listen_address,
                                           const std::string& metrics_path, MetricsText metrics,
                                           HealthCheck health, const Limits& limits,
                                           const WebConfig& web, AlertsJson alerts,
                                           std::string* error);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The address actually bound, with the real port, e.g. "127.0.0.1:41234" or "[::]:9824".
  const std::string& bound_address() const { return bound_address_; }

  struct Handlers {
    std::string metrics_path;
    MetricsText metrics;
    HealthCheck health;
    WebConfig web;
    NodePage node_page;  // built once at start
    AlertsJson alerts;   // null: /api/alerts answers {"state":"off"}
    // Credentials that matched, so that bcrypt (tens of ms by design) runs once per password and
    // not per scrape: SHA-256 of user, hash and password, as exporter-toolkit caches them.
    std::mutex auth_mutex;
    std::set<std::string> auth_cache;
  };

 private:
  HttpServer() = default;

  std::unique_ptr<Handlers> handlers_;
  MHD_Daemon* daemon_ = nullptr;
  int listen_fd_ = -1;
  std::string bound_address_;
};

// Our listen-address syntax split into host ("" for every interface, IPv6 and IPv4) and port;
// exposed for tests. nullopt when malformed.
struct ListenAddress {
  std::string host;
  std::string port;
};
std::optional<ListenAddress> ParseListenAddress(const std::string& listen_address);

// Whether an Accept-Encoding header value admits gzip (RFC 9110 12.5.3: "gzip" or "*" with a
// non-zero q); exposed for tests.
bool AcceptsGzip(const char* accept_encoding);

// `text` as a gzip member (RFC 1952); nullopt if zlib fails.
std::optional<std::string> Gzip(const std::string& text);

}  // namespace ncclscope
