#include "agent/rdma/rdma_source.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string_view>

#include "agent/core/log.h"
#include "agent/core/metric_family.h"
#include "agent/core/text_exposition.h"
#include "agent/rdma/health_config.h"
#include "agent/rdma/rdma_metrics.h"
#include "platform/clock.h"
#include "platform/errno_text.h"
#include "rdma/counters/counter_state.h"
#include "rdma/sysfs/attributes.h"
#include "rdma/topology/pci_topology.h"

namespace ncclscope::rdma {
namespace {

using counters::Behavior;
using counters::CounterInfo;

constexpr std::chrono::seconds kVerbsRefreshEvery{60};

std::string PortLabel(std::uint32_t port) { return std::to_string(port); }

// Attributes of a port this poll, from sysfs, else from verbs.
struct PortAttributes {
  int state = -1;
  int phys_state = -1;
  sysfs::Rate rate{-1, {}, {}};  // gbps -1: unknown
  std::string link_layer;
};

PortAttributes Attributes(const sysfs::PortLayout& layout, const sysfs::PortReading& reading,
                          const verbs::Port* verbs) {
  PortAttributes a;
  a.link_layer = layout.link_layer;
  if (reading.state) a.state = reading.state->id;
  if (reading.phys_state) a.phys_state = reading.phys_state->id;
  if (reading.rate) a.rate = *reading.rate;
  if (verbs != nullptr) {
    if (a.state < 0) a.state = verbs->state;
    if (a.phys_state < 0) a.phys_state = verbs->phys_state;
    if (a.rate.gbps < 0 && !verbs->width.empty()) {
      a.rate = {verbs->gbps, verbs->width, verbs->speed};
    }
    if (a.link_layer.empty()) a.link_layer = verbs->link_layer;
  }
  return a;
}

bool NeedsVerbs(const sysfs::PortLayout& layout, const sysfs::PortReading& reading) {
  return !reading.state || !reading.phys_state || !reading.rate || layout.link_layer.empty();
}

}  // namespace

struct RdmaSource::JudgedPort {
  const sysfs::DeviceLayout* device;
  std::size_t port_index;
  const sysfs::PortReading* reading;
  PortAttributes attrs;
  bool eligible;  // of rdma.expected.link_layer
};

struct RdmaSource::Judgement {
  std::vector<JudgedPort> ports;
  std::uint32_t good = 0;  // eligible, ACTIVE, LinkUp and at least rdma.expected.rate_gbps
  bool below_expected = false;
};

RdmaSource::RdmaSource() : RdmaSource(Deps{}) {}

RdmaSource::RdmaSource(Deps deps) : PolledSource("rdma"), deps_(std::move(deps)) {
  if (!deps_.reader) deps_.reader = std::make_shared<sysfs::PosixFileReader>();
  if (!deps_.verbs) deps_.verbs = std::make_shared<verbs::LibibverbsApi>();
  if (!deps_.clock) deps_.clock = std::make_shared<platform::SteadyClock>();
}

RdmaSource::~RdmaSource() { StopPolling(); }

void RdmaSource::ApplyConfigLocked(const config::RdmaConfig& config) {
  const bool same_tree = collector_ && config.sysfs_root == config_.sysfs_root &&
                         config.hw_counters == config_.hw_counters;
  config_ = config;
  sysfs::DiscoveryOptions options;
  options.root = config.sysfs_root;
  options.hw_counters = config.hw_counters;
  // A new collector re-probes files remembered as failing: a reload is the operator's way to ask.
  collector_ = std::make_unique<sysfs::SysfsCollector>(
      deps_.reader.get(),
      sysfs::DeviceFilter(config.include_devices, config.exclude_devices,
                          config.exclude_pci_addresses),
      options);
  specs_ = ThresholdSpecs(config.thresholds);
  if (!same_tree) {
    ports_.clear();
    affinity_.clear();
  }
  for (auto& [key, port] : ports_) {
    port.health.Reconfigure(&specs_, LinkParams(config.link));
    port.bound_layout = nullptr;
  }
}

void RdmaSource::Configure(const config::RdmaConfig& config) {
  std::lock_guard<std::mutex> lock(poll_mutex_);
  ApplyConfigLocked(config);
}

void RdmaSource::ApplyConfig(const config::Config& config) {
  // Counter files are kept open between polls (one pread per counter); make room for them.
  const std::size_t limit = sysfs::RaiseOpenFileLimit();
  NCCLSCOPE_LOG(kDebug, "rdma") << "open file limit " << limit;
  Configure(config.rdma);
}

void RdmaSource::RefreshTopologyLocked(const sysfs::Snapshot& snapshot) {
  affinity_.clear();
  if (!config_.topology || !snapshot.layouts) return;
  const std::vector<topology::PciNode> gpus = topology::FindGpus(config_.sysfs_root);
  if (gpus.empty()) return;
  for (const sysfs::DeviceLayout& device : *snapshot.layouts) {
    topology::PciNode nic;
    if (!topology::ResolvePci(device.path + "/device", &nic)) continue;
    for (const topology::PciNode& gpu : gpus) {
      const topology::Affinity affinity = topology::Relate(gpu, nic);
      for (const sysfs::PortLayout& port : device.ports) {
        affinity_.push_back({gpu.address, device.name, affinity.relation, port.number,
                             nic.numa_node, gpu.numa_node, affinity.distance});
      }
    }
  }
}

void RdmaSource::PollOnce() {
  std::lock_guard<std::mutex> lock(poll_mutex_);
  if (!collector_) return;
  const auto wall_start = std::chrono::steady_clock::now();
  const health::TimePoint now = deps_.clock->Now();
  sysfs::Snapshot snapshot = collector_->Poll(now);
  ++polls_;
  CountProblemsLocked(snapshot);
  if (snapshot.rediscovered) {
    // New layouts: bindings to the old ones are void (an address may even be reused).
    for (auto& [key, port] : ports_) port.bound_layout = nullptr;
    RefreshTopologyLocked(snapshot);
    if (config_.verbs) {
      verbs_.Refresh(*deps_.verbs);
      last_verbs_refresh_ = now;
    }
  }
  RefreshVerbsIfNeededLocked(snapshot, now);
  ObservePortsLocked(snapshot, now);
  ObserveUnreadPortsLocked(snapshot, now);

  const double poll_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  std::string text = RenderLocked(snapshot, now, poll_seconds);
  SourceStatus status =
      snapshot.class_dir_present
          ? SourceStatus::Up()
          : SourceStatus::Down("no RDMA devices: " + sysfs::ClassDir(config_.sysfs_root) + ": " +
                               platform::ErrnoText(snapshot.list_error).c_str());
  Publish(std::move(text), std::move(status));
}

void RdmaSource::CountProblemsLocked(const sysfs::Snapshot& snapshot) {
  files_read_ += snapshot.problems.files_read;
  if (snapshot.problems.read_errors > 0) errors().Add("read", snapshot.problems.read_errors);
  if (snapshot.problems.parse_errors > 0) errors().Add("parse", snapshot.problems.parse_errors);
  for (const std::string& name : snapshot.vanished) {
    errors().Add("vanished");
    NCCLSCOPE_LOG(kWarn, "rdma") << "device " << name << " vanished while being read";
  }
}

// Verbs fill in what sysfs could not read: refreshed when such a port exists, at most once a
// minute (each refresh opens every device and queries every port).
void RdmaSource::RefreshVerbsIfNeededLocked(const sysfs::Snapshot& snapshot,
                                            health::TimePoint now) {
  if (!config_.verbs || now - last_verbs_refresh_ < kVerbsRefreshEvery) return;
  bool needed = false;
  for (const sysfs::DeviceReading& device : snapshot.devices) {
    for (std::size_t p = 0; p < device.ports.size(); ++p) {
      needed = needed || NeedsVerbs(device.layout->ports[p], device.ports[p]);
    }
  }
  if (needed) {
    verbs_.Refresh(*deps_.verbs);
    last_verbs_refresh_ = now;
  }
}

void RdmaSource::ObservePortsLocked(const sysfs::Snapshot& snapshot, health::TimePoint now) {
  for (auto& [key, port] : ports_) port.present = false;
  for (const sysfs::DeviceReading& device : snapshot.devices) {
    for (std::size_t p = 0; p < device.ports.size(); ++p) {
      const sysfs::PortLayout& layout = device.layout->ports[p];
      const sysfs::PortReading& reading = device.ports[p];
      auto [it, inserted] = ports_.try_emplace({device.layout->name, layout.number}, &specs_,
                                               LinkParams(config_.link));
      PortState& port = it->second;
      if (port.bound_layout != &layout || port.bound.size() != layout.files.size()) {
        BindCountersLocked(port, layout);
      }
      for (std::size_t f = 0; f < layout.files.size(); ++f) {
        if (!reading.values[f] || port.states[f] == nullptr) continue;
        const CounterInfo* info = port.bound[f];
        port.states[f]->Update(*reading.values[f], info ? info->behavior : Behavior::kPlain64,
                               info ? info->width_bits : 64);
      }
      const PortAttributes attrs =
          Attributes(layout, reading,
                     config_.verbs ? verbs_.Find(device.layout->name, layout.number) : nullptr);
      port.health.Observe(now, {true, attrs.state, attrs.phys_state}, port.counters);
      port.present = true;
      port.last_present = now;
    }
  }
}

// Once per discovery: what each file is, and where its state lives (map nodes are stable), so a
// poll does no lookups.
void RdmaSource::BindCountersLocked(PortState& port, const sysfs::PortLayout& layout) {
  port.bound.assign(layout.files.size(), nullptr);
  port.states.assign(layout.files.size(), nullptr);
  for (std::size_t f = 0; f < layout.files.size(); ++f) {
    const sysfs::CounterFile& file = layout.files[f];
    port.bound[f] = counters::Lookup(file.group, file.name);
    const bool tracked =
        port.bound[f] != nullptr ||
        (config_.unknown_hw_counters && file.group == sysfs::CounterGroup::kHwCounters);
    if (tracked) port.states[f] = &port.counters[file.key];
  }
  port.bound_layout = &layout;
}

// Ports that were not read: vanished devices count as down for a while (a NIC falling off the bus
// is exactly a link going down); excluded ones are forgotten at once.
void RdmaSource::ObserveUnreadPortsLocked(const sysfs::Snapshot& snapshot, health::TimePoint now) {
  for (auto it = ports_.begin(); it != ports_.end();) {
    PortState& port = it->second;
    const bool excluded = std::find(snapshot.excluded.begin(), snapshot.excluded.end(),
                                    it->first.first) != snapshot.excluded.end();
    if (!port.present) {
      if (excluded || now - port.last_present > config_.link.flap_window.value()) {
        it = ports_.erase(it);
        continue;
      }
      port.health.Observe(now, {false, -1, -1}, port.counters);
    }
    ++it;
  }
}

// The poll's rendering, one group of families at a time. The families are created on first use
// (FamilySet), so each keeps the place of its first sample in the text.
std::string RdmaSource::RenderLocked(const sysfs::Snapshot& snapshot, health::TimePoint now,
                                     double poll_seconds) {
  metrics::FamilySet out;
  const Judgement judgement = JudgePorts(snapshot);
  RenderDevices(out, snapshot);
  for (const JudgedPort& j : judgement.ports) RenderPort(out, j, now, judgement.below_expected);
  RenderVanishedPorts(out, now);
  RenderNode(out, judgement);
  RenderSelf(out, snapshot, poll_seconds);
  return out.Text();
}

// Expected ports (gpud ExpectedPortStates): which ports count, and how many are fine.
RdmaSource::Judgement RdmaSource::JudgePorts(const sysfs::Snapshot& snapshot) const {
  const config::RdmaExpectedConfig& expected = config_.expected;
  Judgement judgement;
  for (const sysfs::DeviceReading& device : snapshot.devices) {
    for (std::size_t p = 0; p < device.ports.size(); ++p) {
      const sysfs::PortLayout& layout = device.layout->ports[p];
      JudgedPort j{
          device.layout, p, &device.ports[p],
          Attributes(layout, device.ports[p],
                     config_.verbs ? verbs_.Find(device.layout->name, layout.number) : nullptr),
          false};
      j.eligible = expected.link_layer == "any" || j.attrs.link_layer == expected.link_layer;
      if (j.eligible && j.attrs.state == sysfs::kStateActive &&
          j.attrs.phys_state == sysfs::kPhysStateLinkUp &&
          (expected.rate_gbps == 0 || j.attrs.rate.gbps >= expected.rate_gbps)) {
        ++judgement.good;
      }
      judgement.ports.push_back(std::move(j));
    }
  }
  judgement.below_expected = expected.ports > 0 && judgement.good < expected.ports;
  return judgement;
}

void RdmaSource::RenderDevices(metrics::FamilySet& out, const sysfs::Snapshot& snapshot) const {
  for (const sysfs::DeviceReading& device : snapshot.devices) {
    const sysfs::DeviceLayout& d = *device.layout;
    out.Get(kInfinibandInfo)
        .Add({{"device", d.name},
              {"board_id", d.board_id},
              {"firmware_version", d.firmware_version},
              {"hca_type", d.hca_type},
              {"node_guid", d.node_guid},
              {"pci_address", d.pci_address}},
             1);
  }
}

// One port: its attributes, counters and health.
void RdmaSource::RenderPort(metrics::FamilySet& out, const JudgedPort& j, health::TimePoint now,
                            bool below_expected) {
  const sysfs::DeviceLayout& d = *j.device;
  const sysfs::PortLayout& layout = d.ports[j.port_index];
  const sysfs::PortReading& reading = *j.reading;
  const std::string port_label = PortLabel(layout.number);
  const metrics::Labels labels = {{"device", d.name}, {"port", port_label}};
  PortState& port = ports_.at({d.name, layout.number});

  out.Get(kInfinibandPortInfo)
      .Add({{"device", d.name},
            {"port", port_label},
            {"link_layer", j.attrs.link_layer},
            {"width", j.attrs.rate.width},
            {"speed", j.attrs.rate.speed},
            {"netdev", layout.netdev}},
           1);
  if (j.attrs.state >= 0) {
    out.Get(kInfinibandStateId).Add(labels, j.attrs.state);
  }
  if (j.attrs.phys_state >= 0) {
    out.Get(kInfinibandPhysicalStateId).Add(labels, j.attrs.phys_state);
  }
  if (j.attrs.rate.gbps >= 0) {
    out.Get(kInfinibandRateBytesPerSecond).Add(labels, j.attrs.rate.BytesPerSecond());
  }

  RenderPortCounters(out, d.name, port_label, labels, layout, reading, port);
  RenderPortHealth(out, j, port, now, below_expected);
}

// Counters, in catalogue order within the port's files.
void RdmaSource::RenderPortCounters(metrics::FamilySet& out, const std::string& device,
                                    const std::string& port_label, const metrics::Labels& labels,
                                    const sysfs::PortLayout& layout,
                                    const sysfs::PortReading& reading,
                                    const PortState& port) const {
  std::uint32_t saturated = 0;
  for (std::size_t f = 0; f < layout.files.size(); ++f) {
    const sysfs::CounterFile& file = layout.files[f];
    if (!reading.values[f] || port.states[f] == nullptr) continue;
    const counters::CounterState& state = *port.states[f];
    const CounterInfo* info = port.bound[f];
    if (info == nullptr) {
      out.Get(kInfinibandHwCountersTotal)
          .Add({{"device", device}, {"port", port_label}, {"counter", file.name}},
               state.extended());
      continue;
    }
    if (!config_.packet_counters && counters::IsPacketCounter(*info)) continue;
    if (info->behavior == Behavior::kGauge) {
      out.Get(CounterFamily(*info)).Add(labels, static_cast<double>(state.raw()) * info->scale);
      continue;
    }
    out.Get(CounterFamily(*info)).Add(labels, state.extended() * info->scale);
    if (state.saturated()) {
      ++saturated;
      out.Get(kInfinibandPortSaturated)
          .Add({{"device", device}, {"port", port_label}, {"counter", file.name}}, 1);
    }
    if (state.resets() > 0) {
      out.Get(kInfinibandPortClearsTotal)
          .Add({{"device", device}, {"port", port_label}, {"counter", file.name}},
               static_cast<double>(state.resets()));
    }
  }
  // These three are 0 on a healthy port: series only while they are not (rules test == 1, the
  // dashboards sum or take the max), as the findings.
  if (saturated > 0) {
    out.Get(kInfinibandPortSaturatedCounters).Add(labels, saturated);
  }
  for (const auto& [reason, count] : reading.unreadable) {
    out.Get(kInfinibandPortUnreadableFiles)
        .Add({{"device", device}, {"port", port_label}, {"reason", reason}}, count);
  }
  if (reading.restricted) {
    out.Get(kInfinibandPortRestricted).Add(labels, 1);
  }
}

// State changes, flaps and the port's findings.
void RdmaSource::RenderPortHealth(metrics::FamilySet& out, const JudgedPort& j,
                                  const PortState& port, health::TimePoint now,
                                  bool below_expected) const {
  const config::RdmaExpectedConfig& expected = config_.expected;
  const std::string& device = j.device->name;
  const std::string port_label = PortLabel(j.device->ports[j.port_index].number);
  const metrics::Labels labels = {{"device", device}, {"port", port_label}};
  std::vector<health::Finding> findings;
  for (const auto& [transition, count] : port.health.transitions()) {
    out.Get(kInfinibandPortStateTransitionsTotal)
        .Add({{"device", device},
              {"port", port_label},
              {"from", transition.first},
              {"to", transition.second}},
             static_cast<double>(count));
  }
  if (const std::size_t episodes = port.health.history().Episodes(now); episodes > 0) {
    out.Get(kInfinibandPortFlapEpisodes).Add(labels, static_cast<double>(episodes));
  }

  port.health.Findings(now, below_expected && j.eligible, &findings);
  if (expected.rate_gbps > 0 && j.eligible) {
    findings.push_back({"rate_degraded", "warning",
                        j.attrs.state == sysfs::kStateActive && j.attrs.rate.gbps >= 0 &&
                            j.attrs.rate.gbps < expected.rate_gbps});
  }
  for (const health::Finding& finding : findings) {
    if (!finding.active) continue;
    out.Get(kInfinibandFinding)
        .Add({{"device", device},
              {"port", port_label},
              {"finding", finding.name},
              {"severity", finding.severity}},
             1);
  }
}

// Ports of devices that vanished keep their link findings for a while.
void RdmaSource::RenderVanishedPorts(metrics::FamilySet& out, health::TimePoint now) const {
  std::vector<health::Finding> findings;
  for (auto& [key, port] : ports_) {
    if (port.present) continue;
    findings.clear();
    port.health.Findings(now, false, &findings);
    for (const health::Finding& finding : findings) {
      if (!finding.active || (finding.name != "link_down" && finding.name != "link_flapping")) {
        continue;
      }
      out.Get(kInfinibandFinding)
          .Add({{"device", key.first},
                {"port", PortLabel(key.second)},
                {"finding", finding.name},
                {"severity", finding.severity}},
               1);
    }
  }
}

// Node level: expected ports and rate, GPU-NIC affinity.
void RdmaSource::RenderNode(metrics::FamilySet& out, const Judgement& judgement) const {
  const config::RdmaExpectedConfig& expected = config_.expected;
  out.Get(kInfinibandActivePorts).Add({}, judgement.good);
  if (expected.ports > 0) {
    out.Get(kInfinibandExpectedActivePorts).Add({}, expected.ports);
    if (judgement.below_expected) {
      out.Get(kInfinibandFinding)
          .Add({{"finding", "ports_below_expected"}, {"severity", "critical"}}, 1);
    }
  }
  if (expected.rate_gbps > 0) {
    out.Get(kInfinibandExpectedRateBytesPerSecond).Add({}, expected.rate_gbps * 125'000'000.0);
  }

  for (const AffinityRow& row : affinity_) {
    out.Get(kGpuNicAffinityInfo)
        .Add({{"gpu_bus_id", row.gpu_bus_id},
              {"device", row.device},
              {"port", PortLabel(row.port)},
              {"numa_node", std::to_string(row.numa_node)},
              {"gpu_numa_node", std::to_string(row.gpu_numa_node)},
              {"relation", row.relation},
              {"pci_distance", std::to_string(row.distance)}},
             1);
  }
}

// The source itself.
void RdmaSource::RenderSelf(metrics::FamilySet& out, const sysfs::Snapshot& snapshot,
                            double poll_seconds) const {
  std::size_t vanished_devices = 0;
  {
    std::vector<std::string> names;
    for (const auto& [key, port] : ports_) {
      if (!port.present && std::find(names.begin(), names.end(), key.first) == names.end()) {
        names.push_back(key.first);
      }
    }
    vanished_devices = names.size();
  }
  const std::string devices_help =
      "RDMA devices by state: monitored, excluded by the filters (never read), vanished (gone, "
      "findings kept for rdma.link.flap_window).";
  out.Get(kRdmaDevices).Add({{"state", "monitored"}}, static_cast<double>(snapshot.devices.size()));
  out.Get(kRdmaDevices).Add({{"state", "excluded"}}, static_cast<double>(snapshot.excluded.size()));
  out.Get(kRdmaDevices).Add({{"state", "vanished"}}, static_cast<double>(vanished_devices));
  if (config_.verbs) {
    out.Get(kRdmaVerbsDevices).Add({}, static_cast<double>(verbs_.device_count()));
  }
  out.Get(kRdmaPollsTotal).Add({}, static_cast<double>(polls_));
  out.Get(kRdmaFileReadsTotal).Add({}, static_cast<double>(files_read_));
  out.Get(kRdmaPollDurationSeconds).Add({}, poll_seconds);
  out.Get(kRdmaLastPollTimestampSeconds).Add({}, platform::UnixSeconds());
}

}  // namespace ncclscope::rdma
