#pragma once

#include <string_view>

namespace ncclscope {

// Filled in by CMake (agent/exporter/build_info.cc.in).
extern const std::string_view kVersion;
extern const std::string_view kRevision;
extern const std::string_view kCompiler;

}  // namespace ncclscope
