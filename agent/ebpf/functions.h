#pragma once

// The functions the eBPF source can probe: their names in the libraries, which library, and the
// op id the BPF programs know them by (bpf/include/ncclscope/bpf_intf.h). Also the label values
// for results and queue-pair states.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ncclscope::ebpf {

enum class Library { kNccl = 0, kIbverbs = 1 };
inline constexpr int kLibraryCount = 2;

std::string_view LibraryName(Library library);  // "nccl", "ibverbs"

struct ProbedFunction {
  std::string_view name;  // symbol (bare name: the ELF reader picks the default version)
  Library library;
  std::uint32_t op;  // enum ncclscope_op
  bool has_bytes;    // exports bytes
  std::string_view doc;
};

const std::vector<ProbedFunction>& AllFunctions();
const ProbedFunction* FindFunction(std::string_view name);
const ProbedFunction* FunctionForOp(std::uint32_t op);
std::vector<std::string> DefaultFunctionNames(Library library);

// Label value for a non-success result of `op`: the ncclResult_t name for NCCL, the errno name
// (e.g. "EINVAL") for libibverbs int returns, "null" for libibverbs pointer returns.
std::string ResultName(std::uint32_t op, std::int64_t value);

// "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR", "UNKNOWN".
std::string_view QpStateName(std::int64_t state);

}  // namespace ncclscope::ebpf
