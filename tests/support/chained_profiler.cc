// libchained-profiler.so: a second NCCL profiler plugin for the chaining tests (see
// chained_profiler.h). Built twice: with every ABI table (v4, v5, v6) and, with
// CHAINED_PROFILER_ONLY_V5, with ncclProfiler_v5 only (what NCCL's Inspector exports). Thread-safe
// through one mutex: this is a test instrument, not a fast plugin.

#include "tests/support/chained_profiler.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace ncclscope::testing::chained {
namespace {

constexpr std::uint64_t kMagic = 0xC4A1'17ED'0B1E'C7ull;

// What a handle or a context points to. Never freed: a late or repeated call can still be checked.
struct Object {
  std::uint64_t magic = kMagic;
  std::uint64_t type = 0;  // 0: a context
  int version = 0;
  const void* parent = nullptr;
  const Object* context = nullptr;
  bool foreign = false;  // a PXN ProxyOp (or its step): raised for another process
  bool stopped = false;  // handles: stopped; contexts: finalized
};

struct State {
  std::mutex mutex;
  Config config;
  Counts counts;
  std::vector<Event> events;
  std::string violations;
  std::unordered_map<const void*, Object*> issued;
  int* mask = nullptr;  // the int ncclscope gave it at init
  std::uint64_t init_calls = 0, start_calls = 0, stop_calls = 0, record_calls = 0;
  std::string summary_path;
  pid_t pid = 0;
};

State& S() {
  static State* const state = new State();  // never destroyed: calls may come at exit
  return *state;
}

bool Every(int every, std::uint64_t n) {
  return every > 0 && n % static_cast<std::uint64_t>(every) == 0;
}

int BitIndex(std::uint64_t type) {
  return type == 0 ? 15 : (__builtin_ctzll(type) < 15 ? __builtin_ctzll(type) : 15);
}

void Violation(State& s, const std::string& what) {
  ++s.counts.violations;
  if (s.violations.size() < 64 * 1024) s.violations += what + "\n";
}

std::string Named(std::uint64_t type) { return abi::EventTypeName(type); }

// The parent NCCL passes for each event type (src/plugin/profiler.cc; v4: Coll/P2p under Group).
bool LegalParent(int version, std::uint64_t child, std::uint64_t parent) {
  switch (child) {
    case abi::kCollApi:
    case abi::kP2pApi:
    case abi::kKernelLaunch:
      return parent == abi::kGroupApi;
    case abi::kColl:
      return parent == (version >= 5 ? abi::kCollApi : abi::kGroup);
    case abi::kP2p:
      return parent == (version >= 5 ? abi::kP2pApi : abi::kGroup);
    case abi::kKernelCh:
    case abi::kProxyOp:
      return parent == abi::kColl || parent == abi::kP2p;
    case abi::kProxyStep:
      return parent == abi::kProxyOp;
    case abi::kNetPlugin:
      return parent == abi::kProxyStep;
    case abi::kCeColl:
      return parent == abi::kCollApi;
    case abi::kCeSync:
    case abi::kCeBatch:
      return parent == abi::kCeColl;
    default:
      return false;
  }
}

// Looks `p` up among the objects it issued (a map lookup: never a dereference of a stranger).
Object* Mine(State& s, const void* p) {
  const auto it = s.issued.find(p);
  return it == s.issued.end() ? nullptr : it->second;
}

abi::EventDescrV6 Normalize(const abi::EventDescrV4* d) {
  abi::EventDescrV6 n{};
  std::memset(&n, 0, sizeof(n));
  n.type = d->type;
  n.parentObj = d->parentObj;
  n.rank = d->rank;
  switch (d->type) {
    case abi::kColl:
      n.coll.seqNumber = d->coll.seqNumber;
      n.coll.func = d->coll.func;
      n.coll.sendBuff = d->coll.sendBuff;
      n.coll.recvBuff = d->coll.recvBuff;
      n.coll.count = d->coll.count;
      n.coll.root = d->coll.root;
      n.coll.datatype = d->coll.datatype;
      n.coll.nChannels = d->coll.nChannels;
      n.coll.nWarps = d->coll.nWarps;
      n.coll.algo = d->coll.algo;
      n.coll.proto = d->coll.proto;
      break;
    case abi::kP2p:
      n.p2p.func = d->p2p.func;
      n.p2p.buff = d->p2p.buff;
      n.p2p.datatype = d->p2p.datatype;
      n.p2p.count = d->p2p.count;
      n.p2p.peer = d->p2p.peer;
      n.p2p.nChannels = d->p2p.nChannels;
      break;
    case abi::kProxyOp:
      n.proxyOp = d->proxyOp;
      break;
    case abi::kProxyStep:
      n.proxyStep = d->proxyStep;
      break;
    case abi::kKernelCh:
      n.kernelCh = d->kernelCh;
      break;
    case abi::kNetPlugin:
      n.netPlugin = d->netPlugin;
      break;
    default:
      break;
  }
  return n;
}
abi::EventDescrV6 Normalize(const abi::EventDescrV5* d) {
  abi::EventDescrV6 n{};
  std::memcpy(&n, d, sizeof(n));
  return n;
}
abi::EventDescrV6 Normalize(const abi::EventDescrV6* d) { return *d; }

void WriteSummary(State& s);

// ---- the profiler ----

abi::Result InitAny(int version, void** context, int* mask) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  *context = nullptr;
  const std::uint64_t n = ++s.init_calls;
  ++s.counts.inits;
  Event e;
  e.call = kInit;
  e.version = version;
  s.mask = mask;
  if (Every(s.config.fail_init_every, n)) {
    ++s.counts.init_errors;
    e.result = abi::kInternalError;
  } else if (!Every(s.config.null_context_every, n)) {
    auto* ctx = new Object();
    ctx->version = version;
    s.issued[ctx] = ctx;
    *context = ctx;
  }
  if (mask != nullptr) __atomic_store_n(mask, s.config.mask, __ATOMIC_RELAXED);
  e.context = *context;
  e.mask_at_return = s.config.mask;
  if (s.config.log_events) s.events.push_back(e);
  return e.result;
}

[[maybe_unused]] abi::Result InitV4(void** context, int* mask, const char*, std::uint64_t, int, int,
                                    int, abi::DebugLogger) {
  return InitAny(4, context, mask);
}
abi::Result InitV5(void** context, std::uint64_t, int* mask, const char*, int, int, int,
                   abi::DebugLogger) {
  return InitAny(5, context, mask);
}
[[maybe_unused]] abi::Result InitV6(void** context, std::uint64_t, int* mask, const char*, int, int,
                                    int, abi::DebugLogger) {
  return InitAny(6, context, mask);
}

template <typename Descr>
abi::Result StartAny(int version, void* context, void** handle, Descr* d) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  *handle = nullptr;
  const auto type = static_cast<std::uint64_t>(d->type);
  Event e;
  e.call = kStart;
  e.version = version;
  e.type = type;
  e.context = context;
  e.parent = d->parentObj;
  e.descr = Normalize(d);
  if constexpr (!std::is_same_v<Descr, abi::EventDescrV4>) {
    if (type == abi::kColl) e.parent_group = d->coll.parentGroup;
    if (type == abi::kP2p) e.parent_group = d->p2p.parentGroup;
  }
  ++s.counts.starts;
  ++s.counts.starts_by_type[BitIndex(type)];
  const std::string what = Named(type) + " start (v" + std::to_string(version) + ")";

  // PXN: the context and parent of a ProxyOp raised for another process are that process's.
  bool foreign = type == abi::kProxyOp && e.descr.proxyOp.pid != s.pid;
  Object* parent = nullptr;
  if (d->parentObj != nullptr && !foreign) {
    parent = Mine(s, d->parentObj);
    if (parent == nullptr || parent->type == 0) {
      Violation(s, what + ": parentObj is not a handle it issued");
    } else if (!LegalParent(version, type, parent->type)) {
      Violation(s, what + ": parentObj is a " + Named(parent->type));
    }
    if (parent != nullptr && parent->foreign) foreign = true;
  }
  if (e.parent_group != nullptr) {
    Object* group = Mine(s, e.parent_group);
    if (group == nullptr || group->type != abi::kGroup) {
      Violation(s, what + ": parentGroup is not a Group handle it issued");
    }
  }
  Object* ctx = nullptr;
  if (!foreign) {
    ctx = Mine(s, context);
    if (ctx == nullptr || ctx->type != 0) {
      Violation(s, what + ": context is not one it issued");
    } else if (ctx->stopped) {
      Violation(s, what + ": context already finalized");
    }
  }

  const std::uint64_t n = ++s.start_calls;
  const int mask = s.mask != nullptr ? __atomic_load_n(s.mask, __ATOMIC_RELAXED) : 0;
  if (Every(s.config.null_handle_every, n) && (s.config.null_types & type) != 0) {
    if ((static_cast<std::uint64_t>(mask) & type) != 0) ++s.counts.null_in_mask;
  } else {
    auto* obj = new Object();
    obj->type = type;
    obj->version = version;
    obj->parent = d->parentObj;
    obj->context = ctx;
    obj->foreign = foreign;
    s.issued[obj] = obj;
    *handle = obj;
    ++s.counts.handles;
  }
  if (Every(s.config.fail_start_every, n)) {
    ++s.counts.start_errors;
    e.result = abi::kInternalError;
  }
  e.handle = *handle;
  e.mask_at_return = mask;
  if (s.config.log_events) s.events.push_back(e);
  return e.result;
}

[[maybe_unused]] abi::Result StartV4(void* context, void** handle, abi::EventDescrV4* d) {
  return StartAny(4, context, handle, d);
}
abi::Result StartV5(void* context, void** handle, abi::EventDescrV5* d) {
  return StartAny(5, context, handle, d);
}
[[maybe_unused]] abi::Result StartV6(void* context, void** handle, abi::EventDescrV6* d) {
  return StartAny(6, context, handle, d);
}

abi::Result Stop(void* handle) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  Event e;
  e.call = kStop;
  e.handle = handle;
  ++s.counts.stops;
  Object* obj = Mine(s, handle);
  if (obj == nullptr || obj->type == 0) {
    Violation(s, "stop of a handle it never issued");
  } else {
    e.type = obj->type;
    e.version = obj->version;
    e.parent_of_handle = obj->parent;
    if (obj->stopped) Violation(s, Named(obj->type) + " stopped twice");
    obj->stopped = true;
  }
  if (Every(s.config.fail_stop_every, ++s.stop_calls)) {
    ++s.counts.stop_errors;
    e.result = abi::kInternalError;
  }
  if (s.config.log_events) s.events.push_back(e);
  return e.result;
}

abi::Result Record(void* handle, int state, abi::StateArgsV4* args) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  Event e;
  e.call = kRecord;
  e.handle = handle;
  e.state = state;
  e.args_null = args == nullptr;
  if (args != nullptr) std::memcpy(&e.arg, args, sizeof(e.arg));
  ++s.counts.records;
  Object* obj = Mine(s, handle);
  if (obj == nullptr || obj->type == 0) {
    Violation(s, "record (state " + std::to_string(state) + ") on a handle it never issued");
  } else {
    e.type = obj->type;
    e.version = obj->version;
    e.parent_of_handle = obj->parent;
    if (obj->stopped) Violation(s, Named(obj->type) + " recorded after its stop");
  }
  if (Every(s.config.fail_record_every, ++s.record_calls)) {
    ++s.counts.record_errors;
    e.result = abi::kInternalError;
  }
  if (s.config.log_events) s.events.push_back(e);
  return e.result;
}

abi::Result Finalize(void* context) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  Event e;
  e.call = kFinalize;
  e.context = context;
  ++s.counts.finalizes;
  Object* ctx = Mine(s, context);
  if (ctx == nullptr || ctx->type != 0) {
    Violation(s, "finalize of a context it never issued");
  } else {
    if (ctx->stopped) Violation(s, "context finalized twice");
    ctx->stopped = true;
    e.version = ctx->version;
  }
  if (s.config.fail_finalize) {
    ++s.counts.finalize_errors;
    e.result = abi::kInternalError;
  }
  if (s.config.log_events) s.events.push_back(e);
  WriteSummary(s);
  return e.result;
}

void WriteSummary(State& s) {
  if (s.summary_path.empty()) return;
  FILE* f = std::fopen(s.summary_path.c_str(), "w");
  if (f == nullptr) return;
  const Counts& c = s.counts;
  std::fprintf(
      f,
      "inits %llu\nfinalizes %llu\nstarts %llu\nstops %llu\nrecords %llu\nhandles %llu\n"
      "violations %llu\n",
      static_cast<unsigned long long>(c.inits), static_cast<unsigned long long>(c.finalizes),
      static_cast<unsigned long long>(c.starts), static_cast<unsigned long long>(c.stops),
      static_cast<unsigned long long>(c.records), static_cast<unsigned long long>(c.handles),
      static_cast<unsigned long long>(c.violations));
  for (int bit = 0; bit < 15; ++bit) {
    std::fprintf(f, "start %s %llu\n", abi::EventTypeName(1ull << bit),
                 static_cast<unsigned long long>(c.starts_by_type[bit]));
  }
  std::fputs(s.violations.c_str(), f);
  std::fclose(f);
}

}  // namespace
}  // namespace ncclscope::testing::chained

namespace chained = ncclscope::testing::chained;
namespace abi = ncclscope::abi;

// NOLINTBEGIN(readability-identifier-naming): NCCL's ABI names.
extern "C" {
#ifndef CHAINED_PROFILER_ONLY_V5
__attribute__((visibility("default")))
abi::ProfilerV6 ncclProfiler_v6 = {"chained-test", chained::InitV6, chained::StartV6,
                                   chained::Stop,  chained::Record, chained::Finalize};
__attribute__((visibility("default")))
abi::ProfilerV4 ncclProfiler_v4 = {"chained-test", chained::InitV4, chained::StartV4,
                                   chained::Stop,  chained::Record, chained::Finalize};
#endif
__attribute__((visibility("default")))
abi::ProfilerV5 ncclProfiler_v5 = {"chained-test", chained::InitV5, chained::StartV5,
                                   chained::Stop,  chained::Record, chained::Finalize};

__attribute__((visibility("default"))) void chained_profiler_configure(
    const chained::Config* config) {
  chained::State& s = chained::S();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.config = *config;
  s.init_calls = s.start_calls = s.stop_calls = s.record_calls = 0;
}

__attribute__((visibility("default"))) void chained_profiler_set_mask(int mask) {
  chained::State& s = chained::S();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.config.mask = mask;
  if (s.mask != nullptr) __atomic_store_n(s.mask, mask, __ATOMIC_RELAXED);
}

__attribute__((visibility("default"))) void chained_profiler_reset() {
  chained::State& s = chained::S();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.counts = chained::Counts{};
  s.events.clear();
  s.violations.clear();
}

__attribute__((visibility("default"))) void chained_profiler_counts(chained::Counts* out) {
  chained::State& s = chained::S();
  std::lock_guard<std::mutex> lock(s.mutex);
  *out = s.counts;
}

__attribute__((visibility("default"))) std::size_t chained_profiler_events(chained::Event* out,
                                                                           std::size_t max) {
  chained::State& s = chained::S();
  std::lock_guard<std::mutex> lock(s.mutex);
  const std::size_t n = s.events.size() < max ? s.events.size() : max;
  if (out != nullptr) std::copy(s.events.begin(), s.events.begin() + static_cast<long>(n), out);
  return s.events.size();
}

__attribute__((visibility("default"))) std::size_t chained_profiler_violations(char* out,
                                                                               std::size_t max) {
  chained::State& s = chained::S();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (out != nullptr && max > 0) {
    const std::size_t n = s.violations.size() < max - 1 ? s.violations.size() : max - 1;
    std::memcpy(out, s.violations.data(), n);
    out[n] = '\0';
  }
  return s.violations.size();
}
}
// NOLINTEND(readability-identifier-naming)

namespace {

// Environment for child processes (see chained_profiler.h), read at load.
__attribute__((constructor)) void ReadEnvironment() {
  chained::State& s = chained::S();
  s.pid = getpid();
  // Read before any thread of the plugin exists (it has none).
  if (const char* mask = std::getenv("CHAINED_PROFILER_MASK")) {  // NOLINT(concurrency-mt-unsafe)
    s.config.mask = static_cast<int>(std::strtol(mask, nullptr, 0));
  }
  if (const char* every =
          std::getenv("CHAINED_PROFILER_FAIL_EVERY")) {  // NOLINT(concurrency-mt-unsafe)
    const int n = static_cast<int>(std::strtol(every, nullptr, 10));
    s.config.fail_start_every = n;
    s.config.null_handle_every = n + 2;
    s.config.null_types = ~static_cast<std::uint64_t>(abi::kProxyOp | abi::kNetPlugin);
    s.config.fail_stop_every = n + 4;
    s.config.fail_record_every = n + 6;
  }
  if (const char* path =
          std::getenv("CHAINED_PROFILER_SUMMARY")) {  // NOLINT(concurrency-mt-unsafe)
    s.summary_path = path;
  }
  if (const char* broken =
          std::getenv("CHAINED_PROFILER_BROKEN")) {  // NOLINT(concurrency-mt-unsafe)
    if (std::strcmp(broken, "1") == 0) {
#ifndef CHAINED_PROFILER_ONLY_V5
      ncclProfiler_v6.startEvent = nullptr;
      ncclProfiler_v4.startEvent = nullptr;
#endif
      ncclProfiler_v5.startEvent = nullptr;
    }
  }
}

}  // namespace
