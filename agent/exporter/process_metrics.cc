#include "agent/exporter/process_metrics.h"

#include <unistd.h>

#include <exception>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string_view>
#include <vector>

#include "agent/core/text_exposition.h"
#include "agent/exporter/exporter_metrics.h"

namespace ncclscope {
namespace {

// Seconds since the epoch at which the system booted (btime in /proc/stat).
double BootTime(const std::string& proc_root) {
  std::ifstream in(proc_root + "/stat");
  std::string key;
  while (in >> key) {
    if (key == "btime") {
      double value = 0;
      in >> value;
      return value;
    }
    in.ignore(1 << 20, '\n');
  }
  return 0;
}

// A soft limit of /proc/self/limits by its name ("Max open files", "Max address space"), as
// client_golang's process collector reads them; nullopt when unlimited or unreadable.
std::optional<double> SoftLimit(const std::string& proc_root, std::string_view limit) {
  std::ifstream in(proc_root + "/self/limits");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(limit, 0) != 0) continue;
    std::istringstream fields(line.substr(limit.size()));
    std::string soft;
    fields >> soft;
    if (soft == "unlimited" || soft.empty()) return std::nullopt;
    try {
      return std::stod(soft);
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace

void CollectProcessMetrics(metrics::TextWriter& out, const std::string& proc_root) {
  std::ifstream in(proc_root + "/self/stat");
  std::string line;
  if (!std::getline(in, line)) return;
  // Field 2 (comm) may contain spaces and parentheses: parse from the last ')'.
  const std::size_t close = line.rfind(')');
  if (close == std::string::npos) return;
  std::istringstream fields(line.substr(close + 2));
  std::vector<std::string> f;
  for (std::string field; fields >> field;) f.push_back(field);
  // f[0] is field 3 (state); utime=14, stime=15, starttime=22, vsize=23, rss=24 (1-based fields).
  if (f.size() < 22) return;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  const double utime = std::stod(f[14 - 3]);
  const double stime = std::stod(f[15 - 3]);
  const double start_ticks = std::stod(f[22 - 3]);
  const double vsize = std::stod(f[23 - 3]);
  const double rss_pages = std::stod(f[24 - 3]);
  const auto one = [&](const metrics::MetricDef& family, double value) {
    out.Header(family);
    out.Sample(family, "", value);
  };
  one(kProcessCpuSecondsTotal, (utime + stime) / ticks);
  one(kProcessResidentMemoryBytes, rss_pages * page);
  one(kProcessVirtualMemoryBytes, vsize);
  one(kProcessStartTimeSeconds, BootTime(proc_root) + start_ticks / ticks);

  std::error_code ec;
  double fds = 0;
  for (auto it = std::filesystem::directory_iterator(proc_root + "/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++fds;
  }
  one(kProcessOpenFds, fds);
  if (const std::optional<double> max = SoftLimit(proc_root, "Max open files")) {
    one(kProcessMaxFds, *max);
  }
  if (const std::optional<double> max = SoftLimit(proc_root, "Max address space")) {
    one(kProcessVirtualMemoryMaxBytes, *max);
  }
}

}  // namespace ncclscope
