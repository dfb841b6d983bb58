#include "agent/exporter/process_metrics.h"

#include <unistd.h>

#include <exception>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "agent/core/metric_family.h"

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

// The soft limit on open files ("Max open files" in /proc/self/limits, as client_golang's process
// collector reads it); nullopt when unlimited or unreadable.
std::optional<double> MaxOpenFiles(const std::string& proc_root) {
  std::ifstream in(proc_root + "/self/limits");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Max open files", 0) != 0) continue;
    std::istringstream fields(line.substr(std::string("Max open files").size()));
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

std::vector<prometheus::MetricFamily> CollectProcessMetrics(const std::string& proc_root) {
  std::vector<prometheus::MetricFamily> out;
  std::ifstream in(proc_root + "/self/stat");
  std::string line;
  if (!std::getline(in, line)) return out;
  // Field 2 (comm) may contain spaces and parentheses: parse from the last ')'.
  const std::size_t close = line.rfind(')');
  if (close == std::string::npos) return out;
  std::istringstream fields(line.substr(close + 2));
  std::vector<std::string> f;
  for (std::string field; fields >> field;) f.push_back(field);
  // f[0] is field 3 (state); utime=14, stime=15, starttime=22, vsize=23, rss=24 (1-based fields).
  if (f.size() < 22) return out;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  const double utime = std::stod(f[14 - 3]);
  const double stime = std::stod(f[15 - 3]);
  const double start_ticks = std::stod(f[22 - 3]);
  const double vsize = std::stod(f[23 - 3]);
  const double rss_pages = std::stod(f[24 - 3]);

  auto cpu = metrics::Counter("process_cpu_seconds_total",
                              "Total user and system CPU time spent in seconds.");
  metrics::Add(cpu, {}, (utime + stime) / ticks);
  out.push_back(std::move(cpu));

  auto rss = metrics::Gauge("process_resident_memory_bytes", "Resident memory size in bytes.");
  metrics::Add(rss, {}, rss_pages * page);
  out.push_back(std::move(rss));

  auto vms = metrics::Gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.");
  metrics::Add(vms, {}, vsize);
  out.push_back(std::move(vms));

  auto start = metrics::Gauge("process_start_time_seconds",
                              "Start time of the process since unix epoch in seconds.");
  metrics::Add(start, {}, BootTime(proc_root) + start_ticks / ticks);
  out.push_back(std::move(start));

  std::error_code ec;
  double fds = 0;
  for (auto it = std::filesystem::directory_iterator(proc_root + "/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++fds;
  }
  auto open_fds = metrics::Gauge("process_open_fds", "Number of open file descriptors.");
  metrics::Add(open_fds, {}, fds);
  out.push_back(std::move(open_fds));

  if (const std::optional<double> max = MaxOpenFiles(proc_root)) {
    auto max_fds = metrics::Gauge("process_max_fds", "Maximum number of open file descriptors.");
    metrics::Add(max_fds, {}, *max);
    out.push_back(std::move(max_fds));
  }
  return out;
}

}  // namespace ncclscope
