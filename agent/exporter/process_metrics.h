#pragma once

#include <prometheus/metric_family.h>

#include <string>
#include <vector>

namespace ncclscope {

// The standard process_* metrics (as the Go and Python clients export them) for the agent itself,
// read from /proc/self at scrape time: CPU seconds, resident and virtual memory, open fds, start
// time. They are how the agent's own cost (< 1% of a core, < 64 MiB) is watched in production.
std::vector<prometheus::MetricFamily> CollectProcessMetrics(const std::string& proc_root = "/proc");

}  // namespace ncclscope
