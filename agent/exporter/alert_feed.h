#pragma once

// The cross-node half of the verdict, for the node page. The agent's own findings are what one
// node can see; the alerts (NcclscopeNcclSlowRank and the rest) are decided in Prometheus, which
// compares ranks across nodes (docs/analytics.md, "The verdict"). With node_page.prometheus_url
// set, the agent asks Prometheus which ncclscope alerts fire for this node and serves the answer
// at /api/alerts, so that the page shows the same badge as the alert.
//
// Demand-driven: Prometheus is asked only while someone has the page open (a request within the
// last two refresh intervals), at most once per node_page.alerts_refresh; a node page nobody looks
// at costs Prometheus nothing. The HTTP handler never waits on Prometheus: it answers from the
// last result, and a background thread fetches.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace ncclscope {

struct AlertFeedSettings {
  std::string prometheus_url;  // empty: off
  std::string node;            // the value of the alerts' `node` label for this node
  std::chrono::milliseconds refresh{15000};
  std::string runbook_url;  // the page links <runbook_url>#<alertname in lower case>
};

// One alert as ALERTS{} carries it: its labels (alertname, alertstate, severity, comm, rank, ...).
struct FeedAlert {
  std::vector<std::pair<std::string, std::string>> labels;
};

// The PromQL the feed sends: this node's ncclscope alerts, pending and firing.
std::string AlertsQuery(std::string_view node);

// Parses a Prometheus /api/v1/query answer (a vector of ALERTS series). Returns false with *error
// on anything else; keeps at most `max_alerts` (the rest are counted in *dropped).
bool ParseAlertsResponse(std::string_view body, std::size_t max_alerts,
                         std::vector<FeedAlert>* alerts, std::size_t* dropped, std::string* error);

class AlertFeed {
 public:
  // GET `url`; returns false with *error (connection, HTTP status, size). Injected for tests.
  using Fetch = std::function<bool(const std::string& url, std::string* body, std::string* error)>;

  // A feed over libcurl (HTTP and HTTPS, credentials in the URL, 5 s timeout, 1 MiB at most).
  AlertFeed();
  explicit AlertFeed(Fetch fetch);
  ~AlertFeed();
  AlertFeed(const AlertFeed&) = delete;
  AlertFeed& operator=(const AlertFeed&) = delete;

  // At start and on SIGHUP.
  void Configure(AlertFeedSettings settings);

  // The page's view, as JSON: {"state": "off"|"loading"|"ok"|"error", "error": ..., "node": ...,
  // "prometheus": URL without credentials, "age_seconds": ..., "refresh_seconds": ...,
  // "dropped": ..., "runbook_url": ..., "alerts": [{label: value, ...}, ...]}. Marks demand and
  // wakes the fetcher when the last answer is older than the refresh interval.
  std::string Json();

 private:
  void Run();
  void FetchOnce(const AlertFeedSettings& settings);

  Fetch fetch_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::uint64_t generation_ = 0;  // bumped by Configure: a fetch under old settings is dropped
  AlertFeedSettings settings_;
  std::chrono::steady_clock::time_point demanded_{};
  std::chrono::steady_clock::time_point fetched_{};
  bool have_answer_ = false;
  std::string error_;
  std::vector<FeedAlert> alerts_;
  std::size_t dropped_ = 0;
  std::thread thread_;
};

// `url` with any user:password@ removed, for display.
std::string WithoutCredentials(std::string_view url);

}  // namespace ncclscope
