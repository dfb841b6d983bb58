#include "agent/exporter/scrape_collector.h"

#include <chrono>
#include <exception>

#include "agent/core/log.h"
#include "agent/core/metric_family.h"
#include "agent/core/text_exposition.h"
#include "agent/exporter/build_info.h"
#include "agent/exporter/exporter_metrics.h"
#include "agent/exporter/process_metrics.h"

namespace ncclscope {
namespace {

void WriteSelfMetrics(const SourceSet& sources, const ReloadStats& reload,
                      metrics::FamilySet& out) {
  metrics::Family& build = out.Get(kBuildInfo);
  build.Add({{"version", std::string(kVersion)},
             {"revision", std::string(kRevision)},
             {"compiler", std::string(kCompiler)}},
            1);

  metrics::Family& up = out.Get(kSourceUp);
  metrics::Family& enabled = out.Get(kSourceEnabled);
  metrics::Family& errors = out.Get(kSourceErrorsTotal);
  metrics::Family& duration = out.Get(kSourceCollectionDurationSeconds);
  for (const auto& entry : sources.entries()) {
    const std::string& name = entry->source->name();
    const bool is_enabled = entry->enabled.load();
    const bool is_up = is_enabled && entry->running.load() && sources.StatusOf(*entry).up;
    up.Add({{"source", name}}, is_up ? 1 : 0);
    enabled.Add({{"source", name}}, is_enabled ? 1 : 0);
    for (const auto& [kind, count] : entry->source->errors().Snapshot()) {
      errors.Add({{"source", name}, {"kind", kind}}, static_cast<double>(count));
    }
    if (entry->running.load()) {
      duration.Add({{"source", name}}, entry->last_collect_seconds.load());
    }
  }

  out.Get(kConfigLastReloadSuccessful).Add({}, reload.last_successful.load() ? 1 : 0);
  out.Get(kConfigLastReloadSuccessTimestampSeconds)
      .Add({}, reload.last_success_time_seconds.load());
  metrics::Family& reloads = out.Get(kConfigReloadsTotal);
  reloads.Add({{"result", "success"}}, static_cast<double>(reload.successes.load()));
  reloads.Add({{"result", "failure"}}, static_cast<double>(reload.failures.load()));
}

// One source's families into `text`, timed; a source that throws leaves what it wrote (the
// format allows any family order, and each family it completed is whole) and counts an error.
void CollectSource(SourceSet::Entry& entry, std::string& text) {
  const auto start = std::chrono::steady_clock::now();
  try {
    metrics::TextWriter writer(text);
    entry.source->Collect(writer);
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

}  // namespace

ScrapeCollector::ScrapeCollector(const SourceSet* sources, const ReloadStats* reload)
    : sources_(sources), reload_(reload) {}

std::string ScrapeCollector::RenderText() const {
  const auto start = std::chrono::steady_clock::now();
  std::string text;
  text.reserve(static_cast<std::size_t>(last_bytes_.load()) + 4096);
  for (const auto& entry : sources_->entries()) {
    if (entry->running.load()) CollectSource(*entry, text);
  }
  try {
    metrics::FamilySet self;
    WriteSelfMetrics(*sources_, *reload_, self);
    self.Get(kScrapesTotal).Add({}, static_cast<double>(scrapes_.fetch_add(1) + 1));
    self.Get(kScrapeDurationSeconds).Add({}, last_duration_seconds_.load());
    self.Get(kScrapeBytes).Add({}, static_cast<double>(last_bytes_.load()));
    metrics::TextWriter writer(text);
    self.WriteTo(writer);
    CollectProcessMetrics(writer);
  } catch (const std::exception& e) {
    NCCLSCOPE_LOG(kWarn, "exporter") << "self-metrics failed: " << e.what();
  }
  last_duration_seconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  last_bytes_ = text.size();
  return text;
}

}  // namespace ncclscope
