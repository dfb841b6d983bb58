// The node page's alerts from Prometheus (agent/exporter/alert_feed.h): the query it sends, how it
// reads Prometheus' answer, that it asks only while the page is open, and what the page is told
// when Prometheus cannot answer. The feed over the real Prometheus: tests/deploy/node_page_e2e.mjs.

#include "agent/exporter/alert_feed.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "agent/app/agent.h"
#include "agent/exporter/http_server.h"
#include "tests/support/http_client.h"
#include "tests/support/wait_for.h"

namespace ncclscope {
namespace {

// What Prometheus 2.42 answers to the feed's query (GET /api/v1/query), one pending and one firing.
constexpr const char* kAnswer = R"({"status":"success","data":{"resultType":"vector","result":[
  {"metric":{"__name__":"ALERTS","alertname":"NcclscopeNcclSlowRank","alertstate":"firing",
   "comm":"0x7fee3b89592d13a9","comm_name":"SIM world","instance":"10.0.0.5:9824","job_id":"j1",
   "node":"gpu-7","rank":"2","severity":"warning"},"value":[1765100000.1,"1"]},
  {"metric":{"__name__":"ALERTS","alertname":"NcclscopeIBSymbolErrorBurst","alertstate":"pending",
   "device":"mlx5_0","node":"gpu-7","port":"1","severity":"warning"},"value":[1765100000.1,"1"]}]}})";

// A Prometheus stand-in that records the URLs it was asked for and answers `body`.
struct Recorder {
  std::mutex mutex;
  std::vector<std::string> urls;
  std::string body = kAnswer;
  bool fail = false;
  AlertFeed::Fetch Fetch() {
    return [this](const std::string& url, std::string* out, std::string* error) {
      std::lock_guard<std::mutex> lock(mutex);
      urls.push_back(url);
      if (fail) {
        *error = "Failed to connect to prometheus port 9090: Connection refused";
        return false;
      }
      *out = body;
      return true;
    };
  }
  std::size_t Calls() {
    std::lock_guard<std::mutex> lock(mutex);
    return urls.size();
  }
};

nlohmann::json Json(AlertFeed& feed) { return nlohmann::json::parse(feed.Json()); }

// Waits for the fetcher to answer with `state` (asking keeps the page "open").
bool Becomes(AlertFeed& feed, const char* state) {
  return testing::WaitFor([&] { return Json(feed)["state"] == state; }, std::chrono::seconds(10));
}

AlertFeedSettings Settings(std::string url = "http://prometheus:9090/") {
  return {std::move(url), "gpu-7", std::chrono::milliseconds(5000), "https://wiki/runbooks.html"};
}

TEST(AlertFeedTest, QueriesThisNodesNcclscopeAlertsWithTheNameEscaped) {
  EXPECT_EQ(AlertsQuery("gpu-7"), R"(ALERTS{alertname=~"Ncclscope.+",node="gpu-7"})");
  EXPECT_EQ(AlertsQuery(R"(a"b\c)"), R"(ALERTS{alertname=~"Ncclscope.+",node="a\"b\\c"})");
}

TEST(AlertFeedTest, ParsesPrometheusAnswerAndRejectsAnythingElse) {
  std::vector<FeedAlert> alerts;
  std::size_t dropped = 0;
  std::string error;
  ASSERT_TRUE(ParseAlertsResponse(kAnswer, 10, &alerts, &dropped, &error)) << error;
  ASSERT_EQ(alerts.size(), 2u);
  const auto label = [&](std::size_t i, const std::string& name) {
    for (const auto& [key, value] : alerts[i].labels) {
      if (key == name) return value;
    }
    return std::string("(none)");
  };
  EXPECT_EQ(label(0, "alertname"), "NcclscopeNcclSlowRank");
  EXPECT_EQ(label(0, "rank"), "2");
  EXPECT_EQ(label(0, "__name__"), "(none)");
  EXPECT_EQ(label(1, "alertstate"), "pending");
  ASSERT_TRUE(ParseAlertsResponse(kAnswer, 1, &alerts, &dropped, &error));
  EXPECT_EQ(alerts.size(), 1u);
  EXPECT_EQ(dropped, 1u);

  EXPECT_FALSE(ParseAlertsResponse("<html>login</html>", 10, &alerts, &dropped, &error));
  EXPECT_EQ(error, "not a Prometheus API answer (no JSON object)");
  EXPECT_FALSE(ParseAlertsResponse(
      R"({"status":"error","errorType":"bad_data","error":"parse error at char 8"})", 10, &alerts,
      &dropped, &error));
  EXPECT_EQ(error, "Prometheus answered error: parse error at char 8");
  EXPECT_FALSE(ParseAlertsResponse(R"({"status":"success","data":{"resultType":"matrix",
      "result":[]}})",
                                   10, &alerts, &dropped, &error));
  EXPECT_EQ(error, "not an instant vector");
}

TEST(AlertFeedTest, AsksOnlyWhileThePageIsOpenAndServesTheLastAnswer) {
  Recorder prometheus;
  AlertFeed feed(prometheus.Fetch());
  feed.Configure(Settings());
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  EXPECT_EQ(prometheus.Calls(), 0u);  // configured, but nobody looked at the page

  const nlohmann::json first = Json(feed);  // the page opens: it is told to wait, and the
  EXPECT_EQ(first["state"], "loading");     // fetcher is woken at once
  EXPECT_EQ(first["node"], "gpu-7");
  ASSERT_TRUE(Becomes(feed, "ok"));
  const nlohmann::json answer = Json(feed);
  ASSERT_EQ(answer["alerts"].size(), 2u);
  EXPECT_EQ(answer["alerts"][0]["alertname"], "NcclscopeNcclSlowRank");
  EXPECT_EQ(answer["alerts"][0]["comm_name"], "SIM world");
  EXPECT_EQ(answer["prometheus"], "http://prometheus:9090/");
  EXPECT_EQ(answer["refresh_seconds"], 5.0);
  EXPECT_EQ(answer["runbook_url"], "https://wiki/runbooks.html");
  ASSERT_EQ(prometheus.Calls(), 1u);
  EXPECT_EQ(prometheus.urls[0],
            "http://prometheus:9090/api/v1/query?query=ALERTS%7Balertname%3D~%22Ncclscope.%2B%22%"
            "2Cnode%3D%22gpu-7%22%7D");
  // Within the refresh interval the page is answered from the last result.
  for (int i = 0; i < 5; ++i) EXPECT_EQ(Json(feed)["state"], "ok");
  EXPECT_EQ(prometheus.Calls(), 1u);
}

TEST(AlertFeedTest, TellsThePageWhyPrometheusCannotAnswerAndForgetsOldAlerts) {
  Recorder prometheus;
  AlertFeed feed(prometheus.Fetch());
  feed.Configure(Settings("https://user:secret@prometheus.example:9090"));
  Json(feed);
  ASSERT_TRUE(Becomes(feed, "ok"));
  EXPECT_EQ(Json(feed)["prometheus"], "https://prometheus.example:9090");  // no password shown
  {
    std::lock_guard<std::mutex> lock(prometheus.mutex);
    prometheus.fail = true;
  }
  // Reconfigured (SIGHUP): the old answer is dropped and Prometheus asked again.
  feed.Configure(Settings("http://prometheus:9090"));
  Json(feed);
  ASSERT_TRUE(Becomes(feed, "error"));
  const nlohmann::json failed = Json(feed);
  EXPECT_EQ(failed["error"], "Failed to connect to prometheus port 9090: Connection refused");
  EXPECT_EQ(failed["alerts"].size(), 0u);
  feed.Configure({});
  EXPECT_EQ(Json(feed)["state"], "off");
}

// The libcurl fetch against real servers: a closed port, and an HTTP server that is not
// Prometheus (the agent's own: 404 on /api/v1/query).
TEST(AlertFeedTest, RealFetchReportsConnectionAndHttpErrors) {
  std::string error;
  auto server = HttpServer::Start(
      "127.0.0.1:0", "/metrics", [] { return std::string("m 1\n"); }, nullptr, &error);
  ASSERT_TRUE(server) << error;
  AlertFeed feed;
  feed.Configure(Settings("http://" + server->bound_address()));
  Json(feed);
  ASSERT_TRUE(Becomes(feed, "error"));
  EXPECT_EQ(Json(feed)["error"], "HTTP 404: not found\n");
  const std::string closed = server->bound_address();
  server.reset();
  AlertFeed refused;
  refused.Configure(Settings("http://" + closed));
  Json(refused);
  ASSERT_TRUE(Becomes(refused, "error"));
  EXPECT_EQ(
      Json(refused)["error"].get<std::string>().rfind("Failed to connect to 127.0.0.1 port", 0), 0u)
      << Json(refused)["error"];
}

TEST(AlertFeedTest, ServedAtApiAlertsAndOffWithoutAFeed) {
  std::string error;
  auto server = HttpServer::Start(
      "127.0.0.1:0", "/metrics", [] { return std::string("m 1\n"); }, nullptr, HttpServer::Limits{},
      WebConfig{}, [] { return std::string(R"({"state":"loading"})"); }, &error);
  ASSERT_TRUE(server) << error;
  const auto served = testing::HttpGet("http://" + server->bound_address() + "/api/alerts");
  EXPECT_EQ(served.status, 200);
  EXPECT_EQ(served.content_type, "application/json");
  EXPECT_EQ(served.body, R"({"state":"loading"})");
  auto plain = HttpServer::Start(
      "127.0.0.1:0", "/metrics", [] { return std::string("m 1\n"); }, nullptr, &error);
  ASSERT_TRUE(plain) << error;
  EXPECT_EQ(testing::HttpGet("http://" + plain->bound_address() + "/api/alerts").body,
            R"({"state":"off"})");
}

TEST(AlertFeedTest, NodeNameFromTheConfigElseTheEnvironmentElseTheHost) {
  config::NodePageConfig page;
  page.prometheus_url = "http://p:9090";
  EXPECT_EQ(AlertFeedSettingsFor(page, "k8s-node", "host").node, "k8s-node");
  EXPECT_EQ(AlertFeedSettingsFor(page, "", "host").node, "host");
  EXPECT_EQ(AlertFeedSettingsFor(page, nullptr, "host").node, "host");
  page.node = "configured";
  EXPECT_EQ(AlertFeedSettingsFor(page, "k8s-node", "host").node, "configured");
  EXPECT_EQ(AlertFeedSettingsFor(page, nullptr, "host").refresh, std::chrono::seconds(15));
  EXPECT_EQ(AlertFeedSettingsFor(page, nullptr, "host").runbook_url,
            "https://github.com/ncclscope/ncclscope/blob/main/docs/runbooks.md");
}

TEST(AlertFeedTest, CredentialsAreLeftOutOfTheShownUrl) {
  EXPECT_EQ(WithoutCredentials("http://p:9090"), "http://p:9090");
  EXPECT_EQ(WithoutCredentials("https://u:p@h:1/x@y"), "https://h:1/x@y");
  EXPECT_EQ(WithoutCredentials("http://h/path@x"), "http://h/path@x");
}

}  // namespace
}  // namespace ncclscope
