#pragma once

#include <string>

namespace ncclscope {
namespace metrics {
class TextWriter;
}

// The standard process_* metrics (as the Go and Python clients export them) for the agent itself,
// read from /proc/self at scrape time: CPU seconds, resident and virtual memory, open fds, start
// time. They are how the agent's own cost (< 1% of a core, < 64 MiB) is watched in production.
// Nothing when /proc/self/stat cannot be read.
void CollectProcessMetrics(metrics::TextWriter& out, const std::string& proc_root = "/proc");

}  // namespace ncclscope
