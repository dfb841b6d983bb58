#include "agent/ebpf/attach/registry.h"

#include "agent/core/log.h"

namespace ncclscope::ebpf {

AttachRegistry::AttachRegistry(Attacher* attacher,
                               std::map<Library, std::vector<const ProbedFunction*>> wanted)
    : attacher_(attacher), wanted_(std::move(wanted)) {}

AttachRegistry::~AttachRegistry() = default;

AttachRegistry::Outcome AttachRegistry::Acquire(const FileIdentity& id, Library library,
                                                const std::string& path, const ProcessKey& process,
                                                const Opener& open, std::string* error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = entries_.find(id); it != entries_.end()) {
    it->second.users.insert(process);
    return it->second.attached ? Outcome::kAlreadyAttached : Outcome::kAlreadyFailed;
  }
  Entry entry{library, path, nullptr, {process}};
  const auto wanted = wanted_.find(library);
  if (wanted == wanted_.end() || wanted->second.empty()) {
    *error = "no functions selected for this library";
  } else if (proc::OpenedFile file = open(error); file.fd.valid()) {
    std::vector<std::string> missing;
    entry.attached = attacher_->Attach(file, library, wanted->second, &missing, error);
    if (entry.attached && !missing.empty()) {
      std::string list;
      for (const auto& name : missing) list += (list.empty() ? "" : ",") + name;
      NCCLSCOPE_LOG(kDebug, "ebpf")
          << "functions not in file dev=" << id.dev << " ino=" << id.ino << ": " << list;
    }
  }
  const bool ok = entry.attached != nullptr;
  if (!ok) ++failures_[static_cast<int>(library)];
  entries_.emplace(id, std::move(entry));
  return ok ? Outcome::kAttached : Outcome::kFailed;
}

void AttachRegistry::Release(const FileIdentity& id, const ProcessKey& process) {
  std::unique_ptr<AttachedFile> detach;  // destroyed outside the lock
  std::string path;
  Library library = Library::kNccl;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    it->second.users.erase(process);
    if (!it->second.users.empty()) return;
    detach = std::move(it->second.attached);
    path = std::move(it->second.path);
    library = it->second.library;
    entries_.erase(it);
  }
  if (detach) {
    NCCLSCOPE_LOG(kInfo, "ebpf") << "detached " << LibraryName(library) << " probes from " << path
                                 << " (dev " << (id.dev >> 32) << ":" << (id.dev & 0xffffffff)
                                 << " ino " << id.ino << "): no process maps it any more";
  }
}

AttachRegistry::Stats AttachRegistry::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  Stats s;
  std::set<ProcessKey> processes[kLibraryCount];
  for (const auto& [id, entry] : entries_) {
    const int lib = static_cast<int>(entry.library);
    if (!entry.attached) continue;
    ++s.files[lib];
    s.probes[lib] += entry.attached->probe_count();
    processes[lib].insert(entry.users.begin(), entry.users.end());
  }
  for (int lib = 0; lib < kLibraryCount; ++lib) {
    s.processes[lib] = processes[lib].size();
    s.failures[lib] = failures_[lib];
  }
  return s;
}

}  // namespace ncclscope::ebpf
