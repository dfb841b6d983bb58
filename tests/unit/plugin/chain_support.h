#pragma once

// One round of every event type NCCL emits, for one communicator, through tools/replay: what the
// replay drives itself (collectives, a p2p group, an all-to-all with self, network proxy ops and
// steps, kernel channels) plus the events it has no call for, emitted here in NCCL's order and
// only when NCCL's mask snapshot makes NCCL emit them (src/plugin/profiler.cc at v2.28.9-1; CE
// events: HEAD): the kernel launch, a net-plugin (IB QP) event under a network step, the proxy
// thread's control events, a CUDA graph (API events captured once, then Group and Coll at every
// replay naming the captured CollApi handle as parent) and, under v6, a copy-engine collective
// with its sync and batch events. GPU times are fixed per round, so two runs emit the same.
// Also: the chained test plugin's controls, its log in a canonical form (to compare what it saw
// with what NCCL would show it alone), and ncclscope's op records reduced to what must not depend
// on chaining. Used by the chaining tests and the chain-scenario child program.

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "agent/profiler/record_sink.h"
#include "tests/support/chained_profiler.h"
#include "tools/replay/nccl_replay.h"

namespace ncclscope::testing {

// Collectives (ncclscope ops) one round drives, and how many ops ncclscope records for it.
struct RoundOps {
  std::uint64_t colls = 0;
  std::uint64_t p2p = 0;
  std::uint64_t ce = 0;
  std::uint64_t Total() const { return colls + p2p + ce; }
};

// Drives round `round` (seq numbers and GPU times derived from it). Proxy work runs on the comm's
// proxy thread when it has one.
RoundOps DriveEveryEventType(replay::ReplayComm& comm, int round);

// Whether NCCL emits an event of `type` for mask snapshot `snapshot` (NCCL's gates).
bool NcclEmits(int snapshot, std::uint64_t type);

// The chained test plugin (libchained-profiler.so) in this process: dlopen of the same path
// returns the instance ncclscope loaded.
class ChainedPlugin {
 public:
  explicit ChainedPlugin(const std::string& path);
  ~ChainedPlugin();
  ChainedPlugin(const ChainedPlugin&) = delete;
  ChainedPlugin& operator=(const ChainedPlugin&) = delete;

  bool ok() const { return lib_ != nullptr && configure_ != nullptr; }
  void Configure(const chained::Config& config) const { configure_(&config); }
  void SetMask(int mask) const { set_mask_(mask); }
  void Reset() const { reset_(); }
  chained::Counts Counts() const;
  std::vector<chained::Event> Events() const;
  std::string Violations() const;

 private:
  void* lib_ = nullptr;
  decltype(&chained_profiler_configure) configure_ = nullptr;
  decltype(&chained_profiler_set_mask) set_mask_ = nullptr;
  decltype(&chained_profiler_reset) reset_ = nullptr;
  decltype(&chained_profiler_counts) counts_ = nullptr;
  decltype(&chained_profiler_events) events_ = nullptr;
  decltype(&chained_profiler_violations) violations_ = nullptr;
};

// The chained plugin's log as a multiset of lines, one per event it started (type, descriptor
// fields, and its parents described the same way, recursively), followed by the records and the
// stop it got for that handle, plus one line per init and finalize. Pointers never appear: two
// runs that showed the plugin the same events with the same parent links compare equal.
std::multiset<std::string> CanonicalLog(const std::vector<chained::Event>& log);

// What a run wrote for its ops, without what depends on when it ran (host times, op_index order
// across threads, comm_slot): one line per op, sorted, for comparing two runs.
std::vector<std::string> OpLines(const std::vector<profiler::OpView>& ops);
std::vector<std::string> ProxyOpLines(const std::vector<ncclscope_proxy_op_record>& ops);

}  // namespace ncclscope::testing
