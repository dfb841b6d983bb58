#pragma once

// A Source is one stream of data the agent exports: the profiler plugin's rings, the eBPF probes,
// the InfiniBand ports, NVLink. Each writes its own metric families at scrape time, as text
// (Collect), and reports its health; the agent starts, reconfigures and stops it.
//
// Contract:
//  - Start() never throws and never takes the agent down: a source that cannot run (no BPF
//    privilege, no NVML, no sysfs tree) returns Down(reason) and the rest of the agent runs on.
//  - Collect() may run on the HTTP server's threads concurrently with itself and with
//    Reconfigure(); it must be cheap (render state, do no I/O that can block for long). It writes
//    whole families (agent/core/text_exposition.h; metric_family.h when one walk feeds several);
//    a family whose counters count another family's series comes after it, so that a scrape
//    never shows a counter ahead of what it counts.
//  - Errors are counted by kind in errors(), rendered as ncclscope_source_errors_total.

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ncclscope {

namespace config {
struct Config;
}
namespace metrics {
class TextWriter;
}

struct SourceStatus {
  bool up = false;
  std::string reason;  // why the source is down; empty when up

  static SourceStatus Up() { return {true, ""}; }
  static SourceStatus Down(std::string why) { return {false, std::move(why)}; }
};

// Error counts by kind ("read", "corrupt_record", "collect", ...). Thread-safe.
class ErrorCounters {
 public:
  void Add(std::string_view kind, std::uint64_t n = 1);
  std::vector<std::pair<std::string, std::uint64_t>> Snapshot() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::uint64_t, std::less<>> counts_;
};

class Source {
 public:
  explicit Source(std::string name) : name_(std::move(name)) {}
  virtual ~Source() = default;
  Source(const Source&) = delete;
  Source& operator=(const Source&) = delete;

  // Stable lower-case name, the `source` label of the self-metrics.
  const std::string& name() const { return name_; }

  // Whether the config asks for this source to run.
  virtual bool Enabled(const config::Config& config) const = 0;
  virtual SourceStatus Start(const config::Config& config) = 0;
  // Applies a new config to a running source. The default restarts it.
  virtual SourceStatus Reconfigure(const config::Config& config) {
    Stop();
    return Start(config);
  }
  virtual void Stop() = 0;
  // Shutdown, before the HTTP server stops: stop consuming input that nobody can read again (the
  // profiler's rings: what stays in them goes to the next agent), keep serving what was read.
  // Stop() follows. Returns a line for the log about what was read but not yet scraped, if any.
  virtual std::string Quiesce() { return {}; }

  // The source's families, as Prometheus text (see the contract above).
  virtual void Collect(metrics::TextWriter& out) const = 0;

  // Current health. Sources whose health changes while running override this.
  virtual SourceStatus Status() const { return SourceStatus::Up(); }

  ErrorCounters& errors() { return errors_; }
  const ErrorCounters& errors() const { return errors_; }

 private:
  std::string name_;
  ErrorCounters errors_;
};

}  // namespace ncclscope
