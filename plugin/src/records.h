// Op and network-op records (records.cc): what completing an op or a network op writes.
#pragma once

#include <cstdint>

#include "plugin/src/state.h"

namespace ncclscope::plugin {

// Records the op (unless record_one_in left it out), completes it in the comm table and frees its
// slot. `final_state`: the op's state word with the completing bit set; `now`: the completion
// time when the caller has it (0: read the clock).
void EmitAndFree(OpState* op, std::uint32_t index, std::uint32_t final_state,
                 std::uint16_t extra_flags, std::uint64_t now = 0);

// Writes the network op's PROXY_OP record (unless its op is only counted) and frees its slot.
void EmitProxyOp(ProxyOpState* po, std::uint32_t index, std::uint16_t extra_flags);

}  // namespace ncclscope::plugin
