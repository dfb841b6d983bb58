#include "plugin/ring/ring_writer.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>

#include "platform/clock.h"

namespace ncclscope::ring {
namespace {

std::uint64_t AlignUp(std::uint64_t value, std::uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

void CopyString(char* dst, std::size_t capacity, const char* src) {
  const std::size_t n = strnlen(src, capacity - 1);
  std::memcpy(dst, src, n);
  dst[n] = '\0';
}

// "<what>: <strerror(errno)>" into *error.
void Errno(RingError* error, const char* what, const char* path) {
  char text[128];
  const char* reason = strerror_r(errno, text, sizeof(text));  // GNU strerror_r: returns the text
  error->Clear();
  error->Appendf("%s %s: %s", what, path, reason);
}

struct Layout {
  std::uint64_t comm_table_offset;
  std::uint64_t count_table_offset;  // 0: none
  std::uint64_t lanes_offset;
  std::uint64_t data_offset;
  std::uint64_t file_size;
};

Layout LayoutOf(const RingGeometry& g) {
  Layout layout{};
  layout.comm_table_offset = NCCLSCOPE_RING_HEADER_SIZE;
  const std::uint64_t table_end =
      layout.comm_table_offset +
      static_cast<std::uint64_t>(g.comm_slots) * NCCLSCOPE_COMM_SLOT_SIZE;
  layout.count_table_offset = g.count_keys != 0 ? table_end : 0;  // 512-byte slots: aligned
  layout.lanes_offset = AlignUp(table_end + static_cast<std::uint64_t>(g.comm_slots) *
                                                g.count_keys * sizeof(ncclscope_op_count),
                                64);
  layout.data_offset = AlignUp(
      layout.lanes_offset + static_cast<std::uint64_t>(g.lanes) * NCCLSCOPE_LANE_SIZE, 4096);
  layout.file_size = layout.data_offset +
                     static_cast<std::uint64_t>(g.lanes) * g.lane_capacity * NCCLSCOPE_RECORD_SIZE;
  return layout;
}

// Create's steps.

bool ValidGeometry(const RingGeometry& geometry) {
  return geometry.lanes != 0 && geometry.lanes <= NCCLSCOPE_MAX_LANES &&
         geometry.lane_capacity != 0 &&
         (geometry.lane_capacity & (geometry.lane_capacity - 1)) == 0 &&
         geometry.lane_capacity <= NCCLSCOPE_MAX_LANE_CAPACITY &&
         geometry.comm_slots <= NCCLSCOPE_MAX_COMM_SLOTS &&
         (geometry.count_keys == 0 || geometry.count_keys == NCCLSCOPE_COUNT_KEYS);
}

// Shared by every job on the node (like /tmp): sticky and world-writable.
bool MakeRingDirectory(const char* dir, RingError* error) {
  if (::mkdir(dir, 01777) == 0) {
    ::chmod(dir, 01777);
  } else if (errno != EEXIST) {
    Errno(error, "cannot create ring directory", dir);
    return false;
  }
  return true;
}

// A file that did not become a ring: the error (from errno), and the file and descriptor gone.
bool Abandon(RingError* error, const char* what, const char* temp, int fd) {
  Errno(error, what, temp);
  ::unlink(temp);
  ::close(fd);
  return false;
}

// Creates `temp`, locks it, reserves `file_size` bytes and maps them into `*map`; returns the
// descriptor, or -1 with nothing left behind.
int CreateMappedFile(const char* temp, std::uint64_t file_size, RingError* error, void** map) {
  const int fd = ::open(temp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    Errno(error, "cannot create", temp);
    return -1;
  }
  // The shared lock lives as long as this process (or its forked children) keeps the descriptor:
  // the agent's "owner alive" test, independent of pid namespaces and pid reuse.
  if (::flock(fd, LOCK_SH) != 0) {
    Abandon(error, "cannot lock", temp, fd);
    return -1;
  }
  // Reserve every page now: on a full tmpfs a later first touch would be a SIGBUS in the job.
  const int rc = ::posix_fallocate(fd, 0, static_cast<off_t>(file_size));
  if (rc != 0) {
    errno = rc;
    char what[64];
    std::snprintf(what, sizeof(what), "cannot allocate %llu bytes for",
                  static_cast<unsigned long long>(file_size));
    Abandon(error, what, temp, fd);
    return -1;
  }
  *map = ::mmap(nullptr, file_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (*map == MAP_FAILED) {
    Abandon(error, "cannot map", temp, fd);
    return -1;
  }
  return fd;
}

// The header of a new ring, magic last (release): the agent reads nothing before it.
void WriteHeader(ncclscope_ring_header* header, const RingGeometry& geometry, const Layout& layout,
                 const RingIdentity& identity, std::uint64_t created) {
  header->version = NCCLSCOPE_RING_VERSION;
  header->header_size = NCCLSCOPE_RING_HEADER_SIZE;
  header->file_size = layout.file_size;
  header->record_size = NCCLSCOPE_RECORD_SIZE;
  header->lane_count = geometry.lanes;
  header->lane_capacity = geometry.lane_capacity;
  header->comm_slot_count = geometry.comm_slots;
  header->comm_table_offset = layout.comm_table_offset;
  header->count_keys = geometry.count_keys;
  header->count_table_offset = layout.count_table_offset;
  header->lanes_offset = layout.lanes_offset;
  header->data_offset = layout.data_offset;
  header->pid = static_cast<std::int32_t>(::getpid());
  header->created_ns = created;
  CopyString(header->hostname, sizeof(header->hostname), identity.hostname);
  CopyString(header->plugin_version, sizeof(header->plugin_version), identity.plugin_version);
  CopyString(header->job_id, sizeof(header->job_id), identity.job_id);
  header->features = geometry.count_keys != 0
                         ? identity.features | NCCLSCOPE_FEATURE_EXACT_COUNTS
                         : identity.features & ~std::uint32_t{NCCLSCOPE_FEATURE_EXACT_COUNTS};
  header->state = NCCLSCOPE_RING_LIVE;
  std::atomic_ref<std::uint64_t>(header->magic)
      .store(NCCLSCOPE_RING_MAGIC, std::memory_order_release);
}

}  // namespace

RingGeometry RingGeometry::ForRecordBytes(std::uint64_t record_bytes, std::uint32_t lanes,
                                          std::uint32_t comm_slots) {
  RingGeometry g;
  g.lanes = lanes == 0 ? 1 : lanes;
  g.comm_slots = comm_slots;
  std::uint64_t per_lane = record_bytes / g.lanes / NCCLSCOPE_RECORD_SIZE;
  std::uint32_t capacity = 16;  // never less than a handful of records per lane
  while (static_cast<std::uint64_t>(capacity) * 2 <= per_lane &&
         capacity < NCCLSCOPE_MAX_LANE_CAPACITY) {
    capacity *= 2;
  }
  g.lane_capacity = capacity;
  return g;
}

std::uint64_t RingGeometry::FileSize() const { return LayoutOf(*this).file_size; }

RingWriter::~RingWriter() { Close(); }

bool RingWriter::Create(const char* dir, const RingGeometry& geometry, const RingIdentity& identity,
                        RingError* error) {
  Close();
  error->Clear();
  if (!ValidGeometry(geometry)) {
    error->Assign("invalid ring geometry");
    return false;
  }
  if (!MakeRingDirectory(dir, error)) return false;

  const Layout layout = LayoutOf(geometry);
  const std::uint64_t created = platform::RealtimeNs();
  RingPath temp;
  RingPath final_path;
  temp.Appendf("%s/.ncclscope-%d-%llu.tmp", dir, static_cast<int>(::getpid()),
               static_cast<unsigned long long>(created));
  final_path.Appendf("%s/ncclscope-%d-%llu%s", dir, static_cast<int>(::getpid()),
                     static_cast<unsigned long long>(created), NCCLSCOPE_RING_SUFFIX);
  if (temp.truncated() || final_path.truncated()) {
    error->Assign("ring directory name too long");
    return false;
  }

  void* map = nullptr;
  const int fd = CreateMappedFile(temp.c_str(), layout.file_size, error, &map);
  if (fd < 0) return false;
  auto* header = static_cast<ncclscope_ring_header*>(map);
  WriteHeader(header, geometry, layout, identity, created);
  if (::rename(temp.c_str(), final_path.c_str()) != 0) {
    ::munmap(map, layout.file_size);
    return Abandon(error, "cannot rename", temp.c_str(), fd);
  }

  path_ = final_path;
  fd_ = fd;
  map_ = map;
  map_size_ = layout.file_size;
  geometry_ = geometry;
  header_ = header;
  comm_table_ = reinterpret_cast<ncclscope_comm_slot*>(static_cast<unsigned char*>(map) +
                                                       layout.comm_table_offset);
  count_table_ = layout.count_table_offset != 0
                     ? reinterpret_cast<ncclscope_op_count*>(static_cast<unsigned char*>(map) +
                                                             layout.count_table_offset)
                     : nullptr;
  lanes_ =
      reinterpret_cast<ncclscope_lane*>(static_cast<unsigned char*>(map) + layout.lanes_offset);
  data_ = static_cast<unsigned char*>(map) + layout.data_offset;
  return true;
}

void RingWriter::Close() {
  if (map_ != nullptr) ::munmap(map_, map_size_);
  if (fd_ >= 0) ::close(fd_);
  map_ = nullptr;
  fd_ = -1;
  header_ = nullptr;
  comm_table_ = nullptr;
  count_table_ = nullptr;
  lanes_ = nullptr;
  data_ = nullptr;
  path_.Clear();
}

void RingWriter::DetachAfterFork() { Close(); }

void RingWriter::Count(ncclscope_counter counter, std::uint64_t n) {
  if (header_ == nullptr || counter >= NCCLSCOPE_COUNTER_MAX) return;
  std::atomic_ref<std::uint64_t>(header_->counters[counter])
      .fetch_add(n, std::memory_order_relaxed);
}

bool RingWriter::Write(const void* records, std::uint32_t count, std::uint32_t lane_hint) {
  Reservation reservation;  // NOLINT(cppcoreguidelines-pro-type-member-init): Reserve fills it
  if (!Reserve(count, lane_hint, &reservation)) return false;
  const auto* bytes = static_cast<const unsigned char*>(records);
  for (std::uint32_t i = 0; i < count; ++i) {
    std::memcpy(reservation.slots[i], bytes + static_cast<std::size_t>(i) * NCCLSCOPE_RECORD_SIZE,
                NCCLSCOPE_RECORD_SIZE);
  }
  Commit(reservation);
  return true;
}

}  // namespace ncclscope::ring
