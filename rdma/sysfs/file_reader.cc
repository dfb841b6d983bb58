#include "rdma/sysfs/file_reader.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <memory>

namespace ncclscope::rdma::sysfs {
namespace {

struct DirCloser {
  void operator()(DIR* dir) const { closedir(dir); }
};

}  // namespace

int PosixFileReader::Read(const std::string& path, std::string* out) {
  // O_NONBLOCK: a FIFO planted in the tree must not hang the poller; sysfs ignores the flag.
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return errno;
  std::array<char, kMaxAttributeBytes> buffer;
  ssize_t n = 0;
  do {
    n = read(fd, buffer.data(), buffer.size());
  } while (n < 0 && errno == EINTR);
  const int saved = n < 0 ? errno : 0;
  close(fd);
  if (n < 0) return saved;
  out->assign(buffer.data(), static_cast<std::size_t>(n));
  return 0;
}

int PosixFileReader::List(const std::string& path, std::vector<std::string>* names) {
  names->clear();
  std::unique_ptr<DIR, DirCloser> dir(opendir(path.c_str()));
  if (!dir) return errno;
  errno = 0;
  while (const dirent* entry = readdir(dir.get())) {  // NOLINT(concurrency-mt-unsafe): own DIR*
    const char* name = entry->d_name;
    if (std::strcmp(name, ".") == 0 || std::strcmp(name, "..") == 0) continue;
    names->emplace_back(name);
  }
  if (errno != 0) return errno;
  std::sort(names->begin(), names->end());
  return 0;
}

int PosixFileReader::ReadLink(const std::string& path, std::string* target) {
  std::array<char, 4096> buffer;
  const ssize_t n = readlink(path.c_str(), buffer.data(), buffer.size());
  if (n < 0) return errno;
  if (static_cast<std::size_t>(n) >= buffer.size()) return ENAMETOOLONG;
  target->assign(buffer.data(), static_cast<std::size_t>(n));
  return 0;
}

bool PosixFileReader::Exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

std::string ErrnoName(int error) {
  switch (error) {
    case 0:
      return "ok";
    case ENOENT:
      return "enoent";
    case EPERM:
      return "eperm";
    case EACCES:
      return "eacces";
    case EINVAL:
      return "einval";
    case EOPNOTSUPP:
      return "eopnotsupp";
    case EISDIR:
      return "eisdir";
    case EIO:
      return "eio";
    case ENODEV:
      return "enodev";
    case EAGAIN:
      return "eagain";
    case ENXIO:
      return "enxio";
    case EBUSY:
      return "ebusy";
    default:
      return "errno_" + std::to_string(error);
  }
}

}  // namespace ncclscope::rdma::sysfs
