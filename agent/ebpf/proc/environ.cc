#include "agent/ebpf/proc/environ.h"

namespace ncclscope::ebpf::proc {

std::optional<std::string_view> EnvironValue(std::string_view text, std::string_view name) {
  while (!text.empty()) {
    const auto end = text.find('\0');
    if (end == std::string_view::npos) return std::nullopt;  // cut: maybe not all of the value
    const std::string_view entry = text.substr(0, end);
    text.remove_prefix(end + 1);
    // glibc's getenv() takes the first match too.
    if (entry.size() > name.size() && entry[name.size()] == '=' &&
        entry.substr(0, name.size()) == name) {
      return entry.substr(name.size() + 1);
    }
  }
  return std::nullopt;
}

}  // namespace ncclscope::ebpf::proc
