#pragma once

// ncclscope-sim (tools/sim) as a test fixture: a simulated job on this node driving the real
// plugin, its rings in a given directory, and what it says it drove ("expect ..." lines).

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace ncclscope::testing {

struct SimExpectation {
  std::map<std::string, std::string> fields;  // comm, rank, func, algo, proto, size
  std::uint64_t ops = 0;
  std::uint64_t bytes = 0;
  double bus_bytes = 0;    // nccl-tests bus bytes of those ops
  double gpu_seconds = 0;  // their modeled GPU time
  // `comm="..",rank="..",func="..",algo="..",proto="..",size=".."` as the agent labels it.
  std::string OpLabels() const;
};

class SimJob {
 public:
  // Starts ncclscope-sim with `args`, its rings in `ring_dir`, its output in a temp dir.
  SimJob(const std::string& ring_dir, std::vector<std::string> args);

  Subprocess& process() { return *process_; }
  // Waits until `ranks` ranks printed "done rank=" (their iterations are over).
  bool WaitDone(int ranks, std::chrono::milliseconds timeout);
  std::vector<SimExpectation> Expectations() const;

 private:
  TempDir logs_;
  std::unique_ptr<Subprocess> process_;
};

}  // namespace ncclscope::testing
