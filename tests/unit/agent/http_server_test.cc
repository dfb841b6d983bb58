#include "agent/exporter/http_server.h"

#include <gtest/gtest.h>

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
      [] { return std::string("source fake: up\n"); }, &error);
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
  EXPECT_NE(landing.body.find("href=\"/metrics\""), std::string::npos);

  EXPECT_EQ(testing::HttpGet(base + "/nope").status, 404);
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

TEST(HttpServerTest, ListenAddressTranslation) {
  EXPECT_EQ(ToCivetListeningPort(":9824"), "9824");
  EXPECT_EQ(ToCivetListeningPort("127.0.0.1:9824"), "127.0.0.1:9824");
  EXPECT_EQ(ToCivetListeningPort("[::1]:9824"), "[::1]:9824");
}

}  // namespace
}  // namespace ncclscope
