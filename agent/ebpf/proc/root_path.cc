#include "agent/ebpf/proc/root_path.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "platform/errno_text.h"

namespace ncclscope::ebpf::proc {
namespace {

OpenedFile CheckRegular(UniqueFd fd, std::string* error) {
  OpenedFile out;
  if (fstat(fd.get(), &out.st) != 0) {
    *error = std::string("cannot stat: ") + platform::ErrnoText(errno).c_str();
    return out;
  }
  if (!S_ISREG(out.st.st_mode)) {
    *error = "not a regular file";
    return out;
  }
  out.fd = std::move(fd);
  return out;
}

}  // namespace

OpenedFile OpenInRoot(const std::string& root, const std::string& path, std::string* error) {
  if (path.empty() || path.front() != '/') {
    *error = "not an absolute path";
    return {};
  }
  const UniqueFd root_fd(open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd.valid()) {
    *error = "cannot open root " + root + ": " + platform::ErrnoText(errno).c_str();
    return {};
  }
  open_how how{};
  how.flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  const long fd = syscall(SYS_openat2, root_fd.get(), path.c_str(), &how, sizeof(how));
  if (fd < 0) {
    *error = std::string("cannot open in root: ") + platform::ErrnoText(errno).c_str();
    return {};
  }
  return CheckRegular(UniqueFd(static_cast<int>(fd)), error);
}

OpenedFile OpenMappedFile(const std::string& proc_root, pid_t pid, std::uint64_t start,
                          std::uint64_t end, std::string* error) {
  char name[64];
  std::snprintf(name, sizeof(name), "/map_files/%" PRIx64 "-%" PRIx64, start, end);
  const std::string path = proc_root + "/" + std::to_string(pid) + name;
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd.valid()) {
    *error = "cannot open " + path + ": " + platform::ErrnoText(errno).c_str();
    return {};
  }
  return CheckRegular(std::move(fd), error);
}

OpenedFile OpenMapping(const std::string& proc_root, pid_t pid, const Mapping& m,
                       std::string* error) {
  if (!m.deleted) {
    const std::string root = proc_root + "/" + std::to_string(pid) + "/root";
    OpenedFile file = OpenInRoot(root, m.path, error);
    if (file.fd.valid() && file.st.st_ino == m.inode && major(file.st.st_dev) == m.dev_major &&
        minor(file.st.st_dev) == m.dev_minor) {
      return file;
    }
  }
  return OpenMappedFile(proc_root, pid, m.start, m.end, error);
}

}  // namespace ncclscope::ebpf::proc
