#pragma once

// The interface of libchained-profiler.so (chained_profiler.cc), a second NCCL profiler plugin for
// the chaining tests (NCCLSCOPE_CHAIN). It exports ncclProfiler_v4/v5/v6 (the _v5 build only
// ncclProfiler_v5, like NCCL's Inspector), hands out real pointers as handles and contexts (as
// NCCL's plugins do), records every call it receives, and checks every handle it is given
// against the ones it issued (never dereferencing anything else): a parent, a handle to stop or
// record, or a context that is not its own is a violation, as are a second stop and events
// after finalize. It can be told to fail. Tests reach these functions with dlopen(RTLD_NOLOAD)
// + dlsym on the instance ncclscope loaded (same path, same instance).
//
// Environment, read when the library is loaded (for child processes):
//   CHAINED_PROFILER_MASK=N     its event mask (default: every event)
//   CHAINED_PROFILER_BROKEN=1   its tables lack startEvent (a plugin that cannot be used)
//   CHAINED_PROFILER_FAIL_EVERY=N  start errors every N calls, NULL handles every N+2 (not for
//                               ProxyOp/NetPlugin), stop errors every N+4, record errors every N+6
//   CHAINED_PROFILER_SUMMARY=P  write Summary() as text to P at each finalize

#include <cstddef>
#include <cstdint>

#include "plugin/abi/nccl_profiler_abi.h"

namespace ncclscope::testing::chained {

enum Call : std::uint8_t { kInit, kStart, kStop, kRecord, kFinalize };

// One call the plugin received. The descriptor is normalized to the v6 layout.
struct Event {
  Call call = kInit;
  int version = 0;         // the table NCCL (here: ncclscope) called
  std::uint64_t type = 0;  // start: the event type; stop/record: the handle's type
  const void* context = nullptr;
  const void* handle = nullptr;  // start: the handle returned; stop/record: the handle received
  const void* parent = nullptr;  // start: parentObj received
  const void* parent_group = nullptr;      // start (v5+ Coll/P2p): parentGroup received
  const void* parent_of_handle = nullptr;  // stop/record: the parentObj its start received
  int state = -1;                          // record
  bool args_null = true;                   // record
  std::uint64_t arg = 0;                   // record: the 8-byte state-args union
  int result = 0;                          // what the plugin returned
  abi::EventDescrV6 descr{};               // start
  int mask_at_return = 0;                  // its own mask when it returned
};

// What it is told to do; every "every" is 0 (never) or n (each n-th call of that kind).
struct Config {
  int mask = 0x7FFF;
  int fail_init_every = 0;           // init returns ncclInternalError (no context)
  int null_context_every = 0;        // init succeeds with a NULL context
  int fail_start_every = 0;          // startEvent returns an error (with a valid handle)
  int null_handle_every = 0;         // startEvent returns success and a NULL handle
  std::uint64_t null_types = ~0ull;  // ... only for these event types
  int fail_stop_every = 0;
  int fail_record_every = 0;
  bool fail_finalize = false;
  bool log_events = true;  // false: count and check, keep no Event log (big runs)
};

// Counts (also kept when log_events is false).
struct Counts {
  std::uint64_t inits = 0, finalizes = 0, starts = 0, stops = 0, records = 0;
  std::uint64_t starts_by_type[16] = {};  // by bit index of the event type
  std::uint64_t handles = 0;              // non-NULL handles returned
  // Failures injected, as ncclscope must count them in chain_error.
  std::uint64_t init_errors = 0, start_errors = 0, stop_errors = 0, record_errors = 0;
  std::uint64_t finalize_errors = 0;
  std::uint64_t null_in_mask = 0;  // NULL handles returned for a type in its own mask
  std::uint64_t violations = 0;
};

}  // namespace ncclscope::testing::chained

// The C entry points (dlsym names).
extern "C" {
void chained_profiler_configure(const ncclscope::testing::chained::Config* config);
// Stores `mask` into the mask int it got at init, as a plugin changes its mask at run time.
void chained_profiler_set_mask(int mask);
void chained_profiler_reset();  // forgets the log, counts and violations (not the handles)
void chained_profiler_counts(ncclscope::testing::chained::Counts* out);
std::size_t chained_profiler_events(ncclscope::testing::chained::Event* out, std::size_t max);
std::size_t chained_profiler_violations(char* out, std::size_t max);  // text, one per line
}
