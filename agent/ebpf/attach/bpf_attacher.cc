#include "agent/ebpf/attach/bpf_attacher.h"

#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "agent/ebpf/attach/attached_probe.h"
#include "agent/ebpf/elf/elf_symbols.h"
#include "platform/errno_text.h"

namespace ncclscope::ebpf {
namespace {

// LIBBPF_OPTS without its C99 compound literal.
bpf_uprobe_opts UprobeOpts(std::uint64_t cookie, bool retprobe) {
  bpf_uprobe_opts opts{};
  opts.sz = sizeof(opts);
  opts.bpf_cookie = cookie;
  opts.retprobe = retprobe;
  return opts;
}

class LinkedFile : public AttachedFile {
 public:
  std::size_t probe_count() const override { return links.size(); }
  std::vector<AttachedProbe> links;
};

}  // namespace

std::unique_ptr<AttachedFile> BpfAttacher::Attach(
    const proc::OpenedFile& file, Library /*library*/,
    const std::vector<const ProbedFunction*>& functions, std::vector<std::string>* missing,
    std::string* error) {
  std::string elf_error;
  auto symbols = elf::SymbolFile::Open(file.fd.get(), &elf_error);
  if (!symbols) {
    *error = "ELF: " + elf_error;
    return nullptr;
  }
  std::vector<std::string> names;
  names.reserve(functions.size());
  for (const ProbedFunction* f : functions) names.emplace_back(f->name);
  const auto resolved = symbols->Resolve(names);

  const std::string path = "/proc/self/fd/" + std::to_string(file.fd.get());
  auto attached = std::make_unique<LinkedFile>();
  std::set<std::uint64_t> offsets;
  std::string attach_error;
  for (const ProbedFunction* f : functions) {
    const auto& r = resolved.at(std::string(f->name));
    if (!r.symbol) {
      missing->push_back(std::string(f->name) + " (" + r.error + ")");
      continue;
    }
    // Aliases at one address (ncclX/pncclX) are one probe.
    if (!offsets.insert(r.symbol->offset).second) continue;
    // Return probe first: a call already in flight when the entry probe appears then finds no
    // entry state at its return (ignored), instead of leaving entry state that never pops.
    bpf_uprobe_opts return_opts = UprobeOpts(f->op, /*retprobe=*/true);
    AttachedProbe ret(
        bpf_program__attach_uprobe_opts(return_, -1, path.c_str(), r.symbol->offset, &return_opts));
    if (!ret.valid()) {
      attach_error = std::string(f->name) + " (return): " + platform::ErrnoText(errno).c_str();
      continue;
    }
    bpf_uprobe_opts entry_opts = UprobeOpts(f->op, /*retprobe=*/false);
    AttachedProbe entry(
        bpf_program__attach_uprobe_opts(entry_, -1, path.c_str(), r.symbol->offset, &entry_opts));
    if (!entry.valid()) {
      attach_error = std::string(f->name) + ": " + platform::ErrnoText(errno).c_str();
      continue;
    }
    // Destroyed in this order too: entry before return.
    attached->links.push_back(std::move(entry));
    attached->links.push_back(std::move(ret));
  }
  if (attached->links.empty()) {
    *error = !attach_error.empty() ? "attach failed: " + attach_error
                                   : "none of the selected functions is in the file";
    return nullptr;
  }
  return attached;
}

}  // namespace ncclscope::ebpf
