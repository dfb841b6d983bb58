#pragma once

// errno as people read it (ErrnoText: "No such file or directory") and as labels carry it
// (ErrnoName: "ENOENT"). One spelling everywhere: every errno-valued label on /metrics is the
// symbolic name as errno(3) and strerrorname_np(3) write it, upper case.

#include <cerrno>
#include <cstring>

#include "platform/fixed_text.h"

namespace ncclscope::platform {

// strerror() without its shared buffer (the agent is multi-threaded; the plugin runs in NCCL's
// threads). glibc's strerror_r is the GNU variant under _GNU_SOURCE (g++ defines it): it returns
// the text, which may or may not be in `buffer`.
inline FixedText<128> ErrnoText(int err) {
  char buffer[128];
  return FixedText<128>(::strerror_r(err, buffer, sizeof(buffer)));
}

// "ENOENT", or `fallback` for a value with no name. Not for the plugin: strerrorname_np is
// glibc 2.32 (the plugin links against 2.17; tests/compat/plugin_symbols.sh would fail).
inline const char* ErrnoName(int err, const char* fallback = "other") {
  if (err <= 0) return fallback;
  const char* name = ::strerrorname_np(err);
  return name != nullptr ? name : fallback;
}

}  // namespace ncclscope::platform
