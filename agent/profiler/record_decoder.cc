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
// Each check returns the test a record failed (a short expression, logged once per ring and
// reason: RingFile::LogFirstRejections) or nullptr when the record passes.
using Failed = const char*;

// Ranks index series and packed keys: bounded here, once, for every record type.
bool ValidRank(std::int32_t rank) { return rank >= 0 && rank < NCCLSCOPE_MAX_NRANKS; }
bool ValidPeer(std::int32_t peer) { return peer >= -1 && peer < NCCLSCOPE_MAX_NRANKS; }

Failed CheckOpCodes(const ncclscope_op_record& op) {
  if (op.kind < NCCLSCOPE_KIND_COLL || op.kind > NCCLSCOPE_KIND_CE) return "op.kind";
  if (op.func >= NCCLSCOPE_FUNC_COUNT) return "op.func";
  if (op.datatype >= NCCLSCOPE_DT_COUNT) return "op.datatype";
  if (op.algo >= NCCLSCOPE_ALGO_COUNT) return "op.algo";
  if (op.proto >= NCCLSCOPE_PROTO_COUNT) return "op.proto";
  if (!ValidRank(op.rank)) return "op.rank";
  if (!ValidPeer(op.peer)) return "op.peer";
  // A weight multiplies every sum of the record (plugin.record_one_in): bounded as the setting.
  if (op.weight > NCCLSCOPE_MAX_RECORD_ONE_IN) return "op.weight > NCCLSCOPE_MAX_RECORD_ONE_IN";
  return nullptr;
}

Failed CheckOpChannels(const ncclscope_op_record& op) {
  const auto timed = static_cast<std::uint32_t>(__builtin_popcountll(op.channel_mask));
  if (op.n_timed != timed) return "op.n_timed != popcount(op.channel_mask)";
  const std::uint32_t inline_count =
      timed < NCCLSCOPE_OP_INLINE_CHANNELS ? timed : NCCLSCOPE_OP_INLINE_CHANNELS;
  if (op.n_inline != inline_count) return "op.n_inline != min(n_timed, inline channels)";
  const std::uint32_t continuations =
      timed > NCCLSCOPE_OP_INLINE_CHANNELS
          ? (timed - NCCLSCOPE_OP_INLINE_CHANNELS + NCCLSCOPE_OP_CONT_CHANNELS - 1) /
                NCCLSCOPE_OP_CONT_CHANNELS
          : 0;
  // The followers: channel continuations, an OP_DETAIL (HAS_DETAIL), OP_PHASES (HAS_PHASES).
  const std::uint32_t detail = (op.flags & NCCLSCOPE_OP_HAS_DETAIL) != 0 ? 1 : 0;
  if (op.n_continuations > NCCLSCOPE_MAX_OP_FOLLOWERS) return "op.n_continuations > max";
  if (op.n_continuations < continuations + detail) {
    return "op.n_continuations < channel continuations + detail";
  }
  const std::uint32_t phases = op.n_continuations - continuations - detail;
  if ((phases != 0) != ((op.flags & NCCLSCOPE_OP_HAS_PHASES) != 0)) {
    return "op.flags HAS_PHASES != (phase records > 0)";
  }
  const bool timing = (op.flags & NCCLSCOPE_OP_GPU_TIMING) != 0;
  if (timing != (timed != 0)) return "op.flags GPU_TIMING != (n_timed > 0)";
  if (timing && op.gpu_end_ns < op.gpu_start_ns) return "op.gpu_end_ns < op.gpu_start_ns";
  for (std::uint32_t i = 0; i < inline_count; ++i) {
    if (op.ch[i].end_off_ns < op.ch[i].start_off_ns) return "op.ch[i].end_off_ns < start_off_ns";
  }
  return nullptr;
}

Failed CheckOp(const ncclscope_op_record& op) {
  if (Failed failed = CheckOpCodes(op)) return failed;
  if (Failed failed = CheckOpChannels(op)) return failed;
  // Bytes must be what count and datatype say (the plugin sizes "Unknown" as 1 byte).
  std::uint64_t size = ncclscope_datatype_size(op.datatype);
  if (size == 0) size = 1;
  const std::uint64_t bytes = op.count > UINT64_MAX / size ? UINT64_MAX : op.count * size;
  if (bytes != op.bytes) return "op.bytes != op.count * datatype size";  // saturating, as here
  return nullptr;
}

Failed CheckChannels(const ncclscope_op_channels_record& rec) {
  if (rec.part == 0) return "channels.part == 0";
  if (rec.n == 0 || rec.n > NCCLSCOPE_OP_CONT_CHANNELS) return "channels.n";
  if (rec.func >= NCCLSCOPE_FUNC_COUNT) return "channels.func";
  if (!ValidRank(rec.rank)) return "channels.rank";
  for (std::uint32_t i = 0; i < rec.n; ++i) {
    if (rec.ch[i].end_off_ns < rec.ch[i].start_off_ns) {
      return "channels.ch[i].end_off_ns < start_off_ns";
    }
  }
  return nullptr;
}

Failed CheckDetail(const ncclscope_op_detail_record& rec) {
  if (rec.func >= NCCLSCOPE_FUNC_COUNT) return "detail.func";
  if (rec.kernel_variant >= NCCLSCOPE_KV_COUNT) return "detail.kernel_variant";
  if (!ValidRank(rec.rank)) return "detail.rank";
  return nullptr;
}

Failed CheckPhases(const ncclscope_op_phases_record& rec) {
  if (rec.part == 0) return "phases.part == 0";
  if (rec.n == 0 || rec.n > NCCLSCOPE_OP_PHASE_CHANNELS) return "phases.n";
  if (rec.func >= NCCLSCOPE_FUNC_COUNT) return "phases.func";
  if (!ValidRank(rec.rank)) return "phases.rank";
  for (std::uint32_t i = 0; i < rec.n; ++i) {
    if (rec.ch[i].channel >= NCCLSCOPE_MAX_CHANNELS) return "phases.ch[i].channel";
    if (rec.ch[i].present == 0 || rec.ch[i].present >= 1u << NCCLSCOPE_PHASE_COUNT) {
      return "phases.ch[i].present";
    }
    if (i > 0 && rec.ch[i].channel <= rec.ch[i - 1].channel) {
      return "phases.ch[] channels not ascending";
    }
  }
  return nullptr;
}

Failed CheckProxyOp(const ncclscope_proxy_op_record& rec) {
  if (rec.channel >= NCCLSCOPE_MAX_CHANNELS) return "proxy.channel";
  if (rec.is_send > 1) return "proxy.is_send";
  if (rec.func >= NCCLSCOPE_FUNC_COUNT) return "proxy.func";
  if (rec.steps_done < 0) return "proxy.steps_done < 0";
  if (!ValidRank(rec.rank)) return "proxy.rank";
  if (!ValidPeer(rec.peer)) return "proxy.peer";
  if (rec.end_ns < rec.start_ns) return "proxy.end_ns < proxy.start_ns";
  if (rec.weight > NCCLSCOPE_MAX_RECORD_ONE_IN) return "proxy.weight > NCCLSCOPE_MAX_RECORD_ONE_IN";
  return nullptr;
}

Failed CheckCommInit(const ncclscope_comm_init_record& rec) {
  // NCCL 2.23-2.26 (ABI v1-v3) tell the plugin neither the size nor the nodes: 0, unknown.
  const bool size_unknown = rec.nranks == 0 && rec.nnodes == 0 && rec.nccl_abi >= 1 &&
                            rec.nccl_abi <= 3 && ValidRank(rec.rank);
  if (!size_unknown && (rec.nranks <= 0 || rec.nranks > NCCLSCOPE_MAX_NRANKS || rec.rank < 0 ||
                        rec.rank >= rec.nranks || rec.nnodes <= 0 || rec.nnodes > rec.nranks)) {
    return "comm_init nranks, rank or nnodes";
  }
  if (!Terminated(rec.name, sizeof(rec.name))) return "comm_init.name without NUL";
  if (!Terminated(rec.gpu_uuid, sizeof(rec.gpu_uuid))) return "comm_init.gpu_uuid without NUL";
  if (!Terminated(rec.pci_bus_id, sizeof(rec.pci_bus_id)))
    return "comm_init.pci_bus_id without NUL";
  return nullptr;
}

Failed CheckFields(std::uint16_t type, const unsigned char* record) {
  switch (type) {
    case NCCLSCOPE_REC_OP:
      return CheckOp(As<ncclscope_op_record>(record));
    case NCCLSCOPE_REC_OP_CHANNELS:
      return CheckChannels(As<ncclscope_op_channels_record>(record));
    case NCCLSCOPE_REC_PROXY_OP:
      return CheckProxyOp(As<ncclscope_proxy_op_record>(record));
    case NCCLSCOPE_REC_OP_DETAIL:
      return CheckDetail(As<ncclscope_op_detail_record>(record));
    case NCCLSCOPE_REC_OP_PHASES:
      return CheckPhases(As<ncclscope_op_phases_record>(record));
    case NCCLSCOPE_REC_COMM_INIT:
      return CheckCommInit(As<ncclscope_comm_init_record>(record));
    case NCCLSCOPE_REC_COMM_FINALIZE:
      return ValidRank(As<ncclscope_comm_finalize_record>(record).rank) ? nullptr
                                                                        : "comm_finalize.rank";
    default:
      return "header.type";  // not reached: InspectRecord bounded the type first
  }
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

Rejection InspectRecord(const unsigned char* record, std::uint64_t position) {
  const auto header = As<ncclscope_record_header>(record);
  if (header.position != position) return {CorruptReason::kPosition, "header.position"};
  if (header.checksum != ncclscope_checksum(record, NCCLSCOPE_RECORD_SIZE)) {
    return {CorruptReason::kChecksum, "header.checksum"};
  }
  if (header.type == 0 || header.type > NCCLSCOPE_REC_TYPE_MAX) {
    return {CorruptReason::kType, "header.type"};
  }
  if (header.layout != NCCLSCOPE_RECORD_LAYOUT) return {CorruptReason::kLayout, "header.layout"};
  if (Failed failed = CheckFields(header.type, record)) return {CorruptReason::kField, failed};
  return {};
}

CorruptReason ValidateRecord(const unsigned char* record, std::uint64_t position) {
  return InspectRecord(record, position).reason;
}

bool ValidCountKey(std::uint32_t key) {
  const std::uint32_t size = key >> 12 & 0xF;
  return (key & ~0x1FFFFu) == 0 && (key & NCCLSCOPE_COUNT_KEY_VALID) != 0 &&
         (key & 0x1F) < NCCLSCOPE_FUNC_COUNT && (key >> 5 & 0xF) < NCCLSCOPE_ALGO_COUNT &&
         (key >> 9 & 0x7) < NCCLSCOPE_PROTO_COUNT &&
         (size < NCCLSCOPE_SIZE_CLASSES || size == NCCLSCOPE_SIZE_CLASS_OVERFLOW);
}

}  // namespace ncclscope::profiler
