#include "agent/ebpf/functions.h"

#include <cstring>

#include "ncclscope/bpf_intf.h"
#include "platform/errno_text.h"

namespace ncclscope::ebpf {

std::string_view LibraryName(Library library) {
  return library == Library::kNccl ? "nccl" : "ibverbs";
}

const std::vector<ProbedFunction>& AllFunctions() {
  using L = Library;
  static const std::vector<ProbedFunction> kFunctions = {
      {"ncclAllReduce", L::kNccl, NCCLSCOPE_OP_ALL_REDUCE, true, "collective"},
      {"ncclBroadcast", L::kNccl, NCCLSCOPE_OP_BROADCAST, true, "collective"},
      {"ncclBcast", L::kNccl, NCCLSCOPE_OP_BCAST, true, "collective (in-place broadcast)"},
      {"ncclReduce", L::kNccl, NCCLSCOPE_OP_REDUCE, true, "collective"},
      {"ncclAllGather", L::kNccl, NCCLSCOPE_OP_ALL_GATHER, true, "collective (bytes: sendcount)"},
      {"ncclReduceScatter", L::kNccl, NCCLSCOPE_OP_REDUCE_SCATTER, true,
       "collective (bytes: recvcount)"},
      {"ncclAlltoAll", L::kNccl, NCCLSCOPE_OP_ALL_TO_ALL, true, "collective (NCCL >= 2.28)"},
      {"ncclGather", L::kNccl, NCCLSCOPE_OP_GATHER, true, "collective (NCCL >= 2.28)"},
      {"ncclScatter", L::kNccl, NCCLSCOPE_OP_SCATTER, true, "collective (NCCL >= 2.28)"},
      {"ncclSend", L::kNccl, NCCLSCOPE_OP_SEND, true, "point-to-point"},
      {"ncclRecv", L::kNccl, NCCLSCOPE_OP_RECV, true, "point-to-point"},
      {"ncclGroupStart", L::kNccl, NCCLSCOPE_OP_GROUP_START, false, "group"},
      {"ncclGroupEnd", L::kNccl, NCCLSCOPE_OP_GROUP_END, false, "group"},
      {"ncclCommInitRank", L::kNccl, NCCLSCOPE_OP_COMM_INIT_RANK, false, "communicator init"},
      {"ncclCommInitRankConfig", L::kNccl, NCCLSCOPE_OP_COMM_INIT_RANK_CONFIG, false,
       "communicator init"},
      {"ncclCommInitRankScalable", L::kNccl, NCCLSCOPE_OP_COMM_INIT_RANK_SCALABLE, false,
       "communicator init (NCCL >= 2.23)"},
      {"ncclCommInitAll", L::kNccl, NCCLSCOPE_OP_COMM_INIT_ALL, false,
       "communicator init (one per device)"},
      {"ncclCommSplit", L::kNccl, NCCLSCOPE_OP_COMM_SPLIT, false, "communicator split"},
      {"ncclCommFinalize", L::kNccl, NCCLSCOPE_OP_COMM_FINALIZE, false, "communicator finalize"},
      {"ncclCommDestroy", L::kNccl, NCCLSCOPE_OP_COMM_DESTROY, false, "communicator destroy"},
      {"ncclCommAbort", L::kNccl, NCCLSCOPE_OP_COMM_ABORT, false, "communicator abort"},
      {"ncclCommCount", L::kNccl, NCCLSCOPE_OP_COMM_COUNT, false,
       "size query (fills nranks of split communicators)"},
      {"ncclCommUserRank", L::kNccl, NCCLSCOPE_OP_COMM_USER_RANK, false,
       "rank query (fills rank of split communicators)"},
      {"ibv_create_qp", L::kIbverbs, NCCLSCOPE_OP_IBV_CREATE_QP, false, "queue pair creation"},
      {"ibv_modify_qp", L::kIbverbs, NCCLSCOPE_OP_IBV_MODIFY_QP, false,
       "queue pair state transitions"},
      {"ibv_destroy_qp", L::kIbverbs, NCCLSCOPE_OP_IBV_DESTROY_QP, false, "queue pair teardown"},
      {"ibv_reg_mr", L::kIbverbs, NCCLSCOPE_OP_IBV_REG_MR, true, "memory registration"},
      {"ibv_reg_mr_iova2", L::kIbverbs, NCCLSCOPE_OP_IBV_REG_MR_IOVA2, true,
       "memory registration (what NCCL calls)"},
      {"ibv_reg_dmabuf_mr", L::kIbverbs, NCCLSCOPE_OP_IBV_REG_DMABUF_MR, true,
       "dma-buf memory registration (GPUDirect RDMA)"},
      {"ibv_dereg_mr", L::kIbverbs, NCCLSCOPE_OP_IBV_DEREG_MR, false, "memory deregistration"},
  };
  return kFunctions;
}

const ProbedFunction* FindFunction(std::string_view name) {
  for (const ProbedFunction& f : AllFunctions()) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

const ProbedFunction* FunctionForOp(std::uint32_t op) {
  for (const ProbedFunction& f : AllFunctions()) {
    if (f.op == op) return &f;
  }
  return nullptr;
}

std::vector<std::string> DefaultFunctionNames(Library library) {
  std::vector<std::string> names;
  for (const ProbedFunction& f : AllFunctions()) {
    if (f.library == library) names.emplace_back(f.name);
  }
  return names;
}

std::string ResultName(std::uint32_t op, std::int64_t value) {
  if (op < NCCLSCOPE_OP_IBV_FIRST) {
    static const char* const kNames[] = {
        "ncclSuccess",         "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError",
        "ncclInvalidArgument", "ncclInvalidUsage",       "ncclRemoteError", "ncclInProgress"};
    if (value >= 0 && value < 8) return kNames[value];
    return "other";
  }
  if (value == NCCLSCOPE_RESULT_NULL) return "null";
  // Verbs return positive errno values (some providers return them negated).
  const std::int64_t errnum = value < 0 ? -value : value;
  return errnum < 4096 ? platform::ErrnoName(static_cast<int>(errnum)) : "other";
}

std::string_view QpStateName(std::int64_t state) {
  static constexpr std::string_view kNames[] = {"RESET", "INIT", "RTR", "RTS",
                                                "SQD",   "SQE",  "ERR", "UNKNOWN"};
  if (state >= 0 && state < 8) return kNames[state];
  return "UNKNOWN";
}

}  // namespace ncclscope::ebpf
