#include "agent/exporter/alert_feed.h"

#include <curl/curl.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <utility>

#include "agent/core/log.h"

namespace ncclscope {
namespace {

// Prometheus' answer for one node's alerts is a few KiB; a cap keeps a wrong URL (a large page)
// from costing memory.
constexpr std::size_t kMaxBody = 1 << 20;
constexpr std::size_t kMaxAlerts = 500;
constexpr long kTimeoutMs = 5000;
constexpr long kConnectTimeoutMs = 2000;

struct Sink {
  std::string* body = nullptr;
  bool overflow = false;
};

std::size_t Append(char* data, std::size_t size, std::size_t count, void* user) {
  auto* sink = static_cast<Sink*>(user);
  const std::size_t n = size * count;
  if (sink->body->size() + n > kMaxBody) {
    sink->overflow = true;
    return 0;  // curl aborts the transfer
  }
  sink->body->append(data, n);
  return n;
}

bool CurlFetch(const std::string& url, std::string* body, std::string* error) {
  static std::once_flag global_init;
  std::call_once(global_init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) {
    *error = "curl_easy_init failed";
    return false;
  }
  char message[CURL_ERROR_SIZE] = {};
  Sink sink{body};
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, Append);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, message);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, kTimeoutMs);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, kConnectTimeoutMs);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);  // a background thread: no SIGALRM for DNS timeouts
  curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");
  curl_easy_setopt(c, CURLOPT_USERAGENT, "ncclscope-agent");
  const CURLcode rc = curl_easy_perform(c);
  if (sink.overflow) {
    *error = "answer larger than 1 MiB";
    return false;
  }
  if (rc != CURLE_OK) {
    *error = message[0] != '\0' ? message : curl_easy_strerror(rc);
    return false;
  }
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  if (status != 200) {
    // Prometheus explains a bad query in its JSON body ("error"); show its start.
    *error = "HTTP " + std::to_string(status) + ": " + body->substr(0, 200);
    return false;
  }
  return true;
}

std::string PromQLString(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string QueryUrl(const std::string& base, const std::string& query) {
  std::unique_ptr<char, decltype(&curl_free)> escaped(
      curl_easy_escape(nullptr, query.c_str(), static_cast<int>(query.size())), curl_free);
  std::string url = base;
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url + "/api/v1/query?query=" + (escaped ? escaped.get() : "");
}

}  // namespace

std::string AlertsQuery(std::string_view node) {
  return "ALERTS{alertname=~\"Ncclscope.+\",node=" + PromQLString(node) + "}";
}

bool ParseAlertsResponse(std::string_view body, std::size_t max_alerts,
                         std::vector<FeedAlert>* alerts, std::size_t* dropped, std::string* error) {
  alerts->clear();
  *dropped = 0;
  const nlohmann::json answer = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (answer.is_discarded() || !answer.is_object()) {
    *error = "not a Prometheus API answer (no JSON object)";
    return false;
  }
  if (answer.value("status", "") != "success") {
    *error = "Prometheus answered " + answer.value("status", std::string("nothing")) + ": " +
             answer.value("error", std::string());
    return false;
  }
  const auto data = answer.find("data");
  if (data == answer.end() || !data->is_object() || data->value("resultType", "") != "vector" ||
      !data->contains("result") || !(*data)["result"].is_array()) {
    *error = "not an instant vector";
    return false;
  }
  for (const nlohmann::json& series : (*data)["result"]) {
    if (!series.is_object() || !series.contains("metric") || !series["metric"].is_object()) {
      continue;
    }
    if (alerts->size() == max_alerts) {
      ++*dropped;
      continue;
    }
    FeedAlert alert;
    for (const auto& [name, value] : series["metric"].items()) {
      if (value.is_string() && name != "__name__") {
        alert.labels.emplace_back(name, value.get<std::string>());
      }
    }
    alerts->push_back(std::move(alert));
  }
  return true;
}

std::string WithoutCredentials(std::string_view url) {
  const std::size_t scheme = url.find("://");
  if (scheme == std::string_view::npos) return std::string(url);
  const std::size_t host = scheme + 3;
  const std::size_t path = url.find('/', host);
  const std::size_t at = url.rfind('@', path == std::string_view::npos ? url.size() : path);
  if (at == std::string_view::npos || at < host) return std::string(url);
  return std::string(url.substr(0, host)) + std::string(url.substr(at + 1));
}

AlertFeed::AlertFeed() : AlertFeed(CurlFetch) {}

AlertFeed::AlertFeed(Fetch fetch) : fetch_(std::move(fetch)), thread_([this] { Run(); }) {}

AlertFeed::~AlertFeed() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void AlertFeed::Configure(AlertFeedSettings settings) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (settings.prometheus_url == settings_.prometheus_url && settings.node == settings_.node &&
      settings.refresh == settings_.refresh) {
    settings_.runbook_url = std::move(settings.runbook_url);  // no new query needed
    return;
  }
  settings_ = std::move(settings);
  ++generation_;
  have_answer_ = false;
  error_.clear();
  alerts_.clear();
  dropped_ = 0;
  wake_.notify_all();
}

void AlertFeed::Run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    const auto now = std::chrono::steady_clock::now();
    const bool wanted = !settings_.prometheus_url.empty() &&
                        demanded_ != std::chrono::steady_clock::time_point{} &&
                        now - demanded_ <= 2 * settings_.refresh;
    if (wanted && (!have_answer_ || now - fetched_ >= settings_.refresh)) {
      const AlertFeedSettings settings = settings_;
      const std::uint64_t generation = generation_;
      lock.unlock();
      std::string body;
      std::string error;
      const bool ok =
          fetch_(QueryUrl(settings.prometheus_url, AlertsQuery(settings.node)), &body, &error);
      std::vector<FeedAlert> alerts;
      std::size_t dropped = 0;
      const bool parsed = ok && ParseAlertsResponse(body, kMaxAlerts, &alerts, &dropped, &error);
      lock.lock();
      if (generation != generation_) continue;  // reconfigured meanwhile
      if (!parsed && error_ != error) {
        NCCLSCOPE_LOG(kWarn, "exporter")
            << "node page alerts from " << WithoutCredentials(settings.prometheus_url) << ": "
            << error;
      }
      have_answer_ = true;
      fetched_ = std::chrono::steady_clock::now();
      error_ = parsed ? "" : error;
      alerts_ = parsed ? std::move(alerts) : std::vector<FeedAlert>{};
      dropped_ = dropped;
      continue;
    }
    // Woken by Json() when someone looks at a stale answer, by Configure() and by the destructor.
    wake_.wait_for(lock, std::chrono::seconds(1));
  }
}

std::string AlertFeed::Json() {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  demanded_ = now;
  nlohmann::json out = nlohmann::json::object();
  out["refresh_seconds"] = std::chrono::duration<double>(settings_.refresh).count();
  if (settings_.prometheus_url.empty()) {
    out["state"] = "off";
    return out.dump();
  }
  out["node"] = settings_.node;
  out["prometheus"] = WithoutCredentials(settings_.prometheus_url);
  out["runbook_url"] = settings_.runbook_url;
  if (!have_answer_ || now - fetched_ >= settings_.refresh) wake_.notify_all();
  if (!have_answer_) {
    out["state"] = "loading";
    return out.dump();
  }
  out["state"] = error_.empty() ? "ok" : "error";
  if (!error_.empty()) out["error"] = error_;
  out["age_seconds"] = std::chrono::duration<double>(now - fetched_).count();
  out["dropped"] = dropped_;
  nlohmann::json alerts = nlohmann::json::array();
  for (const FeedAlert& alert : alerts_) {
    nlohmann::json labels = nlohmann::json::object();
    for (const auto& [name, value] : alert.labels) labels[name] = value;
    alerts.push_back(std::move(labels));
  }
  out["alerts"] = std::move(alerts);
  // Label values are another system's strings: invalid UTF-8 is replaced, not thrown on.
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace ncclscope
