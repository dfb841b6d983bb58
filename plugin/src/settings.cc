#include "plugin/src/settings.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>

#include "platform/fd_io.h"
#include "platform/file_status.h"
#include "plugin/ring/ncclscope_ring.h"
#include "plugin/ring/regular_file.h"

namespace ncclscope::plugin {
namespace {

std::string_view Trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) {
    text.remove_suffix(1);
  }
  return text;
}

bool ToLowerEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char c = a[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != b[i]) return false;
  }
  return true;
}

// Leading decimal digits of `text` as a number; `rest` gets what follows.
std::optional<std::uint64_t> LeadingNumber(std::string_view text, std::string_view* rest) {
  std::uint64_t value = 0;
  std::size_t i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    if (value > (UINT64_MAX - 9) / 10) return std::nullopt;
    value = value * 10 + static_cast<std::uint64_t>(text[i] - '0');
  }
  if (i == 0) return std::nullopt;
  *rest = text.substr(i);
  return value;
}

std::optional<std::uint64_t> Multiply(std::uint64_t value, std::uint64_t unit) {
  if (unit != 0 && value > UINT64_MAX / unit) return std::nullopt;
  return value * unit;
}

std::optional<std::uint64_t> ParseUint(std::string_view text) {
  text = Trim(text);
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    std::uint64_t value = 0;
    for (char c : text.substr(2)) {
      int digit = -1;
      if (c >= '0' && c <= '9') digit = c - '0';
      if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
      if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
      if (digit < 0 || value > (UINT64_MAX >> 4)) return std::nullopt;
      value = value << 4 | static_cast<std::uint64_t>(digit);
    }
    return value;
  }
  std::string_view rest;
  const auto value = LeadingNumber(text, &rest);
  if (!value || !rest.empty()) return std::nullopt;
  return value;
}

struct Control {
  const char* env;        // environment variable
  const char* key;        // controls-file key
  std::uint32_t pin_bit;  // ncclscope_control_bit, 0 for start-up-only settings
  bool (*apply)(std::string_view value, Settings& settings);
};

template <typename T, typename Parse>
bool Assign(std::string_view value, T& field, Parse parse) {
  const auto parsed = parse(value);
  if (!parsed) return false;
  field = static_cast<T>(*parsed);
  return true;
}

bool InRange(std::uint64_t value, std::uint64_t lo, std::uint64_t hi) {
  return value >= lo && value <= hi;
}

constexpr Control kControls[] = {
    {"NCCLSCOPE_EVENTS", NCCLSCOPE_KEY_EVENTS, NCCLSCOPE_CONTROL_EVENT_MASK,
     [](std::string_view v, Settings& s) { return Assign(v, s.event_mask, ParseEvents); }},
    {"NCCLSCOPE_MIN_BYTES", NCCLSCOPE_KEY_MIN_BYTES, NCCLSCOPE_CONTROL_MIN_BYTES,
     [](std::string_view v, Settings& s) { return Assign(v, s.min_bytes, ParseBytes); }},
    {"NCCLSCOPE_DUTY_PERIOD", NCCLSCOPE_KEY_DUTY_PERIOD, NCCLSCOPE_CONTROL_DUTY_PERIOD,
     [](std::string_view v, Settings& s) {
       const auto ns = ParseDurationNs(v);
       if (!ns || !InRange(*ns, 1'000'000ull, 86'400'000'000'000ull)) return false;
       s.duty_period_ns = *ns;
       return true;
     }},
    {"NCCLSCOPE_KERNEL_DUTY", NCCLSCOPE_KEY_KERNEL_DUTY, NCCLSCOPE_CONTROL_KERNEL_DUTY,
     [](std::string_view v, Settings& s) { return Assign(v, s.kernel_duty_pm, ParseFractionPm); }},
    {"NCCLSCOPE_PROXY_DUTY", NCCLSCOPE_KEY_PROXY_DUTY, NCCLSCOPE_CONTROL_PROXY_DUTY,
     [](std::string_view v, Settings& s) { return Assign(v, s.proxy_duty_pm, ParseFractionPm); }},
    {"NCCLSCOPE_OVERHEAD_BUDGET", NCCLSCOPE_KEY_OVERHEAD_BUDGET, NCCLSCOPE_CONTROL_OVERHEAD_BUDGET,
     [](std::string_view v, Settings& s) {
       return Assign(v, s.overhead_budget_ppm, ParseFractionPpm);
     }},
    {"NCCLSCOPE_RECORD_ONE_IN", NCCLSCOPE_KEY_RECORD_ONE_IN, NCCLSCOPE_CONTROL_RECORD_ONE_IN,
     [](std::string_view v, Settings& s) {
       const auto n = ParseUint(v);
       if (!n || !InRange(*n, 1, NCCLSCOPE_MAX_RECORD_ONE_IN)) return false;
       s.record_one_in = static_cast<std::uint32_t>(*n);
       return true;
     }},
    {"NCCLSCOPE_RECORD_RATE_LIMIT", NCCLSCOPE_KEY_RECORD_RATE_LIMIT,
     NCCLSCOPE_CONTROL_RECORD_RATE_LIMIT,
     [](std::string_view v, Settings& s) {
       const auto n = ParseUint(v);
       if (!n || *n > 1'000'000'000) return false;
       s.record_rate_limit = static_cast<std::uint32_t>(*n);
       return true;
     }},
    {"NCCLSCOPE_OVERHEAD_SAMPLE", nullptr, 0,
     [](std::string_view v, Settings& s) {
       const auto n = ParseUint(v);
       if (!n || !InRange(*n, 1, 65536) || (*n & (*n - 1)) != 0) return false;
       s.overhead_sample = static_cast<std::uint32_t>(*n);
       return true;
     }},
    {"NCCLSCOPE_TEST_SPIN_FILE", nullptr, 0,
     [](std::string_view v, Settings& s) {
       s.test_spin_file.Assign(v);
       return !s.test_spin_file.truncated();
     }},
    {"NCCLSCOPE_RING_SIZE", NCCLSCOPE_KEY_RING_SIZE, 0,
     [](std::string_view v, Settings& s) {
       const auto bytes = ParseBytes(v);
       if (!bytes || !InRange(*bytes, 64u << 10, 1ull << 30)) return false;
       s.ring_bytes = *bytes;
       return true;
     }},
    {"NCCLSCOPE_RING_LANES", "lanes", 0,
     [](std::string_view v, Settings& s) {
       const auto n = ParseUint(v);
       if (!n || !InRange(*n, 1, NCCLSCOPE_MAX_LANES)) return false;
       s.lanes = static_cast<std::uint32_t>(*n);
       return true;
     }},
    {"NCCLSCOPE_COMM_SLOTS", "comm_slots", 0,
     [](std::string_view v, Settings& s) {
       const auto n = ParseUint(v);
       if (!n || !InRange(*n, 1, NCCLSCOPE_MAX_COMM_SLOTS)) return false;
       s.comm_slots = static_cast<std::uint32_t>(*n);
       return true;
     }},
    {"NCCLSCOPE_MAX_OPS", "max_ops", 0,
     [](std::string_view v, Settings& s) {
       const auto n = ParseUint(v);
       if (!n || !InRange(*n, 64, 1u << 22)) return false;
       s.max_ops = static_cast<std::uint32_t>(*n);
       return true;
     }},
    {"NCCLSCOPE_MAX_PROXY_OPS", "max_proxy_ops", 0,
     [](std::string_view v, Settings& s) {
       const auto n = ParseUint(v);
       if (!n || !InRange(*n, 64, 1u << 22)) return false;
       s.max_proxy_ops = static_cast<std::uint32_t>(*n);
       return true;
     }},
    {"NCCLSCOPE_CLOCK", nullptr, 0,
     [](std::string_view v, Settings& s) {
       if (v != "auto" && v != "tsc" && v != "realtime") return false;
       s.clock.Assign(v);
       return true;
     }},
};

bool ApplyOne(const Control& control, std::string_view value, const char* source,
              Settings& settings) {
  if (control.apply(Trim(value), settings)) return true;
  const int shown = value.size() > 200 ? 200 : static_cast<int>(value.size());
  settings.warnings.Add("%s: ignoring bad value \"%.*s\"", source, shown, value.data());
  return false;
}

}  // namespace

void Warnings::Add(const char* format, ...) {
  if (size_ == kMax) {
    ++dropped_;
    return;
  }
  WarningText& text = items_[size_++];
  text.Clear();
  char buffer[WarningText::capacity() + 1];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buffer, sizeof(buffer), format, args);
  va_end(args);
  text.Append(buffer);
}

std::optional<std::uint64_t> ParseBytes(std::string_view text) {
  text = Trim(text);
  std::string_view unit;
  const auto value = LeadingNumber(text, &unit);
  if (!value) return std::nullopt;
  unit = Trim(unit);
  struct Unit {
    const char* name;
    std::uint64_t factor;
  };
  static constexpr Unit kUnits[] = {{"", 1},
                                    {"b", 1},
                                    {"k", 1ull << 10},
                                    {"kb", 1000},
                                    {"kib", 1ull << 10},
                                    {"m", 1ull << 20},
                                    {"mb", 1000000},
                                    {"mib", 1ull << 20},
                                    {"g", 1ull << 30},
                                    {"gb", 1000000000},
                                    {"gib", 1ull << 30}};
  for (const Unit& u : kUnits) {
    if (ToLowerEquals(unit, u.name)) return Multiply(*value, u.factor);
  }
  return std::nullopt;
}

std::optional<std::uint64_t> ParseDurationNs(std::string_view text) {
  text = Trim(text);
  if (text.empty()) return std::nullopt;
  std::uint64_t total = 0;
  while (!text.empty()) {
    std::string_view rest;
    const auto value = LeadingNumber(text, &rest);
    if (!value) return std::nullopt;
    std::size_t unit_len = 0;
    while (unit_len < rest.size() && rest[unit_len] >= 'a' && rest[unit_len] <= 'z') ++unit_len;
    const std::string_view unit = rest.substr(0, unit_len);
    std::uint64_t factor = 0;
    if (unit == "ns") factor = 1;
    if (unit == "us") factor = 1000;
    if (unit == "ms") factor = 1'000'000;
    if (unit == "s") factor = 1'000'000'000;
    if (unit == "m") factor = 60'000'000'000;
    if (unit == "h") factor = 3'600'000'000'000;
    if (factor == 0) return std::nullopt;
    const auto part = Multiply(*value, factor);
    if (!part || total > UINT64_MAX - *part) return std::nullopt;
    total += *part;
    text = rest.substr(unit_len);
  }
  return total;
}

std::optional<std::uint32_t> ParseFractionPm(std::string_view text) {
  text = Trim(text);
  const bool percent = !text.empty() && text.back() == '%';
  if (percent) text.remove_suffix(1);
  std::string_view rest;
  const auto whole = LeadingNumber(text, &rest);
  if (!whole) return std::nullopt;
  std::uint64_t pm = *whole * (percent ? 10 : 1000);
  if (!rest.empty()) {
    if (rest[0] != '.') return std::nullopt;
    std::uint64_t scale = percent ? 1 : 100;  // first fraction digit is worth this many per mille
    for (std::size_t i = 1; i < rest.size(); ++i) {
      if (rest[i] < '0' || rest[i] > '9') return std::nullopt;
      pm += static_cast<std::uint64_t>(rest[i] - '0') * scale;
      scale /= 10;
    }
  }
  if (pm > 1000) return std::nullopt;
  return static_cast<std::uint32_t>(pm);
}

std::optional<std::uint32_t> ParseFractionPpm(std::string_view text) {
  text = Trim(text);
  const bool percent = !text.empty() && text.back() == '%';
  if (percent) text.remove_suffix(1);
  std::string_view rest;
  const auto whole = LeadingNumber(text, &rest);
  if (!whole || *whole > 1'000'000) return std::nullopt;
  std::uint64_t ppm = *whole * (percent ? 10'000 : 1'000'000);
  if (!rest.empty()) {
    if (rest[0] != '.') return std::nullopt;
    // The first fraction digit is worth this many ppm; digits beyond 1 ppm are ignored.
    std::uint64_t scale = percent ? 1'000 : 100'000;
    for (std::size_t i = 1; i < rest.size(); ++i) {
      if (rest[i] < '0' || rest[i] > '9') return std::nullopt;
      ppm += static_cast<std::uint64_t>(rest[i] - '0') * scale;
      scale /= 10;
    }
  }
  if (ppm > 1'000'000) return std::nullopt;
  return static_cast<std::uint32_t>(ppm);
}

std::optional<std::uint32_t> ParseEvents(std::string_view text) {
  text = Trim(text);
  if (const auto number = ParseUint(text)) {
    if (*number > UINT32_MAX || (*number & ~static_cast<std::uint64_t>(kUsableEvents)) != 0) {
      return std::nullopt;
    }
    return static_cast<std::uint32_t>(*number);
  }
  if (text == "none") return 0;
  if (text == "default" || text == "all") return kUsableEvents;
  std::uint32_t mask = 0;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view name = Trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    std::uint32_t bits = 0;
    for (unsigned group = 0; group < NCCLSCOPE_EVENT_GROUP_COUNT; ++group) {
      if (name == ncclscope_event_group_name(group)) bits = ncclscope_event_group_bits(group);
    }
    if (bits == 0) return std::nullopt;
    mask |= bits;
  }
  return mask;
}

EnvLookup ProcessEnv() {
  return EnvLookup(
      [](const void*, const char* name) -> const char* {
        // Read once at init, before any thread of ours exists; NCCL itself reads the environment
        // the same way.
        return std::getenv(name);  // NOLINT(concurrency-mt-unsafe)
      },
      nullptr);
}

PathText ChainPath(const EnvLookup& env) {
  PathText path;
  if (const char* value = env("NCCLSCOPE_CHAIN")) path.Assign(Trim(value));
  return path;
}

void ApplyControlsFile(std::string_view text, Settings& settings) {
  while (!text.empty()) {
    const std::size_t newline = text.find('\n');
    const std::string_view line = Trim(text.substr(0, newline));
    text = newline == std::string_view::npos ? std::string_view() : text.substr(newline + 1);
    if (line.empty() || line[0] == '#') continue;
    const std::size_t eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view key = Trim(line.substr(0, eq));
    const std::string_view value = line.substr(eq + 1);
    for (const Control& control : kControls) {
      if (control.key == nullptr || key != control.key) continue;
      if (control.pin_bit != 0 && (settings.pinned & control.pin_bit) != 0) break;
      ApplyOne(control, value, kControlsFileName, settings);
      break;
    }
  }
}

namespace {

// NCCLSCOPE_RING_DIR, when set and not blank: a directory name longer than PATH_MAX is a bad value
// (warned), not a truncated path.
void ApplyRingDir(const EnvLookup& env, Settings& settings) {
  const char* dir = env("NCCLSCOPE_RING_DIR");
  if (dir == nullptr || dir[0] == '\0') return;
  PathText path(dir);
  if (path.truncated()) {
    settings.warnings.Add("NCCLSCOPE_RING_DIR: ignoring a path longer than %zu bytes",
                          PathText::capacity());
    return;
  }
  settings.ring_dir = path;
}

}  // namespace

void ApplyEnvironment(const EnvLookup& env, Settings& settings) {
  if (const char* disable = env("NCCLSCOPE_DISABLE")) {
    settings.disabled = disable[0] != '\0' && std::string_view(disable) != "0";
  }
  ApplyRingDir(env, settings);
  if (const char* job = env("NCCLSCOPE_JOB_ID")) {
    settings.job_id.Assign(job);
  } else if (const char* slurm = env("SLURM_JOB_ID")) {
    settings.job_id.Assign(slurm);
  }
  for (const Control& control : kControls) {
    const char* value = env(control.env);
    if (value == nullptr) continue;
    if (ApplyOne(control, value, control.env, settings)) settings.pinned |= control.pin_bit;
  }
}

bool ReadControlsFile(const char* dir, platform::PodVector<char>* text, WarningText* problem) {
  problem->Clear();
  const int dirfd = ::open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0) return false;  // no directory yet: nothing to read, nothing to say
  struct stat dir_st {};
  const bool dir_ok = platform::FileStatus(dirfd, &dir_st) == 0;
  struct stat st {};
  const int fd = ring::OpenRegularFile(dirfd, kControlsFileName, O_RDONLY, &st);
  const int open_errno = errno;
  ::close(dirfd);
  if (fd < 0) {
    if (open_errno != ENOENT) problem->Assign("not a regular file, ignored");
    return false;
  }
  // Written by the agent (root, or the directory's owner); anyone else's file, or one that others
  // can write, is not the node's policy.
  const bool trusted_owner =
      st.st_uid == 0 || st.st_uid == ::geteuid() || (dir_ok && st.st_uid == dir_st.st_uid);
  if (!trusted_owner || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    ::close(fd);
    problem->Appendf("owned by uid %u or writable by others, ignored",
                     static_cast<unsigned>(st.st_uid));
    return false;
  }
  if (st.st_size > static_cast<off_t>(kMaxControlsFileBytes)) {
    ::close(fd);
    problem->Appendf("larger than %zu bytes, ignored", kMaxControlsFileBytes);
    return false;
  }
  if (!text->Resize(kMaxControlsFileBytes + 1)) {
    ::close(fd);
    problem->Assign("no memory to read it, ignored");
    return false;
  }
  const std::size_t got = platform::ReadUpTo(fd, text->begin(), text->size());
  ::close(fd);
  if (got > kMaxControlsFileBytes) {  // grew while read
    problem->Appendf("larger than %zu bytes, ignored", kMaxControlsFileBytes);
    return false;
  }
  text->Resize(got);
  return true;
}

Settings LoadSettings(const EnvLookup& env) {
  Settings settings;
  // The directory decides where the controls file is, so take it from the environment first.
  ApplyRingDir(env, settings);
  platform::PodVector<char> text;
  WarningText problem;
  if (ReadControlsFile(settings.ring_dir.c_str(), &text, &problem)) {
    // Pins are not known yet; the environment is applied afterwards and wins anyway.
    ApplyControlsFile(std::string_view(text.begin(), text.size()), settings);
  } else if (!problem.empty()) {
    settings.warnings.Add("%s: %s", kControlsFileName, problem.c_str());
  }
  ApplyEnvironment(env, settings);
  return settings;
}

}  // namespace ncclscope::plugin
