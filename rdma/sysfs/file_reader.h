#pragma once

// Bounded reads of small sysfs attribute files. Everything under /sys/class/infiniband belongs to
// the kernel and the HCA firmware: a read can fail with any errno (EINVAL on restricted ports,
// ENOENT when the device vanished), return "N/A (no PMA)", or (in a broken or hostile tree) be a
// FIFO or a huge file. A FileReader never blocks, never reads more than a page, and reports errno
// instead of throwing, so one bad file fails alone.
//
// It is an interface so tests can inject the errnos real sysfs produces and plain files cannot
// (EINVAL from a failed firmware command), and record which files were touched.

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ncclscope::rdma::sysfs {

// The most a sysfs attribute can hold (one page); longer content is cut here.
inline constexpr std::size_t kMaxAttributeBytes = 4096;

class FileReader {
 public:
  virtual ~FileReader() = default;

  // Reads up to kMaxAttributeBytes of `path` into *out. Returns 0 or the errno of the failure.
  virtual int Read(const std::string& path, std::string* out) = 0;

  // Names in directory `path` (no "." or ".."), sorted. Returns 0 or errno. Listing a directory
  // touches no attribute: it never reaches the HCA firmware.
  virtual int List(const std::string& path, std::vector<std::string>* names) = 0;

  // Target of symlink `path` (as written in the link). Returns 0 or errno.
  virtual int ReadLink(const std::string& path, std::string* target) = 0;

  // Whether `path` exists (used to tell "file failed" from "device vanished").
  virtual bool Exists(const std::string& path) = 0;

  // Drops whatever the reader caches about directories (called at each rediscovery, when devices
  // may have been removed and re-created under the same paths).
  virtual void Forget() {}
};

// The real thing. The first read of a file opens it (O_RDONLY|O_NONBLOCK|O_CLOEXEC|O_NOCTTY,
// relative to a cached O_PATH descriptor of its directory, so no path walk through
// class/infiniband's symlinks) and keeps it open; later reads are one pread() at offset 0, which
// makes sysfs (kernfs seq_file) generate the attribute afresh. One syscall per counter instead of
// three: on a 16-port node that is ~1800 syscalls per poll saved. A kept file whose pread fails
// with ENODEV/ENOENT/ESTALE (its device was removed) is closed and opened again by path, which
// then fails as it should. At most kMaxOpenFiles files (and half the RLIMIT_NOFILE soft limit)
// stay open, about 4 KiB of kernel memory each; beyond that files are opened per read. Only
// regular files are kept. Forget() closes everything. Not thread-safe: one poller owns it.
class PosixFileReader : public FileReader {
 public:
  PosixFileReader() = default;
  ~PosixFileReader() override;
  PosixFileReader(const PosixFileReader&) = delete;
  PosixFileReader& operator=(const PosixFileReader&) = delete;

  int Read(const std::string& path, std::string* out) override;
  int List(const std::string& path, std::vector<std::string>* names) override;
  int ReadLink(const std::string& path, std::string* target) override;
  bool Exists(const std::string& path) override;
  void Forget() override;

  static constexpr std::size_t kMaxOpenFiles = 2048;
  std::size_t open_files() const { return files_.size(); }

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  // Cached O_PATH descriptor of directory `dir`, or -1.
  int DirectoryFd(std::string_view dir);
  void Drop(std::string_view dir);
  // Opens `path` for reading (through its directory's descriptor when possible); -1 and errno.
  int OpenFresh(const std::string& path);

  std::unordered_map<std::string, int, Hash, std::equal_to<>> directories_;
  std::unordered_map<std::string, int, Hash, std::equal_to<>> files_;
  std::size_t file_budget_ = 0;  // computed at the first read
};

// Raises this process's RLIMIT_NOFILE soft limit towards the hard limit (at most 65536), so the
// kept-open counter files fit next to everything else; returns the soft limit in force.
std::size_t RaiseOpenFileLimit();

}  // namespace ncclscope::rdma::sysfs
