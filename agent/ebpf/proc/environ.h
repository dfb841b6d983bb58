#pragma once

// /proc/<pid>/environ: the environment a process was exec'd with, NUL-separated NAME=value
// entries. Only the initial one: what the process later sets (setenv, Python's os.environ before
// `import torch` initializes NCCL) stays in its own memory and is never seen here. Written by the
// process's parent, so any bytes; parsed without trusting sizes.

#include <optional>
#include <string_view>

namespace ncclscope::ebpf::proc {

// The value of the first `name=` entry in environ text, or nullopt when there is none. An entry
// cut by the end of `text` (a read at its limit) does not count.
std::optional<std::string_view> EnvironValue(std::string_view text, std::string_view name);

}  // namespace ncclscope::ebpf::proc
