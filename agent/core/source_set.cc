#include "agent/core/source_set.h"

#include <exception>

#include "agent/core/log.h"

namespace ncclscope {
namespace {

// Lifecycle calls are guarded: a source that throws is reported down, never propagated.
template <typename Fn>
SourceStatus Guarded(Source& source, const char* what, Fn&& fn) {
  try {
    return fn();
  } catch (const std::exception& e) {
    source.errors().Add("lifecycle");
    return SourceStatus::Down(std::string(what) + " failed: " + e.what());
  } catch (...) {
    source.errors().Add("lifecycle");
    return SourceStatus::Down(std::string(what) + " failed");
  }
}

void Report(const Source& source, const char* what, const SourceStatus& status) {
  if (status.up) {
    NCCLSCOPE_LOG(kInfo, "agent") << "source " << source.name() << " " << what;
  } else {
    NCCLSCOPE_LOG(kWarn, "agent") << "source " << source.name() << " is down: " << status.reason
                                  << " (other sources keep running)";
  }
}

}  // namespace

SourceSet::SourceSet(std::vector<std::shared_ptr<Source>> sources) {
  for (auto& source : sources) {
    auto entry = std::make_unique<Entry>();
    entry->source = std::move(source);
    entries_.push_back(std::move(entry));
  }
}

void SourceSet::Apply(const config::Config& config) {
  std::lock_guard<std::mutex> lock(lifecycle_mutex_);
  for (auto& entry : entries_) {
    Source& source = *entry->source;
    const bool enabled = source.Enabled(config);
    const bool running = entry->running.load();
    entry->enabled = enabled;
    if (enabled && !running) {
      SourceStatus status = Guarded(source, "start", [&] { return source.Start(config); });
      Report(source, "started", status);
      SetStartStatus(*entry, std::move(status));
      entry->running = true;
    } else if (enabled && running) {
      SourceStatus status =
          Guarded(source, "reconfigure", [&] { return source.Reconfigure(config); });
      if (!status.up) Report(source, "reconfigured", status);
      SetStartStatus(*entry, std::move(status));
    } else if (!enabled && running) {
      entry->running = false;
      Guarded(source, "stop", [&] {
        source.Stop();
        return SourceStatus::Up();
      });
      SetStartStatus(*entry, SourceStatus::Down("disabled in config"));
      NCCLSCOPE_LOG(kInfo, "agent") << "source " << source.name() << " stopped (disabled)";
    } else {
      SetStartStatus(*entry, SourceStatus::Down("disabled in config"));
    }
  }
}

void SourceSet::SetStartStatus(Entry& entry, SourceStatus status) {
  std::lock_guard<std::mutex> lock(status_mutex_);
  entry.start_status = std::move(status);
}

void SourceSet::StopAll() {
  std::lock_guard<std::mutex> lock(lifecycle_mutex_);
  for (auto& entry : entries_) {
    if (!entry->running.exchange(false)) continue;
    Guarded(*entry->source, "stop", [&] {
      entry->source->Stop();
      return SourceStatus::Up();
    });
  }
}

SourceStatus SourceSet::StatusOf(const Entry& entry) const {
  {
    std::lock_guard<std::mutex> lock(status_mutex_);
    if (!entry.start_status.up) return entry.start_status;
  }
  return entry.source->Status();
}

}  // namespace ncclscope
