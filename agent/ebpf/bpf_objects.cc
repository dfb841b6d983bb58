#include "agent/ebpf/bpf_objects.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "agent/core/log.h"
#include "agent/ebpf/proc/unique_fd.h"
#include "platform/errno_text.h"
#include "platform/fd_io.h"
#include "probes.skel.h"
#include "vma_iter.skel.h"

namespace ncclscope::ebpf {
namespace {

// The records cross the kernel/user boundary byte for byte.
static_assert(sizeof(ncclscope_proc_key) == 24);
static_assert(sizeof(ncclscope_call_counts) == 24);
static_assert(sizeof(ncclscope_slot_ref) == 16);
static_assert(sizeof(ncclscope_result_key) == 32);
static_assert(sizeof(ncclscope_stash) == 40);
static_assert(sizeof(ncclscope_thread_state) == 96 + 16 * NCCLSCOPE_OP_SLOTS);
static_assert(sizeof(ncclscope_event) == 64);
static_assert(sizeof(ncclscope_vma_record) == 40);

int LibbpfPrint(enum libbpf_print_level level, const char* format, va_list args) {
  if (level == LIBBPF_DEBUG || !log::Enabled(log::Level::kDebug)) return 0;
  char line[1024];
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"  // libbpf's own format strings
  const int n = std::vsnprintf(line, sizeof(line), format, args);
#pragma GCC diagnostic pop
  std::string text(line, n > 0 ? std::min<std::size_t>(n, sizeof(line) - 1) : 0);
  while (!text.empty() && text.back() == '\n') text.pop_back();
  NCCLSCOPE_LOG(kDebug, "libbpf") << text;
  return 0;
}

void InstallLibbpfLogger() {
  static const bool installed = [] {
    libbpf_set_print(LibbpfPrint);
    return true;
  }();
  (void)installed;
}

std::string LoadError(int err) {
  if (err == EPERM || err == EACCES) {
    return std::string("not permitted to load BPF programs (") + platform::ErrnoText(err).c_str() +
           "): run as root, or grant CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN (see "
           "agent/ebpf/README.md)";
  }
  return std::string("cannot load BPF programs: ") + platform::ErrnoText(err).c_str();
}

}  // namespace

Features DecideFeatures(const FeatureFacts& facts) {
  Features f;
  f.has_uprobe_pmu = facts.uprobe_pmu;
  if (!facts.objects_loaded) {
    f.reason = facts.load_error;
    return f;
  }
  if (!facts.uprobe_pmu) {
    f.reason = "the kernel has no uprobe PMU (CONFIG_UPROBE_EVENTS)";
    return f;
  }
  f.can_load = true;
  f.has_vma_iterator = facts.vma_iterator;
  return f;
}

Features ProbeKernelFeatures() {
  static const Features features = [] {
    FeatureFacts facts;
    facts.uprobe_pmu = access("/sys/bus/event_source/devices/uprobe/type", R_OK) == 0;
    auto objects = BpfObjects::Load(&facts.load_error);
    facts.objects_loaded = objects != nullptr;
    facts.vma_iterator = objects && objects->ExecutableMappings(getpid()).has_value();
    return DecideFeatures(facts);
  }();
  return features;
}

std::unique_ptr<BpfObjects> BpfObjects::Load(std::string* error) {
  InstallLibbpfLogger();
  std::unique_ptr<BpfObjects> objects(new BpfObjects());
  objects->probes_ = ncclscope_probes__open_and_load();
  if (objects->probes_ == nullptr) {
    *error = LoadError(errno);
    return nullptr;
  }
  if (!objects->calls().FillFreeSlots()) {
    *error =
        std::string("cannot fill the BPF free-slot queue: ") + platform::ErrnoText(errno).c_str();
    return nullptr;
  }
  objects->vma_ = ncclscope_vma_iter__open_and_load();
  if (objects->vma_ == nullptr) {
    // Not fatal: without the iterator, files are identified by the inode the process sees.
    NCCLSCOPE_LOG(kWarn, "ebpf") << "task_vma iterator unavailable ("
                                 << platform::ErrnoText(errno).c_str()
                                 << "): overlayfs files shared by containers may be counted twice";
  }
  return objects;
}

BpfObjects::~BpfObjects() {
  lifecycle_.clear();
  if (vma_ != nullptr) ncclscope_vma_iter__destroy(vma_);
  if (probes_ != nullptr) ncclscope_probes__destroy(probes_);
}

bool BpfObjects::AttachLifecycle(std::string* error) {
  for (bpf_program* program : {probes_->progs.ncclscope_exec, probes_->progs.ncclscope_exit}) {
    bpf_link* link = bpf_program__attach(program);
    if (link == nullptr) {
      *error = std::string("cannot attach ") + bpf_program__name(program) + ": " +
               platform::ErrnoText(errno).c_str();
      lifecycle_.clear();
      return false;
    }
    lifecycle_.emplace_back(link);
  }
  return true;
}

bpf_program* BpfObjects::entry_program() const { return probes_->progs.ncclscope_entry; }
bpf_program* BpfObjects::return_program() const { return probes_->progs.ncclscope_return; }
CallCounts BpfObjects::calls() const {
  return CallCounts(bpf_map__fd(probes_->maps.call_slots), bpf_map__fd(probes_->maps.call_counts),
                    bpf_map__fd(probes_->maps.free_slots));
}
BpfMap<ncclscope_result_key, std::uint64_t> BpfObjects::results() const {
  return BpfMap<ncclscope_result_key, std::uint64_t>(bpf_map__fd(probes_->maps.results));
}
BpfMap<ncclscope_result_key, std::uint64_t> BpfObjects::qp_states() const {
  return BpfMap<ncclscope_result_key, std::uint64_t>(bpf_map__fd(probes_->maps.qp_states));
}
BpfMap<std::uint32_t, std::uint64_t> BpfObjects::counters() const {
  return BpfMap<std::uint32_t, std::uint64_t>(bpf_map__fd(probes_->maps.counters));
}

std::unique_ptr<EventRing> EventRing::Open(const BpfObjects& objects, Handler handler,
                                           std::string* error) {
  std::unique_ptr<EventRing> ring(new EventRing(std::move(handler)));
  ring->ring_ = ring_buffer__new(bpf_map__fd(objects.probes_->maps.events), &EventRing::OnRecord,
                                 ring.get(), nullptr);
  if (ring->ring_ == nullptr) {
    *error = std::string("cannot open the BPF ring buffer: ") + platform::ErrnoText(errno).c_str();
    return nullptr;
  }
  return ring;
}

EventRing::~EventRing() {
  if (ring_ != nullptr) ring_buffer__free(ring_);
}

int EventRing::Poll(int timeout_ms) { return ring_buffer__poll(ring_, timeout_ms); }

int EventRing::OnRecord(void* ctx, void* data, std::size_t size) {
  if (size < sizeof(ncclscope_event)) return 0;
  ncclscope_event event{};
  std::memcpy(&event, data, sizeof(event));
  static_cast<EventRing*>(ctx)->handler_(event);
  return 0;
}

std::optional<std::vector<ncclscope_vma_record>> BpfObjects::ExecutableMappings(pid_t pid) const {
  if (vma_ == nullptr) return std::nullopt;
  union bpf_iter_link_info info {};
  info.task.pid = static_cast<__u32>(pid);
  bpf_iter_attach_opts opts{};
  opts.sz = sizeof(opts);
  opts.link_info = &info;
  opts.link_info_len = sizeof(info);
  const AttachedProbe link(bpf_program__attach_iter(vma_->progs.ncclscope_vmas, &opts));
  if (!link.valid()) return std::nullopt;
  const UniqueFd fd(bpf_iter_create(bpf_link__fd(link.get())));
  if (!fd.valid()) return std::nullopt;
  std::vector<ncclscope_vma_record> records;
  std::vector<char> bytes;
  char buffer[8192];
  constexpr std::size_t kMaxBytes = 16 << 20;  // a process with ~400k executable mappings
  for (;;) {
    const ssize_t n = platform::ReadRetrying(fd.get(), buffer, sizeof(buffer));
    if (n <= 0) break;
    bytes.insert(bytes.end(), buffer, buffer + n);
    if (bytes.size() > kMaxBytes) break;
  }
  records.resize(bytes.size() / sizeof(ncclscope_vma_record));
  // An empty read (the process exited meanwhile) leaves both buffers without storage.
  if (!records.empty()) {
    std::memcpy(records.data(), bytes.data(), records.size() * sizeof(ncclscope_vma_record));
  }
  return records;
}

}  // namespace ncclscope::ebpf
