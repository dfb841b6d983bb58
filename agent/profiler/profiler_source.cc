#include "agent/profiler/profiler_source.h"

#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <sstream>

#include "agent/core/log.h"
#include "agent/core/metric_family.h"
#include "agent/core/text_exposition.h"
#include "agent/profiler/profiler_metrics.h"
#include "agent/profiler/ring_owner.h"
#include "platform/clock.h"
#include "platform/errno_text.h"
#include "rdma/netlink/netlink_qp_source.h"

namespace ncclscope::profiler {
namespace {

// The mask the controls carry: the event groups' bits (the ring header's vocabulary).
std::uint32_t EventMask(const std::vector<std::string>& events) {
  std::uint32_t mask = 0;
  for (const std::string& event : events) {
    for (unsigned group = 0; group < NCCLSCOPE_EVENT_GROUP_COUNT; ++group) {
      if (event == ncclscope_event_group_name(group)) mask |= ncclscope_event_group_bits(group);
    }
  }
  return mask;
}

std::uint32_t PerMille(double fraction) {
  return static_cast<std::uint32_t>(std::lround(fraction * 1000.0));
}

std::uint64_t Nanos(const config::Duration& d) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(d.value()).count());
}

// The plugins' overhead governors (plugin/src/governor.h), summed over the node's processes.
void CollectGovernor(const DirectoryTotals& s, metrics::FamilySet& out) {
  metrics::Family& seconds = out.Get(kNcclPluginOverheadSecondsTotal);
  seconds.Add({}, static_cast<double>(s.plugin_counters[NCCLSCOPE_CTR_PLUGIN_TIME_NS]) * 1e-9);
  metrics::Family& steps = out.Get(kNcclPluginGovernorStepsTotal);
  steps.Add({{"direction", "down"}},
            static_cast<double>(s.plugin_counters[NCCLSCOPE_CTR_GOVERNOR_DOWN]));
  steps.Add({{"direction", "up"}},
            static_cast<double>(s.plugin_counters[NCCLSCOPE_CTR_GOVERNOR_UP]));
  const DirectoryTotals::Governor& g = s.governor;
  metrics::Family& governed = out.Get(kNcclPluginGovernedProcesses);
  governed.Add({{"level", "proxy"}}, g.by_level[NCCLSCOPE_GOVERNOR_PROXY]);
  governed.Add({{"level", "kernel"}}, g.by_level[NCCLSCOPE_GOVERNOR_KERNEL]);
  governed.Add({{"level", "floor"}}, g.by_level[NCCLSCOPE_GOVERNOR_FLOOR]);
  out.Get(kNcclPluginMaskOverriddenProcesses).Add({}, g.nccl_override);
  if (g.rings == 0) return;  // no live process: no duty cycle or load to show
  metrics::Family& duty = out.Get(kNcclPluginDutyCycleRatio);
  duty.Add({{"events", "kernel_ch"}}, g.min_kernel_duty_pm / 1000.0);
  duty.Add({{"events", "proxy"}}, g.min_proxy_duty_pm / 1000.0);
  metrics::Family& load = out.Get(kNcclPluginOverheadRatio);
  load.Add({}, g.max_load_ppm / 1e6);
  metrics::Family& per_op = out.Get(kNcclPluginOpOverheadSeconds);
  per_op.Add({}, static_cast<double>(g.max_op_ns) * 1e-9);
  metrics::Family& one_in = out.Get(kNcclPluginRecordOneIn);
  one_in.Add({}, g.max_record_one_in);
}

}  // namespace

ncclscope_controls ControlsFromConfig(const config::PluginConfig& plugin) {
  ncclscope_controls controls{};
  controls.event_mask = EventMask(plugin.events);
  controls.min_bytes = plugin.min_bytes;
  controls.duty_period_ns = Nanos(plugin.duty_cycle_period);
  controls.kernel_duty_pm = PerMille(plugin.kernel_duty_cycle);
  controls.proxy_duty_pm = PerMille(plugin.proxy_duty_cycle);
  controls.overhead_budget_ppm =
      static_cast<std::uint32_t>(std::lround(plugin.overhead_budget * 1'000'000.0));
  controls.record_one_in = plugin.record_one_in;
  controls.record_rate_limit = plugin.record_rate_limit;
  controls.flags = NCCLSCOPE_CONTROLS_HAS_BUDGET | NCCLSCOPE_CONTROLS_HAS_RECORD_ONE_IN |
                   NCCLSCOPE_CONTROLS_HAS_RECORD_RATE_LIMIT;
  return controls;
}

DirectoryLimits LimitsFromConfig(const config::PluginConfig& plugin) {
  DirectoryLimits limits;
  limits.max_rings = plugin.max_rings;
  return limits;
}

namespace {

// `parts` (per mille: 10 a percent, ppm: 10,000) as an exact percentage: "12.5%", "0.0001%".
std::string Percent(std::uint32_t parts, std::uint32_t per_percent) {
  std::string text = std::to_string(parts / per_percent);
  if (const std::uint32_t fraction = parts % per_percent; fraction != 0) {
    std::string digits = std::to_string(fraction + per_percent).substr(1);  // leading zeros kept
    while (digits.back() == '0') digits.pop_back();
    text += "." + digits;
  }
  return text + "%";
}

}  // namespace

std::string ControlsFileText(const config::PluginConfig& plugin) {
  // The same values as the ring header's controls, converted once (ControlsFromConfig): the file
  // is their text for jobs that start before they can read a header, so the two never disagree.
  const ncclscope_controls c = ControlsFromConfig(plugin);
  std::ostringstream text;
  std::string events;  // the names; c.event_mask is their union
  for (const std::string& e : plugin.events) events += (events.empty() ? "" : ",") + e;
  text << "# Written by ncclscope-agent from its plugin config; read by the NCCL profiler plugin\n"
       << "# when a job starts. A job's NCCLSCOPE_* environment variables take precedence.\n"
       << NCCLSCOPE_KEY_EVENTS "=" << (events.empty() ? "none" : events) << "\n"
       << NCCLSCOPE_KEY_MIN_BYTES "=" << c.min_bytes << "\n"
       << NCCLSCOPE_KEY_RECORD_ONE_IN "=" << c.record_one_in << "\n"
       << NCCLSCOPE_KEY_RECORD_RATE_LIMIT "=" << c.record_rate_limit << "\n"
       << NCCLSCOPE_KEY_DUTY_PERIOD "=" << c.duty_period_ns << "ns\n"
       << NCCLSCOPE_KEY_KERNEL_DUTY "=" << Percent(c.kernel_duty_pm, 10) << "\n"
       << NCCLSCOPE_KEY_PROXY_DUTY "=" << Percent(c.proxy_duty_pm, 10) << "\n"
       << NCCLSCOPE_KEY_OVERHEAD_BUDGET "=" << Percent(c.overhead_budget_ppm, 10'000) << "\n"
       << NCCLSCOPE_KEY_RING_SIZE "=" << plugin.ring_size << "\n";
  return text.str();
}

analytics::AnalyticsSettings AnalyticsFromConfig(const config::Config& config) {
  analytics::AnalyticsSettings s;
  s.max_comms = config.plugin.max_comms;
  s.max_peers = config.plugin.max_peers;
  s.max_tracked_comms = config.plugin.max_tracked_comms;
  s.retention = config.plugin.series_retention.value();
  s.channel_metrics = config.plugin.channel_metrics;
  s.rank_histograms = config.plugin.rank_histograms;
  s.p2p_histograms = config.plugin.p2p_histograms;
  s.intra_node_channels = config.plugin.intra_node_channels;
  s.match_window = config.detection.match_window;
  s.match_timeout = config.detection.match_timeout.value();
  s.hang_timeout = config.detection.hang_timeout.value();
  s.sysfs_root = config.rdma.sysfs_root;
  s.nic_lookup = config.plugin.qp_table != "off";
  s.detection.straggler_min_cost = config.detection.straggler_min_cost;
  s.detection.straggler_threshold_s =
      std::chrono::duration<double>(config.detection.straggler_threshold.value()).count();
  s.detection.state_dir = config.detection.state_dir == "off" ? "" : config.detection.state_dir;
  s.detection.baseline_max_keys = config.detection.baseline_max_keys;
  return s;
}

std::unique_ptr<rdma::netlink::QpSource> QpSourceFromConfig(const config::PluginConfig& plugin) {
  if (plugin.qp_table == "off") return nullptr;
  if (plugin.qp_table == "netlink") return std::make_unique<rdma::netlink::NetlinkQpSource>();
  return std::make_unique<rdma::netlink::FileQpSource>(plugin.qp_table);
}

// Hands each record to the analytics, then to the extra sinks.
class ProfilerSource::Fanout : public RecordSink {
 public:
  explicit Fanout(std::vector<std::shared_ptr<RecordSink>> sinks) : sinks_(std::move(sinks)) {}
  void OnCommInit(const RingOrigin& o, const ncclscope_comm_init_record& r) override {
    for (auto& s : sinks_) s->OnCommInit(o, r);
  }
  void OnCommTables(const std::vector<LiveComm>& comms) override {
    for (auto& s : sinks_) s->OnCommTables(comms);
  }
  void OnCommFinalize(const RingOrigin& o, const ncclscope_comm_finalize_record& r) override {
    for (auto& s : sinks_) s->OnCommFinalize(o, r);
  }
  void OnOp(const RingOrigin& o, const OpView& v) override {
    for (auto& s : sinks_) s->OnOp(o, v);
  }
  void OnOpCounts(const RingOrigin& o, const OpCounts& r) override {
    for (auto& s : sinks_) s->OnOpCounts(o, r);
  }
  void OnProxyOp(const RingOrigin& o, const ncclscope_proxy_op_record& r) override {
    for (auto& s : sinks_) s->OnProxyOp(o, r);
  }

 private:
  std::vector<std::shared_ptr<RecordSink>> sinks_;
};

ProfilerSource::ProfilerSource()
    : Source("profiler"), analytics_(std::make_shared<analytics::NcclAnalytics>()) {}

ProfilerSource::~ProfilerSource() { Stop(); }

void ProfilerSource::AddSink(std::shared_ptr<RecordSink> sink) {
  extra_sinks_.push_back(std::move(sink));
}

bool ProfilerSource::Enabled(const config::Config& config) const { return config.plugin.enabled; }

SourceStatus ProfilerSource::PrepareDirectory(const config::PluginConfig& plugin) {
  // Jobs of any user create their rings here: make it shared like /tmp (sticky, world-writable).
  if (::mkdir(plugin.ring_dir.c_str(), 01777) == 0) {
    ::chmod(plugin.ring_dir.c_str(), 01777);
  } else if (errno != EEXIST) {
    return SourceStatus::Down("cannot create ring directory " + plugin.ring_dir + ": " +
                              platform::ErrnoText(errno).c_str());
  }
  // The controls file is written (and kept as written) by the reader thread's RingDirectory.
  return SourceStatus::Up();
}

SourceStatus ProfilerSource::Start(const config::Config& config) {
  Stop();
  const config::PluginConfig& plugin = config.plugin;
  SourceStatus status = PrepareDirectory(plugin);
  {
    std::lock_guard<std::mutex> lock(snapshot_mutex_);
    down_reason_ = status.up ? "" : status.reason;
  }
  if (!status.up) return status;
  {
    std::lock_guard<std::mutex> lock(analytics_mutex_);
    analytics_->Configure(AnalyticsFromConfig(config));
    // Ring writers are found in the host's /proc (ebpf.proc_root: the agent runs with hostPID).
    analytics_->SetHostProcesses(
        std::make_shared<ProcRingOwners>(plugin.ring_dir, config.ebpf.proc_root));
  }
  std::vector<std::shared_ptr<RecordSink>> sinks = {analytics_};
  sinks.insert(sinks.end(), extra_sinks_.begin(), extra_sinks_.end());
  fanout_ = std::make_unique<Fanout>(std::move(sinks));
  sink_ = extra_sinks_.empty() ? static_cast<RecordSink*>(analytics_.get()) : fanout_.get();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = false;
    plugin_ = plugin;
    directory_ = std::make_unique<RingDirectory>(
        plugin.ring_dir, LimitsFromConfig(plugin),
        std::make_unique<RingAttribution>(config.ebpf.proc_root, config.ebpf.runtime_state_files));
    directory_->SetControls(ControlsFromConfig(plugin));
    qp_source_ = QpSourceFromConfig(plugin);
    last_dump_status_ = rdma::netlink::DumpStatus::kOk;
    directory_->SetControlsFileText(ControlsFileText(plugin));
    directory_->KeepControlsFile();  // before any job can start on this agent's policy
    pacer_.SetBounds(plugin.poll_interval.value(), plugin.poll_interval_max.value());
    controls_dirty_ = false;
    rendered_at_ = {};
  }
  thread_ = std::thread([this] { Run(); });
  NCCLSCOPE_LOG(kInfo, "profiler") << "reading plugin rings in " << plugin.ring_dir;
  return SourceStatus::Up();
}

SourceStatus ProfilerSource::Reconfigure(const config::Config& config) {
  const config::PluginConfig& plugin = config.plugin;
  bool restart = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    restart = !thread_.joinable() || plugin.ring_dir != plugin_.ring_dir ||
              plugin.qp_table != plugin_.qp_table;
  }
  if (restart) return Start(config);
  SourceStatus status = PrepareDirectory(plugin);
  if (!status.up) return status;
  {
    std::lock_guard<std::mutex> lock(analytics_mutex_);
    analytics_->Configure(AnalyticsFromConfig(config));
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    plugin_ = plugin;
    controls_dirty_ = true;
  }
  wake_.notify_all();
  return SourceStatus::Up();
}

std::string ProfilerSource::Quiesce() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!thread_.joinable()) return {};
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();  // finishes its pass and renders it for the remaining scrapes
  std::lock_guard<std::mutex> lock(snapshot_mutex_);
  const std::uint64_t unserved =
      records_rendered_ > records_served_ ? records_rendered_ - records_served_ : 0;
  if (unserved == 0) return {};
  return "stopped reading rings; " + std::to_string(unserved) +
         " records read since the last scrape are counted only if one more scrape comes "
         "before the server stops (unread records stay in the rings for the next agent)";
}

void ProfilerSource::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  directory_.reset();
  qp_source_.reset();
}

SourceStatus ProfilerSource::Status() const {
  std::lock_guard<std::mutex> lock(snapshot_mutex_);
  if (!down_reason_.empty()) return SourceStatus::Down(down_reason_);
  return SourceStatus::Up();
}

void ProfilerSource::Run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    if (controls_dirty_) {
      directory_->SetControls(ControlsFromConfig(plugin_));
      directory_->SetControlsFileText(ControlsFileText(plugin_));
      directory_->SetLimits(LimitsFromConfig(plugin_));
      pacer_.SetBounds(plugin_.poll_interval.value(), plugin_.poll_interval_max.value());
      controls_dirty_ = false;
    }
    RingDirectory& directory = *directory_;
    lock.unlock();
    bool more = false;
    PassPacer::Duration wait = pacer_.wait();
    try {
      {
        std::lock_guard<std::mutex> pass(analytics_mutex_);
        more = directory.Poll(*sink_);
        wait = pacer_.AfterPass(directory.snapshot().fullest_lane_permille);
        analytics_->SetLiveRings(directory.snapshot().ring_ids);
        analytics_->EndPass(std::chrono::steady_clock::now());
        // The data-path counters for scrapes, published before the pass's records become
        // visible: a scrape must never see an op counted but not the events (filtered,
        // dropped) the plugin counted before it. Lock order analytics -> snapshot, as in
        // CollectAnalytics and RenderSnapshot.
        PublishSnapshot(directory.snapshot(), wait);
      }
      RefreshQpTable();
    } catch (const std::exception& e) {
      errors().Add("poll");
      NCCLSCOPE_LOG(kWarn, "profiler") << "reading rings failed: " << e.what();
    }
    const auto now = std::chrono::steady_clock::now();
    if (now - rendered_at_ >= kRenderInterval) {
      RenderSnapshot();
      rendered_at_ = now;
    }
    lock.lock();
    if (!more) wake_.wait_for(lock, wait, [this] { return stop_ || controls_dirty_; });
  }
  lock.unlock();
  RenderSnapshot();  // what the last pass counted, for the scrapes until the server stops
}

void ProfilerSource::PublishSnapshot(const DirectorySnapshot& latest, PassPacer::Duration wait) {
  std::lock_guard<std::mutex> snap(snapshot_mutex_);
  published_wait_ = wait;
  if (latest.controls_file_errors > snapshot_.controls_file_errors) {
    errors().Add("controls_file");
  }
  snapshot_ = static_cast<const DirectoryTotals&>(latest);  // whole: DirectoryTotals says why
}

void ProfilerSource::RenderSnapshot() {
  std::shared_ptr<std::string> text;
  std::uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> pass(analytics_mutex_);
    text = RenderAnalytics(rendered_capacity_);
    generation = ++render_generation_;
  }
  rendered_capacity_ = text->size() + text->size() / 8;
  std::uint64_t records = 0;
  {
    std::lock_guard<std::mutex> snap(snapshot_mutex_);
    for (std::uint64_t n : snapshot_.records) records += n;
  }
  Publish(std::move(text), generation, records);
}

std::shared_ptr<std::string> ProfilerSource::RenderAnalytics(std::size_t capacity) const {
  auto text = std::make_shared<std::string>();
  text->reserve(capacity);
  metrics::TextWriter writer(*text);
  analytics_->Render(writer, platform::RealtimeNs());
  return text;
}

void ProfilerSource::Publish(std::shared_ptr<const std::string> text, std::uint64_t generation,
                             std::uint64_t records) const {
  std::lock_guard<std::mutex> snap(snapshot_mutex_);
  // The reader thread publishes after releasing the analytics lock: a scrape's rendering made
  // meanwhile is newer and stays.
  if (generation <= rendered_generation_) return;
  rendered_ = std::move(text);
  rendered_generation_ = generation;
  records_rendered_ = records;
}

void ProfilerSource::RefreshQpTable() {
  if (qp_source_ == nullptr) return;
  {
    std::lock_guard<std::mutex> pass(analytics_mutex_);
    if (!analytics_->WantsQpRefresh()) return;
  }
  // Scrapes go on meanwhile: a dump queries every QP of the node and can take a while.
  const rdma::netlink::QpDump dump = qp_source_->Dump();
  if (dump.status != last_dump_status_) {
    if (dump.status == rdma::netlink::DumpStatus::kOk) {
      NCCLSCOPE_LOG(kInfo, "profiler") << "QP table readable again (" << dump.qps.size()
                                       << " QPs on " << dump.devices << " devices)";
    } else {
      NCCLSCOPE_LOG(kWarn, "profiler") << "cannot read the QP table, so channels get no NIC "
                                       << "names (retried every minute): " << dump.error;
    }
    last_dump_status_ = dump.status;
  }
  std::lock_guard<std::mutex> pass(analytics_mutex_);
  analytics_->OnQpDump(dump, std::chrono::steady_clock::now());
}

void ProfilerSource::CollectAnalytics(metrics::TextWriter& out) const {
  // Fresh when the reader is between passes (most of the time: ages are then those of this very
  // scrape); while it is in a pass, the newest rendering there is (the reader thread's, made every
  // kRenderInterval, or an earlier scrape's): never older than what a scrape already showed. A
  // scrape never waits for a pass, however long a hostile ring makes it.
  std::unique_lock<std::mutex> live(analytics_mutex_, std::try_to_lock);
  if (live.owns_lock()) {
    std::uint64_t records = 0;
    std::size_t capacity = 0;
    {
      std::lock_guard<std::mutex> lock(snapshot_mutex_);
      for (std::uint64_t n : snapshot_.records) records += n;
      if (rendered_) capacity = rendered_->size() + rendered_->size() / 8;
    }
    std::shared_ptr<std::string> text = RenderAnalytics(capacity);
    const std::uint64_t generation = ++render_generation_;
    live.unlock();
    out.Rendered(*text);
    // Cached for the scrapes that find the next pass running: what this one showed.
    Publish(std::move(text), generation, records);
    std::lock_guard<std::mutex> lock(snapshot_mutex_);
    records_served_ = std::max(records_served_, records);
    return;
  }
  std::shared_ptr<const std::string> text;
  {
    std::lock_guard<std::mutex> lock(snapshot_mutex_);
    text = rendered_;
    records_served_ = std::max(records_served_, records_rendered_);
  }
  if (text) out.Rendered(*text);
}

void ProfilerSource::Collect(metrics::TextWriter& writer) const {
  // The analytics first, the ring health after: its counters (records_total, plugin events) are
  // then never older than the series they count.
  CollectAnalytics(writer);
  metrics::FamilySet out;
  DirectoryTotals s;
  PassPacer::Duration wait{};
  {
    std::lock_guard<std::mutex> lock(snapshot_mutex_);
    s = snapshot_;
    wait = published_wait_;
  }

  metrics::Family& rings = out.Get(kNcclRings);
  rings.Add({{"state", "live"}}, s.rings_live);
  rings.Add({{"state", "closed"}}, s.rings_closed);
  metrics::Family& reclaimed = out.Get(kNcclRingsReclaimedTotal);
  reclaimed.Add({}, static_cast<double>(s.rings_reclaimed));
  metrics::Family& rejected = out.Get(kNcclRingsRejectedTotal);
  for (const auto& [reason, count] : s.rings_rejected) {
    rejected.Add({{"reason", reason}}, static_cast<double>(count));
  }
  rejected.Add({{"reason", "fault"}}, static_cast<double>(s.ring_faults));

  metrics::Family& records = out.Get(kNcclRecordsTotal);
  for (std::size_t type = 1; type < s.records.size(); ++type) {
    if (const char* name = ncclscope_record_type_name(static_cast<unsigned>(type))) {
      records.Add({{"type", name}}, static_cast<double>(s.records[type]));
    }
  }
  metrics::Family& corrupt = out.Get(kNcclRecordsCorruptTotal);
  for (std::size_t reason = 1; reason < s.corrupt.size(); ++reason) {
    corrupt.Add({{"reason", std::string(CorruptReasonName(static_cast<CorruptReason>(reason)))}},
                static_cast<double>(s.corrupt[reason]));
  }
  corrupt.Add({{"reason", "lane_resync"}}, static_cast<double>(s.lane_resyncs));
  metrics::Family& dropped = out.Get(kNcclRecordsDroppedTotal);
  dropped.Add({{"reason", "ring_full"}}, static_cast<double>(s.dropped_ring_full));
  dropped.Add({{"reason", "lane_busy"}},
              static_cast<double>(s.plugin_counters[NCCLSCOPE_CTR_DROPPED_CONTENTION]));
  metrics::Family& limited = out.Get(kNcclRingLimitsTotal);
  // A limit's series appears when the limit is first hit, as the analytics' limits do.
  for (std::size_t limit = 0; limit < s.limited.size(); ++limit) {
    if (s.limited[limit] == 0) continue;
    limited.Add({{"limit", DirectoryLimitName(static_cast<DirectoryLimit>(limit))}},
                static_cast<double>(s.limited[limit]));
  }
  metrics::Family& mapped = out.Get(kNcclRingMappedBytes);
  mapped.Add({}, static_cast<double>(s.mapped_bytes));
  out.Get(kNcclRingPollWaitSeconds).Add({}, std::chrono::duration<double>(wait).count());
  metrics::Family& repairs = out.Get(kNcclControlsFileRepairsTotal);
  repairs.Add({}, static_cast<double>(s.controls_file_repairs));
  metrics::Family& events = out.Get(kNcclPluginEventsTotal);
  for (std::size_t counter = 0; counter < s.plugin_counters.size(); ++counter) {
    if (const char* name = ncclscope_counter_name(static_cast<unsigned>(counter))) {
      events.Add({{"event", name}}, static_cast<double>(s.plugin_counters[counter]));
    }
  }
  CollectGovernor(s, out);
  out.WriteTo(writer);
}

}  // namespace ncclscope::profiler
