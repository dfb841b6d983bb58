#include "agent/exporter/http_server.h"

#include <arpa/inet.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <cctype>
#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <string_view>

#include "agent/core/log.h"
#include "platform/errno_text.h"

namespace ncclscope {
namespace {

constexpr const char* kMetricsType = "text/plain; version=0.0.4; charset=utf-8";
constexpr const char* kTextType = "text/plain; charset=utf-8";

void FreeBody(void* body) { delete static_cast<std::string*>(body); }

struct Reply {
  unsigned code = MHD_HTTP_OK;
  const char* type = kTextType;
  std::string body;
  const char* allow = nullptr;
  bool gzip = false;          // body is compressed
  bool vary = false;          // the body depends on Accept-Encoding
  bool challenge = false;     // 401 with a Basic challenge
  const char* csp = nullptr;  // Content-Security-Policy of an HTML page
};

MHD_Result Respond(MHD_Connection* connection, const HttpServer::Handlers& handlers, Reply reply) {
  auto* owned = new std::string(std::move(reply.body));
  MHD_Response* response = MHD_create_response_from_buffer_with_free_callback_cls(
      owned->size(), owned->data(), &FreeBody, owned);
  if (response == nullptr) {
    delete owned;
    return MHD_NO;
  }
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, reply.type);
  MHD_add_response_header(response, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
  if (reply.allow != nullptr) MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, reply.allow);
  if (reply.gzip) MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
  if (reply.vary) MHD_add_response_header(response, MHD_HTTP_HEADER_VARY, "Accept-Encoding");
  if (reply.csp != nullptr) {
    MHD_add_response_header(response, "Content-Security-Policy", reply.csp);
    MHD_add_response_header(response, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(response, "Referrer-Policy", "no-referrer");
  }
  for (const auto& [name, value] : handlers.web.headers) {
    MHD_add_response_header(response, name.c_str(), value.c_str());
  }
  // For HEAD, libmicrohttpd sends the headers (Content-Length included) and no body.
  const MHD_Result result =
      reply.challenge ? MHD_queue_basic_auth_fail_response(connection, "ncclscope", response)
                      : MHD_queue_response(connection, reply.code, response);
  MHD_destroy_response(response);
  return result;
}

Reply Text(unsigned code, std::string body) {
  Reply r;
  r.code = code;
  r.body = std::move(body);
  return r;
}

std::string Sha256Hex(const std::string& text) {
  unsigned char digest[32];
  if (gnutls_hash_fast(GNUTLS_DIG_SHA256, text.data(), text.size(), digest) != 0) return {};
  static const char* const kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : digest) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

// Basic auth against web-config's bcrypt hashes (none configured: everyone passes).
bool Authorized(MHD_Connection* connection, HttpServer::Handlers& handlers) {
  if (!handlers.web.basic_auth()) return true;
  char* password = nullptr;
  char* user = MHD_basic_auth_get_username_password(connection, &password);
  bool ok = false;
  if (user != nullptr && password != nullptr) {
    const auto it = handlers.web.basic_auth_users.find(user);
    if (it != handlers.web.basic_auth_users.end()) {
      const std::string key = Sha256Hex(std::string(user) + '\0' + it->second + '\0' + password);
      {
        std::lock_guard<std::mutex> lock(handlers.auth_mutex);
        ok = !key.empty() && handlers.auth_cache.count(key) != 0;
      }
      if (!ok && BcryptMatches(password, it->second)) {
        ok = true;
        std::lock_guard<std::mutex> lock(handlers.auth_mutex);
        if (handlers.auth_cache.size() >= 64) handlers.auth_cache.clear();  // bounded
        if (!key.empty()) handlers.auth_cache.insert(key);
      }
    }
  }
  if (password != nullptr) {
    std::memset(password, 0, std::strlen(password));
    MHD_free(password);
  }
  if (user != nullptr) MHD_free(user);
  return ok;
}

// With client_auth_type RequireAndVerifyClientCert: a certificate that chains to client_ca_file.
bool ClientCertificateVerified(MHD_Connection* connection, const HttpServer::Handlers& handlers) {
  if (handlers.web.client_ca_pem.empty()) return true;
  const MHD_ConnectionInfo* info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_GNUTLS_SESSION);
  if (info == nullptr || info->tls_session == nullptr) return false;
  auto* session = static_cast<gnutls_session_t>(info->tls_session);
  unsigned status = 0;
  return gnutls_certificate_verify_peers2(session, &status) == GNUTLS_E_SUCCESS && status == 0;
}

MHD_Result Handle(void* cls, MHD_Connection* connection, const char* url, const char* method,
                  const char* /*version*/, const char* /*upload_data*/, size_t* upload_size,
                  void** request_state) {
  auto* handlers = static_cast<HttpServer::Handlers*>(cls);
  const bool get = std::strcmp(method, MHD_HTTP_METHOD_GET) == 0;
  const bool head = std::strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
  if (!get && !head) {
    // Answered before any request body is read; the connection is not kept.
    (void)upload_size;
    Reply r = Text(MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");
    r.allow = "GET, HEAD";
    return Respond(connection, *handlers, std::move(r));
  }
  if (*request_state == nullptr) {
    // First call: headers only. Answer on the second, as libmicrohttpd recommends.
    static int marker = 0;
    *request_state = &marker;
    return MHD_YES;
  }
  if (!ClientCertificateVerified(connection, *handlers)) {
    return Respond(connection, *handlers,
                   Text(MHD_HTTP_FORBIDDEN, "client certificate required\n"));
  }
  if (std::strcmp(url, "/healthz") == 0) {
    HealthReport report;
    if (handlers->health) {
      try {
        report = handlers->health();
      } catch (const std::exception&) {
        report = {true, "health details unavailable\n"};
      }
    }
    return Respond(connection, *handlers,
                   report.healthy
                       ? Text(MHD_HTTP_OK, "ok\n" + report.text)
                       : Text(MHD_HTTP_SERVICE_UNAVAILABLE, "unhealthy\n" + report.text));
  }
  if (!Authorized(connection, *handlers)) {
    Reply r = Text(MHD_HTTP_UNAUTHORIZED, "unauthorized\n");
    r.challenge = true;
    return Respond(connection, *handlers, std::move(r));
  }
  if (handlers->metrics_path == url) {
    Reply r;
    r.type = kMetricsType;
    r.vary = true;
    try {
      if (handlers->metrics) r.body = handlers->metrics();
    } catch (const std::exception& e) {
      return Respond(connection, *handlers,
                     Text(MHD_HTTP_INTERNAL_SERVER_ERROR,
                          std::string("rendering metrics failed: ") + e.what() + "\n"));
    }
    if (AcceptsGzip(MHD_lookup_connection_value(connection, MHD_HEADER_KIND,
                                                MHD_HTTP_HEADER_ACCEPT_ENCODING))) {
      if (std::optional<std::string> packed = Gzip(r.body)) {
        r.body = std::move(*packed);
        r.gzip = true;
      }
    }
    return Respond(connection, *handlers, std::move(r));
  }
  if (std::strcmp(url, "/api/alerts") == 0) {
    Reply r = Text(MHD_HTTP_OK, handlers->alerts ? handlers->alerts() : R"({"state":"off"})");
    r.type = "application/json";
    return Respond(connection, *handlers, std::move(r));
  }
  if (std::strcmp(url, "/") == 0) {
    Reply r = Text(MHD_HTTP_OK, handlers->node_page.html);
    r.type = "text/html; charset=utf-8";
    r.csp = handlers->node_page.content_security_policy.c_str();
    return Respond(connection, *handlers, std::move(r));
  }
  return Respond(connection, *handlers, Text(MHD_HTTP_NOT_FOUND, "not found\n"));
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
  return std::string(what) + ": " + platform::ErrnoText(errno).c_str();
}

int BindAndListen(int family, const sockaddr* addr, socklen_t length, bool dual_stack,
                  std::string* error) {
  const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = Errno("socket");
    return -1;
  }
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (dual_stack) {
    const int zero = 0;  // IPv4 too, as ::ffff:a.b.c.d, whatever net.ipv6.bindv6only says
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
  }
  if (::bind(fd, addr, length) == 0 && ::listen(fd, 128) == 0) return fd;
  *error = Errno("bind");
  ::close(fd);
  return -1;
}

// A bound, listening socket for `address`, or -1 with *error. ":PORT" is one IPv6 socket that
// also takes IPv4 (node_exporter's ":9100" listens on both the same way); where the kernel has no
// IPv6 (ipv6.disable=1), IPv4 alone.
int Listen(const ListenAddress& address, bool* dual_stack, std::string* error) {
  *dual_stack = false;
  if (address.host.empty()) {
    char* end = nullptr;
    const unsigned long port = std::strtoul(address.port.c_str(), &end, 10);
    if (end == address.port.c_str() || *end != '\0' || port > 65535) {
      *error = "bad port";
      return -1;
    }
    sockaddr_in6 any6{};
    any6.sin6_family = AF_INET6;
    any6.sin6_addr = in6addr_any;
    any6.sin6_port = htons(static_cast<std::uint16_t>(port));
    std::string why;
    const int fd =
        BindAndListen(AF_INET6, reinterpret_cast<const sockaddr*>(&any6), sizeof(any6), true, &why);
    if (fd >= 0) {
      *dual_stack = true;
      return fd;
    }
    if (errno != EAFNOSUPPORT) {
      *error = why;
      return -1;
    }
    sockaddr_in any4{};
    any4.sin_family = AF_INET;
    any4.sin_addr.s_addr = htonl(INADDR_ANY);
    any4.sin_port = any6.sin6_port;
    return BindAndListen(AF_INET, reinterpret_cast<const sockaddr*>(&any4), sizeof(any4), false,
                         error);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(address.host.c_str(), address.port.c_str(), &hints, &found);
  if (rc != 0) {
    *error = gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = BindAndListen(a->ai_family, a->ai_addr, a->ai_addrlen, false, error);
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

bool AcceptsGzip(const char* accept_encoding) {
  if (accept_encoding == nullptr) return false;
  std::string_view rest(accept_encoding);
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    std::string_view coding = item.substr(0, item.find(';'));
    while (!coding.empty() && std::isspace(static_cast<unsigned char>(coding.front()))) {
      coding.remove_prefix(1);
    }
    while (!coding.empty() && std::isspace(static_cast<unsigned char>(coding.back()))) {
      coding.remove_suffix(1);
    }
    if (coding.size() != 4 && coding != "*") continue;
    if (coding != "*" && ::strncasecmp(coding.data(), "gzip", 4) != 0) continue;
    // q=0 (also "0.0", "0.000") refuses it; any other weight accepts.
    const std::size_t q = item.find("q=");
    if (q == std::string_view::npos) return true;
    const std::string_view weight = item.substr(q + 2);
    for (char c : weight) {
      if (c >= '1' && c <= '9') return true;
      if (c != '0' && c != '.') break;
    }
  }
  return false;
}

std::optional<std::string> Gzip(const std::string& text) {
  z_stream z{};
  // 15 window bits + 16: a gzip header and trailer. Level 1: the page is mostly repeated label
  // names, which the fastest level already shrinks ~10x.
  if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return std::nullopt;
  std::string out;
  out.resize(deflateBound(&z, static_cast<uLong>(text.size())));
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  const std::size_t written = out.size() - z.avail_out;
  deflateEnd(&z);
  if (rc != Z_STREAM_END) return std::nullopt;
  out.resize(written);
  return out;
}

std::unique_ptr<HttpServer> HttpServer::Start(const std::string& listen_address,
                                              const std::string& metrics_path, MetricsText metrics,
                                              HealthCheck health, std::string* error) {
  return Start(listen_address, metrics_path, std::move(metrics), std::move(health), Limits{},
               error);
}

std::unique_ptr<HttpServer> HttpServer::Start(const std::string& listen_address,
                                              const std::string& metrics_path, MetricsText metrics,
                                              HealthCheck health, const Limits& limits,
                                              std::string* error) {
  return Start(listen_address, metrics_path, std::move(metrics), std::move(health), limits,
               WebConfig{}, error);
}

std::unique_ptr<HttpServer> HttpServer::Start(const std::string& listen_address,
                                              const std::string& metrics_path, MetricsText metrics,
                                              HealthCheck health, const Limits& limits,
                                              const WebConfig& web, std::string* error) {
  return Start(listen_address, metrics_path, std::move(metrics), std::move(health), limits, web,
               nullptr, error);
}

std::unique_ptr<HttpServer> HttpServer::Start(const std::string& listen_address,
                                              const std::string& metrics_path, MetricsText metrics,
                                              HealthCheck health, const Limits& limits,
                                              const WebConfig& web, AlertsJson alerts,
                                              std::string* error) {
  const auto address = ParseListenAddress(listen_address);
  if (!address) {
    *error = "cannot listen on " + listen_address + ": not HOST:PORT";
    return nullptr;
  }
  std::unique_ptr<HttpServer> server(new HttpServer());
  server->handlers_ = std::make_unique<Handlers>();
  server->handlers_->metrics_path = metrics_path;
  server->handlers_->metrics = std::move(metrics);
  server->handlers_->health = std::move(health);
  server->handlers_->web = web;
  server->handlers_->node_page = MakeNodePage(metrics_path);
  server->handlers_->alerts = std::move(alerts);
  std::string why;
  bool dual_stack = false;
  server->listen_fd_ = Listen(*address, &dual_stack, &why);
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

  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
  if (bound.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
  if (web.tls()) flags |= MHD_USE_TLS;
  // Options that differ with TLS go in an array (MHD_OPTION_ARRAY), the rest inline.
  // Pointers into the server's own copy: valid for the daemon's whole life.
  const WebConfig& owned = server->handlers_->web;
  MHD_OptionItem tls_options[5] = {};
  std::size_t n = 0;
  if (owned.tls()) {
    tls_options[n++] = {MHD_OPTION_HTTPS_MEM_CERT, 0, const_cast<char*>(owned.cert_pem.c_str())};
    tls_options[n++] = {MHD_OPTION_HTTPS_MEM_KEY, 0, const_cast<char*>(owned.key_pem.c_str())};
    tls_options[n++] = {MHD_OPTION_HTTPS_PRIORITIES, 0,
                        const_cast<char*>(owned.tls_priorities.c_str())};
    if (!owned.client_ca_pem.empty()) {
      tls_options[n++] = {MHD_OPTION_HTTPS_MEM_TRUST, 0,
                          const_cast<char*>(owned.client_ca_pem.c_str())};
    }
  }
  tls_options[n] = {MHD_OPTION_END, 0, nullptr};
  server->daemon_ = MHD_start_daemon(
      flags, 0, nullptr, nullptr, &Handle, server->handlers_.get(),        //
      MHD_OPTION_LISTEN_SOCKET, server->listen_fd_,                        //
      MHD_OPTION_THREAD_POOL_SIZE, static_cast<unsigned>(limits.threads),  //
      MHD_OPTION_CONNECTION_LIMIT, static_cast<unsigned>(limits.max_connections),
      MHD_OPTION_PER_IP_CONNECTION_LIMIT, static_cast<unsigned>(limits.per_ip_connections),
      MHD_OPTION_CONNECTION_TIMEOUT, static_cast<unsigned>(limits.idle_timeout_s),
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, limits.connection_memory, MHD_OPTION_EXTERNAL_LOGGER,
      &LogFromMhd, nullptr,           //
      MHD_OPTION_ARRAY, tls_options,  //
      MHD_OPTION_END);
  if (server->daemon_ == nullptr) {
    *error = "cannot listen on " + listen_address + ": libmicrohttpd did not start" +
             (web.tls() ? " (check the web config's certificate and key)" : "");
    return nullptr;  // the destructor closes the socket
  }
  std::string host = address->host;
  if (host.empty()) host = dual_stack ? "::" : "0.0.0.0";
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
