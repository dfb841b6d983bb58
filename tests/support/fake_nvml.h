#pragma once

// Driving the fake libnvidia-ml.so.1 (tests/support/fake_nvml/fake_nvml.c) from tests: its state
// file format is described there. The library path comes from NCCLSCOPE_FAKE_NVML (set by CMake).

#include <string>

namespace ncclscope::testing {

// Replaces the fake's state file atomically (the fake re-reads it when it changes).
void WriteFakeNvmlState(const std::string& path, const std::string& content);

}  // namespace ncclscope::testing
