#include "agent/ebpf/proc/maps.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>

#include "platform/fd_io.h"

namespace ncclscope::ebpf::proc {
namespace {

// Consumes one field (up to the next space) from `line`.
std::string_view Field(std::string_view& line) {
  const auto space = line.find(' ');
  std::string_view field = line.substr(0, space);
  line.remove_prefix(space == std::string_view::npos ? line.size() : space + 1);
  return field;
}

template <typename T>
bool Hex(std::string_view text, T& out) {
  if (text.empty()) return false;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out, 16);
  return ec == std::errc() && ptr == text.data() + text.size();
}

std::optional<Mapping> ParseLine(std::string_view line) {
  Mapping m;
  const std::string_view range = Field(line);
  const std::string_view perms = Field(line);
  const std::string_view offset = Field(line);
  const std::string_view dev = Field(line);
  const std::string_view inode = Field(line);
  const auto dash = range.find('-');
  const auto colon = dev.find(':');
  if (dash == std::string_view::npos || colon == std::string_view::npos || perms.size() != 4) {
    return std::nullopt;
  }
  if (!Hex(range.substr(0, dash), m.start) || !Hex(range.substr(dash + 1), m.end) ||
      m.end < m.start || !Hex(offset, m.offset) || !Hex(dev.substr(0, colon), m.dev_major) ||
      !Hex(dev.substr(colon + 1), m.dev_minor)) {
    return std::nullopt;
  }
  const auto [ptr, ec] = std::from_chars(inode.data(), inode.data() + inode.size(), m.inode);
  if (ec != std::errc() || ptr != inode.data() + inode.size()) return std::nullopt;
  m.executable = perms[2] == 'x';
  // The path is the rest of the line after the padding spaces; it may contain spaces itself.
  const auto path_start = line.find_first_not_of(' ');
  if (path_start != std::string_view::npos) {
    std::string_view path = line.substr(path_start);
    constexpr std::string_view kDeleted = " (deleted)";
    if (path.size() > kDeleted.size() && path.substr(path.size() - kDeleted.size()) == kDeleted) {
      m.deleted = true;
      path.remove_suffix(kDeleted.size());
    }
    m.path = std::string(path);
  }
  return m;
}

}  // namespace

std::vector<Mapping> ParseMaps(std::string_view text, std::size_t* bad_lines,
                               std::size_t max_lines) {
  std::vector<Mapping> out;
  std::size_t bad = 0;
  for (std::size_t n = 0; !text.empty() && n < max_lines; ++n) {
    const auto newline = text.find('\n');
    const std::string_view line = text.substr(0, newline);
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    if (line.empty()) continue;
    if (auto m = ParseLine(line)) {
      out.push_back(std::move(*m));
    } else {
      ++bad;
    }
  }
  if (bad_lines != nullptr) *bad_lines = bad;
  return out;
}

std::optional<std::uint64_t> ParseStartTicks(std::string_view stat_text) {
  const auto paren = stat_text.rfind(')');
  if (paren == std::string_view::npos) return std::nullopt;
  std::string_view rest = stat_text.substr(paren + 1);
  // After "(comm)" come field 3 (state) ... field 22 (starttime): skip 19 fields.
  for (int field = 3; field < 22; ++field) {
    rest.remove_prefix(std::min(rest.find_first_not_of(' '), rest.size()));
    const auto space = rest.find(' ');
    if (space == std::string_view::npos) return std::nullopt;
    rest.remove_prefix(space);
  }
  rest.remove_prefix(std::min(rest.find_first_not_of(' '), rest.size()));
  std::uint64_t ticks = 0;
  const auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), ticks);
  if (ec != std::errc() || ptr == rest.data()) return std::nullopt;
  return ticks;
}

std::optional<std::string> ReadProcFile(const std::string& path, std::size_t limit) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buffer[16384];
  while (out.size() < limit) {
    const ssize_t n = platform::ReadRetrying(fd, buffer, sizeof(buffer));
    if (n < 0) {
      close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    out.append(buffer, static_cast<std::size_t>(n));
  }
  close(fd);
  if (out.size() > limit) out.resize(limit);
  return out;
}

std::optional<pid_t> SelfPid(const std::string& proc_root) {
  char target[32];
  const ssize_t n = readlink((proc_root + "/self").c_str(), target, sizeof(target) - 1);
  if (n <= 0) return std::nullopt;
  pid_t pid = 0;
  const auto [end, ec] = std::from_chars(target, target + n, pid);
  if (ec != std::errc() || end != target + n || pid <= 0) return std::nullopt;
  return pid;
}

std::optional<std::uint64_t> StartTicks(const std::string& proc_root, pid_t pid) {
  const auto text = ReadProcFile(proc_root + "/" + std::to_string(pid) + "/stat", 4096);
  if (!text) return std::nullopt;
  return ParseStartTicks(*text);
}

std::vector<pid_t> ListPids(const std::string& proc_root) {
  std::vector<pid_t> pids;
  DIR* dir = opendir(proc_root.c_str());
  if (dir == nullptr) return pids;
  while (const dirent* entry = readdir(dir)) {  // NOLINT(concurrency-mt-unsafe): own DIR*
    pid_t pid = 0;
    const std::string_view name(entry->d_name);
    const auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), pid);
    if (ec == std::errc() && ptr == name.data() + name.size() && pid > 0) pids.push_back(pid);
  }
  closedir(dir);
  return pids;
}

}  // namespace ncclscope::ebpf::proc
