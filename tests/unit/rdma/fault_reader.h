#pragma once

// A FileReader over real files that records every path it opens and makes chosen paths fail
// with a chosen errno. Real sysfs returns EINVAL from an attribute whose firmware command fails
// (restricted PFs); no plain file can (a directory gives EISDIR, root ignores permissions, a FIFO
// opened non-blocking reads as empty), so that one errno is injected here, at the exact seam where
// the kernel would produce it. Everything else is read from the test's real fixture tree.

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "rdma/sysfs/file_reader.h"

namespace ncclscope::rdma::testing {

class FaultReader : public sysfs::FileReader {
 public:
  // Paths containing `needle` fail with `error`.
  void Fail(std::string needle, int error) { faults_.emplace_back(std::move(needle), error); }
  void ClearFaults() { faults_.clear(); }
  // Runs before each Read (e.g. to remove a device mid-poll).
  std::function<void(const std::string&)> before_read;

  int Read(const std::string& path, std::string* out) override {
    reads.push_back(path);
    if (before_read) before_read(path);
    for (const auto& [needle, error] : faults_) {
      if (path.find(needle) != std::string::npos) return error;
    }
    return real_.Read(path, out);
  }
  int List(const std::string& path, std::vector<std::string>* names) override {
    lists.push_back(path);
    return real_.List(path, names);
  }
  int ReadLink(const std::string& path, std::string* target) override {
    links.push_back(path);
    return real_.ReadLink(path, target);
  }
  bool Exists(const std::string& path) override { return real_.Exists(path); }

  // Paths opened containing `needle`.
  std::size_t ReadsOf(const std::string& needle) const {
    std::size_t n = 0;
    for (const std::string& path : reads) n += path.find(needle) != std::string::npos ? 1 : 0;
    return n;
  }
  // Any access (read, list, readlink) to a path containing `needle`.
  bool Touched(const std::string& needle) const {
    for (const auto* log : {&reads, &lists, &links}) {
      for (const std::string& path : *log) {
        if (path.find(needle) != std::string::npos) return true;
      }
    }
    return false;
  }

  std::vector<std::string> reads, lists, links;

 private:
  sysfs::PosixFileReader real_;
  std::vector<std::pair<std::string, int>> faults_;
};

}  // namespace ncclscope::rdma::testing
