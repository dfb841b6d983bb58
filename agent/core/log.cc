#include "agent/core/log.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <ctime>

namespace ncclscope::log {
namespace {

std::atomic<Level> g_level{Level::kInfo};

std::string Timestamp() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char buffer[40];
  const std::size_t n = std::strftime(buffer, sizeof(buffer), "%Y-%m-%dT%H:%M:%S", &utc);
  char out[48];
  std::snprintf(out, sizeof(out), "%.*s.%03dZ", static_cast<int>(n), buffer,
                static_cast<int>(millis));
  return out;
}

// logfmt value quoting: always quoted, with \ " and control characters escaped.
void AppendQuoted(std::string& out, std::string_view text) {
  out += '"';
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += '?';
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

}  // namespace

void SetLevel(Level level) { g_level.store(level, std::memory_order_relaxed); }
Level GetLevel() { return g_level.load(std::memory_order_relaxed); }
bool Enabled(Level level) { return level >= g_level.load(std::memory_order_relaxed); }

std::optional<Level> ParseLevel(std::string_view name) {
  if (name == "debug") return Level::kDebug;
  if (name == "info") return Level::kInfo;
  if (name == "warn") return Level::kWarn;
  if (name == "error") return Level::kError;
  return std::nullopt;
}

std::string_view LevelName(Level level) {
  switch (level) {
    case Level::kDebug:
      return "debug";
    case Level::kInfo:
      return "info";
    case Level::kWarn:
      return "warn";
    case Level::kError:
      return "error";
  }
  return "unknown";
}

std::string FormatLine(std::string_view timestamp, Level level, std::string_view component,
                       std::string_view message) {
  std::string line;
  line.reserve(64 + message.size());
  line += "ts=";
  line += timestamp;
  line += " level=";
  line += LevelName(level);
  line += " component=";
  line += component;
  line += " msg=";
  AppendQuoted(line, message);
  line += '\n';
  return line;
}

Line::Line(Level level, std::string_view component) : level_(level), component_(component) {}

Line::~Line() {
  const std::string line = FormatLine(Timestamp(), level_, component_, message_.str());
  // One write(2) per line keeps lines from different threads whole.
  const ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace ncclscope::log
