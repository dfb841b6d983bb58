#include "agent/ebpf/runtime.h"

#include <cerrno>

#include "agent/core/log.h"
#include "agent/ebpf/functions.h"
#include "agent/ebpf/proc/maps.h"
#include "platform/errno_text.h"

namespace ncclscope::ebpf {
namespace {

std::map<Library, std::vector<const ProbedFunction*>> Wanted(const config::EbpfConfig& config) {
  std::map<Library, std::vector<const ProbedFunction*>> wanted;
  for (const auto* list : {&config.nccl.functions, &config.ibverbs.functions}) {
    for (const std::string& name : *list) {
      if (const ProbedFunction* f = FindFunction(name)) wanted[f->library].push_back(f);
    }
  }
  return wanted;
}

std::string Describe(const PodLabels& labels) {
  if (labels.pod.empty()) return "host";
  return labels.namespace_name + "/" + labels.pod + "/" + labels.container;
}

// How stale the ring writers may be: a job that just created its ring counts as uncovered for up
// to this long (the alert waits 30 minutes).
constexpr std::chrono::seconds kCoverageRefresh{2};

}  // namespace

std::shared_ptr<Runtime> Runtime::Start(const config::EbpfConfig& config, Coverage coverage,
                                        const Features& features, std::string* error) {
  if (!features.can_load) {
    *error = features.reason;
    return nullptr;
  }
  std::shared_ptr<Runtime> rt(new Runtime());
  rt->config_ = config;
  rt->coverage_ = std::move(coverage);
  rt->objects_ = BpfObjects::Load(error);
  if (!rt->objects_) return nullptr;
  rt->attacher_ =
      std::make_unique<BpfAttacher>(rt->objects_->entry_program(), rt->objects_->return_program());
  rt->registry_ = std::make_unique<AttachRegistry>(rt->attacher_.get(), Wanted(config));

  Discovery::Options options;
  options.proc_root = config.proc_root;
  options.self_pid = proc::SelfPid(config.proc_root).value_or(0);
  if (!config.nccl.functions.empty())
    options.library_patterns[Library::kNccl] = config.nccl.libraries;
  if (!config.ibverbs.functions.empty()) {
    options.library_patterns[Library::kIbverbs] = config.ibverbs.libraries;
  }
  options.first_rescan =
      std::chrono::duration_cast<std::chrono::milliseconds>(config.rescan_delay.value());
  options.rescans = config.rescans;
  const BpfObjects* objects = rt->objects_.get();
  Discovery::RealFiles real_files;
  if (features.has_vma_iterator) {
    real_files = [objects](pid_t pid) { return objects->ExecutableMappings(pid); };
  } else {
    NCCLSCOPE_LOG(kWarn, "ebpf") << "no task_vma iterator: files are identified by the inode the "
                                    "process sees; a library shared by overlayfs containers "
                                    "may be attached (and counted) once per container";
  }
  rt->discovery_ = std::make_unique<Discovery>(options, rt->registry_.get(), real_files);
  if (rt->coverage_.writers) {
    ProcessFactsReader::Options facts;
    facts.proc_root = config.proc_root;
    facts.nccl_libraries = config.nccl.libraries;
    rt->facts_ = std::make_unique<ProcessFactsReader>(facts, rt->coverage_.errors);
  }

  std::unique_ptr<cgroup::CgroupPaths> cgroup_paths;
  if (const auto unified = cgroup::FindUnifiedRoot(config.cgroup_root)) {
    cgroup_paths = std::make_unique<cgroup::CgroupPaths>(*unified);
  } else {
    NCCLSCOPE_LOG(kInfo, "ebpf") << "no cgroup v2 hierarchy under " << config.cgroup_root
                                 << ": pods are found through /proc/<pid>/cgroup (v1)";
  }
  rt->attributor_ = std::make_unique<Attributor>(
      config.proc_root, std::move(cgroup_paths),
      std::make_unique<cgroup::PodMetadata>(config.runtime_state_files),
      static_cast<std::size_t>(config.max_label_sets));

  rt->events_ = EventRing::Open(
      *rt->objects_, [raw = rt.get()](const ncclscope_event& event) { raw->HandleEvent(event); },
      error);
  if (!rt->events_) return nullptr;
  if (!rt->objects_->AttachLifecycle(error)) return nullptr;
  rt->worker_ = std::thread([raw = rt.get()] { raw->Work(); });
  return rt;
}

Runtime::~Runtime() {
  stop_ = true;
  if (worker_.joinable()) worker_.join();
  events_.reset();
  discovery_.reset();
  registry_.reset();  // detaches every file before the programs go away
  attacher_.reset();
  objects_.reset();
}

void Runtime::Work() {
  using Clock = Discovery::Clock;
  auto next_sweep = Clock::now();
  auto next_coverage = Clock::now();
  while (!stop_) {
    const int n = events_->Poll(100);
    if (n < 0 && n != -EINTR) {
      NCCLSCOPE_LOG(kError, "ebpf")
          << "ring buffer poll failed: " << platform::ErrnoText(-n).c_str();
    }
    if (!exits_.empty()) {
      std::set<ProcessKey> dead(exits_.begin(), exits_.end());
      exits_.clear();
      for (const ProcessKey& p : dead) discovery_->OnExit(p.pid, p.start_ticks);
      std::lock_guard<std::mutex> lock(state_mutex_);
      Fold(dead);
    }
    const auto now = Clock::now();
    discovery_->RunDue(now);
    if (now >= next_coverage) {
      // /proc/locks, one directory listing and the new or uncovered processes' files: done here
      // so that scrapes read none.
      RefreshCoverage();
      next_coverage = now + kCoverageRefresh;
    }
    if (now >= next_sweep) {
      discovery_->Sweep();
      const std::set<ProcessKey> dead = DeadInMaps();
      std::lock_guard<std::mutex> lock(state_mutex_);
      Fold(dead);
      for (auto it = communicators_.begin(); it != communicators_.end();) {
        if (proc::StartTicks(config_.proc_root, it->first.pid) != it->first.start_ticks) {
          communicator_count_ -= it->second.size();
          it = communicators_.erase(it);
        } else {
          ++it;
        }
      }
      next_sweep = now + config_.sweep_interval.value();
    }
    scans_ = discovery_->scans();
    rescan_overflows_ = discovery_->queue_overflows();
  }
}

void Runtime::HandleEvent(const ncclscope_event& event) {
  const ProcessKey process{static_cast<pid_t>(event.tgid), event.start_ticks};
  switch (event.kind) {
    case NCCLSCOPE_EVENT_EXEC:
      discovery_->OnExec(process.pid, process.start_ticks, Discovery::Clock::now());
      return;
    case NCCLSCOPE_EVENT_EXIT:
      exits_.push_back(process);
      return;
    default:
      break;
  }
  const PodLabels labels = attributor_->For(process, event.cgroup_id);
  const ProbedFunction* function = FunctionForOp(event.op);
  const std::string_view name = function != nullptr ? function->name : "?";
  std::lock_guard<std::mutex> lock(state_mutex_);
  switch (event.kind) {
    case NCCLSCOPE_EVENT_COMM_INIT: {
      const bool ok = event.result == 0 || event.result == NCCLSCOPE_NCCL_IN_PROGRESS;
      if (!ok) {
        NCCLSCOPE_LOG(kWarn, "ebpf")
            << name << " failed: " << ResultName(event.op, event.result) << " pid=" << event.tgid
            << " pod=" << Describe(labels) << " nranks=" << event.nranks << " rank=" << event.rank;
        return;
      }
      if (event.handle == 0) return;
      NCCLSCOPE_LOG(kDebug, "ebpf") << name << " created communicator pid=" << event.tgid
                                    << " nranks=" << event.nranks << " rank=" << event.rank;
      auto& comms = communicators_[process];
      if (comms.count(event.handle) == 0) {
        if (communicator_count_ >= static_cast<std::size_t>(config_.max_communicators)) {
          ++communicator_overflows_;
          if (comms.empty()) communicators_.erase(process);
          return;
        }
        ++communicator_count_;
      }
      comms[event.handle] = {event.nranks, event.rank, labels};
      return;
    }
    case NCCLSCOPE_EVENT_COMM_INFO: {
      auto it = communicators_.find(process);
      if (it == communicators_.end()) return;
      auto comm = it->second.find(event.handle);
      if (comm == it->second.end()) return;
      if (event.op == NCCLSCOPE_OP_COMM_COUNT) comm->second.nranks = event.nranks;
      if (event.op == NCCLSCOPE_OP_COMM_USER_RANK) comm->second.rank = event.rank;
      return;
    }
    case NCCLSCOPE_EVENT_COMM_END: {
      if (event.op == NCCLSCOPE_OP_COMM_ABORT) {
        ++totals_.aborts[labels];
        NCCLSCOPE_LOG(kWarn, "ebpf")
            << "ncclCommAbort pid=" << event.tgid << " pod=" << Describe(labels);
      }
      auto it = communicators_.find(process);
      if (it == communicators_.end()) return;
      communicator_count_ -= it->second.erase(event.handle);
      if (it->second.empty()) communicators_.erase(it);
      return;
    }
    case NCCLSCOPE_EVENT_QP_ERROR:
      NCCLSCOPE_LOG(kWarn, "ebpf")
          << "queue pair " << event.qp_num << " moved to the error state pid=" << event.tgid
          << " pod=" << Describe(labels);
      return;
    default:
      return;
  }
}

std::set<ProcessKey> Runtime::DeadInMaps() const {
  std::set<ProcessKey> seen;
  objects_->calls().ForEach([&](const ncclscope_proc_key& key, const auto&) {
    seen.insert({static_cast<pid_t>(key.tgid), key.start_ticks});
  });
  for (const auto& map : {objects_->results(), objects_->qp_states()}) {
    map.ForEach([&](const ncclscope_result_key& key, std::uint64_t) {
      seen.insert({static_cast<pid_t>(key.proc.tgid), key.proc.start_ticks});
    });
  }
  std::set<ProcessKey> dead;
  for (const ProcessKey& p : seen) {
    if (proc::StartTicks(config_.proc_root, p.pid) != p.start_ticks) dead.insert(p);
  }
  return dead;
}

void Runtime::Fold(const std::set<ProcessKey>& dead) {
  if (dead.empty()) return;
  auto is_dead = [&](const ncclscope_proc_key& k) {
    return dead.count({static_cast<pid_t>(k.tgid), k.start_ticks}) != 0;
  };
  auto labels_of = [&](const ncclscope_proc_key& k) {
    return attributor_->For({static_cast<pid_t>(k.tgid), k.start_ticks}, k.cgroup_id);
  };
  std::vector<ncclscope_proc_key> call_keys;
  const auto calls = objects_->calls();
  calls.ForEach([&](const ncclscope_proc_key& key, const ncclscope_call_counts& value) {
    if (!is_dead(key)) return;
    auto& total = totals_.calls[{labels_of(key), key.op}];
    total.calls += value.calls;
    total.bytes += value.bytes;
    call_keys.push_back(key);
  });
  for (const auto& key : call_keys) calls.Delete(key);
  for (const bool qp : {false, true}) {
    const auto map = qp ? objects_->qp_states() : objects_->results();
    std::vector<ncclscope_result_key> keys;
    map.ForEach([&](const ncclscope_result_key& key, std::uint64_t value) {
      if (!is_dead(key.proc)) return;
      if (qp) {
        totals_.qp_states[{labels_of(key.proc), key.value}] += value;
      } else {
        totals_.results[{labels_of(key.proc), key.proc.op, key.value}] += value;
      }
      keys.push_back(key);
    });
    for (const auto& key : keys) map.Delete(key);
  }
  for (const ProcessKey& p : dead) {
    if (auto it = communicators_.find(p); it != communicators_.end()) {
      communicator_count_ -= it->second.size();
      communicators_.erase(it);
    }
    attributor_->Forget(p);
  }
}

}  // namespace ncclscope::ebpf
