#pragma once

#include <string>
#include <system_error>

namespace ncclscope::ebpf {

// strerror() without its shared buffer (the agent is multi-threaded).
inline std::string ErrnoText(int err) { return std::generic_category().message(err); }

}  // namespace ncclscope::ebpf
