#include "agent/exporter/scrape_collector.h"

#include <chrono>
#include <exception>

#include "agent/core/log.h"
#include "agent/core/metric_family.h"
#include "agent/core/text_exposition.h"
#include "agent/exporter/build_info.h"
#include "agent/exporter/process_metrics.h"

namespace ncclscope {
namespace {

using prometheus::MetricFamily;

void AppendSelfMetrics(const SourceSet& sources, const ReloadStats& reload,
                       std::vector<MetricFamily>& out) {
  auto build = metrics::Gauge(
      "ncclscope_build_info",
      "A metric with a constant '1' value labeled by version, revision and compiler of the agent.");
  metrics::Add(build,
               {{"version", std::string(kVersion)},
                {"revision", std::string(kRevision)},
                {"compiler", std::string(kCompiler)}},
               1);
  out.push_back(std::move(build));

  auto up = metrics::Gauge("ncclscope_source_up",
                           "1 when the source is running and healthy, 0 when it is down or "
                           "disabled (see the agent log for why).");
  auto enabled =
      metrics::Gauge("ncclscope_source_enabled", "1 when the config enables the source.");
  auto errors = metrics::Counter("ncclscope_source_errors_total",
                                 "Errors a source met, by kind; the source keeps running.");
  auto duration = metrics::Gauge("ncclscope_source_collection_duration_seconds",
                                 "Time the source took to render its metrics for this scrape.");
  for (const auto& entry : sources.entries()) {
    const std::string& name = entry->source->name();
    const bool is_enabled = entry->enabled.load();
    const bool is_up = is_enabled && entry->running.load() && sources.StatusOf(*entry).up;
    metrics::Add(up, {{"source", name}}, is_up ? 1 : 0);
    metrics::Add(enabled, {{"source", name}}, is_enabled ? 1 : 0);
    for (const auto& [kind, count] : entry->source->errors().Snapshot()) {
      metrics::Add(errors, {{"source", name}, {"kind", kind}}, static_cast<double>(count));
    }
    if (entry->running.load()) {
      metrics::Add(duration, {{"source", name}}, entry->last_collect_seconds.load());
    }
  }
  out.push_back(std::move(up));
  out.push_back(std::move(enabled));
  if (!errors.metric.empty()) out.push_back(std::move(errors));
  if (!duration.metric.empty()) out.push_back(std::move(duration));

  auto reload_ok = metrics::Gauge("ncclscope_config_last_reload_successful",
                                  "Whether the last configuration reload attempt was successful.");
  metrics::Add(reload_ok, {}, reload.last_successful.load() ? 1 : 0);
  out.push_back(std::move(reload_ok));
  auto reload_time = metrics::Gauge("ncclscope_config_last_reload_success_timestamp_seconds",
                                    "Timestamp of the last successful configuration load.");
  metrics::Add(reload_time, {}, reload.last_success_time_seconds.load());
  out.push_back(std::move(reload_time));
  auto reloads = metrics::Counter("ncclscope_config_reloads_total",
                                  "Configuration reload attempts (SIGHUP), by result.");
  metrics::Add(reloads, {{"result", "success"}}, static_cast<double>(reload.successes.load()));
  metrics::Add(reloads, {{"result", "failure"}}, static_cast<double>(reload.failures.load()));
  out.push_back(std::move(reloads));
}

}  // namespace

ScrapeCollector::ScrapeCollector(const SourceSet* sources, const ReloadStats* reload)
    : sources_(sources), reload_(reload) {}

void ScrapeCollector::CollectSource(SourceSet::Entry& entry, std::vector<MetricFamily>& out,
                                    std::string* text) const {
  const auto start = std::chrono::steady_clock::now();
  try {
    if (text != nullptr) {
      // The text first, the families after: a source's families (its counters) are then never
      // older than its text (what they count), e.g. the profiler's ops_total never runs ahead
      // of the plugin events counted before those ops. A source that fails half-way leaves
      // what it wrote: the format allows any family order, and each family it completed is
      // whole.
      {
        metrics::TextWriter writer(*text);
        entry.source->CollectText(writer);
      }
      metrics::AppendFamilies(*text, entry.source->Collect());
    } else {
      std::vector<MetricFamily> families = entry.source->Collect();
      for (MetricFamily& family : families) out.push_back(std::move(family));
    }
  } catch (const std::exception& e) {
    entry.source->errors().Add("collect");
    NCCLSCOPE_LOG(kWarn, "exporter")
        << "source " << entry.source->name() << " failed to render metrics: " << e.what();
  } catch (...) {
    entry.source->errors().Add("collect");
  }
  entry.last_collect_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::vector<MetricFamily> ScrapeCollector::Collect() const {
  std::vector<MetricFamily> out;
  for (const auto& entry : sources_->entries()) {
    if (entry->running.load()) CollectSource(*entry, out, nullptr);
  }
  try {
    AppendSelfMetrics(*sources_, *reload_, out);
    for (MetricFamily& family : CollectProcessMetrics()) out.push_back(std::move(family));
  } catch (const std::exception& e) {
    NCCLSCOPE_LOG(kWarn, "exporter") << "self-metrics failed: " << e.what();
  }
  return out;
}

std::string ScrapeCollector::RenderText() const {
  const auto start = std::chrono::steady_clock::now();
  std::string text;
  text.reserve(static_cast<std::size_t>(last_bytes_.load()) + 4096);
  std::vector<MetricFamily> self;
  for (const auto& entry : sources_->entries()) {
    if (entry->running.load()) CollectSource(*entry, self, &text);
  }
  try {
    AppendSelfMetrics(*sources_, *reload_, self);
    auto scrapes = metrics::Counter("ncclscope_scrapes_total",
                                    "Scrapes of the metrics path served, this one included.");
    metrics::Add(scrapes, {}, static_cast<double>(scrapes_.fetch_add(1) + 1));
    self.push_back(std::move(scrapes));
    auto duration = metrics::Gauge(
        "ncclscope_scrape_duration_seconds",
        "Time the previous scrape took to render every family into the response text.");
    metrics::Add(duration, {}, last_duration_seconds_.load());
    self.push_back(std::move(duration));
    auto bytes = metrics::Gauge("ncclscope_scrape_bytes", "Size of the previous scrape's text.");
    metrics::Add(bytes, {}, static_cast<double>(last_bytes_.load()));
    self.push_back(std::move(bytes));
    for (MetricFamily& family : CollectProcessMetrics()) self.push_back(std::move(family));
    metrics::AppendFamilies(text, self);
  } catch (const std::exception& e) {
    NCCLSCOPE_LOG(kWarn, "exporter") << "self-metrics failed: " << e.what();
  }
  last_duration_seconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  last_bytes_ = text.size();
  return text;
}

}  // namespace ncclscope
