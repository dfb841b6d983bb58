// libFuzzer target over what the agent does with a pod's ring file: the input is the whole file.
// It is opened and validated (RingFile::Open), drained into a sink that touches every field it is
// handed, its header and comm table are read, controls are written into it, and every 256-byte
// block is also checked as a record on its own (ValidateRecord). Built with clang
// -fsanitize=fuzzer,address,undefined (tests/fuzz/CMakeLists.txt); seeds in corpus/ are real
// rings written by the plugin's writer (make_seeds.cc), so mutations start from valid geometry.

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "agent/core/log.h"
#include "agent/profiler/record_decoder.h"
#include "agent/profiler/ring_file.h"

namespace {

using ncclscope::profiler::OpView;
using ncclscope::profiler::RingOrigin;

// Reads what it is given, so that anything out of bounds is seen by the sanitizers.
struct Touch : ncclscope::profiler::RecordSink {
  std::uint64_t sum = 0;
  void OnCommInit(const RingOrigin& o, const ncclscope_comm_init_record& r) override {
    sum += r.comm_id + static_cast<std::uint64_t>(r.rank) + std::strlen(r.name) + o.hostname.size();
  }
  void OnCommFinalize(const RingOrigin&, const ncclscope_comm_finalize_record& r) override {
    sum += r.ops_completed;
  }
  void OnOp(const RingOrigin&, const OpView& v) override {
    for (std::uint32_t i = 0; i < v.n_channels; ++i) {
      sum += v.channels[i].end_off_ns - v.channels[i].start_off_ns + v.channel_ids[i];
    }
    sum += v.op.bytes;
  }
  void OnProxyOp(const RingOrigin&, const ncclscope_proxy_op_record& r) override { sum += r.bytes; }
};

std::string Path() {
  static std::string path = [] {
    const char* dir = ::getenv("TMPDIR");
    std::string p = std::string(dir != nullptr ? dir : "/tmp") + "/ncclscope-fuzz-" +
                    std::to_string(::getpid()) + ".ring";
    return p;
  }();
  return path;
}

}  // namespace

// The reader logs each ring's first rejected record of each reason at warn (still inspected, the
// check it failed named, below that level): every input is a new ring, so only errors are written.
extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  ncclscope::log::SetLevel(ncclscope::log::Level::kError);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  for (std::size_t at = 0; at + NCCLSCOPE_RECORD_SIZE <= size; at += NCCLSCOPE_RECORD_SIZE) {
    ncclscope_record_header h{};
    std::memcpy(&h, data + at, sizeof(h));
    (void)ncclscope::profiler::ValidateRecord(data + at, h.position);
  }
  const std::string path = Path();
  const int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) return 0;
  std::size_t written = 0;
  while (written < size) {
    const ssize_t n = ::write(fd, data + written, size - written);
    if (n <= 0) break;
    written += static_cast<std::size_t>(n);
  }
  ::close(fd);
  std::string reason;
  auto ring = ncclscope::profiler::RingFile::Open(path, &reason);
  if (ring != nullptr) {
    Touch sink;
    for (int pass = 0; pass < 3; ++pass) ring->Drain(sink, 64);
    ncclscope::profiler::RingHeaderSnapshot header;
    ring->ReadHeader(&header);
    for (const auto& slot : ring->ReadCommTable())
      sink.sum += slot.name.size() + slot.recent[0].seq_low;
    ncclscope_controls controls{};
    controls.event_mask = 0x2;
    ring->WriteControls(controls);
    ring->OwnerAlive();
  }
  ::unlink(path.c_str());
  return 0;
}
