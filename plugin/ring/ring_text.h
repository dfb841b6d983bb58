#pragma once

// Reading the fixed-size text fields of a ring (header hostname/job id, comm names, GPU ids): the
// writer pads them with NULs but nothing guarantees a terminator (a hostile pod writes what it
// likes, docs/trust-model.md), so a field is read up to its first NUL or its size, never beyond.

#include <cstddef>
#include <cstring>
#include <string>

namespace ncclscope::ring {

template <std::size_t N>
std::string FieldText(const char (&field)[N]) {
  return std::string(field, strnlen(field, N));
}

}  // namespace ncclscope::ring
