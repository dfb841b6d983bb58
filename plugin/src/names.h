#pragma once

// NCCL's strings (func, datatype, algo, proto) to the ring's small codes. NCCL passes pointers to
// static strings, so each lookup first tries a tiny pointer-keyed cache (one atomic load); the
// string compare runs once per distinct pointer.

#include <cstdint>

namespace ncclscope::plugin::names {

std::uint8_t Func(const char* name);
std::uint8_t Datatype(const char* name);
std::uint8_t Algo(const char* name);
std::uint8_t Proto(const char* name);

}  // namespace ncclscope::plugin::names
