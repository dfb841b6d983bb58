#pragma once

// Settings of the detectors (the `detection` section of the config, docs/configuration.md).

#include <cstddef>
#include <string>

namespace ncclscope::analytics::detection {

struct DetectionSettings {
  // A straggler worth a finding makes the node's other ranks wait at least this fraction of the
  // wall time for it (detection.straggler_min_cost): the CUSUM's shift to detect. Its allowance
  // is half of it.
  double straggler_min_cost = 0.05;
  // The CUSUM's decision interval, in seconds of excess waiting (detection.straggler_threshold).
  double straggler_threshold_s = 0.25;
  // Where baselines are kept across restarts of the jobs and the agent; empty: memory only
  // (detection.state_dir).
  std::string state_dir;
  std::size_t baseline_max_keys = 4096;  // detection.baseline_max_keys
};

}  // namespace ncclscope::analytics::detection
