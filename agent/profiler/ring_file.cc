#include "agent/profiler/ring_file.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "agent/core/log.h"
#include "agent/profiler/guarded_memory.h"
#include "platform/fd_io.h"
#include "plugin/ring/regular_file.h"
#include "plugin/ring/ring_text.h"

namespace ncclscope::profiler {
namespace {

// Records that may follow an op in its group (channel continuations, detail, phases).
constexpr std::uint32_t kMaxContinuations = NCCLSCOPE_MAX_OP_FOLLOWERS;

std::string BaseName(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool Aligned(std::uint64_t value) { return value % 64 == 0; }

// Scratch for drains and table reads, one per reader thread (shared by all its rings).
struct DrainScratch {
  std::vector<unsigned char> records;
  std::vector<CorruptReason> verdict;
  OpView view;
  std::vector<ncclscope_comm_slot> table;
  std::vector<std::uint32_t> versions;
  std::vector<std::uint32_t> index;
  std::vector<ncclscope_op_count> counts;  // ReadCounts: count_keys entries per slot copied
};

DrainScratch& Scratch() {
  thread_local DrainScratch scratch;
  return scratch;
}

// Folds an op and its follower records (already validated one by one) into an OpView: its
// channel continuations, then its OP_DETAIL, then its OP_PHASES (ncclscope_op_record's
// n_continuations). Returns false when a follower does not belong to the op.
bool BuildOpView(const unsigned char* records, std::uint32_t available, OpView* view,
                 std::uint32_t* consumed) {
  std::memcpy(&view->op, records, sizeof(view->op));
  const ncclscope_op_record& op = view->op;
  std::uint8_t ids[NCCLSCOPE_MAX_CHANNELS];
  std::uint32_t n_ids = 0;
  for (std::uint64_t m = op.channel_mask; m != 0; m &= m - 1) {
    ids[n_ids++] = static_cast<std::uint8_t>(__builtin_ctzll(m));
  }
  view->n_channels = 0;
  view->user_tag = 0;
  view->kernel_variant = NCCLSCOPE_KV_NONE;
  view->n_phase_channels = 0;
  for (std::uint32_t i = 0; i < op.n_inline; ++i) {
    view->channels[view->n_channels] = op.ch[i];
    view->channel_ids[view->n_channels] = ids[view->n_channels];
    ++view->n_channels;
  }
  *consumed = 1;
  if (op.n_continuations > kMaxContinuations || 1u + op.n_continuations > available) return false;
  const auto same_op = [&op](std::uint64_t comm_id, std::uint64_t seq, std::uint64_t op_index,
                             std::int32_t rank) {
    return comm_id == op.comm_id && seq == op.seq && op_index == op.op_index && rank == op.rank;
  };
  std::uint32_t part = 1;
  // Channel continuations: as many as the inline channels left over need.
  for (std::uint32_t k = 1; view->n_channels < n_ids; ++k, ++part) {
    if (part > op.n_continuations) return false;
    ncclscope_op_channels_record cont{};
    std::memcpy(&cont, records + static_cast<std::size_t>(part) * NCCLSCOPE_RECORD_SIZE,
                sizeof(cont));
    const std::uint32_t remaining = n_ids - view->n_channels;
    const std::uint32_t expected_n =
        remaining < NCCLSCOPE_OP_CONT_CHANNELS ? remaining : NCCLSCOPE_OP_CONT_CHANNELS;
    if (cont.h.type != NCCLSCOPE_REC_OP_CHANNELS ||
        !same_op(cont.comm_id, cont.seq, cont.op_index, cont.rank) || cont.part != k ||
        cont.first != view->n_channels || cont.n != expected_n) {
      return false;
    }
    for (std::uint32_t i = 0; i < cont.n; ++i) {
      view->channels[view->n_channels] = cont.ch[i];
      view->channel_ids[view->n_channels] = ids[view->n_channels];
      ++view->n_channels;
    }
    *consumed = part + 1;
  }
  if ((op.flags & NCCLSCOPE_OP_HAS_DETAIL) != 0) {
    if (part > op.n_continuations) return false;
    ncclscope_op_detail_record detail{};
    std::memcpy(&detail, records + static_cast<std::size_t>(part) * NCCLSCOPE_RECORD_SIZE,
                sizeof(detail));
    if (detail.h.type != NCCLSCOPE_REC_OP_DETAIL ||
        !same_op(detail.comm_id, detail.seq, detail.op_index, detail.rank)) {
      return false;
    }
    view->user_tag = detail.user_tag;
    view->kernel_variant = detail.kernel_variant;
    *consumed = ++part;
  }
  for (std::uint32_t k = 1; part <= op.n_continuations; ++k, ++part) {
    ncclscope_op_phases_record phases{};
    std::memcpy(&phases, records + static_cast<std::size_t>(part) * NCCLSCOPE_RECORD_SIZE,
                sizeof(phases));
    if (phases.h.type != NCCLSCOPE_REC_OP_PHASES ||
        !same_op(phases.comm_id, phases.seq, phases.op_index, phases.rank) || phases.part != k ||
        view->n_phase_channels + phases.n > NCCLSCOPE_MAX_CHANNELS ||
        (view->n_phase_channels != 0 &&
         phases.ch[0].channel <= view->phases[view->n_phase_channels - 1].channel)) {
      return false;
    }
    for (std::uint32_t i = 0; i < phases.n; ++i)
      view->phases[view->n_phase_channels++] = phases.ch[i];
    *consumed = part + 1;
  }
  return true;
}

}  // namespace

RingFile::~RingFile() {
  if (map_ != nullptr) ::munmap(map_, map_size_);
  if (fd_ >= 0) ::close(fd_);
}

namespace {

// The header's geometry, checked without any arithmetic that can wrap: every count and offset is
// bounded first (offsets below 2^40, counts below 2^20), so no sum or product below can exceed
// 2^41; then every region must lie after the previous one and the data must end exactly at
// file_size.
bool GeometryOk(const ncclscope_ring_header& h, const RingLimits& limits) {
  const std::uint64_t lanes = h.lane_count;
  const std::uint64_t capacity = h.lane_capacity;
  const std::uint64_t slots = h.comm_slot_count;
  if (lanes < 1 || lanes > NCCLSCOPE_MAX_LANES) return false;
  if (capacity < 1 || capacity > NCCLSCOPE_MAX_LANE_CAPACITY || (capacity & (capacity - 1)) != 0) {
    return false;
  }
  if (slots > NCCLSCOPE_MAX_COMM_SLOTS) return false;
  constexpr std::uint64_t kMax = NCCLSCOPE_MAX_REGION_OFFSET;
  if (h.comm_table_offset > kMax || h.lanes_offset > kMax || h.data_offset > kMax ||
      h.file_size > kMax) {
    return false;
  }
  if (!Aligned(h.comm_table_offset) || !Aligned(h.lanes_offset) || !Aligned(h.data_offset)) {
    return false;
  }
  std::uint64_t table_end = h.comm_table_offset + slots * NCCLSCOPE_COMM_SLOT_SIZE;
  // The count table: with EXACT_COUNTS, right of the comm table and left of the lanes.
  if ((h.features & NCCLSCOPE_FEATURE_EXACT_COUNTS) != 0) {
    if (h.count_keys != NCCLSCOPE_COUNT_KEYS || h.count_table_offset > kMax ||
        !Aligned(h.count_table_offset) || h.count_table_offset < table_end) {
      return false;
    }
    table_end = h.count_table_offset + slots * h.count_keys * sizeof(ncclscope_op_count);
  }
  const std::uint64_t lanes_end = h.lanes_offset + lanes * NCCLSCOPE_LANE_SIZE;
  const std::uint64_t data_bytes = lanes * capacity * NCCLSCOPE_RECORD_SIZE;
  return h.comm_table_offset >= NCCLSCOPE_RING_HEADER_SIZE && h.lanes_offset >= table_end &&
         h.data_offset >= lanes_end && h.file_size == h.data_offset + data_bytes &&
         h.file_size <= limits.max_file_bytes;
}

// Whether every byte of the file is allocated. The plugin fallocate()s its whole ring; a file with
// holes would make the agent's reads through the mapping allocate (and be charged for) pages.
bool FullyAllocated(const struct stat& st, std::uint64_t file_size) {
  return static_cast<std::uint64_t>(st.st_blocks) * 512 >= file_size;
}

// Why a ring with this header, in a file of `st`, cannot be read; nullptr when it can.
const char* HeaderRejection(const ncclscope_ring_header& header, const struct stat& st,
                            const RingLimits& limits) {
  if (header.magic != NCCLSCOPE_RING_MAGIC) return "magic";
  if (header.version != NCCLSCOPE_RING_VERSION) return "version";
  if (header.header_size != NCCLSCOPE_RING_HEADER_SIZE ||
      header.record_size != NCCLSCOPE_RECORD_SIZE) {
    return "format";
  }
  if (!GeometryOk(header, limits)) return "geometry";
  if (static_cast<std::uint64_t>(st.st_size) < header.file_size) return "size";
  if (!FullyAllocated(st, header.file_size)) return "sparse";
  return nullptr;
}

}  // namespace

std::unique_ptr<RingFile> RingFile::Open(const std::string& path, std::string* reason,
                                         const RingLimits& limits) {
  std::unique_ptr<RingFile> ring(new RingFile());
  ring->path_ = path;
  ring->limits_ = limits;
  ring->writable_ = true;
  struct stat st {};
  ring->fd_ = ring::OpenRegularFile(AT_FDCWD, path.c_str(), O_RDWR, &st);
  if (ring->fd_ < 0 && errno == EACCES) {
    ring->writable_ = false;
    ring->fd_ = ring::OpenRegularFile(AT_FDCWD, path.c_str(), O_RDONLY, &st);
  }
  if (ring->fd_ < 0) {
    *reason = errno == EINVAL || errno == ELOOP ? "not_regular" : "open";
    return nullptr;
  }
  ring->stat_ = st;
  ncclscope_ring_header header{};
  if (st.st_size < static_cast<off_t>(sizeof(header)) ||
      ::pread(ring->fd_, &header, sizeof(header), 0) != static_cast<ssize_t>(sizeof(header))) {
    *reason = "size";
    return nullptr;
  }
  if (const char* rejection = HeaderRejection(header, st, limits)) {
    *reason = rejection;
    return nullptr;
  }
  if (!ring->Map(header)) {
    *reason = "map";
    return nullptr;
  }
  ring->Adopt(header);
  if (!ring->writable_) ring->StartAtCurrentTails();
  return ring;
}

bool RingFile::Map(const ncclscope_ring_header& header) {
  // Only the metadata is mapped; records are read with pread (see the header comment).
  const std::uint64_t map_size = header.data_offset;
  const int protection = PROT_READ | (writable_ ? PROT_WRITE : 0);
  void* map = ::mmap(nullptr, map_size, protection, MAP_SHARED, fd_, 0);
  if (map == MAP_FAILED) return false;
  map_ = static_cast<unsigned char*>(map);
  map_size_ = map_size;
  return true;
}

void RingFile::Adopt(const ncclscope_ring_header& header) {
  size_ = header.file_size;
  lanes_ = header.lane_count;
  capacity_ = header.lane_capacity;
  comm_slots_ = header.comm_slot_count;
  comm_table_offset_ = header.comm_table_offset;
  count_table_offset_ = header.count_table_offset;
  lanes_offset_ = header.lanes_offset;
  data_offset_ = header.data_offset;
  local_tails_.assign(lanes_, 0);
  origin_.ring = BaseName(path_);
  origin_.pid = header.pid;
  origin_.hostname = ring::FieldText(header.hostname);
  origin_.job_id = ring::FieldText(header.job_id);
  origin_.owner_uid = stat_.st_uid;
}

void RingFile::StartAtCurrentTails() {
  for (std::uint32_t i = 0; i < lanes_; ++i) {
    auto* lane = reinterpret_cast<ncclscope_lane*>(map_ + lanes_offset_ + i * NCCLSCOPE_LANE_SIZE);
    std::uint64_t tail = 0;
    if (GuardedLoad(&lane->tail, &tail)) local_tails_[i] = tail;
  }
}

bool RingFile::CheckFile() {
  if (!healthy_) return false;
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || static_cast<std::uint64_t>(st.st_size) < size_ ||
      !FullyAllocated(st, size_)) {
    healthy_ = false;
  }
  return healthy_;
}

DrainStats RingFile::Drain(RecordSink& sink, std::uint32_t max_per_lane) {
  DrainStats stats;
  if (!CheckFile()) return stats;
  for (std::uint32_t lane = 0; lane < lanes_; ++lane) {
    if (!DrainLane(lane, sink, max_per_lane, stats)) {
      healthy_ = false;
      break;
    }
  }
  return stats;
}

namespace {

// The records of a copied batch (`copy` of them, the first at position `tail`), validated one by
// one into `verdict`; returns how many to take so that no op is cut from its continuation records:
// an op whose group crosses `take` but lies within the copy pulls `take` past its last record.
std::uint64_t ValidateBatch(const std::vector<unsigned char>& bytes, std::uint64_t tail,
                            std::uint64_t take, std::uint64_t copy,
                            std::vector<CorruptReason>& verdict) {
  verdict.resize(copy);
  for (std::uint64_t i = 0; i < copy; ++i) {
    verdict[i] = ValidateRecord(bytes.data() + i * NCCLSCOPE_RECORD_SIZE, tail + i);
  }
  for (std::uint64_t i = 0; i < take; ++i) {
    if (verdict[i] != CorruptReason::kNone) continue;
    ncclscope_record_header h{};
    std::memcpy(&h, bytes.data() + i * NCCLSCOPE_RECORD_SIZE, sizeof(h));
    if (h.type != NCCLSCOPE_REC_OP) continue;
    const std::uint8_t n_cont =
        bytes[i * NCCLSCOPE_RECORD_SIZE + offsetof(ncclscope_op_record, n_continuations)];
    if (i + n_cont >= take && i + n_cont < copy) take = i + n_cont + 1;
  }
  return take;
}

// Delivers the op at `i` with its follower records; returns how many records it used.
std::uint32_t DeliverOp(const RingOrigin& origin, const unsigned char* record,
                        const std::vector<CorruptReason>& verdict, std::uint64_t i,
                        std::uint64_t take, OpView& view, RecordSink& sink, DrainStats& stats) {
  std::uint32_t consumed = 1;
  // Continuations must themselves be valid records. Only the next kMaxContinuations can
  // belong to this op: looking further made each drain quadratic in the batch size.
  std::uint32_t valid_after = 0;
  for (std::uint64_t k = i + 1;
       k < take && k <= i + kMaxContinuations && verdict[k] == CorruptReason::kNone; ++k) {
    ++valid_after;
  }
  if (!BuildOpView(record, valid_after + 1, &view, &consumed)) {
    // Deliver the op with its inline channels; the rest are lost and counted.
    ++stats.corrupt[static_cast<std::size_t>(CorruptReason::kContinuation)];
    consumed = 1;
  }
  sink.OnOp(origin, view);
  ++stats.by_type[NCCLSCOPE_REC_OP];
  for (std::uint32_t k = 1; k < consumed; ++k) {
    ncclscope_record_header follower{};
    std::memcpy(&follower, record + static_cast<std::size_t>(k) * NCCLSCOPE_RECORD_SIZE,
                sizeof(follower));
    ++stats.by_type[follower.type];  // a validated type: at most NCCLSCOPE_REC_TYPE_MAX
  }
  stats.records += consumed;
  return consumed;
}

// Delivers one record that is not an op (nor one of its followers, which DeliverOp takes).
void DeliverSingle(const RingOrigin& origin, const unsigned char* record, std::uint16_t type,
                   RecordSink& sink, DrainStats& stats) {
  switch (type) {
    case NCCLSCOPE_REC_OP_CHANNELS:
    case NCCLSCOPE_REC_OP_DETAIL:
    case NCCLSCOPE_REC_OP_PHASES:
      ++stats.corrupt[static_cast<std::size_t>(CorruptReason::kContinuation)];  // orphan
      return;
    case NCCLSCOPE_REC_PROXY_OP: {
      ncclscope_proxy_op_record rec{};
      std::memcpy(&rec, record, sizeof(rec));
      sink.OnProxyOp(origin, rec);
      break;
    }
    case NCCLSCOPE_REC_COMM_INIT: {
      ncclscope_comm_init_record rec{};
      std::memcpy(&rec, record, sizeof(rec));
      sink.OnCommInit(origin, rec);
      break;
    }
    case NCCLSCOPE_REC_COMM_FINALIZE: {
      ncclscope_comm_finalize_record rec{};
      std::memcpy(&rec, record, sizeof(rec));
      sink.OnCommFinalize(origin, rec);
      break;
    }
    default:
      return;
  }
  ++stats.by_type[type];
  ++stats.records;
}

// Delivers the first `take` records of the batch, counting the corrupt ones.
void DeliverBatch(const RingOrigin& origin, const std::vector<unsigned char>& bytes,
                  const std::vector<CorruptReason>& verdict, std::uint64_t take, OpView& view,
                  RecordSink& sink, DrainStats& stats) {
  std::uint64_t i = 0;
  while (i < take) {
    const unsigned char* record = bytes.data() + i * NCCLSCOPE_RECORD_SIZE;
    if (verdict[i] != CorruptReason::kNone) {
      ++stats.corrupt[static_cast<std::size_t>(verdict[i])];
      ++i;
      continue;
    }
    ncclscope_record_header h{};
    std::memcpy(&h, record, sizeof(h));
    if (h.type == NCCLSCOPE_REC_OP) {
      i += DeliverOp(origin, record, verdict, i, take, view, sink, stats);
      continue;
    }
    DeliverSingle(origin, record, h.type, sink, stats);
    ++i;
  }
}

}  // namespace

bool RingFile::ReadLaneRecords(std::uint32_t index, std::uint64_t tail, std::uint64_t copy,
                               std::vector<unsigned char>& bytes) {
  bytes.resize(copy * NCCLSCOPE_RECORD_SIZE);
  // head - tail <= capacity and capacity <= 2^20 were checked, so these stay far from wrapping.
  const std::uint64_t data =
      data_offset_ + std::uint64_t{index} * capacity_ * NCCLSCOPE_RECORD_SIZE;
  const std::uint64_t start_slot = tail & (capacity_ - 1);
  const std::uint64_t first_run = capacity_ - start_slot < copy ? capacity_ - start_slot : copy;
  if (!platform::PreadExactly(fd_, bytes.data(), first_run * NCCLSCOPE_RECORD_SIZE,
                              data + start_slot * NCCLSCOPE_RECORD_SIZE)) {
    return false;
  }
  return copy <= first_run ||
         platform::PreadExactly(fd_, bytes.data() + first_run * NCCLSCOPE_RECORD_SIZE,
                                (copy - first_run) * NCCLSCOPE_RECORD_SIZE, data);
}

bool RingFile::DrainLane(std::uint32_t index, RecordSink& sink, std::uint32_t max,
                         DrainStats& stats) {
  auto* lane = reinterpret_cast<ncclscope_lane*>(
      map_ + lanes_offset_ + static_cast<std::size_t>(index) * NCCLSCOPE_LANE_SIZE);
  std::uint64_t head = 0;
  std::uint64_t tail = local_tails_[index];
  if (!GuardedLoad(&lane->head, &head)) return false;
  if (writable_ && !GuardedLoad(&lane->tail, &tail)) return false;
  auto commit = [&](std::uint64_t new_tail) {
    local_tails_[index] = new_tail;
    return !writable_ || GuardedStore(&lane->tail, new_tail);
  };
  if (head == tail) return true;
  if (head < tail || head - tail > capacity_) {
    ++stats.lane_resyncs;  // nonsense from the writer side: skip what we cannot trust
    return commit(head);
  }
  const std::uint64_t available = head - tail;
  stats.fullest_lane_permille = std::max(stats.fullest_lane_permille,
                                         static_cast<std::uint32_t>(available * 1000 / capacity_));
  std::uint64_t take = available < max ? available : max;
  // Keep an op and its continuation records together even across the batch limit.
  const std::uint64_t copy =
      available < take + kMaxContinuations ? available : take + kMaxContinuations;
  DrainScratch& scratch = Scratch();
  if (!ReadLaneRecords(index, tail, copy, scratch.records)) return false;
  take = ValidateBatch(scratch.records, tail, take, copy, scratch.verdict);
  if (!commit(tail + take)) return false;
  stats.more = stats.more || take < available;
  LogFirstRejections(index, scratch.records, scratch.verdict, tail, take);
  // Deliver from our copy. The view is reused: only its first n_channels entries are meaningful.
  const std::uint64_t orphans_before =
      stats.corrupt[static_cast<std::size_t>(CorruptReason::kContinuation)];
  DeliverBatch(origin_, scratch.records, scratch.verdict, take, scratch.view, sink, stats);
  if (stats.corrupt[static_cast<std::size_t>(CorruptReason::kContinuation)] != orphans_before) {
    LogFirstContinuationLoss(index, tail, take);
  }
  return true;
}

void RingFile::LogFirstContinuationLoss(std::uint32_t lane, std::uint64_t tail,
                                        std::uint64_t take) {
  const std::uint32_t bit = 1u << static_cast<unsigned>(CorruptReason::kContinuation);
  if ((logged_reasons_ & bit) != 0) return;
  logged_reasons_ |= bit;
  NCCLSCOPE_LOG(kWarn, "profiler")
      << "ring " << origin_.ring << " (pid " << origin_.pid << "): records following an op are "
      << "missing or belong to another op, lane " << lane << " positions " << tail << "-"
      << tail + take - 1
      << " (reason=continuation); later records rejected for this reason are only counted";
}

void RingFile::LogFirstRejections(std::uint32_t lane, const std::vector<unsigned char>& bytes,
                                  const std::vector<CorruptReason>& verdict, std::uint64_t tail,
                                  std::uint64_t take) {
  for (std::uint64_t i = 0; i < take; ++i) {
    if (verdict[i] == CorruptReason::kNone) continue;
    const std::uint32_t bit = 1u << static_cast<unsigned>(verdict[i]);
    if ((logged_reasons_ & bit) != 0) continue;
    logged_reasons_ |= bit;
    const unsigned char* record = bytes.data() + i * NCCLSCOPE_RECORD_SIZE;
    ncclscope_record_header header{};
    std::memcpy(&header, record, sizeof(header));
    const Rejection rejection = InspectRecord(record, tail + i);
    NCCLSCOPE_LOG(kWarn, "profiler")
        << "ring " << origin_.ring << " (pid " << origin_.pid << "): rejected a record at lane "
        << lane << " position " << tail + i << ", type " << header.type
        << " (reason=" << CorruptReasonName(rejection.reason)
        << ", failed check: " << rejection.check
        << "); later records rejected for this reason are only counted";
  }
}

bool RingFile::ReadHeader(RingHeaderSnapshot* out) {
  if (!healthy_) return false;
  ncclscope_ring_header header{};
  if (!GuardedCopy(&header, map_, offsetof(ncclscope_ring_header, controls))) {
    healthy_ = false;
    return false;
  }
  if (header.magic != NCCLSCOPE_RING_MAGIC || header.lane_count != lanes_ ||
      header.lane_capacity != capacity_) {
    healthy_ = false;  // rewritten under us
    return false;
  }
  out->state = header.state;
  out->nccl_abi = header.nccl_abi;
  out->effective_mask = header.effective_mask;
  out->applied_control_seq = header.applied_control_seq;
  if (!GuardedLoad(&reinterpret_cast<ncclscope_ring_header*>(map_)->controls.seq,
                   &out->control_seq)) {
    healthy_ = false;
    return false;
  }
  out->pinned_controls = header.pinned_controls;
  for (std::size_t i = 0; i < out->counters.size(); ++i) out->counters[i] = header.counters[i];
  out->governor = header.governor;
  out->dropped_ring_full = 0;
  for (std::uint32_t i = 0; i < lanes_; ++i) {
    auto* lane = reinterpret_cast<ncclscope_lane*>(
        map_ + lanes_offset_ + static_cast<std::size_t>(i) * NCCLSCOPE_LANE_SIZE);
    std::uint64_t dropped = 0;
    if (!GuardedLoad(&lane->dropped, &dropped)) {
      healthy_ = false;
      return false;
    }
    // Saturating: a pod's counters must not wrap the node's total.
    out->dropped_ring_full = dropped > UINT64_MAX - out->dropped_ring_full
                                 ? UINT64_MAX
                                 : out->dropped_ring_full + dropped;
  }
  return true;
}

namespace {

// Copies the slots in use out of the mapping in one guarded pass (no allocation inside: the
// destination is sized beforehand). A slot whose version changed while it was copied, or was odd,
// is skipped by the caller (being rewritten).
struct TableCopy {
  const unsigned char* table = nullptr;
  std::uint32_t slots = 0;
  ncclscope_comm_slot* out = nullptr;  // capacity `max_copied`
  std::uint32_t* version_after = nullptr;
  std::uint32_t* index = nullptr;
  std::uint32_t max_copied = 0;
  std::uint32_t copied = 0;
  std::uint32_t over = 0;  // slots in use beyond max_copied
};

void CopyTable(void* arg) {
  auto* t = static_cast<TableCopy*>(arg);
  for (std::uint32_t i = 0; i < t->slots; ++i) {
    const auto* shared = reinterpret_cast<const ncclscope_comm_slot*>(
        t->table + static_cast<std::size_t>(i) * NCCLSCOPE_COMM_SLOT_SIZE);
    const std::uint32_t state = __atomic_load_n(&shared->state, __ATOMIC_ACQUIRE);
    if (state != NCCLSCOPE_COMM_LIVE && state != NCCLSCOPE_COMM_FINALIZED) continue;
    if (t->copied == t->max_copied) {
      ++t->over;
      continue;
    }
    std::memcpy(&t->out[t->copied], shared, sizeof(ncclscope_comm_slot));
    OrderLoads();
    t->version_after[t->copied] = __atomic_load_n(&shared->version, __ATOMIC_ACQUIRE);
    t->index[t->copied] = i;
    ++t->copied;
  }
}

struct CountsCopy {
  const unsigned char* table = nullptr;   // the comm table
  const unsigned char* counts = nullptr;  // the count table
  std::uint32_t slots = 0;
  std::uint32_t max_copied = 0;
  OpCounts* out = nullptr;                // identity of each copied slot (capacity max_copied)
  ncclscope_op_count* entries = nullptr;  // NCCLSCOPE_COUNT_KEYS per copied slot
  std::uint32_t copied = 0;
};

// Seqlock reader over each slot: version, identity, its counts, version again; a slot rewritten
// meanwhile (a new communicator resetting the counts) is skipped this pass.
void CopyCounts(void* arg) {
  auto* c = static_cast<CountsCopy*>(arg);
  for (std::uint32_t i = 0; i < c->slots && c->copied < c->max_copied; ++i) {
    const auto* shared = reinterpret_cast<const ncclscope_comm_slot*>(
        c->table + static_cast<std::size_t>(i) * NCCLSCOPE_COMM_SLOT_SIZE);
    const std::uint32_t before = __atomic_load_n(&shared->version, __ATOMIC_ACQUIRE);
    const std::uint32_t state = __atomic_load_n(&shared->state, __ATOMIC_RELAXED);
    if ((before & 1) != 0 || (state != NCCLSCOPE_COMM_LIVE && state != NCCLSCOPE_COMM_FINALIZED)) {
      continue;
    }
    OpCounts& out = c->out[c->copied];
    out.slot = i;
    out.comm_id = __atomic_load_n(&shared->comm_id, __ATOMIC_RELAXED);
    out.context = __atomic_load_n(&shared->context, __ATOMIC_RELAXED);
    out.rank = __atomic_load_n(&shared->rank, __ATOMIC_RELAXED);
    ncclscope_op_count* entries =
        c->entries + static_cast<std::size_t>(c->copied) * NCCLSCOPE_COUNT_KEYS;
    std::memcpy(
        entries,
        c->counts + static_cast<std::size_t>(i) * NCCLSCOPE_COUNT_KEYS * sizeof(ncclscope_op_count),
        NCCLSCOPE_COUNT_KEYS * sizeof(ncclscope_op_count));
    OrderLoads();
    if (__atomic_load_n(&shared->version, __ATOMIC_ACQUIRE) != before) continue;
    ++c->copied;
  }
}

}  // namespace

// Only the slots the plugin ever took (ncclscope_ring.h, comm_slots_used; 0: not kept, read all):
// with 256 slots of 512 bytes, checking every slot's state was one cold cache line each, 3.5 % of
// the agent's samples at 8 rings (docs/benchmarks.md, "NCCL analytics").
bool RingFile::SlotsUsed(std::uint32_t* slots) {
  std::uint32_t used = 0;
  if (!GuardedLoad(&reinterpret_cast<ncclscope_ring_header*>(map_)->comm_slots_used, &used)) {
    healthy_ = false;
    return false;
  }
  *slots = used != 0 && used < comm_slots_ ? used : comm_slots_;
  return true;
}

std::vector<CommSlotSnapshot> RingFile::ReadCommTable() {
  std::vector<CommSlotSnapshot> slots;
  slots_over_limit_ = 0;
  if (!healthy_ || comm_slots_ == 0) return slots;
  const std::uint32_t max_copied =
      comm_slots_ < limits_.max_live_slots ? comm_slots_ : limits_.max_live_slots;
  DrainScratch& scratch = Scratch();
  scratch.table.resize(max_copied);
  scratch.versions.resize(max_copied);
  scratch.index.resize(max_copied);
  TableCopy t;
  if (!SlotsUsed(&t.slots)) return slots;
  t.table = map_ + comm_table_offset_;
  t.out = scratch.table.data();
  t.version_after = scratch.versions.data();
  t.index = scratch.index.data();
  t.max_copied = max_copied;
  if (!GuardedCall(&CopyTable, &t)) {
    healthy_ = false;
    return slots;
  }
  slots_over_limit_ = t.over;
  slots.reserve(t.copied);
  for (std::uint32_t k = 0; k < t.copied; ++k) {
    const ncclscope_comm_slot& copy = scratch.table[k];
    if ((copy.version & 1) != 0 || copy.version != scratch.versions[k]) continue;  // rewritten
    if (copy.state != NCCLSCOPE_COMM_LIVE && copy.state != NCCLSCOPE_COMM_FINALIZED) continue;
    // Under ABI v1-v3 NCCL never tells the size: nranks and nnodes stay 0 (unknown) once the
    // first op named the communicator (comm id and rank).
    const bool size_unknown = copy.nranks == 0 && copy.nnodes == 0 && copy.comm_id != 0;
    if (copy.rank < 0 || copy.rank >= NCCLSCOPE_MAX_NRANKS ||
        (!size_unknown &&
         (copy.nranks <= 0 || copy.nranks > NCCLSCOPE_MAX_NRANKS || copy.rank >= copy.nranks ||
          copy.nnodes <= 0 || copy.nnodes > copy.nranks))) {
      continue;
    }
    CommSlotSnapshot s;
    s.index = scratch.index[k];
    s.state = copy.state;
    s.comm_id = copy.comm_id;
    s.context = copy.context;
    s.rank = copy.rank;
    s.nranks = copy.nranks;
    s.nnodes = copy.nnodes;
    s.cuda_device = copy.cuda_device;
    s.name = ring::FieldText(copy.name);
    s.gpu_uuid = ring::FieldText(copy.gpu_uuid);
    s.pci_bus_id = ring::FieldText(copy.pci_bus_id);
    s.ops_enqueued = copy.ops_enqueued;
    s.ops_completed = copy.ops_completed;
    s.last_enqueue_ns = copy.last_enqueue_ns;
    s.last_enqueue_seq = copy.last_enqueue_seq;
    s.last_enqueue_func = copy.last_enqueue_func;
    s.last_complete_ns = copy.last_complete_ns;
    s.last_complete_seq = copy.last_complete_seq;
    s.last_complete_func = copy.last_complete_func;
    for (std::size_t r = 0; r < s.recent.size(); ++r) s.recent[r] = copy.recent[r];
    slots.push_back(std::move(s));
  }
  return slots;
}

bool RingFile::WriteControls(const ncclscope_controls& controls) {
  if (!healthy_ || !writable_) return false;
  auto* shared = reinterpret_cast<ncclscope_ring_header*>(map_);
  std::uint32_t seq = 0;
  if (!GuardedLoad(&shared->controls.seq, &seq)) {
    healthy_ = false;
    return false;
  }
  seq += (seq & 1) != 0 ? 1 : 2;  // next even value; the odd one in between marks "writing"
  ncclscope_controls body = controls;
  body.seq = seq - 1;
  const bool marked = GuardedStore(&shared->controls.seq, seq - 1);
  OrderStores();
  if (!marked ||
      !GuardedCopy(reinterpret_cast<unsigned char*>(&shared->controls) + sizeof(std::uint32_t),
                   reinterpret_cast<const unsigned char*>(&body) + sizeof(std::uint32_t),
                   sizeof(body) - sizeof(std::uint32_t)) ||
      !GuardedStore(&shared->controls.seq, seq)) {
    healthy_ = false;
    return false;
  }
  return true;
}

bool RingFile::OwnerAlive() {
  if (owner_dead_) return false;
  if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) {
    owner_dead_ = true;
    return false;
  }
  return true;
}

std::vector<OpCounts> RingFile::ReadCounts() {
  std::vector<OpCounts> result;
  if (!healthy_ || comm_slots_ == 0 || count_table_offset_ == 0) return result;
  CountsCopy c;
  if (!SlotsUsed(&c.slots)) return result;
  c.table = map_ + comm_table_offset_;
  c.counts = map_ + count_table_offset_;
  c.max_copied = c.slots < limits_.max_live_slots ? c.slots : limits_.max_live_slots;
  std::vector<OpCounts> ids(c.max_copied);
  DrainScratch& scratch = Scratch();
  scratch.counts.resize(static_cast<std::size_t>(c.max_copied) * NCCLSCOPE_COUNT_KEYS);
  c.out = ids.data();
  c.entries = scratch.counts.data();
  if (!GuardedCall(&CopyCounts, &c)) {
    healthy_ = false;
    return result;
  }
  result.reserve(c.copied);
  for (std::uint32_t k = 0; k < c.copied; ++k) {
    OpCounts& slot = ids[k];
    // ABI v1-v3 name the communicator with its first op: until then no identity, nothing counted.
    if (slot.comm_id == 0 || slot.rank < 0 || slot.rank >= NCCLSCOPE_MAX_NRANKS) continue;
    const ncclscope_op_count* entries =
        scratch.counts.data() + static_cast<std::size_t>(k) * NCCLSCOPE_COUNT_KEYS;
    for (std::uint32_t e = 0; e < NCCLSCOPE_COUNT_KEYS; ++e) {
      if (entries[e].key != 0 && ValidCountKey(entries[e].key)) slot.counts.push_back(entries[e]);
    }
    result.push_back(std::move(slot));
  }
  return result;
}

}  // namespace ncclscope::profiler
