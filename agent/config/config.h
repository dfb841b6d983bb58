#pragma once

// The agent's whole configuration: one struct per YAML section. Every key, its default, its check
// and its one-line meaning live in the section's Visit(); docs/configuration.md is generated from
// these (see ReferenceWriter) and a test keeps the two in step.

#include <cstdint>
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

// NCCL profiler plugin hand-off (plugin/ writes, agent/profiler reads). The keys from `events`
// on are controls for the plugins: written into every ring (applied by live jobs within ~200 ms)
// and into <ring_dir>/ncclscope.controls (read by jobs when they start). A job's own NCCLSCOPE_*
// environment variable overrides the matching control for that job.
struct PluginConfig {
  bool enabled = true;
  std::string ring_dir = "/run/ncclscope";
  Duration poll_interval = Millis(100);
  std::uint32_t max_comms = 64;
  Duration series_retention = Seconds(600);
  std::vector<std::string> events = {"coll",     "p2p",        "kernel_ch",
                                     "proxy_op", "proxy_step", "ce_coll"};
  std::uint64_t min_bytes = 0;
  Duration duty_cycle_period = Seconds(10);
  double kernel_duty_cycle = 1.0;
  double proxy_duty_cycle = 0.1;
  std::uint64_t ring_size = 8u << 20;

  template <typename V>
  void Visit(V& v) {
    v.Field("enabled", enabled, "Read records that the NCCL profiler plugin writes.");
    v.Field("ring_dir", ring_dir,
            "Directory holding the plugins' shared-memory rings (NCCLSCOPE_RING_DIR in the job). "
            "Changing it needs a restart of the jobs.",
            checks::AbsolutePath());
    v.Field("poll_interval", poll_interval,
            "How often the rings are drained. Each lane holds ring_size/16/256 records, so keep "
            "it well below the time a job takes to write that many.",
            checks::InRange{Millis(10), Seconds(10)});
    v.Field("max_comms", max_comms,
            "Communicators that get their own comm label; records of further ones are "
            "aggregated under comm=\"other\".",
            checks::InRange<std::uint32_t>{1, 10000});
    v.Field("series_retention", series_retention,
            "How long a communicator's series stay after its last record once no running job "
            "has it.",
            checks::InRange{Seconds(10), Seconds(86400)});
    v.Field("events", events,
            "NCCL events the plugins record: coll and p2p (every operation), kernel_ch (GPU "
            "timing per channel), proxy_op and proxy_step (network steps), ce_coll (copy-engine "
            "collectives, NCCL 2.29+). NCCLSCOPE_EVENTS in the job.",
            checks::SubsetOf{{"coll", "p2p", "kernel_ch", "proxy_op", "proxy_step", "ce_coll"}});
    v.Field("min_bytes", min_bytes,
            "Operations with fewer bytes are counted as filtered, not recorded. "
            "NCCLSCOPE_MIN_BYTES in the job.",
            checks::InRange<std::uint64_t>{0, 1ull << 40});
    v.Field("duty_cycle_period", duty_cycle_period,
            "Length of one sampling cycle for kernel_ch and proxy events, aligned to the wall "
            "clock so every process samples the same windows. NCCLSCOPE_DUTY_PERIOD in the job.",
            checks::InRange{Millis(10), Seconds(3600)});
    v.Field("kernel_duty_cycle", kernel_duty_cycle,
            "Fraction of each cycle with kernel_ch (GPU timing) on; 1 = always. "
            "NCCLSCOPE_KERNEL_DUTY in the job.",
            checks::InRange{0.0, 1.0});
    v.Field("proxy_duty_cycle", proxy_duty_cycle,
            "Fraction of each cycle with proxy_op/proxy_step (network steps) on. "
            "NCCLSCOPE_PROXY_DUTY in the job.",
            checks::InRange{0.0, 1.0});
    v.Field("ring_size", ring_size,
            "Bytes of record space in each job's ring (256 bytes per record), for rings created "
            "from now on. NCCLSCOPE_RING_SIZE in the job.",
            checks::InRange<std::uint64_t>{64u << 10, 1u << 30});
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
