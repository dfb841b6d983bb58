#pragma once

// One simulated rank: NCCL's user thread and proxy thread for the local GPU rank `local`, driving
// the real profiler plugin through tools/replay. The user thread issues each operation of the job
// model at its enqueue time; the proxy thread emits the op's kernel-channel events (with the
// model's GPU timestamps) and its network ops and steps at the model's host times, so the
// plugin's own clock measures the modeled step states. Events whose exact host time does not
// matter (kernel-channel start/stop, whose times travel in pTimer) are batched on a tick; proxy
// step states are emitted on time.

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "tools/replay/nccl_replay.h"
#include "tools/sim/job_model.h"
#include "tools/sim/sim_options.h"
#include "tools/sim/timed_executor.h"

namespace ncclscope::sim {

// What the plugin must have recorded for this rank, per (comm, rank, func, algo, proto, size):
// printed as "expect ..." lines at the end for tests.
struct Expectation {
  std::uint64_t ops = 0;
  std::uint64_t bytes = 0;
  double bus_bytes = 0;      // of the ops with GPU timing
  std::uint64_t gpu_ns = 0;  // their modeled GPU time
};
using ExpectKey = std::tuple<std::string, int, std::string, std::string, std::string, std::string>;

class RankRunner {
 public:
  RankRunner(const Options& options, const replay::ProfilerPlugin& plugin, int local,
             std::uint64_t t0_ns, const std::atomic<bool>& stop);

  // Runs until the iterations are done (and their events emitted), the duration is over or
  // `stop` is set; prints Summary() and "done rank=R" to stdout (unless quiet), lingers if asked,
  // then finalizes the communicators. Returns false when init failed.
  bool Run();

  // "expect comm=.. rank=.. func=.. algo=.. proto=.. size=.. ops=N bytes=B busbw=X" lines.
  std::string Summary() const;

 private:
  // Run()'s steps: initialize this rank's communicators; run the iterations until done, out of
  // time, stopped or blocked in an op that never ends (returns whether blocked).
  bool InitComms(replay::ReplayProcess& process, const JobModel& model,
                 std::vector<std::unique_ptr<replay::ReplayComm>>& comms,
                 std::map<std::uint64_t, replay::ReplayComm*>& by_id);
  bool RunIterations(JobModel& model, std::map<std::uint64_t, replay::ReplayComm*>& by_id,
                     TimedExecutor& executor, std::uint64_t deadline);
  bool RunIteration(const std::vector<RankOp>& ops,
                    std::map<std::uint64_t, replay::ReplayComm*>& by_id, TimedExecutor& executor,
                    std::uint64_t deadline, bool* out_of_time);
  // Enqueues the p2p group starting at ops[i] (one ncclGroup); returns the index past it.
  std::size_t EnqueueP2pGroup(const std::vector<RankOp>& ops, std::size_t i,
                              replay::ReplayComm* comm, TimedExecutor& executor);
  void EnqueueCollective(const RankOp& op, replay::ReplayComm* comm, TimedExecutor& executor);
  // Posts an enqueued op's kernel and proxy events at their times, and counts what it will
  // complete (Summary()).
  void Schedule(TimedExecutor& executor, const RankOp& op, replay::ReplayComm* comm,
                const replay::EnqueuedOp& e);
  void Expect(const RankOp& op, std::uint64_t end);

  const Options& options_;
  const replay::ProfilerPlugin& plugin_;
  int local_;
  std::uint64_t t0_ns_;
  const std::atomic<bool>& stop_;
  std::map<ExpectKey, Expectation> expected_;
};

}  // namespace ncclscope::sim
