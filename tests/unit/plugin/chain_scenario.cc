// chain-scenario: a child process for the chaining tests whose configuration is process-wide
// (NCCLSCOPE_CHAIN set to something else, or unset): drives one communicator (rank 1 of 4 over 2
// nodes, its own proxy thread) through the plugin for --rounds rounds of every event type
// (chain_support.h), finalizes it, and prints what the parent test checks:
//
//   ops N            ops ncclscope should have recorded
//   nccl_mask M      NCCL's event mask after init (decimal)
//   ours_mask M      ncclscope's own (the ring header's effective mask)
//   chain_errors N   the ring's chain_error counter at the end
//
// Options: --plugin PATH (required) --abi 4|5|6 (6) --rounds N (2). Environment: NCCLSCOPE_* for
// the plugin, CHAINED_PROFILER_* for the chained test plugin.

#include <cstdio>
#include <cstdlib>
#include <string>

#include "agent/profiler/ring_file.h"
#include "tests/support/ring_records.h"
#include "tests/unit/plugin/chain_support.h"
#include "tools/replay/nccl_replay.h"

namespace ncclscope::testing {
namespace {

profiler::RingHeaderSnapshot Header() {
  profiler::RingHeaderSnapshot header;
  // Read once at the start of main, before any thread of ours exists.
  const char* dir = std::getenv("NCCLSCOPE_RING_DIR");  // NOLINT(concurrency-mt-unsafe)
  std::string reason;
  const auto file = profiler::RingFile::Open(OnlyRing(dir != nullptr ? dir : ""), &reason);
  if (file != nullptr) file->ReadHeader(&header);
  return header;
}

int Run(const std::string& path, int abi, int rounds) {
  replay::ProfilerPlugin plugin(path);
  if (!plugin.ok() || !plugin.Has(abi)) {
    std::fprintf(stderr, "cannot use %s (ABI v%d): %s\n", path.c_str(), abi,
                 plugin.error().c_str());
    return 2;
  }
  replay::ReplayProcess process(plugin, abi);
  replay::ProxyThread proxy;
  replay::ReplayComm comm(process, 0x5CE7A210ull, "scenario", 2, 4, 1, &proxy);
  if (!comm.Init()) {
    std::fprintf(stderr, "init gave no context\n");
    return 3;
  }
  const int nccl_mask = replay::ReplayProcess::MaskSnapshot();
  std::uint64_t ops = 0;
  for (int round = 0; round < rounds; ++round) ops += DriveEveryEventType(comm, round).Total();
  comm.Finalize();
  const profiler::RingHeaderSnapshot header = Header();
  std::printf("ops %llu\nnccl_mask %d\nours_mask %u\nchain_errors %llu\n",
              static_cast<unsigned long long>(ops), nccl_mask, header.effective_mask,
              static_cast<unsigned long long>(header.counters[NCCLSCOPE_CTR_CHAIN_ERRORS]));
  return 0;
}

}  // namespace
}  // namespace ncclscope::testing

int main(int argc, char** argv) {
  std::string plugin;
  int abi = 6;
  int rounds = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string arg = argv[i];
    if (arg == "--plugin") plugin = argv[i + 1];
    if (arg == "--abi") abi = static_cast<int>(std::strtol(argv[i + 1], nullptr, 10));
    if (arg == "--rounds") rounds = static_cast<int>(std::strtol(argv[i + 1], nullptr, 10));
  }
  if (plugin.empty()) {
    std::fprintf(stderr, "usage: chain-scenario --plugin PATH [--abi 4|5|6] [--rounds N]\n");
    return 2;
  }
  return ncclscope::testing::Run(plugin, abi, rounds);
}
