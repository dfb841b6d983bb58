#include "agent/profiler/record_decoder.h"

#include <cstring>

namespace ncclscope::profiler {
namespace {

template <typename T>
T As(const unsigned char* record) {
  T value{};
  std::memcpy(&value, record, sizeof(T));
  return value;
}

bool Terminated(const char* text, std::size_t capacity) {
  return std::memchr(text, '\0', capacity) != nullptr;
}

// Ranks index series and packed keys: bounded here, once, for every record type.
bool ValidRank(std::int32_t rank) { return rank >= 0 && rank < NCCLSCOPE_MAX_NRANKS; }
bool ValidPeer(std::int32_t peer) { return peer >= -1 && peer < NCCLSCOPE_MAX_NRANKS; }

bool ValidOp(const ncclscope_op_record& op) {
  if (op.kind < NCCLSCOPE_KIND_COLL || op.kind > NCCLSCOPE_KIND_CE) return false;
  if (op.func >= NCCLSCOPE_FUNC_COUNT || op.datatype >= NCCLSCOPE_DT_COUNT ||
      op.algo >= NCCLSCOPE_ALGO_COUNT || op.proto >= NCCLSCOPE_PROTO_COUNT) {
    return false;
  }
  if (!ValidRank(op.rank) || !ValidPeer(op.peer)) return false;
  // A weight multiplies every sum of the record (plugin.record_one_in): bounded as the setting.
  if (op.weight > NCCLSCOPE_MAX_RECORD_ONE_IN) return false;
  const auto timed = static_cast<std::uint32_t>(__builtin_popcountll(op.channel_mask));
  if (op.n_timed != timed) return false;
  const std::uint32_t inline_count =
      timed < NCCLSCOPE_OP_INLINE_CHANNELS ? timed : NCCLSCOPE_OP_INLINE_CHANNELS;
  if (op.n_inline != inline_count) return false;
  const std::uint32_t continuations =
      timed > NCCLSCOPE_OP_INLINE_CHANNELS
          ? (timed - NCCLSCOPE_OP_INLINE_CHANNELS + NCCLSCOPE_OP_CONT_CHANNELS - 1) /
                NCCLSCOPE_OP_CONT_CHANNELS
          : 0;
  // The followers: channel continuations, an OP_DETAIL (HAS_DETAIL), OP_PHASES (HAS_PHASES).
  const std::uint32_t detail = (op.flags & NCCLSCOPE_OP_HAS_DETAIL) != 0 ? 1 : 0;
  if (op.n_continuations > NCCLSCOPE_MAX_OP_FOLLOWERS ||
      op.n_continuations < continuations + detail) {
    return false;
  }
  const std::uint32_t phases = op.n_continuations - continuations - detail;
  if ((phases != 0) != ((op.flags & NCCLSCOPE_OP_HAS_PHASES) != 0)) return false;
  const bool timing = (op.flags & NCCLSCOPE_OP_GPU_TIMING) != 0;
  if (timing != (timed != 0)) return false;
  if (timing && op.gpu_end_ns < op.gpu_start_ns) return false;
  for (std::uint32_t i = 0; i < inline_count; ++i) {
    if (op.ch[i].end_off_ns < op.ch[i].start_off_ns) return false;
  }
  // Bytes must be what count and datatype say (the plugin sizes "Unknown" as 1 byte).
  std::uint64_t size = ncclscope_datatype_size(op.datatype);
  if (size == 0) size = 1;
  const std::uint64_t bytes = op.count > UINT64_MAX / size ? UINT64_MAX : op.count * size;
  if (bytes != op.bytes) return false;  // the plugin saturates, as here
  return true;
}

bool ValidChannels(const ncclscope_op_channels_record& rec) {
  if (rec.part == 0 || rec.n == 0 || rec.n > NCCLSCOPE_OP_CONT_CHANNELS) return false;
  if (rec.func >= NCCLSCOPE_FUNC_COUNT || !ValidRank(rec.rank)) return false;
  for (std::uint32_t i = 0; i < rec.n; ++i) {
    if (rec.ch[i].end_off_ns < rec.ch[i].start_off_ns) return false;
  }
  return true;
}

bool ValidDetail(const ncclscope_op_detail_record& rec) {
  return rec.func < NCCLSCOPE_FUNC_COUNT && rec.kernel_variant < NCCLSCOPE_KV_COUNT &&
         ValidRank(rec.rank);
}

bool ValidPhases(const ncclscope_op_phases_record& rec) {
  if (rec.part == 0 || rec.n == 0 || rec.n > NCCLSCOPE_OP_PHASE_CHANNELS) return false;
  if (rec.func >= NCCLSCOPE_FUNC_COUNT || !ValidRank(rec.rank)) return false;
  for (std::uint32_t i = 0; i < rec.n; ++i) {
    if (rec.ch[i].channel >= NCCLSCOPE_MAX_CHANNELS || rec.ch[i].present == 0 ||
        rec.ch[i].present >= 1u << NCCLSCOPE_PHASE_COUNT) {
      return false;
    }
    if (i > 0 && rec.ch[i].channel <= rec.ch[i - 1].channel) return false;  // ascending
  }
  return true;
}

bool ValidProxyOp(const ncclscope_proxy_op_record& rec) {
  if (rec.channel >= NCCLSCOPE_MAX_CHANNELS || rec.is_send > 1) return false;
  if (rec.func >= NCCLSCOPE_FUNC_COUNT || rec.steps_done < 0 || !ValidRank(rec.rank) ||
      !ValidPeer(rec.peer)) {
    return false;
  }
  if (rec.end_ns < rec.start_ns) return false;
  if (rec.weight > NCCLSCOPE_MAX_RECORD_ONE_IN) return false;
  return true;
}

bool ValidCommInit(const ncclscope_comm_init_record& rec) {
  // NCCL 2.23-2.26 (ABI v1-v3) tell the plugin neither the size nor the nodes: 0, unknown.
  const bool size_unknown = rec.nranks == 0 && rec.nnodes == 0 && rec.nccl_abi >= 1 &&
                            rec.nccl_abi <= 3 && ValidRank(rec.rank);
  if (!size_unknown && (rec.nranks <= 0 || rec.nranks > NCCLSCOPE_MAX_NRANKS || rec.rank < 0 ||
                        rec.rank >= rec.nranks || rec.nnodes <= 0 || rec.nnodes > rec.nranks)) {
    return false;
  }
  return Terminated(rec.name, sizeof(rec.name)) && Terminated(rec.gpu_uuid, sizeof(rec.gpu_uuid)) &&
         Terminated(rec.pci_bus_id, sizeof(rec.pci_bus_id));
}

}  // namespace

std::string_view CorruptReasonName(CorruptReason reason) {
  switch (reason) {
    case CorruptReason::kNone:
      return "none";
    case CorruptReason::kType:
      return "type";
    case CorruptReason::kLayout:
      return "layout";
    case CorruptReason::kChecksum:
      return "checksum";
    case CorruptReason::kPosition:
      return "position";
    case CorruptReason::kField:
      return "field";
    case CorruptReason::kContinuation:
      return "continuation";
    case CorruptReason::kCount:
      break;
  }
  return "unknown";
}

CorruptReason ValidateRecord(const unsigned char* record, std::uint64_t position) {
  const auto header = As<ncclscope_record_header>(record);
  if (header.position != position) return CorruptReason::kPosition;
  if (header.checksum != ncclscope_checksum(record, NCCLSCOPE_RECORD_SIZE)) {
    return CorruptReason::kChecksum;
  }
  if (header.type == 0 || header.type > NCCLSCOPE_REC_TYPE_MAX) return CorruptReason::kType;
  if (header.layout != NCCLSCOPE_RECORD_LAYOUT) return CorruptReason::kLayout;
  bool ok = true;
  switch (header.type) {
    case NCCLSCOPE_REC_OP:
      ok = ValidOp(As<ncclscope_op_record>(record));
      break;
    case NCCLSCOPE_REC_OP_CHANNELS:
      ok = ValidChannels(As<ncclscope_op_channels_record>(record));
      break;
    case NCCLSCOPE_REC_PROXY_OP:
      ok = ValidProxyOp(As<ncclscope_proxy_op_record>(record));
      break;
    case NCCLSCOPE_REC_OP_DETAIL:
      ok = ValidDetail(As<ncclscope_op_detail_record>(record));
      break;
    case NCCLSCOPE_REC_OP_PHASES:
      ok = ValidPhases(As<ncclscope_op_phases_record>(record));
      break;
    case NCCLSCOPE_REC_COMM_INIT:
      ok = ValidCommInit(As<ncclscope_comm_init_record>(record));
      break;
    case NCCLSCOPE_REC_COMM_FINALIZE:
      ok = ValidRank(As<ncclscope_comm_finalize_record>(record).rank);
      break;
    default:
      return CorruptReason::kType;
  }
  return ok ? CorruptReason::kNone : CorruptReason::kField;
}

bool ValidCountKey(std::uint32_t key) {
  const std::uint32_t size = key >> 12 & 0xF;
  return (key & ~0x1FFFFu) == 0 && (key & NCCLSCOPE_COUNT_KEY_VALID) != 0 &&
         (key & 0x1F) < NCCLSCOPE_FUNC_COUNT && (key >> 5 & 0xF) < NCCLSCOPE_ALGO_COUNT &&
         (key >> 9 & 0x7) < NCCLSCOPE_PROTO_COUNT &&
         (size < NCCLSCOPE_SIZE_CLASSES || size == NCCLSCOPE_SIZE_CLASS_OVERFLOW);
}

}  // namespace ncclscope::profiler
