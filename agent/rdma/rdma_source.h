#pragma once

// The `rdma` source: InfiniBand/RoCE ports from sysfs (plus libibverbs), normalized counters,
// health findings and GPU<->NIC affinity. A PolledSource: the ports are read every rdma.interval,
// each poll renders the metric families once and publishes them, so a scrape never causes a
// firmware read.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "agent/config/config.h"
#include "agent/core/metric_family.h"
#include "agent/core/polled_source.h"
#include "rdma/counters/catalogue.h"
#include "rdma/health/clock.h"
#include "rdma/health/port_health.h"
#include "rdma/sysfs/collector.h"
#include "rdma/sysfs/file_reader.h"
#include "rdma/verbs/verbs_inventory.h"

namespace ncclscope::rdma {

class RdmaSource : public PolledSource {
 public:
  // Seams for tests; null means the real thing (POSIX files, libibverbs, the steady clock).
  struct Deps {
    std::shared_ptr<sysfs::FileReader> reader;
    std::shared_ptr<verbs::VerbsApi> verbs;
    std::shared_ptr<platform::Clock> clock;
  };

  RdmaSource();
  explicit RdmaSource(Deps deps);
  ~RdmaSource() override;

  bool Enabled(const config::Config& config) const override { return config.rdma.enabled; }
  void PollOnce() override;
  // Applies a config without starting the poller thread (tests).
  void Configure(const config::RdmaConfig& config);

 protected:
  void ApplyConfig(const config::Config& config) override;
  std::chrono::nanoseconds PollInterval(const config::Config& config) const override {
    return config.rdma.interval.value();
  }

 private:
  struct PortState {
    health::PortCounters counters;
    health::PortHealth health;
    const sysfs::PortLayout* bound_layout = nullptr;
    std::vector<const counters::CounterInfo*> bound;  // per layout file
    std::vector<counters::CounterState*> states;      // per layout file; null: not tracked
    bool present = false;
    health::TimePoint last_present{};
    PortState(const std::vector<health::ThresholdSpec>* specs, health::LinkHistoryParams link)
        : health(specs, link) {}
  };
  using PortKey = std::pair<std::string, std::uint32_t>;
  struct AffinityRow {
    std::string gpu_bus_id, device, relation;
    std::uint32_t port;
    int numa_node, gpu_numa_node, distance;
  };

  struct JudgedPort;  // a port read this poll, judged against rdma.expected (rdma_source.cc)
  struct Judgement;   // every port's, and how many are fine

  void ApplyConfigLocked(const config::RdmaConfig& config);
  void RefreshTopologyLocked(const sysfs::Snapshot& snapshot);
  // PollOnce's steps (poll_mutex_ held): count what the read met; refresh verbs where sysfs fell
  // short; feed every port read to its counters and health; age the ports that were not read.
  void CountProblemsLocked(const sysfs::Snapshot& snapshot);
  void RefreshVerbsIfNeededLocked(const sysfs::Snapshot& snapshot, health::TimePoint now);
  void ObservePortsLocked(const sysfs::Snapshot& snapshot, health::TimePoint now);
  void BindCountersLocked(PortState& port, const sysfs::PortLayout& layout);
  void ObserveUnreadPortsLocked(const sysfs::Snapshot& snapshot, health::TimePoint now);
  // The poll's families as text, one group at a time (the poll lock held).
  std::string RenderLocked(const sysfs::Snapshot& snapshot, health::TimePoint now,
                           double poll_seconds);
  Judgement JudgePorts(const sysfs::Snapshot& snapshot) const;
  void RenderDevices(metrics::FamilySet& out, const sysfs::Snapshot& snapshot) const;
  void RenderPort(metrics::FamilySet& out, const JudgedPort& j, health::TimePoint now,
                  bool below_expected);
  void RenderPortCounters(metrics::FamilySet& out, const std::string& device,
                          const std::string& port_label, const metrics::Labels& labels,
                          const sysfs::PortLayout& layout, const sysfs::PortReading& reading,
                          const PortState& port) const;
  void RenderPortHealth(metrics::FamilySet& out, const JudgedPort& j, const PortState& port,
                        health::TimePoint now, bool below_expected) const;
  void RenderVanishedPorts(metrics::FamilySet& out, health::TimePoint now) const;
  void RenderNode(metrics::FamilySet& out, const Judgement& judgement) const;
  void RenderSelf(metrics::FamilySet& out, const sysfs::Snapshot& snapshot,
                  double poll_seconds) const;

  Deps deps_;

  std::mutex poll_mutex_;  // the poll state below: poller thread vs. lifecycle calls
  config::RdmaConfig config_;
  std::unique_ptr<sysfs::SysfsCollector> collector_;
  verbs::VerbsInventory verbs_;
  std::vector<health::ThresholdSpec> specs_;
  std::map<PortKey, PortState> ports_;
  std::vector<AffinityRow> affinity_;
  std::uint64_t polls_ = 0;
  std::uint64_t files_read_ = 0;
  health::TimePoint last_verbs_refresh_{};
};

}  // namespace ncclscope::rdma
