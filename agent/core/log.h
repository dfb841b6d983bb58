#pragma once

// Leveled logging to stderr, one logfmt line per message:
//   ts=2026-11-30T12:00:00.123Z level=info component=exporter msg="serving metrics on 0.0.0.0:9824"
// Use through NCCLSCOPE_LOG so a disabled level costs one atomic load and builds no string.

#include <optional>
#include <sstream>
#include <string>
#include <string_view>

namespace ncclscope::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

void SetLevel(Level level);
Level GetLevel();
bool Enabled(Level level);
std::optional<Level> ParseLevel(std::string_view name);
std::string_view LevelName(Level level);

// One log line; written (atomically, as a single write) when destroyed.
class Line {
 public:
  Line(Level level, std::string_view component);
  ~Line();
  Line(const Line&) = delete;
  Line& operator=(const Line&) = delete;

  template <typename T>
  Line& operator<<(const T& value) {
    message_ << value;
    return *this;
  }

 private:
  Level level_;
  std::string_view component_;
  std::ostringstream message_;
};

// Formats a complete line; exposed for tests.
std::string FormatLine(std::string_view timestamp, Level level, std::string_view component,
                       std::string_view message);

}  // namespace ncclscope::log

#define NCCLSCOPE_LOG(level, component)                           \
  if (!::ncclscope::log::Enabled(::ncclscope::log::Level::level)) \
    ;                                                             \
  else                                                            \
    ::ncclscope::log::Line(::ncclscope::log::Level::level, component)
