#include "rdma/sysfs/device_filter.h"

namespace ncclscope::rdma::sysfs {
namespace {

std::vector<std::regex> Compile(const std::vector<std::string>& patterns) {
  std::vector<std::regex> out;
  out.reserve(patterns.size());
  for (const std::string& pattern : patterns) {
    out.emplace_back(pattern, std::regex::ECMAScript | std::regex::optimize);
  }
  return out;
}

bool AnyMatch(const std::vector<std::regex>& patterns, const std::string& text) {
  for (const std::regex& pattern : patterns) {
    if (std::regex_search(text, pattern)) return true;
  }
  return false;
}

}  // namespace

DeviceFilter::DeviceFilter(const std::vector<std::string>& include,
                           const std::vector<std::string>& exclude,
                           const std::vector<std::string>& exclude_pci)
    : include_(Compile(include)), exclude_(Compile(exclude)), exclude_pci_(Compile(exclude_pci)) {}

bool DeviceFilter::AcceptsName(const std::string& name) const {
  if (!include_.empty() && !AnyMatch(include_, name)) return false;
  return !AnyMatch(exclude_, name);
}

bool DeviceFilter::AcceptsPci(const std::string& pci_address) const {
  return !AnyMatch(exclude_pci_, pci_address);
}

}  // namespace ncclscope::rdma::sysfs
