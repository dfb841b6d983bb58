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

// The `source` names of the agent's sources (agent/app/sources.cc; a test keeps the two in step).
inline const std::vector<std::string>& SourceNames() {
  static const std::vector<std::string> kNames = {"profiler", "ebpf", "rdma", "nvlink"};
  return kNames;
}

struct ServerConfig {
  std::string listen_address = ":9824";
  std::string metrics_path = "/metrics";
  std::string web_config_file;
  // Empty by default: a source down is a normal state of many nodes (no HCA, no NVML, no BPF
  // privilege), and kubelet restarting the agent for it would fix nothing.
  std::vector<std::string> healthz_requires;

  template <typename V>
  void Visit(V& v) {
    v.Field("listen_address", listen_address,
            "Address the HTTP server binds (/metrics, /healthz). Changing it needs a restart.",
            checks::ListenAddress());
    v.Field("metrics_path", metrics_path, "Path Prometheus scrapes. Changing it needs a restart.",
            checks::UrlPath());
    v.Field("web_config_file", web_config_file,
            "TLS, client certificates and basic auth for the endpoint, in the Prometheus "
            "exporter-toolkit web-config format (the file exporters take with "
            "--web.config.file; see deploy/README.md). Empty: plain HTTP, no auth. Read at "
            "start: changing it or its certificates needs a restart.",
            checks::OneOfOrAbsolutePath({""}));
    v.Field("healthz_requires", healthz_requires,
            "Sources (profiler, ebpf, rdma, nvlink) this node must have: while one of them is "
            "enabled and down, /healthz answers 503 and names it (the DaemonSet's liveness and "
            "readiness probes then restart the agent and take it out of the Service). A disabled "
            "source is not required. Empty: /healthz is 200 while the agent runs.",
            checks::SubsetOf{SourceNames(), "any of profiler, ebpf, rdma, nvlink"});
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

// The event groups plugin.events names, in the ring header's order (ncclscope_event_group_name in
// plugin/ring/ncclscope_ring.h, the vocabulary the plugins parse too).
std::vector<std::string> EventGroupNames();

// NCCL profiler plugin hand-off (plugin/ writes, agent/profiler reads). The keys from `events`
// on are controls for the plugins: written into every ring (applied by live jobs within ~200 ms)
// and into <ring_dir>/ncclscope.controls (read by jobs when they start). A job's own NCCLSCOPE_*
// environment variable overrides the matching control for that job.
struct PluginConfig {
  bool enabled = true;
  std::string ring_dir = "/run/ncclscope";
  Duration poll_interval = Millis(100);
  Duration poll_interval_max = Millis(500);
  std::uint32_t max_comms = 64;
  std::uint32_t max_peers = 16;
  std::uint32_t max_rings = 256;
  std::uint32_t max_tracked_comms = 4096;
  bool channel_metrics = true;
  bool rank_histograms = false;
  bool p2p_histograms = false;
  bool intra_node_channels = false;
  std::string qp_table = "netlink";
  Duration series_retention = Seconds(600);
  std::vector<std::string> events = EventGroupNames();
  std::uint64_t min_bytes = 0;
  std::uint32_t record_one_in = 1;
  std::uint32_t record_rate_limit = 1000;
  Duration duty_cycle_period = Seconds(10);
  double kernel_duty_cycle = 1.0;
  double proxy_duty_cycle = 0.1;
  double overhead_budget = 0.01;
  std::uint64_t ring_size = 8u << 20;

  // One line per key of the section, a table (docs/configuration.md is generated from it).
  template <typename V>
  // NOLINTNEXTLINE(readability-function-size): a table of keys, not steps
  void Visit(V& v) {
    v.Field("enabled", enabled, "Read records that the NCCL profiler plugin writes.");
    v.Field("ring_dir", ring_dir,
            "Directory holding the plugins' shared-memory rings (NCCLSCOPE_RING_DIR in the job). "
            "Changing it needs a restart of the jobs.",
            checks::AbsolutePath());
    v.Field("poll_interval", poll_interval,
            "How often the rings are drained while records come in (the shortest wait between "
            "passes; see poll_interval_max). Each lane holds ring_size/16/256 records, so keep "
            "it well below the time a job takes to write that many.",
            checks::InRange{Millis(10), Seconds(10)});
    v.Field("poll_interval_max", poll_interval_max,
            "The longest wait between passes. The reader waits as long as would find its fullest "
            "lane about 40 % full at the rate it last saw (at most twice its last wait), between "
            "poll_interval and this; a lane half full brings it back to poll_interval. A pass "
            "costs about the same with little to read, so a quiet node is read less often. Equal "
            "to poll_interval (or below): every wait is poll_interval.",
            checks::InRange{Millis(10), Seconds(10)});
    v.Field("max_comms", max_comms,
            "Communicators that get their own comm label; records of further ones are "
            "aggregated under comm=\"other\".",
            checks::InRange<std::uint32_t>{1, 10000});
    v.Field("max_rings", max_rings,
            "Rings (processes using the plugin) read at once; further ones wait, counted in "
            "ncclscope_nccl_ring_limits_total{limit=\"rings\"}. Bounds the agent's descriptors "
            "and mappings whatever pods put in ring_dir.",
            checks::InRange<std::uint32_t>{1, 4096});
    v.Field("max_tracked_comms", max_tracked_comms,
            "Communicator ids tracked at once, labelled or not; beyond, the least recently "
            "active one that no live ring lists is forgotten (counted). Bounds the analytics' "
            "memory whatever ids pods write.",
            checks::InRange<std::uint32_t>{16, 65536});
    v.Field("max_peers", max_peers,
            "Network peers per communicator rank that get their own peer label in the "
            "per-channel metrics; further ones are aggregated under peer=\"other\".",
            checks::InRange<std::uint32_t>{1, 4096});
    v.Field("channel_metrics", channel_metrics,
            "Export per-channel series (bytes and busy time by transport, network wait "
            "decomposition per channel and peer). Off: per-rank totals only "
            "(ncclscope_nccl_network_*, the sums of the per-channel network series, which "
            "replace them).");
    v.Field("rank_histograms", rank_histograms,
            "GPU-duration histogram (ncclscope_nccl_op_gpu_duration_seconds) per rank: 16 "
            "series per rank and op kind, and the arrival-lag histogram "
            "(ncclscope_nccl_coll_arrival_lag_seconds): 16 series per rank. Off: the duration "
            "histogram per communicator and op kind, the node's ranks together, and no lag "
            "histogram; the per-rank time, count and lag are counters either way.");
    v.Field("p2p_histograms", p2p_histograms,
            "GPU-duration histogram rows for Send/Recv too (16 series per communicator and op "
            "kind; a pipeline has one p2p communicator per GPU). Off: collectives only; the p2p "
            "time and count are counters either way (ncclscope_nccl_op_gpu_seconds_total, "
            "ncclscope_nccl_p2p_gpu_seconds_total).");
    v.Field("intra_node_channels", intra_node_channels,
            "Per-channel series also for channels that never carried network bytes (NVLink, "
            "PCIe or shared memory only; most channels of a node). Off: per-channel series for "
            "networked channels only, the ones the slow-link rules and the channel -> NIC join "
            "need.");
    v.Field("qp_table", qp_table,
            "Where the QPs behind NCCL's IB channels are looked up to name each channel's HCA "
            "port (ncclscope_nccl_channel_nic_info; needs channel_metrics): netlink (the "
            "kernel's rdma netlink, dumped only when unknown QPs appear, at most every 5 s; a "
            "dump queries every QP of the node), off, or the absolute path of a file of "
            "recorded rdma netlink QP-dump replies (tests, offline replay).",
            checks::OneOfOrAbsolutePath{"netlink", "off"});
    v.Field("series_retention", series_retention,
            "How long a communicator's series stay after its last record once no running job "
            "has it.",
            checks::InRange{Seconds(10), Seconds(86400)});
    v.Field("events", events,
            "NCCL events the plugins record: coll and p2p (every operation), kernel_ch (GPU "
            "timing per channel), proxy_op and proxy_step (network steps), net_plugin (the NIC "
            "and queue pairs of each network op), ce_coll (copy-engine collectives, NCCL 2.29+), "
            "kernel_phase (each channel's kernel phases: initial sync, compute, final sync; NCCL "
            "2.31+; sampled with kernel_ch). NCCLSCOPE_EVENTS in the job.",
            checks::SubsetOf{EventGroupNames()});
    v.Field("min_bytes", min_bytes,
            "Operations with fewer bytes are not recorded (counted as filtered; ops_total and "
            "op_bytes_total still count them). NCCLSCOPE_MIN_BYTES in the job.",
            checks::InRange<std::uint64_t>{0, 1ull << 40});
    v.Field("record_one_in", record_one_in,
            "Record 1 operation in this many (and its network steps), the same ones on every "
            "rank. Operation counts and bytes stay exact (the plugin counts every operation); "
            "the agent weighs each record by this number, so GPU seconds, bandwidth and the "
            "other per-op detail stay rates of all operations (estimates, within a few percent "
            "over a minute at thousands of operations per second). Use the same value on every "
            "node. NCCLSCOPE_RECORD_ONE_IN in the job.",
            checks::InRange<std::uint32_t>{1, 65536});  // NCCLSCOPE_MAX_RECORD_ONE_IN
    v.Field("record_rate_limit", record_rate_limit,
            "Operations per second a process records at most: above it, each process "
            "multiplies record_one_in by the smallest power of two that brings it under (raised "
            "within 200 ms of the rate needing it; back down after a second under half), which "
            "bounds the agent's cost per process (docs/benchmarks.md) while slower jobs keep "
            "every record. Counts and bytes stay exact. ncclscope_nccl_plugin_record_one_in "
            "shows the largest in force. 0: no limit. NCCLSCOPE_RECORD_RATE_LIMIT in the job.",
            checks::InRange<std::uint32_t>{0, 1'000'000'000});
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
    v.Field("overhead_budget", overhead_budget,
            "Overhead governor: the most time the plugin may spend on NCCL's threads, as a "
            "share of one core per GPU of the process, measured over each duty cycle. Above "
            "it the plugin lowers proxy_duty_cycle, then kernel_duty_cycle, and restores them "
            "once well under (ncclscope_nccl_plugin_governed_processes); 0 turns it off. "
            "NCCLSCOPE_OVERHEAD_BUDGET in the job.",
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

// One counter threshold of the fabric health findings: the finding is active while the counter grew
// by more than `increase` within the last `window` (so increase 0 means "any increment").
struct CounterThreshold {
  double increase = 0;
  Duration window = Seconds(600);
  std::string severity = "warning";

  template <typename V>
  void Visit(V& v) {
    v.Field("increase", increase, "Finding when the counter grew by more than this within window.",
            checks::InRange{0.0, 1e18});
    v.Field("window", window, "Look-back window of the increase.",
            checks::InRange{Seconds(1), Seconds(86400)});
    v.Field("severity", severity, "severity label of the finding; none turns it off.",
            checks::OneOf({"critical", "warning", "info", "none"}));
  }
};

// Link down and flapping findings from the history of port states (gpud-style drop and flap
// windows, fabric.md 0.8 and 5).
struct RdmaLinkConfig {
  Duration down_after = Seconds(240);
  Duration down_hold = Seconds(600);
  Duration flap_min_down = Seconds(25);
  unsigned flap_episodes = 3;
  Duration flap_window = Seconds(3600);

  template <typename V>
  void Visit(V& v) {
    v.Field("down_after", down_after,
            "link_down finding: port not ACTIVE continuously for this long (gpud drop: 4m).",
            checks::InRange{Seconds(0), Seconds(86400)});
    v.Field("down_hold", down_hold,
            "link_down stays active this long after the port recovers, so alerts do not flap.",
            checks::InRange{Seconds(0), Seconds(86400)});
    v.Field("flap_min_down", flap_min_down,
            "A down period counts as a flap episode when it lasted this long (gpud: 25s) or the "
            "HCA counted a link_downed event.",
            checks::InRange{Seconds(0), Seconds(3600)});
    v.Field("flap_episodes", flap_episodes,
            "link_flapping finding: this many down-then-ACTIVE episodes within flap_window.",
            checks::InRange{1u, 1000u});
    v.Field("flap_window", flap_window, "Window in which flap episodes are counted.",
            checks::InRange{Seconds(60), Seconds(7 * 86400)});
  }
};

// What the node should have (gpud ExpectedPortStates): 0 turns a check off.
struct RdmaExpectedConfig {
  unsigned ports = 0;
  unsigned rate_gbps = 0;
  std::string link_layer = "InfiniBand";

  template <typename V>
  void Visit(V& v) {
    v.Field("ports", ports,
            "ports_below_expected finding when fewer ports are ACTIVE, LinkUp and at least "
            "rate_gbps (8 on DGX H100/B200); 0 = no check.",
            checks::InRange{0u, 1024u});
    v.Field("rate_gbps", rate_gbps,
            "rate_degraded finding when an ACTIVE port runs slower (400 for NDR); 0 = no check.",
            checks::InRange{0u, 100000u});
    v.Field("link_layer", link_layer, "Ports the expectations apply to.",
            checks::OneOf({"InfiniBand", "Ethernet", "any"}));
  }
};

// Counter thresholds (defaults from fabric.md 2.9: NVSentinel's counter table and gpud).
struct RdmaThresholdsConfig {
  CounterThreshold symbol_error_burst{600, Seconds(60), "warning"};
  CounterThreshold symbol_error_ber{120, Seconds(3600), "critical"};
  CounterThreshold link_error_recovery{25, Seconds(300), "warning"};
  CounterThreshold link_downed{0, Seconds(600), "critical"};
  CounterThreshold local_link_integrity{0, Seconds(600), "critical"};
  CounterThreshold excessive_buffer_overrun{0, Seconds(600), "critical"};
  CounterThreshold receive_errors{3000, Seconds(300), "warning"};
  CounterThreshold discards{30000, Seconds(300), "warning"};
  CounterThreshold transmit_wait{3e8, Seconds(300), "warning"};
  CounterThreshold cnp_ignored{0, Seconds(900), "warning"};
  CounterThreshold ecn_marked{300000, Seconds(300), "info"};
  CounterThreshold cnp_handled{300000, Seconds(300), "info"};
  CounterThreshold out_of_buffer{0, Seconds(600), "warning"};
  CounterThreshold ack_timeouts{300, Seconds(300), "warning"};
  CounterThreshold retries_exceeded{0, Seconds(600), "critical"};
  CounterThreshold roce_slow_restart{3000, Seconds(300), "warning"};

  template <typename V>
  void Visit(V& v) {
    v.Section("symbol_error_burst", symbol_error_burst, "symbol_error > 10/s (NVSentinel).");
    v.Section("symbol_error_ber", symbol_error_ber,
              "symbol_error > 120/h, IBTA BER 1e-12 (NVSentinel fatal).");
    v.Section("link_error_recovery", link_error_recovery, "link_error_recovery > 5/min.");
    v.Section("link_downed", link_downed, "Any link_downed increment (NVSentinel fatal).");
    v.Section("local_link_integrity", local_link_integrity,
              "Any local_link_integrity_errors increment (NVSentinel fatal).");
    v.Section("excessive_buffer_overrun", excessive_buffer_overrun,
              "Any excessive_buffer_overrun_errors increment (NVSentinel fatal).");
    v.Section("receive_errors", receive_errors, "port_rcv_errors > 10/s.");
    v.Section("discards", discards,
              "port_xmit_discards + port_rcv_discards > 100/s while the port is ACTIVE.");
    v.Section(
        "transmit_wait", transmit_wait,
        "port_xmit_wait > 1e6 ticks/s (a placeholder: the tick length is hardware-specific).");
    v.Section("cnp_ignored", cnp_ignored,
              "Any rp_cnp_ignored increment: CNPs arrive but congestion control is off.");
    v.Section("ecn_marked", ecn_marked, "np_ecn_marked_roce_packets > 1000/s (RoCE congestion).");
    v.Section("cnp_handled", cnp_handled, "rp_cnp_handled > 1000/s (senders throttled by DCQCN).");
    v.Section("out_of_buffer", out_of_buffer,
              "Any out_of_buffer drop: receivers do not post buffers fast enough.");
    v.Section("ack_timeouts", ack_timeouts, "local_ack_timeout_err > 1/s.");
    v.Section("retries_exceeded", retries_exceeded,
              "Any req_transport_retries_exceeded or req_rnr_retries_exceeded: a QP failed.");
    v.Section("roce_slow_restart", roce_slow_restart, "roce_slow_restart > 10/s (NVSentinel).");
  }
};

// InfiniBand / RoCE port counters.
struct RdmaConfig {
  bool enabled = true;
  std::string sysfs_root = "/sys";
  Duration interval = Seconds(10);
  std::vector<std::string> include_devices;
  std::vector<std::string> exclude_devices;
  std::vector<std::string> exclude_pci_addresses;
  bool hw_counters = true;
  bool unknown_hw_counters = false;
  bool packet_counters = false;
  bool verbs = true;
  bool topology = true;
  RdmaLinkConfig link;
  RdmaExpectedConfig expected;
  RdmaThresholdsConfig thresholds;

  template <typename V>
  void Visit(V& v) {
    v.Field("enabled", enabled, "Collect InfiniBand/RoCE port state and counters.");
    v.Field("sysfs_root", sysfs_root, "Where sysfs is mounted (/host/sys in a container).",
            checks::AbsolutePath());
    v.Field("interval", interval,
            "How often ports are read (with 10% jitter). Each counter read is a firmware command "
            "on the HCA.",
            checks::InRange{Millis(100), Seconds(3600)});
    v.Field("include_devices", include_devices,
            "Only devices whose name matches one of these regexes (empty: all).",
            checks::RegexList());
    v.Field("exclude_devices", exclude_devices,
            "Devices whose name matches one of these regexes are never read.", checks::RegexList());
    v.Field("exclude_pci_addresses", exclude_pci_addresses,
            "Devices whose PCI address (e.g. 0000:05:00.0) matches are never read: restricted "
            "PFs whose counter reads fail and flood dmesg.",
            checks::RegexList());
    v.Field("hw_counters", hw_counters,
            "Read ports/N/hw_counters (mlx5 Q and congestion counters).");
    v.Field("unknown_hw_counters", unknown_hw_counters,
            "Also export hw_counters files not in the catalogue, with a counter label.");
    v.Field("packet_counters", packet_counters,
            "Also export the packet counts (all, unicast, multicast) and VL15 drops of each port. "
            "node_exporter's infiniband collector exports the same counters; no shipped rule or "
            "dashboard reads them (7 series per port).");
    v.Field("verbs", verbs,
            "Enumerate devices with libibverbs too, to fill port attributes sysfs cannot give.");
    v.Field("topology", topology, "Export GPU to NIC PCIe affinity from sysfs.");
    v.Section("link", link, "Link down and flap findings from the port state history.");
    v.Section("expected", expected, "Ports the node should have.");
    v.Section("thresholds", thresholds, "Counter thresholds of the health findings.");
  }
};

// NVLink through NVML, loaded at run time.
struct NvlinkConfig {
  bool enabled = true;
  std::string library = "libnvidia-ml.so.1";
  Duration interval = Seconds(10);
  unsigned expected_links = 0;
  bool per_link_metrics = false;
  Duration down_after = Seconds(120);
  CounterThreshold errors{0, Seconds(600), "warning"};

  template <typename V>
  void Visit(V& v) {
    v.Field("enabled", enabled, "Collect NVLink state, throughput and errors through NVML.");
    v.Field("library", library, "NVML shared library to dlopen (name or absolute path).",
            checks::NonEmpty());
    v.Field("interval", interval, "How often NVML is polled (with 10% jitter).",
            checks::InRange{Millis(100), Seconds(3600)});
    v.Field("expected_links", expected_links,
            "links_below_expected finding when a GPU has fewer active links (18 on H100 SXM); "
            "0 = no check.",
            checks::InRange{0u, 64u});
    v.Field("per_link_metrics", per_link_metrics,
            "One series per NVLink for link state, throughput and error counters (18 links x "
            "~10 series per GPU); off: one per GPU (counters summed over its links, BER the "
            "worst link's), findings still name the link.");
    v.Field("down_after", down_after,
            "link_inactive finding: a link that was active is inactive for this long.",
            checks::InRange{Seconds(0), Seconds(86400)});
    v.Section("errors", errors,
              "CRC, replay and recovery errors (NVLink5: malformed, overrun, receive, integrity, "
              "failed recovery) on a link.");
  }
};

// Slow-rank, hang and degradation detection in the agent.
struct DetectionConfig {
  Duration hang_timeout = Seconds(60);
  std::uint32_t match_window = 4096;
  Duration match_timeout = Seconds(10);
  double straggler_min_cost = 0.05;
  Duration straggler_threshold = Millis(250);
  std::string state_dir = "/var/lib/ncclscope";
  std::uint32_t baseline_max_keys = 4096;

  template <typename V>
  void Visit(V& v) {
    v.Field("hang_timeout", hang_timeout,
            "An op in flight longer than this counts as hung in the agent's findings.",
            checks::InRange{Seconds(1), Seconds(86400)});
    v.Field("match_window", match_window,
            "Collectives that may wait at once for the records of the node's other ranks "
            "(slow-rank matching); beyond, the oldest is evicted and counted.",
            checks::InRange<std::uint32_t>{16, 1u << 20});
    v.Field("match_timeout", match_timeout,
            "How long a collective waits for the records of the node's other ranks before it is "
            "evicted as incomplete.",
            checks::InRange{Seconds(1), Seconds(600)});
    v.Field("straggler_min_cost", straggler_min_cost,
            "Straggler finding: the smallest cost to detect, as the fraction of wall time the "
            "node's other ranks wait for one rank (0.05: 5 %). The node's CUSUM allows half of "
            "it (docs/analytics.md, Detection).",
            checks::InRange{0.001, 1.0});
    v.Field("straggler_threshold", straggler_threshold,
            "Straggler finding: the CUSUM's decision interval, in excess waiting accumulated "
            "beyond the allowance; the finding clears under half of it.",
            checks::InRange{Millis(10), Seconds(60)});
    v.Field("state_dir", state_dir,
            "Where the latency baselines are kept across restarts of jobs and of the agent "
            "(one small file, written every minute while it changes); off: in memory only.",
            checks::OneOfOrAbsolutePath{"off"});
    v.Field("baseline_max_keys", baseline_max_keys,
            "Latency baselines kept (one per communicator name, rank, function, algorithm, "
            "protocol and size bucket); beyond, the least recently seen is dropped.",
            checks::InRange<std::uint32_t>{16, 1u << 20});
  }
};

// The node page's cross-node half of the verdict (agent/exporter/alert_feed.h).
struct NodePageConfig {
  std::string prometheus_url;
  std::string node;
  Duration alerts_refresh = Seconds(15);
  std::string runbook_url = "https://github.com/ncclscope/ncclscope/blob/main/docs/runbooks.md";

  template <typename V>
  void Visit(V& v) {
    v.Field("prometheus_url", prometheus_url,
            "Prometheus (or a Thanos or Mimir query endpoint) the node page asks which ncclscope "
            "alerts fire or are pending for this node, to show them beside the agent's own "
            "findings: the cross-node half of the verdict (GET /api/alerts; asked only while the "
            "page is open). Credentials, if any, in the URL (https://user:password@host). Empty: "
            "the page shows the agent's findings only.",
            checks::HttpUrlOrEmpty{});
    v.Field("node", node,
            "The `node` label Prometheus gives this node's series "
            "(deploy/prometheus/scrape-configs.yaml). Empty: $NODE_NAME (the DaemonSet sets it "
            "to the Kubernetes node name), else the host name.",
            checks::PlainName{});
    v.Field("alerts_refresh", alerts_refresh,
            "How often, at most, the open node page's alerts are asked of Prometheus.",
            checks::InRange{Seconds(5), Seconds(600)});
    v.Field("runbook_url", runbook_url,
            "Where the node page links an alert's runbook: this URL, then # and the alert's name "
            "in lower case, as the rules' runbook_url annotations. Set it to the same copy of "
            "docs/runbooks.md as the runbook-url component. Empty: no link.",
            checks::HttpUrlOrEmpty{});
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
  NodePageConfig node_page;

  template <typename V>
  void Visit(V& v) {
    v.Section("server", server, "HTTP server for Prometheus.");
    v.Section("log", log, "Logging to stderr.");
    v.Section("plugin", plugin, "NCCL profiler plugin records.");
    v.Section("ebpf", ebpf, "eBPF uprobes on libnccl and libibverbs.");
    v.Section("rdma", rdma, "InfiniBand and RoCE ports.");
    v.Section("nvlink", nvlink, "NVLink through NVML.");
    v.Section("detection", detection, "Slow-rank, hang and degradation findings.");
    v.Section("node_page", node_page, "The node page's alerts from Prometheus.");
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
