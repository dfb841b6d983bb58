#pragma once

// The agent's whole configuration: one struct per YAML section. Every key, its default, its check
// and its one-line meaning live in the section's Visit(); docs/configuration.md is generated from
// these (see ReferenceWriter) and a test keeps the two in step.

#include <string>
#include <vector>

#include "agent/config/duration.h"
#include "agent/config/schema.h"

namespace ncclscope::config {

// Documented in the README; not in the Prometheus default-port registry's taken range.
inline constexpr int kDefaultPort = 9824;

struct ServerConfig {
  std::string listen_address = ":9824";
  std::string metrics_path = "/metrics";

  template <typename V>
  void Visit(V& v) {
    v.Field("listen_address", listen_address,
            "Address the HTTP server binds (/metrics, /healthz). Changing it needs a restart.",
            checks::ListenAddress());
    v.Field("metrics_path", metrics_path, "Path Prometheus scrapes. Changing it needs a restart.",
            checks::UrlPath());
  }
};

struct LogConfig {
  std::string level = "info";

  template <typename V>
  void Visit(V& v) {
    v.Field("level", level, "Least severe level written to stderr.",
            checks::OneOf({"debug", "info", "warn", "error"}));
  }
};

// NCCL profiler plugin hand-off (plugin/ writes, agent/profiler reads).
struct PluginConfig {
  bool enabled = true;
  std::string ring_dir = "/run/ncclscope";

  template <typename V>
  void Visit(V& v) {
    v.Field("enabled", enabled, "Read records that the NCCL profiler plugin writes.");
    v.Field("ring_dir", ring_dir,
            "Directory holding the plugins' shared-memory rings (NCCLSCOPE_RING_DIR in the job).",
            checks::AbsolutePath());
  }
};

// eBPF uprobes on libnccl and libibverbs.
struct EbpfConfig {
  bool enabled = true;

  template <typename V>
  void Visit(V& v) {
    v.Field("enabled", enabled, "Attach uprobes to libnccl and libibverbs in every process.");
  }
};

// InfiniBand / RoCE port counters.
struct RdmaConfig {
  bool enabled = true;
  std::string sysfs_root = "/sys";
  Duration interval = Seconds(10);

  template <typename V>
  void Visit(V& v) {
    v.Field("enabled", enabled, "Collect InfiniBand/RoCE port state and counters.");
    v.Field("sysfs_root", sysfs_root, "Where sysfs is mounted (/host/sys in a container).",
            checks::AbsolutePath());
    v.Field("interval", interval,
            "How often ports are read. Each counter read is a firmware command on the HCA.",
            checks::InRange{Millis(100), Seconds(3600)});
  }
};

// NVLink through NVML, loaded at run time.
struct NvlinkConfig {
  bool enabled = true;
  std::string library = "libnvidia-ml.so.1";
  Duration interval = Seconds(10);

  template <typename V>
  void Visit(V& v) {
    v.Field("enabled", enabled, "Collect NVLink state, throughput and errors through NVML.");
    v.Field("library", library, "NVML shared library to dlopen (name or absolute path).",
            checks::NonEmpty());
    v.Field("interval", interval, "How often NVML is polled.",
            checks::InRange{Millis(100), Seconds(3600)});
  }
};

// Slow-rank, hang and degradation detection in the agent.
struct DetectionConfig {
  Duration hang_timeout = Seconds(60);

  template <typename V>
  void Visit(V& v) {
    v.Field("hang_timeout", hang_timeout,
            "An op in flight longer than this counts as hung in the agent's findings.",
            checks::InRange{Seconds(1), Seconds(86400)});
  }
};

struct Config {
  ServerConfig server;
  LogConfig log;
  PluginConfig plugin;
  EbpfConfig ebpf;
  RdmaConfig rdma;
  NvlinkConfig nvlink;
  DetectionConfig detection;

  template <typename V>
  void Visit(V& v) {
    v.Section("server", server, "HTTP server for Prometheus.");
    v.Section("log", log, "Logging to stderr.");
    v.Section("plugin", plugin, "NCCL profiler plugin records.");
    v.Section("ebpf", ebpf, "eBPF uprobes on libnccl and libibverbs.");
    v.Section("rdma", rdma, "InfiniBand and RoCE ports.");
    v.Section("nvlink", nvlink, "NVLink through NVML.");
    v.Section("detection", detection, "Slow-rank, hang and degradation findings.");
  }
};

// Result of loading a file: the config when `errors` is empty.
struct LoadResult {
  Config config;
  std::vector<ConfigError> errors;
  bool ok() const { return errors.empty(); }
};

// Reads and validates `path`. Missing or unreadable files and YAML syntax errors are errors too.
LoadResult LoadFile(const std::string& path);

// Parses YAML text; `name` is used in error messages in place of a file name.
LoadResult LoadString(const std::string& yaml, const std::string& name);

// The effective config as YAML text (what --check-config prints).
std::string ToYaml(Config config);

// The Markdown reference of every key (the generated part of docs/configuration.md).
std::string ReferenceMarkdown();

}  // namespace ncclscope::config
