#include "agent/app/health.h"

#include <algorithm>

namespace ncclscope {

HealthReport SourcesHealth(const SourceSet& sources, const std::vector<std::string>& required) {
  HealthReport report;
  std::string missing;
  for (const auto& entry : sources.entries()) {
    const SourceStatus status = sources.StatusOf(*entry);
    const std::string& name = entry->source->name();
    report.text += "source " + name + ": ";
    if (!entry->enabled.load()) {
      report.text += "disabled\n";
      continue;
    }
    if (status.up) {
      report.text += "up\n";
      continue;
    }
    report.text += "down (" + status.reason + ")\n";
    if (std::find(required.begin(), required.end(), name) != required.end()) {
      report.healthy = false;
      missing += "required source " + name + " is down: " + status.reason + "\n";
    }
  }
  report.text = missing + report.text;
  return report;
}

}  // namespace ncclscope
