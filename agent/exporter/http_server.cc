#include "agent/exporter/http_server.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <exception>

#include "agent/core/log.h"

namespace ncclscope {
namespace {

constexpr const char* kMetricsType = "text/plain; version=0.0.4; charset=utf-8";
constexpr const char* kTextType = "text/plain; charset=utf-8";

std::string LandingPage(const std::string& metrics_path) {
  return "<html><head><title>ncclscope</title></head><body><h1>ncclscope agent</h1>"
         "<p>NCCL, eBPF and fabric telemetry for this node.</p><ul><li><a href=\"" +
         metrics_path +
         "\">metrics</a></li><li><a href=\"/healthz\">healthz</a></li></ul></body></html>\n";
}

void FreeBody(void* body) { delete static_cast<std::string*>(body); }

MHD_Result Respond(MHD_Connection* connection, unsigned code, const char* type, std::string body,
                   const char* allow = nullptr) {
  auto* owned = new std::string(std::move(body));
  MHD_Response* response = MHD_create_response_from_buffer_with_free_callback_cls(
      owned->size(), owned->data(), &FreeBody, owned);
  if (response == nullptr) {
    delete owned;
    return MHD_NO;
  }
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, type);
  MHD_add_response_header(response, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
  if (allow != nullptr) MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, allow);
  // For HEAD, libmicrohttpd sends the headers (Content-Length included) and no body.
  const MHD_Result result = MHD_queue_response(connection, code, response);
  MHD_destroy_response(response);
  return result;
}

MHD_Result Handle(void* cls, MHD_Connection* connection, const char* url, const char* method,
                  const char* /*version*/, const char* /*upload_data*/, size_t* upload_size,
                  void** request_state) {
  const auto* handlers = static_cast<const HttpServer::Handlers*>(cls);
  const bool get = std::strcmp(method, MHD_HTTP_METHOD_GET) == 0;
  const bool head = std::strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
  if (!get && !head) {
    // Answered before any request body is read; the connection is not kept.
    (void)upload_size;
    return Respond(connection, MHD_HTTP_METHOD_NOT_ALLOWED, kTextType, "method not allowed\n",
                   "GET, HEAD");
  }
  if (*request_state == nullptr) {
    // First call: headers only. Answer on the second, as libmicrohttpd recommends.
    static int marker = 0;
    *request_state = &marker;
    return MHD_YES;
  }
  if (handlers->metrics_path == url) {
    std::string body;
    try {
      if (handlers->metrics) body = handlers->metrics();
    } catch (const std::exception& e) {
      return Respond(connection, MHD_HTTP_INTERNAL_SERVER_ERROR, kTextType,
                     std::string("rendering metrics failed: ") + e.what() + "\n");
    }
    return Respond(connection, MHD_HTTP_OK, kMetricsType, std::move(body));
  }
  if (std::strcmp(url, "/healthz") == 0) {
    std::string body = "ok\n";
    if (handlers->health) {
      try {
        body += handlers->health();
      } catch (const std::exception&) {
        body += "health details unavailable\n";
      }
    }
    return Respond(connection, MHD_HTTP_OK, kTextType, std::move(body));
  }
  if (std::strcmp(url, "/") == 0) {
    return Respond(connection, MHD_HTTP_OK, "text/html; charset=utf-8",
                   LandingPage(handlers->metrics_path));
  }
  return Respond(connection, MHD_HTTP_NOT_FOUND, kTextType, "not found\n");
}

// libmicrohttpd's messages, at debug level (it logs a refused or timed-out client, which any pod
// can cause at will).
__attribute__((format(printf, 2, 0))) void LogFromMhd(void* /*cls*/, const char* format,
                                                      va_list args) {
  char text[512];
  std::vsnprintf(text, sizeof(text), format, args);
  std::string line(text);
  while (!line.empty() && line.back() == '\n') line.pop_back();
  NCCLSCOPE_LOG(kDebug, "exporter") << "libmicrohttpd: " << line;
}

std::string Errno(const char* what) {
  char text[128];
  return std::string(what) + ": " + strerror_r(errno, text, sizeof(text));
}

// A bound, listening socket for `address`, or -1 with *error.
int Listen(const ListenAddress& address, std::string* error) {
  addrinfo hints{};
  hints.ai_family = address.host.empty() ? AF_INET : AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(address.host.empty() ? nullptr : address.host.c_str(),
                               address.port.c_str(), &hints, &found);
  if (rc != 0) {
    *error = gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 128) == 0) break;
    *error = Errno("bind");
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(found);
  return fd;
}

}  // namespace

std::optional<ListenAddress> ParseListenAddress(const std::string& listen_address) {
  const std::size_t colon = listen_address.rfind(':');
  if (colon == std::string::npos || colon + 1 >= listen_address.size()) return std::nullopt;
  ListenAddress address;
  address.host = listen_address.substr(0, colon);
  address.port = listen_address.substr(colon + 1);
  if (address.host.size() >= 2 && address.host.front() == '[' && address.host.back() == ']') {
    address.host = address.host.substr(1, address.host.size() - 2);
  }
  return address;
}

std::unique_ptr<HttpServer> HttpServer::Start(const std::string& listen_address,
                                              const std::string& metrics_path, MetricsText metrics,
                                              HealthText health, std::string* error) {
  return Start(listen_address, metrics_path, std::move(metrics), std::move(health), Limits{},
               error);
}

std::unique_ptr<HttpServer> HttpServer::Start(const std::string& listen_address,
                                              const std::string& metrics_path, MetricsText metrics,
                                              HealthText health, const Limits& limits,
                                              std::string* error) {
  const auto address = ParseListenAddress(listen_address);
  if (!address) {
    *error = "cannot listen on " + listen_address + ": not HOST:PORT";
    return nullptr;
  }
  std::unique_ptr<HttpServer> server(new HttpServer());
  server->handlers_ = {metrics_path, std::move(metrics), std::move(health)};
  std::string why;
  server->listen_fd_ = Listen(*address, &why);
  if (server->listen_fd_ < 0) {
    *error = "cannot listen on " + listen_address + ": " + why;
    return nullptr;
  }
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  ::getsockname(server->listen_fd_, reinterpret_cast<sockaddr*>(&bound), &length);
  const int port = bound.ss_family == AF_INET6
                       ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                       : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);

  server->daemon_ = MHD_start_daemon(
      MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG, 0, nullptr, nullptr,
      &Handle, &server->handlers_,                                         //
      MHD_OPTION_LISTEN_SOCKET, server->listen_fd_,                        //
      MHD_OPTION_THREAD_POOL_SIZE, static_cast<unsigned>(limits.threads),  //
      MHD_OPTION_CONNECTION_LIMIT, static_cast<unsigned>(limits.max_connections),
      MHD_OPTION_PER_IP_CONNECTION_LIMIT, static_cast<unsigned>(limits.per_ip_connections),
      MHD_OPTION_CONNECTION_TIMEOUT, static_cast<unsigned>(limits.idle_timeout_s),
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, limits.connection_memory, MHD_OPTION_EXTERNAL_LOGGER,
      &LogFromMhd, nullptr,  //
      MHD_OPTION_END);
  if (server->daemon_ == nullptr) {
    *error = "cannot listen on " + listen_address + ": libmicrohttpd did not start";
    return nullptr;  // the destructor closes the socket
  }
  const std::string host = address->host.empty() ? "0.0.0.0" : address->host;
  server->bound_address_ =
      (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
  return server;
}

HttpServer::~HttpServer() {
  if (daemon_ != nullptr) {
    MHD_stop_daemon(daemon_);  // waits for requests in progress; closes the listening socket
  } else if (listen_fd_ >= 0) {
    ::close(listen_fd_);
  }
}

}  // namespace ncclscope
