#include "agent/exporter/http_server.h"

#include <CivetServer.h>
#include <civetweb.h>

#include <cstring>
#include <exception>
#include <mutex>

#include "agent/core/log.h"

namespace ncclscope {
namespace {

// civetweb's request hook has no user pointer of ours (CivetServer keeps it), so what the hook
// serves is process-wide. The agent runs one HTTP server per process.
struct HookState {
  std::mutex mutex;
  HttpServer::HealthText health;          // guarded by mutex
  HttpServer::MetricsText metrics;        // guarded by mutex
  std::string metrics_path = "/metrics";  // guarded by mutex
};

HookState& Hook() {
  static HookState state;
  return state;
}

std::string LandingPage(const std::string& metrics_path) {
  return "<html><head><title>ncclscope</title></head><body><h1>ncclscope agent</h1>"
         "<p>NCCL, eBPF and fabric telemetry for this node.</p><ul><li><a href=\"" +
         metrics_path +
         "\">metrics</a></li><li><a href=\"/healthz\">healthz</a></li></ul></body></html>\n";
}

void Respond(mg_connection* conn, int code, const char* reason, const char* type,
             const std::string& body) {
  mg_printf(conn,
            "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
            "Cache-Control: no-store\r\nConnection: close\r\n\r\n",
            code, reason, type, body.size());
  mg_write(conn, body.data(), body.size());
}

// Handles the metrics path, / and /healthz; anything else gets civetweb's 404.
int BeginRequest(mg_connection* conn) {
  const mg_request_info* info = mg_get_request_info(conn);
  if (info == nullptr || info->local_uri == nullptr) return 0;
  HttpServer::MetricsText metrics;
  bool is_metrics = false;
  {
    std::lock_guard<std::mutex> lock(Hook().mutex);
    is_metrics = Hook().metrics_path == info->local_uri;
    if (is_metrics) metrics = Hook().metrics;  // rendered outside the lock: scrapes run in parallel
  }
  if (is_metrics) {
    std::string body;
    try {
      if (metrics) body = metrics();
    } catch (const std::exception& e) {
      Respond(conn, 500, "Internal Server Error", "text/plain; charset=utf-8",
              std::string("rendering metrics failed: ") + e.what() + "\n");
      return 500;
    }
    Respond(conn, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", body);
    return 200;
  }
  if (std::strcmp(info->local_uri, "/healthz") == 0) {
    std::string body = "ok\n";
    {
      std::lock_guard<std::mutex> lock(Hook().mutex);
      if (Hook().health) {
        try {
          body += Hook().health();
        } catch (const std::exception&) {
          body += "health details unavailable\n";
        }
      }
    }
    Respond(conn, 200, "OK", "text/plain; charset=utf-8", body);
    return 200;
  }
  if (std::strcmp(info->local_uri, "/") == 0) {
    std::string path;
    {
      std::lock_guard<std::mutex> lock(Hook().mutex);
      path = Hook().metrics_path;
    }
    Respond(conn, 200, "OK", "text/html; charset=utf-8", LandingPage(path));
    return 200;
  }
  return 0;
}

std::string HostOf(const std::string& listen_address) {
  const std::string host = listen_address.substr(0, listen_address.rfind(':'));
  return host.empty() ? "0.0.0.0" : host;
}

}  // namespace

std::string ToCivetListeningPort(const std::string& listen_address) {
  // ":9824" means every IPv4 interface, which civetweb spells as the bare port.
  if (!listen_address.empty() && listen_address[0] == ':') return listen_address.substr(1);
  return listen_address;
}

std::unique_ptr<HttpServer> HttpServer::Start(const std::string& listen_address,
                                              const std::string& metrics_path, MetricsText metrics,
                                              HealthText health, std::string* error) {
  {
    std::lock_guard<std::mutex> lock(Hook().mutex);
    Hook().health = std::move(health);
    Hook().metrics = std::move(metrics);
    Hook().metrics_path = metrics_path;
  }
  CivetCallbacks callbacks{};
  callbacks.begin_request = &BeginRequest;
  std::unique_ptr<HttpServer> server(new HttpServer());
  try {
    server->server_ = std::make_unique<CivetServer>(
        std::vector<std::string>{"listening_ports", ToCivetListeningPort(listen_address),
                                 "num_threads", "4", "request_timeout_ms", "10000"},
        &callbacks);
  } catch (const std::exception& e) {
    *error = "cannot listen on " + listen_address + ": " + e.what();
    return nullptr;
  }
  const std::vector<int> ports = server->server_->getListeningPorts();
  const int port = ports.empty() ? 0 : ports.front();
  server->bound_address_ = HostOf(listen_address) + ":" + std::to_string(port);
  return server;
}

HttpServer::~HttpServer() {
  server_.reset();
  std::lock_guard<std::mutex> lock(Hook().mutex);
  Hook().health = nullptr;
  Hook().metrics = nullptr;
}

}  // namespace ncclscope
