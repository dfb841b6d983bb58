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

// eBPF uprobes on libnccl and libibverbs. The function lists are the ones agent/ebpf knows
// (agent/ebpf/functions.cc; a test keeps the two in step); the default probes all of them.
inline const std::vector<std::string>& EbpfNcclFunctions() {
  static const std::vector<std::string> kNames = {"ncclAllReduce",
                                                  "ncclBroadcast",
                                                  "ncclBcast",
                                                  "ncclReduce",
                                                  "ncclAllGather",
                                                  "ncclReduceScatter",
                                                  "ncclAlltoAll",
                                                  "ncclGather",
                                                  "ncclScatter",
                                                  "ncclSend",
                                                  "ncclRecv",
                                                  "ncclGroupStart",
                                                  "ncclGroupEnd",
                                                  "ncclCommInitRank",
                                                  "ncclCommInitRankConfig",
                                                  "ncclCommInitRankScalable",
                                                  "ncclCommInitAll",
                                                  "ncclCommSplit",
                                                  "ncclCommFinalize",
                                                  "ncclCommDestroy",
                                                  "ncclCommAbort",
                                                  "ncclCommCount",
                                                  "ncclCommUserRank"};
  return kNames;
}
inline const std::vector<std::string>& EbpfIbverbsFunctions() {
  static const std::vector<std::string> kNames = {
      "ibv_create_qp",    "ibv_modify_qp",     "ibv_destroy_qp", "ibv_reg_mr",
      "ibv_reg_mr_iova2", "ibv_reg_dmabuf_mr", "ibv_dereg_mr"};
  return kNames;
}

struct EbpfNcclConfig {
  std::vector<std::string> functions = EbpfNcclFunctions();
  std::vector<std::string> libraries = {R"(^libnccl\.so)"};

  template <typename V>
  void Visit(V& v) {
    v.Field("functions", functions, "NCCL functions to probe; [] turns NCCL probing off.",
            checks::SubsetOf{EbpfNcclFunctions()});
    v.Field("libraries", libraries,
            "Regular expressions on the file names of mapped libraries searched for NCCL "
            "(add ^libtorch_cuda\\.so for a statically linked NCCL).",
            checks::RegexList());
  }
};

struct EbpfIbverbsConfig {
  std::vector<std::string> functions = EbpfIbverbsFunctions();
  std::vector<std::string> libraries = {R"(^libibverbs\.so)"};

  template <typename V>
  void Visit(V& v) {
    v.Field("functions", functions,
            "libibverbs control-path functions to probe; [] turns verbs probing off.",
            checks::SubsetOf{EbpfIbverbsFunctions()});
    v.Field("libraries", libraries,
            "Regular expressions on the file names of mapped libraries searched for verbs.",
            checks::RegexList());
  }
};

struct EbpfConfig {
  bool enabled = true;
  EbpfNcclConfig nccl;
  EbpfIbverbsConfig ibverbs;
  Duration rescan_delay = Millis(500);
  int rescans = 4;
  Duration sweep_interval = Seconds(30);
  int max_label_sets = 500;
  int max_communicators = 4096;
  std::string proc_root = "/proc";
  std::string cgroup_root = "/sys/fs/cgroup";
  std::vector<std::string> runtime_state_files = {
      "/run/containerd/io.containerd.runtime.v2.task/k8s.io/{id}/config.json",
      "/run/containers/storage/overlay-containers/{id}/userdata/config.json",
      "/var/lib/docker/containers/{id}/config.v2.json"};

  template <typename V>
  void Visit(V& v) {
    v.Field("enabled", enabled, "Attach uprobes to libnccl and libibverbs in every process.");
    v.Section("nccl", nccl, "Probes on libnccl.");
    v.Section("ibverbs", ibverbs, "Probes on libibverbs.");
    v.Field("rescan_delay", rescan_delay,
            "First rescan of a process after exec; later ones at 4x each (NCCL is dlopen'ed "
            "late).",
            checks::InRange{Millis(10), Seconds(600)});
    v.Field("rescans", rescans, "Rescans of each new process after its exec.",
            checks::InRange{0, 10});
    v.Field("sweep_interval", sweep_interval,
            "How often every process is scanned, as a safety net for missed events.",
            checks::InRange{Seconds(1), Seconds(3600)});
    v.Field("max_label_sets", max_label_sets,
            "Most (namespace, pod, container) label sets exported; the rest are summed into "
            "pod=\"_other\".",
            checks::InRange{1, 100000});
    v.Field("max_communicators", max_communicators, "Most live communicators tracked.",
            checks::InRange{1, 1000000});
    v.Field("proc_root", proc_root, "Where the host's /proc is (needs hostPID in a pod).",
            checks::AbsolutePath());
    v.Field("cgroup_root", cgroup_root,
            "Where the host's cgroup hierarchy is mounted (cgroup v2, or v1 with unified/).",
            checks::AbsolutePath());
    v.Field("runtime_state_files", runtime_state_files,
            "Container runtime files holding pod and container names; {id} is the container id.");
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
