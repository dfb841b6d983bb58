// ncclscope-sim: a SIMULATED training job on this node, driving the real NCCL profiler plugin
// through its ABI as NCCL would (tools/replay), one process per local GPU rank (or threads with
// --threads). No GPU is involved: GPU timestamps come from the job model (job_model.h), host-side
// step states happen in real time. See README.md and `ncclscope-sim --help`.

#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "platform/clock.h"
#include "tools/replay/nccl_replay.h"
#include "tools/sim/rank_runner.h"
#include "tools/sim/sim_options.h"

namespace ncclscope::sim {
namespace {

std::atomic<bool> g_stop{false};

void OnSignal(int /*signal*/) { g_stop.store(true); }

std::string ExeDir() {
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return ".";
  path[n] = '\0';
  std::string p(path);
  return p.substr(0, p.rfind('/'));
}

bool Exists(const std::string& path) { return ::access(path.c_str(), R_OK) == 0; }

// An installed file (prefix/bin/ncclscope-sim -> prefix/lib/ncclscope/NAME), else the build tree's.
std::string Find(const std::string& installed_name, const char* build_path) {
  std::string installed = ExeDir() + "/../lib/ncclscope/" + installed_name;
  if (Exists(installed)) return installed;
  return build_path;
}

// One local rank, in this process.
int RunRank(const Options& o, const std::string& plugin_path, int local, std::uint64_t t0) {
  replay::ProfilerPlugin plugin(plugin_path);
  if (!plugin.ok() || !plugin.Has(o.abi)) {
    std::fprintf(stderr, "ncclscope-sim: cannot use %s (ABI v%d): %s\n", plugin_path.c_str(), o.abi,
                 plugin.error().c_str());
    return 2;
  }
  RankRunner runner(o, plugin, local, t0, g_stop);
  return runner.Run() ? 0 : 3;
}

// What every rank needs before the first one starts: the simulated CUDA driver, which names
// each rank's GPU for the plugin (sim_cuda.c), and the environment the plugin reads at its first
// init (before any thread of ours exists).
void PrepareProcess(const Options& o) {
  const std::string cuda = Find("libncclscope-sim-cuda.so", NCCLSCOPE_SIM_CUDA_PATH);
  if (dlopen(cuda.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
    std::fprintf(stderr, "ncclscope-sim: no simulated CUDA driver (%s): GPUs stay unnamed\n",
                 dlerror());
  }
  setenv("NCCLSCOPE_JOB_ID", o.job_id.c_str(), 0);  // NOLINT(concurrency-mt-unsafe)
  // The simulated ranks share this node's cores with each other and the agent, so the plugin's
  // wall-clock timing of its calls includes the simulator's own crowding and its overhead
  // governor would react to that. Off unless the environment sets a budget (to try it).
  setenv("NCCLSCOPE_OVERHEAD_BUDGET", "0", 0);  // NOLINT(concurrency-mt-unsafe)

  struct sigaction action = {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

// The job and the faults injected into it, on stderr: a simulated job says so.
void Announce(const Options& o, const std::string& plugin_path) {
  const char* ring_dir = std::getenv("NCCLSCOPE_RING_DIR");  // NOLINT(concurrency-mt-unsafe)
  const int first = o.node * o.gpus;
  std::fprintf(stderr,
               "ncclscope-sim: SIMULATED job %s: %d node(s) x %d GPU(s), this is node %d (ranks "
               "%d-%d), %d channels, %.3g iterations/s; no GPU is used, GPU times come from the "
               "job model. Plugin %s, rings in %s.\n",
               o.job_id.c_str(), o.nodes, o.gpus, o.node, first, first + o.gpus - 1, o.channels,
               o.rate, plugin_path.c_str(), ring_dir != nullptr ? ring_dir : "/run/ncclscope");
  const double fault_from = static_cast<double>(o.fault_start_ns) * 1e-9;
  const double fault_to =
      o.fault_end_ns == UINT64_MAX ? -1 : static_cast<double>(o.fault_end_ns) * 1e-9;
  if (o.slow_rank >= 0) {
    std::fprintf(stderr,
                 "ncclscope-sim: injected: rank %d is %.3g ms slow before every op (from %.3g s "
                 "to %.3g s; -1: the end)\n",
                 o.slow_rank, static_cast<double>(o.slow_by_ns) * 1e-6, fault_from, fault_to);
  }
  if (o.slow_channel >= 0) {
    std::fprintf(stderr,
                 "ncclscope-sim: injected: channel %d's network hop (from node %d; -1: every "
                 "node) is %.3gx slower (from %.3g s to %.3g s; -1: the end)\n",
                 o.slow_channel, o.slow_node, o.slow_factor, fault_from, fault_to);
  }
  if (o.hang_rank >= 0 && o.hang_at_ns > 0) {
    std::fprintf(stderr, "ncclscope-sim: injected: rank %d hangs %.3g s in\n", o.hang_rank,
                 static_cast<double>(o.hang_at_ns) * 1e-9);
  } else if (o.hang_rank >= 0) {
    std::fprintf(stderr, "ncclscope-sim: injected: rank %d hangs at iteration %llu\n", o.hang_rank,
                 static_cast<unsigned long long>(o.hang_iteration));
  }
  std::fflush(stderr);
}

// --threads: every rank a thread of this process, sharing one loaded plugin.
int RunThreads(const Options& o, const std::string& plugin_path, std::uint64_t t0) {
  std::vector<int> codes(static_cast<std::size_t>(o.gpus), 0);
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(o.gpus));
  replay::ProfilerPlugin plugin(plugin_path);
  if (!plugin.ok() || !plugin.Has(o.abi)) {
    std::fprintf(stderr, "ncclscope-sim: cannot use %s (ABI v%d): %s\n", plugin_path.c_str(), o.abi,
                 plugin.error().c_str());
    return 2;
  }
  std::vector<std::unique_ptr<RankRunner>> runners;
  runners.reserve(static_cast<std::size_t>(o.gpus));
  for (int local = 0; local < o.gpus; ++local) {
    runners.push_back(std::make_unique<RankRunner>(o, plugin, local, t0, g_stop));
  }
  for (int local = 0; local < o.gpus; ++local) {
    threads.emplace_back([&, local] {
      codes[static_cast<std::size_t>(local)] =
          runners[static_cast<std::size_t>(local)]->Run() ? 0 : 3;
    });
  }
  for (std::thread& t : threads) t.join();
  int worst = 0;
  for (const int c : codes) worst = std::max(worst, c);
  return worst;
}

// One process per rank, as NCCL jobs run; a stop signal is forwarded to every child.
int RunProcesses(const Options& o, const std::string& plugin_path, std::uint64_t t0) {
  std::fflush(nullptr);
  std::vector<pid_t> children;
  for (int local = 0; local < o.gpus; ++local) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("ncclscope-sim: fork");
      g_stop.store(true);
      break;
    }
    if (pid == 0) std::_Exit(RunRank(o, plugin_path, local, t0));
    children.push_back(pid);
  }
  int worst = 0;
  std::size_t running = children.size();
  bool forwarded = false;
  while (running > 0) {
    if (g_stop.load() && !forwarded) {
      for (const pid_t child : children) ::kill(child, SIGTERM);
      forwarded = true;
    }
    int status = 0;
    const pid_t done = ::waitpid(-1, &status, 0);
    if (done < 0) continue;  // interrupted by our signal: forward it, then wait on
    --running;
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    worst = std::max(worst, code);
  }
  return worst;
}

int Main(int argc, char** argv) {
  std::string error;
  const std::optional<Options> parsed = ParseOptions(argc, argv, &error);
  if (!parsed) {
    if (!error.empty()) std::fprintf(stderr, "ncclscope-sim: %s\n\n", error.c_str());
    std::fputs(UsageText().c_str(), error.empty() ? stdout : stderr);
    return error.empty() ? 0 : 2;
  }
  const Options& o = *parsed;
  const std::string plugin_path =
      o.plugin.empty() ? Find("libnccl-profiler-ncclscope.so", NCCLSCOPE_SIM_PLUGIN_PATH)
                       : o.plugin;
  PrepareProcess(o);
  Announce(o, plugin_path);
  // Time for every rank to come up; or the job's start every node's simulator was given.
  const std::uint64_t t0 =
      o.start_at_ns != 0 ? o.start_at_ns : platform::RealtimeNs() + 200'000'000;
  return o.threads ? RunThreads(o, plugin_path, t0) : RunProcesses(o, plugin_path, t0);
}

}  // namespace
}  // namespace ncclscope::sim

int main(int argc, char** argv) { return ncclscope::sim::Main(argc, argv); }
