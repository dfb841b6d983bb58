// Plugin chaining's loading: NCCLSCOPE_CHAIN, the chained library and the table NCCL's ABI version
// asks for in it, and the memory the chain reserves (slots, retire rings, the communicator map);
// also where the chain's process-wide state (chain_state.h) is defined. NCCL line numbers are at
// v2.28.9-1 unless marked HEAD (master 5067397c = 2.30.7) or v2.27.7-1.

#include <dlfcn.h>
#include <sys/mman.h>

#include <cstdio>
#include <new>

#include "plugin/src/chain_state.h"
#include "plugin/src/runtime.h"
#include "plugin/src/settings.h"

namespace ncclscope::plugin::chain {

std::atomic<bool> g_active{false};

namespace {

alignas(Chain) unsigned char g_chain_storage[sizeof(Chain)];

}  // namespace

Chain* const g_chain = new (g_chain_storage) Chain();  // NOLINT(cert-err58-cpp)

alignas(64) int g_ours_mask = 0;
alignas(64) int g_chained_mask = 0;

namespace {

template <typename Table>
bool Complete(const Table* t) {
  return t->init != nullptr && t->startEvent != nullptr && t->stopEvent != nullptr &&
         t->recordEventState != nullptr && t->finalize != nullptr;
}

}  // namespace

// Resolves the chained plugin's table for NCCL's `version` (under g.mutex). NCCL looks up
// ncclProfiler_v<N> from its newest N down (src/plugin/profiler.cc:70-82); the chain wants the
// version NCCL chose for ncclscope, and behind v6 also takes a v5 table, as NCCL itself would
// load a v5-only plugin (NCCL's Inspector exports only ncclProfiler_v5: HEAD
// plugins/profiler/inspector/inspector_plugin.cc:806).
const ChainedTable& Resolve(Chain& g, int version, abi::DebugLogger logger) {
  ChainedTable& t = g.tables[version];
  if (t.tried || g.lib == nullptr) return t;
  t.tried = true;
  const int candidates[2] = {version, version == 6 ? 5 : 0};
  for (int candidate : candidates) {
    if (candidate == 0) break;
    char symbol[32];
    std::snprintf(symbol, sizeof(symbol), "ncclProfiler_v%d", candidate);
    void* found = dlsym(g.lib, symbol);
    if (found == nullptr) continue;
    Dl_info self{};
    Dl_info other{};
    if (dladdr(reinterpret_cast<void*>(&Maintain), &self) != 0 && dladdr(found, &other) != 0 &&
        self.dli_fbase == other.dli_fbase) {
      LogWith(logger, abi::kLogWarn, "NCCLSCOPE_CHAIN=%s is ncclscope itself; ncclscope runs alone",
              g.path.c_str());
      ++g.pending_errors;
      return t;
    }
    bool complete = false;
    const char* name = nullptr;
    if (candidate == 4) {
      const auto* v4 = static_cast<const abi::ProfilerV4*>(found);
      complete = Complete(v4);
      name = v4->name;
    } else if (candidate == 5) {
      const auto* v5 = static_cast<const abi::ProfilerV5*>(found);
      complete = Complete(v5);
      name = v5->name;
    } else {
      const auto* v6 = static_cast<const abi::ProfilerV6*>(found);
      complete = Complete(v6);
      name = v6->name;
    }
    if (!complete) {
      LogWith(logger, abi::kLogWarn,
              "%s in %s lacks a function (init, startEvent, stopEvent, recordEventState or "
              "finalize is NULL); ncclscope runs alone",
              symbol, g.path.c_str());
      ++g.pending_errors;
      return t;
    }
    t.version = candidate;
    t.drops_ce = candidate != version;
    t.table = found;
    t.name = name != nullptr ? name : "(unnamed)";
    LogWith(logger, abi::kLogInfo, "forwarding every event to %s (%s, %s%s)", g.path.c_str(),
            t.name, symbol,
            t.drops_ce ? " behind NCCL's v6, without CE events, as NCCL's v5 adapter does" : "");
    g_active.store(true, std::memory_order_release);
    return t;
  }
  LogWith(logger, abi::kLogWarn,
          "%s exports no ncclProfiler_v%d%s (the ABI version NCCL chose for ncclscope); "
          "ncclscope runs alone",
          g.path.c_str(), version, version == 6 ? " or ncclProfiler_v5" : "");
  ++g.pending_errors;
  return t;
}

namespace {

bool ReserveRing(RetireRing& ring, std::uint32_t size) {
  void* map = ::mmap(nullptr, size * sizeof(std::uint64_t), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map == MAP_FAILED) return false;
  ring.cells = static_cast<std::atomic<std::uint64_t>*>(map);  // zeroed: every cell empty
  ring.size = size;
  return true;
}

}  // namespace

// First init (under g.mutex): NCCLSCOPE_CHAIN, and the chained library.
void Configure(Chain& g, abi::DebugLogger logger) {
  g.configured = true;
  const EnvLookup env = ProcessEnv();
  g.path = ChainPath(env);
  if (g.path.empty()) return;
  Settings probe;
  ApplyEnvironment(env, probe);
  if (probe.disabled) return;  // NCCLSCOPE_DISABLE: NCCL runs without profiler events at all
  const bool reserved = g.slots.Reserve(kChainArena, sizeof(Slot), kSlots) &&
                        ReserveRing(g.task, kTaskWindow) && ReserveRing(g.graph, kGraphWindow) &&
                        ReserveRing(g.proxy, kProxyWindow);
  if (!reserved) {
    LogWith(logger, abi::kLogWarn,
            "cannot reserve memory for NCCLSCOPE_CHAIN=%s; ncclscope runs "
            "alone",
            g.path.c_str());
    ++g.pending_errors;
    return;
  }
  // As NCCL opens profiler plugins (src/plugin/plugin_open.cc:37). Never closed: its threads may
  // outlive the last communicator, and ncclscope itself is never unloaded (-z nodelete).
  g.lib = dlopen(g.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (g.lib == nullptr) {
    const char* error = dlerror();
    LogWith(logger, abi::kLogWarn, "NCCLSCOPE_CHAIN=%s cannot be loaded (%s); ncclscope runs alone",
            g.path.c_str(), error != nullptr ? error : "unknown error");
    ++g.pending_errors;
  }
}

// The table of the communicator map, once ncclscope's comm arena exists (under g.mutex).
bool EnsureComms(Chain& g) {
  if (g.comms != nullptr) return true;
  const std::uint32_t ours = R().comms.capacity();
  const std::size_t bytes = (static_cast<std::size_t>(ours) + kChainOnlyComms) * sizeof(CommEntry);
  void* map = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map == MAP_FAILED) return false;
  g.comms = static_cast<CommEntry*>(map);  // zeroed memory: every entry unused
  g.ours_capacity = ours;
  return true;
}

}  // namespace ncclscope::plugin::chain
