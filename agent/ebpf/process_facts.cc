#include "agent/ebpf/process_facts.h"

#include <strings.h>

#include <algorithm>

#include "agent/core/log.h"
#include "agent/ebpf/proc/environ.h"
#include "agent/ebpf/proc/root_path.h"

namespace ncclscope::ebpf {
namespace {

// The plugin's file name (plugin/CMakeLists.txt); NCCL_PROFILER_PLUGIN=ncclscope makes NCCL
// dlopen "libnccl-profiler-ncclscope.so" (src/plugin/plugin_open.cc:91 at v2.28.9-1).
constexpr std::string_view kPluginFilePrefix = "libnccl-profiler-ncclscope";
constexpr std::string_view kPluginVariable = "NCCL_PROFILER_PLUGIN";

constexpr std::chrono::seconds kFirstMapsReread{2};
constexpr std::chrono::seconds kMaxMapsReread{64};

std::string_view Basename(std::string_view path) {
  const auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace

PluginRequest RequestFromValue(const std::optional<std::string_view>& value) {
  if (!value || value->empty()) return PluginRequest::kNotRequested;
  if (value->size() == 4 && strncasecmp(value->data(), "none", 4) == 0) {
    return PluginRequest::kNotRequested;
  }
  if (value->find("ncclscope") != std::string_view::npos) return PluginRequest::kNcclscope;
  return PluginRequest::kOther;
}

ProcessFactsReader::ProcessFactsReader(Options options, ErrorCounters* errors)
    : options_(std::move(options)), errors_(errors) {
  for (const std::string& pattern : options_.nccl_libraries) {
    nccl_patterns_.emplace_back(pattern, std::regex::ECMAScript);
  }
}

void ProcessFactsReader::Count(const char* kind) {
  if (errors_ != nullptr) errors_->Add(kind);
}

bool ProcessFactsReader::Alive(const ProcessKey& process) const {
  return proc::StartTicks(options_.proc_root, process.pid) == process.start_ticks;
}

std::optional<ProcessFacts> ProcessFactsReader::Get(const ProcessKey& process, bool covered,
                                                    Clock::time_point now) {
  auto [it, fresh] = processes_.try_emplace(process);
  Entry& entry = it->second;
  const bool maps_due = fresh || (!covered && now >= entry.next_maps_read);
  // The environment again only when it could not be read: it never changes after exec.
  if ((fresh || (maps_due && !entry.environ_read)) && !ReadEnviron(process, entry)) {
    processes_.erase(it);
    return std::nullopt;
  }
  if (maps_due) {
    if (!ReadMaps(process, entry)) {
      processes_.erase(it);
      return std::nullopt;
    }
    entry.maps_interval = fresh
                              ? Clock::duration(kFirstMapsReread)
                              : std::min<Clock::duration>(entry.maps_interval * 2, kMaxMapsReread);
    entry.next_maps_read = now + entry.maps_interval;
  }
  return entry.facts;
}

bool ProcessFactsReader::ReadEnviron(const ProcessKey& process, Entry& entry) {
  const std::string path = options_.proc_root + "/" + std::to_string(process.pid) + "/environ";
  const auto text = proc::ReadProcFile(path, options_.max_environ_bytes);
  // Checked after the read: a pid reused meanwhile would lend another process's environment.
  if (!Alive(process)) return false;
  if (!text) {
    Count("environ_read");
    NCCLSCOPE_LOG(kDebug, "ebpf") << "cannot read " << path;
    entry.facts.request = PluginRequest::kUnknown;
    return true;
  }
  const auto value = proc::EnvironValue(*text, kPluginVariable);
  entry.environ_read = true;
  if (!value && text->size() >= options_.max_environ_bytes) {
    entry.facts.request = PluginRequest::kUnknown;  // the variable may be in the part not read
    return true;
  }
  entry.facts.request = RequestFromValue(value);
  return true;
}

bool ProcessFactsReader::ReadMaps(const ProcessKey& process, Entry& entry) {
  const std::string path = options_.proc_root + "/" + std::to_string(process.pid) + "/maps";
  const auto text = proc::ReadProcFile(path, options_.max_maps_bytes);
  if (!Alive(process)) return false;
  if (!text) {
    Count("maps_read");
    NCCLSCOPE_LOG(kDebug, "ebpf") << "cannot read " << path;
    return true;
  }
  bool plugin = false;
  std::optional<proc::Mapping> nccl;
  for (proc::Mapping& m : proc::ParseMaps(*text)) {
    const std::string_view name = Basename(m.path);
    if (name.substr(0, kPluginFilePrefix.size()) == kPluginFilePrefix) plugin = true;
    if (nccl || !m.executable || m.path.empty() || m.path.front() != '/') continue;
    const std::string file(name);
    for (const std::regex& pattern : nccl_patterns_) {
      if (std::regex_search(file, pattern)) {
        nccl = std::move(m);
        break;
      }
    }
  }
  entry.facts.plugin_mapped = plugin;
  if (!nccl) return true;
  const FileIdentity id{std::uint64_t{nccl->dev_major} << 32 | nccl->dev_minor, nccl->inode};
  entry.facts.nccl_library = nccl->path;
  entry.nccl_file = id;
  auto known = versions_.find(id);
  if (known == versions_.end() && versions_.size() < options_.max_library_files) {
    ReadVersion(process.pid, *nccl, id);
    known = versions_.find(id);
  }
  entry.facts.nccl_version = known != versions_.end() ? known->second : std::nullopt;
  return true;
}

void ProcessFactsReader::ReadVersion(pid_t pid, const proc::Mapping& mapping,
                                     const FileIdentity& id) {
  std::string error;
  const proc::OpenedFile file = proc::OpenMapping(options_.proc_root, pid, mapping, &error);
  if (!file.fd.valid()) {
    // Not cached: the next read of the maps tries again (the process may have exited).
    Count("nccl_version_read");
    NCCLSCOPE_LOG(kDebug, "ebpf") << "cannot open " << mapping.path << " (pid " << pid
                                  << ") for its NCCL version: " << error;
    return;
  }
  auto version = elf::ReadNcclVersion(file.fd.get(), &error, options_.version_limits);
  if (!version) {
    // Cached as unknown: the same file gives the same answer, logged once.
    Count("nccl_version_read");
    NCCLSCOPE_LOG(kWarn, "ebpf") << "no NCCL version in " << mapping.path << " (pid " << pid
                                 << "): " << error;
  }
  versions_.emplace(id, version);
}

void ProcessFactsReader::Retain(const std::set<ProcessKey>& live) {
  std::set<FileIdentity> mapped;
  for (auto it = processes_.begin(); it != processes_.end();) {
    if (live.count(it->first) == 0) {
      it = processes_.erase(it);
      continue;
    }
    if (it->second.nccl_file) mapped.insert(*it->second.nccl_file);
    ++it;
  }
  for (auto it = versions_.begin(); it != versions_.end();) {
    it = mapped.count(it->first) == 0 ? versions_.erase(it) : std::next(it);
  }
}

}  // namespace ncclscope::ebpf
