#include "agent/ebpf/discovery.h"

#include "agent/core/log.h"
#include "agent/ebpf/proc/maps.h"
#include "agent/ebpf/proc/root_path.h"

namespace ncclscope::ebpf {
namespace {

// The kernel's internal dev_t (as in super_block->s_dev): major << 20 | minor.
FileIdentity FromKernel(const ncclscope_vma_record& r) {
  return {(std::uint64_t{r.dev} >> 20) << 32 | (r.dev & 0xfffff), r.ino};
}

FileIdentity FromMaps(const proc::Mapping& m) {
  return {std::uint64_t{m.dev_major} << 32 | m.dev_minor, m.inode};
}

std::string Basename(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

Discovery::Discovery(Options options, AttachRegistry* registry, RealFiles real_files)
    : options_(std::move(options)), registry_(registry), real_files_(std::move(real_files)) {
  for (const auto& [library, list] : options_.library_patterns) {
    for (const std::string& pattern : list) {
      patterns_.emplace_back(library, std::regex(pattern, std::regex::ECMAScript));
    }
  }
}

std::optional<Library> Discovery::Match(const std::string& path) const {
  const std::string name = Basename(path);
  for (const auto& [library, regex] : patterns_) {
    if (std::regex_search(name, regex)) return library;
  }
  return std::nullopt;
}

void Discovery::OnExec(pid_t pid, std::uint64_t start_ticks, Clock::time_point now) {
  // The exec itself maps only the executable and its DT_NEEDED libraries: scan at once (a
  // program linked against libnccl), then again as it dlopens more.
  auto delay = options_.first_rescan;
  for (int i = 0; i <= options_.rescans; ++i) {
    if (due_.size() >= options_.max_pending) {
      ++queue_overflows_;
      return;
    }
    due_.push({i == 0 ? now : now + delay, pid, start_ticks});
    if (i > 0) delay *= 4;
  }
}

void Discovery::OnExit(pid_t pid, std::uint64_t start_ticks) { Forget({pid, start_ticks}); }

void Discovery::Forget(const ProcessKey& process) {
  auto it = processes_.find(process);
  if (it == processes_.end()) return;
  for (const Held& held : it->second) registry_->Release(held.id, process);
  processes_.erase(it);
}

void Discovery::RunDue(Clock::time_point now) {
  while (!due_.empty() && due_.top().when <= now) {
    const Due due = due_.top();
    due_.pop();
    // A scan of a pid that now belongs to another process is still a correct scan of that one.
    Scan(due.pid);
  }
}

void Discovery::Sweep() {
  std::set<pid_t> alive;
  for (pid_t pid : proc::ListPids(options_.proc_root)) {
    if (Scan(pid)) alive.insert(pid);
  }
  std::vector<ProcessKey> gone;
  for (const auto& [process, held] : processes_) {
    if (alive.count(process.pid) == 0) gone.push_back(process);
  }
  for (const ProcessKey& process : gone) Forget(process);
}

// A library file a process maps, executable, found by its path in /proc/<pid>/maps.
struct Discovery::Candidate {
  Library library;
  proc::Mapping mapping;
};

bool Discovery::Scan(pid_t pid) {
  ++scans_;
  const std::string dir = options_.proc_root + "/" + std::to_string(pid);
  const auto start = proc::StartTicks(options_.proc_root, pid);
  ForgetExited(pid, start);
  if (!start) return false;
  if (pid == options_.self_pid) return true;
  const ProcessKey process{pid, *start};

  const auto text = proc::ReadProcFile(dir + "/maps");
  if (!text) return false;
  const std::vector<Candidate> candidates = Candidates(*text);
  std::vector<Held> now_held;
  if (!candidates.empty()) {
    std::optional<std::vector<ncclscope_vma_record>> real;
    if (real_files_) real = real_files_(pid);
    for (const Candidate& c : candidates) now_held.push_back(Acquire(process, c, real));
  }
  Hold(process, std::move(now_held));
  return true;
}

// Any tracked process with this pid but another start time (or none: gone) has exited.
void Discovery::ForgetExited(pid_t pid, const std::optional<std::uint64_t>& start) {
  std::vector<ProcessKey> stale;
  for (auto it = processes_.lower_bound({pid, 0}); it != processes_.end() && it->first.pid == pid;
       ++it) {
    if (!start || it->first.start_ticks != *start) stale.push_back(it->first);
  }
  for (const ProcessKey& process : stale) Forget(process);
}

std::vector<Discovery::Candidate> Discovery::Candidates(const std::string& maps) const {
  std::vector<Candidate> candidates;
  std::set<FileIdentity> seen;
  for (proc::Mapping& m : proc::ParseMaps(maps)) {
    if (!m.executable || m.path.empty() || m.path.front() != '/') continue;
    const auto library = Match(m.path);
    if (!library || !seen.insert(FromMaps(m)).second) continue;
    candidates.push_back({*library, std::move(m)});
  }
  return candidates;
}

Discovery::Held Discovery::Acquire(const ProcessKey& process, const Candidate& c,
                                   const std::optional<std::vector<ncclscope_vma_record>>& real) {
  const pid_t pid = process.pid;
  FileIdentity id = FromMaps(c.mapping);
  if (real) {
    for (const auto& r : *real) {
      if (r.vm_start == c.mapping.start) id = FromKernel(r);
    }
  }
  const proc::Mapping& m = c.mapping;
  auto open = [&](std::string* error) {
    return proc::OpenMapping(options_.proc_root, pid, m, error);
  };
  std::string error;
  const std::string shown = m.deleted ? m.path + " (deleted)" : m.path;
  const auto outcome = registry_->Acquire(id, c.library, shown, process, open, &error);
  if (outcome == AttachRegistry::Outcome::kAttached) {
    NCCLSCOPE_LOG(kInfo, "ebpf") << "attached " << LibraryName(c.library) << " probes to " << shown
                                 << " (pid " << pid << ")";
  } else if (outcome == AttachRegistry::Outcome::kFailed) {
    NCCLSCOPE_LOG(kWarn, "ebpf") << "cannot attach " << LibraryName(c.library) << " probes to "
                                 << shown << " (pid " << pid << "): " << error;
  }
  bool known = false;
  if (auto it = processes_.find(process); it != processes_.end()) {
    for (const Held& h : it->second) known |= h.id == id;
  }
  if (!known) {
    NCCLSCOPE_LOG(kDebug, "ebpf") << "process " << pid << " maps " << LibraryName(c.library) << " "
                                  << shown;
  }
  return {c.library, id};
}

// Release what the process no longer maps (dlclose, or a library replaced and reloaded).
void Discovery::Hold(const ProcessKey& process, std::vector<Held> now_held) {
  auto& held = processes_[process];
  for (const Held& old : held) {
    bool still = false;
    for (const Held& h : now_held) still |= h.id == old.id;
    if (!still) registry_->Release(old.id, process);
  }
  if (now_held.empty()) {
    processes_.erase(process);
  } else {
    held = std::move(now_held);
  }
}

std::set<ProcessKey> Discovery::tracked() const {
  std::set<ProcessKey> out;
  for (const auto& [process, held] : processes_) out.insert(process);
  return out;
}

}  // namespace ncclscope::ebpf
