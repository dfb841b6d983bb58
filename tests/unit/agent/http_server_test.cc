#include "agent/exporter/http_server.h"

#include <arpa/inet.h>
#include <crypt.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "agent/exporter/scrape_collector.h"
#include "tests/support/http_client.h"
#include "tests/unit/agent/fake_source.h"

namespace ncclscope {
namespace {

TEST(HttpServerTest, ServesMetricsHealthzAndLandingPage) {
  SourceSet sources({std::make_shared<testing::FakeSource>("fake")});
  sources.Apply(config::Config{});
  ReloadStats reload;
  auto collector = std::make_shared<ScrapeCollector>(&sources, &reload);
  std::string error;
  auto server = HttpServer::Start(
      "127.0.0.1:0", "/metrics", [collector] { return collector->RenderText(); },
      [] {
        return HealthReport{true, "source fake: up\n"};
      },
      &error);
  ASSERT_TRUE(server) << error;
  const std::string base = "http://" + server->bound_address();
  ASSERT_NE(server->bound_address(), "127.0.0.1:0");

  const auto metrics = testing::HttpGet(base + "/metrics");
  EXPECT_EQ(metrics.status, 200) << metrics.error;
  EXPECT_NE(metrics.body.find("fake_fake_value{k=\"v\"} 42"), std::string::npos);
  EXPECT_EQ(metrics.content_type, "text/plain; version=0.0.4; charset=utf-8");

  const auto health = testing::HttpGet(base + "/healthz");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, "ok\nsource fake: up\n");

  const auto landing = testing::HttpGet(base + "/");
  EXPECT_EQ(landing.status, 200);
  EXPECT_NE(landing.body.find("content=\"/metrics\""), std::string::npos);

  EXPECT_EQ(testing::HttpGet(base + "/nope").status, 404);
}

// An unhealthy report is a 503 whose body says why, still without credentials (kubelet probes
// carry none).
TEST(HttpServerTest, UnhealthyIsServiceUnavailableWithTheReason) {
  WebConfig web;
  web.basic_auth_users["prometheus"] = "$2b$04$unused";
  std::string error;
  auto server = HttpServer::Start(
      "127.0.0.1:0", "/metrics", [] { return std::string("m 1\n"); },
      [] {
        return HealthReport{false, "required source rdma is down: no devices\n"};
      },
      HttpServer::Limits{}, web, &error);
  ASSERT_TRUE(server) << error;
  const auto health = testing::HttpGet("http://" + server->bound_address() + "/healthz");
  EXPECT_EQ(health.status, 503);
  EXPECT_EQ(health.body, "unhealthy\nrequired source rdma is down: no devices\n");
  EXPECT_EQ(health.content_type, "text/plain; charset=utf-8");
}

TEST(HttpServerTest, BindFailureIsAnErrorNotACrash) {
  SourceSet sources({});
  ReloadStats reload;
  auto collector = std::make_shared<ScrapeCollector>(&sources, &reload);
  std::string error;
  auto render = [collector] { return collector->RenderText(); };
  auto first = HttpServer::Start("127.0.0.1:0", "/metrics", render, nullptr, &error);
  ASSERT_TRUE(first);
  auto second = HttpServer::Start(first->bound_address(), "/metrics", render, nullptr, &error);
  EXPECT_FALSE(second);
  EXPECT_NE(error.find("cannot listen on"), std::string::npos) << error;
}

TEST(HttpServerTest, ListenAddressParsing) {
  EXPECT_EQ(ParseListenAddress(":9824")->host, "");
  EXPECT_EQ(ParseListenAddress(":9824")->port, "9824");
  EXPECT_EQ(ParseListenAddress("127.0.0.1:9824")->host, "127.0.0.1");
  EXPECT_EQ(ParseListenAddress("[::1]:9824")->host, "::1");
  EXPECT_FALSE(ParseListenAddress("9824").has_value());
}

// A TCP connection to `port` on 127.0.0.1 from `source` (another loopback address stands for
// another pod), or -1.
int Connect(int port, const char* source = "127.0.0.1") {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  ::inet_pton(AF_INET, source, &from.sin_addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0) {
    ::close(fd);
    return -1;
  }
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<std::uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends `request` on a fresh connection and returns everything the server sent until it closed
// (or 2 s passed).
std::string Exchange(int port, const std::string& request) {
  const int fd = Connect(port);
  if (fd < 0) return "";
  timeval timeout{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string reply;
  char buffer[65536];
  ssize_t n = 0;
  while ((n = ::recv(fd, buffer, sizeof(buffer), 0)) > 0) reply.append(buffer, n);
  ::close(fd);
  return reply;
}

struct Served {
  std::unique_ptr<HttpServer> server;
  int port = 0;
};

Served Serve(const std::string& body) {
  std::string error;
  Served s;
  s.server = HttpServer::Start(
      "127.0.0.1:0", "/metrics", [body] { return body; }, nullptr, &error);
  EXPECT_TRUE(s.server) << error;
  if (s.server) {
    const std::string& a = s.server->bound_address();
    s.port = std::stoi(a.substr(a.rfind(':') + 1));
  }
  return s;
}

// / is the node page: HTML, not cached, with a policy that lets only its own script and style run
// and lets it fetch only from its origin; the metrics path it fetches is escaped into it.
TEST(HttpServerTest, NodePageIsHtmlWithAStrictPolicy) {
  std::string error;
  auto server = HttpServer::Start(
      "127.0.0.1:0", "/m\"<x>", [] { return std::string("m 1\n"); }, nullptr, &error);
  ASSERT_TRUE(server) << error;
  const std::string& a = server->bound_address();
  const int port = std::stoi(a.substr(a.rfind(':') + 1));
  const std::string raw = Exchange(port, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(raw.rfind("HTTP/1.1 200", 0), 0u) << raw.substr(0, 200);
  EXPECT_NE(raw.find("Content-Type: text/html; charset=utf-8\r\n"), std::string::npos);
  EXPECT_NE(raw.find("Cache-Control: no-store\r\n"), std::string::npos);
  EXPECT_NE(raw.find("X-Content-Type-Options: nosniff\r\n"), std::string::npos);
  EXPECT_NE(raw.find("Referrer-Policy: no-referrer\r\n"), std::string::npos);
  EXPECT_NE(raw.find("Content-Security-Policy: default-src 'none'; script-src 'sha256-"),
            std::string::npos);
  EXPECT_NE(raw.find("; connect-src 'self'; img-src 'none';"), std::string::npos);
  EXPECT_NE(raw.find("<meta name=\"ncclscope-metrics-path\" content=\"/m&quot;&lt;x&gt;\">"),
            std::string::npos);
  EXPECT_EQ(raw.find("/m\"<x>"), std::string::npos);
  // HEAD: the same headers, no body.
  const std::string head =
      Exchange(port, "HEAD / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_NE(head.find("Content-Security-Policy: "), std::string::npos);
  EXPECT_EQ(head.substr(head.find("\r\n\r\n") + 4), "");
  // The metrics path itself has no such policy: it is not a page.
  const std::string metrics =
      Exchange(port, "GET /m%22%3Cx%3E HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(metrics.find("Content-Security-Policy"), std::string::npos);
}

// What the page's script may do, checked on its source: it builds the DOM from text nodes, so
// nothing that parses markup appears in it; the policy hashes exactly its script and style.
TEST(NodePageTest, ScriptNeverParsesMarkupAndThePolicyHashesIt) {
  const NodePage page = MakeNodePage("/metrics");
  for (const char* sink : {"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write",
                           "eval(", "new Function", "srcdoc", "createContextualFragment"}) {
    EXPECT_EQ(page.html.find(sink), std::string::npos) << sink;
  }
  EXPECT_EQ(page.html.find("@METRICS_PATH@"), std::string::npos);
  EXPECT_EQ(page.html.find("http://"), std::string::npos) << "no external asset";
  EXPECT_EQ(page.html.find("https://"), std::string::npos) << "no external asset";
  // One script and one style element, each hashed (two hashes, none 'unsafe-inline').
  EXPECT_EQ(page.html.find("<script>", page.html.find("<script>") + 1), std::string::npos);
  EXPECT_EQ(page.html.find("<script "), std::string::npos);
  const std::string& csp = page.content_security_policy;
  EXPECT_EQ(csp.find("unsafe"), std::string::npos) << csp;
  const std::size_t first = csp.find("'sha256-");
  ASSERT_NE(first, std::string::npos) << csp;
  EXPECT_NE(csp.find("'sha256-", first + 1), std::string::npos) << csp;
  EXPECT_EQ(csp.find("'sha256-", first + 1), csp.find("style-src 'sha256-") + 10) << csp;
}

TEST(HttpServerTest, OnlyGetAndHeadServeMetricsAndHeadHasNoBody) {
  Served s = Serve("metric_a 1\n");
  const std::string get =
      Exchange(s.port, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(get.rfind("HTTP/1.1 200", 0), 0u) << get;
  EXPECT_NE(get.find("\r\n\r\nmetric_a 1\n"), std::string::npos) << get;
  const std::string head =
      Exchange(s.port, "HEAD /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(head.rfind("HTTP/1.1 200", 0), 0u) << head;
  EXPECT_NE(head.find("Content-Length: 11"), std::string::npos) << head;
  EXPECT_EQ(head.find("metric_a"), std::string::npos) << head;
  for (const char* method : {"POST", "PUT", "DELETE", "OPTIONS", "BREW"}) {
    const std::string reply =
        Exchange(s.port, std::string(method) +
                             " /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello");
    EXPECT_EQ(reply.rfind("HTTP/1.1 405", 0), 0u) << method << ": " << reply;
    EXPECT_NE(reply.find("Allow: GET, HEAD"), std::string::npos) << reply;
    EXPECT_EQ(reply.find("metric_a"), std::string::npos) << reply;
  }
}

TEST(HttpServerTest, IdleAndSlowClientsCannotStarveScrapes) {
  // With civetweb, one idle connection per second held its four workers: every scrape timed out.
  // Here another "pod" (127.0.0.2, 127.0.0.3, ...) opens connections that send nothing, or half a
  // request, and keeps them open; scrapes from Prometheus's address must still be answered.
  Served s = Serve(std::string(1 << 20, '#') + "\n");  // a 1 MiB page
  std::vector<int> idle;
  for (int pod = 2; pod <= 6; ++pod) {
    const std::string source = "127.0.0." + std::to_string(pod);
    for (int i = 0; i < 40; ++i) {
      const int fd = Connect(s.port, source.c_str());
      if (fd < 0) continue;
      if (i % 2 == 1) ::send(fd, "GET /metrics HTTP/1.1\r\nHost:", 29, MSG_NOSIGNAL);  // slowloris
      idle.push_back(fd);
    }
  }
  EXPECT_GE(idle.size(), 100u);  // connected (the server drops those over its per-address limit)
  const std::string base = "http://" + s.server->bound_address();
  double worst = 0;
  for (int i = 0; i < 20; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const auto reply = testing::HttpGet(base + "/metrics", 2000);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    worst = std::max(worst, seconds);
    ASSERT_EQ(reply.status, 200) << "scrape " << i << ": " << reply.error;
    EXPECT_EQ(reply.body.size(), (1u << 20) + 1);
  }
  std::printf("worst scrape latency with %zu idle/slow connections open: %.1f ms\n", idle.size(),
              worst * 1e3);
  EXPECT_LT(worst, 1.0);
  for (int fd : idle) ::close(fd);
}

using testing::Http;
using testing::HttpGet;
using testing::HttpRequest;
using testing::HttpResponse;

TEST(HttpServerTest, AcceptEncodingParsing) {
  EXPECT_TRUE(AcceptsGzip("gzip"));
  EXPECT_TRUE(AcceptsGzip("gzip, deflate, br"));
  EXPECT_TRUE(AcceptsGzip("identity;q=1, GZIP;q=0.5"));
  EXPECT_TRUE(AcceptsGzip("*"));
  EXPECT_FALSE(AcceptsGzip(nullptr));
  EXPECT_FALSE(AcceptsGzip(""));
  EXPECT_FALSE(AcceptsGzip("deflate, br"));
  EXPECT_FALSE(AcceptsGzip("gzip;q=0"));
  EXPECT_FALSE(AcceptsGzip("gzip;q=0.000"));
  EXPECT_FALSE(AcceptsGzip("xgzip"));
}

// What Prometheus sends (Accept-Encoding: gzip) gets a gzip body that decodes to the page; a
// client that does not ask gets it plain.
TEST(HttpServerTest, MetricsAreGzippedWhenTheScraperAcceptsIt) {
  std::string page;
  for (int i = 0; i < 2000; ++i) page += "metric_a{i=\"" + std::to_string(i) + "\"} 1\n";
  Served s = Serve(page);
  HttpRequest request;
  request.url = "http://127.0.0.1:" + std::to_string(s.port) + "/metrics";
  request.accept_encoding = "gzip";
  const HttpResponse packed = Http(request);
  EXPECT_EQ(packed.status, 200) << packed.error;
  EXPECT_EQ(packed.content_encoding, "gzip");
  EXPECT_EQ(packed.body, page);
  const HttpResponse plain = HttpGet(request.url);
  EXPECT_EQ(plain.content_encoding, "");
  EXPECT_EQ(plain.body, page);
  // The compressed size, as the raw exchange shows it: much smaller than the page.
  const std::string raw = Exchange(s.port,
                                   "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n"
                                   "Connection: close\r\n\r\n");
  const std::size_t body = raw.find("\r\n\r\n");
  ASSERT_NE(body, std::string::npos);
  EXPECT_LT(raw.size() - body, page.size() / 4);
  EXPECT_NE(raw.find("Vary: Accept-Encoding"), std::string::npos);
  const std::optional<std::string> again = Gzip(page);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(static_cast<unsigned char>((*again)[0]), 0x1f);  // gzip magic
}

// ":PORT" takes IPv6 and IPv4 clients on one socket.
TEST(HttpServerTest, AllInterfacesMeansIpv6AndIpv4) {
  std::string error;
  auto server = HttpServer::Start(
      ":0", "/metrics", [] { return std::string("m 1\n"); }, nullptr, &error);
  ASSERT_TRUE(server) << error;
  const std::string& bound = server->bound_address();
  ASSERT_EQ(bound.rfind("[::]:", 0), 0u) << bound;
  const std::string port = bound.substr(bound.rfind(':') + 1);
  EXPECT_EQ(HttpGet("http://127.0.0.1:" + port + "/metrics").body, "m 1\n");
  EXPECT_EQ(HttpGet("http://[::1]:" + port + "/metrics").body, "m 1\n");
}

// Basic auth from a web config: the metrics need the password (bcrypt-checked once, then cached),
// /healthz does not; a wrong password or user is 401 with a Basic challenge.
TEST(HttpServerTest, BasicAuthGuardsEverythingButHealthz) {
  WebConfig web;
  char salt[CRYPT_GENSALT_OUTPUT_SIZE];
  ASSERT_NE(crypt_gensalt_rn("$2b$", 4, nullptr, 0, salt, sizeof(salt)), nullptr);
  crypt_data data{};
  const char* hash = crypt_r("s3cret", salt, &data);
  ASSERT_NE(hash, nullptr);
  web.basic_auth_users["prometheus"] = hash;
  web.headers["X-Frame-Options"] = "deny";
  std::string error;
  auto server = HttpServer::Start(
      "127.0.0.1:0", "/metrics", [] { return std::string("m 1\n"); }, [] { return HealthReport{}; },
      HttpServer::Limits{}, web, &error);
  ASSERT_TRUE(server) << error;
  HttpRequest request;
  request.url = "http://" + server->bound_address() + "/metrics";
  EXPECT_EQ(Http(request).status, 401);
  request.user = "prometheus";
  request.password = "wrong";
  EXPECT_EQ(Http(request).status, 401);
  request.password = "s3cret";
  for (int i = 0; i < 3; ++i) {
    const HttpResponse ok = Http(request);
    EXPECT_EQ(ok.status, 200);
    EXPECT_EQ(ok.body, "m 1\n");
  }
  request.user = "someone";
  EXPECT_EQ(Http(request).status, 401);
  EXPECT_EQ(HttpGet("http://" + server->bound_address() + "/healthz").status, 200);
  const std::string& a = server->bound_address();
  const std::string raw = Exchange(std::stoi(a.substr(a.rfind(':') + 1)),
                                   "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_NE(raw.find("WWW-Authenticate: Basic realm=\"ncclscope\""), std::string::npos) << raw;
  EXPECT_NE(raw.find("X-Frame-Options: deny"), std::string::npos) << raw;
}

}  // namespace
}  // namespace ncclscope
