#pragma once

// The environment the real plugin reads its settings from, once, at its first init in a process
// (plugin/src/settings.cc). Set it before that init with no other thread running (before main, in
// a test's SetUp before any communicator, or in a fork's child): setenv is not thread-safe.

#include <stdlib.h>

#include <initializer_list>
#include <string>

namespace ncclscope::testing {

// One NCCLSCOPE_<name> variable.
struct PluginSetting {
  const char* name;  // without the NCCLSCOPE_ prefix: "RING_SIZE"
  std::string value;
};

// Sets NCCLSCOPE_RING_DIR to `ring_dir` and the overhead governor off (NCCLSCOPE_OVERHEAD_BUDGET=0)
// unless the environment already sets a budget: tests drive the plugin flat out, and the governor
// would rightly sample less. Then sets each of `settings`, overwriting what the environment says
// ({"OVERHEAD_BUDGET", "0"} insists on the governor off).
inline void SetPluginEnvironment(const std::string& ring_dir,
                                 std::initializer_list<PluginSetting> settings = {}) {
  setenv("NCCLSCOPE_RING_DIR", ring_dir.c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
  setenv("NCCLSCOPE_OVERHEAD_BUDGET", "0", 0);        // NOLINT(concurrency-mt-unsafe)
  for (const PluginSetting& s : settings) {
    // NOLINTNEXTLINE(concurrency-mt-unsafe)
    setenv(("NCCLSCOPE_" + std::string(s.name)).c_str(), s.value.c_str(), 1);
  }
}

}  // namespace ncclscope::testing
