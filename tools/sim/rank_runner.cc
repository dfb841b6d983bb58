#include "tools/sim/rank_runner.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>

#include "agent/analytics/comm_registry.h"
#include "agent/analytics/size_bucket.h"
#include "platform/clock.h"
#include "plugin/abi/nccl_profiler_abi.h"
#include "tools/sim/timed_executor.h"

namespace ncclscope::sim {
namespace {

// NCCL hands the profiler pointers to static strings (ncclFuncToString and friends), and the
// plugin caches its name lookups by pointer (plugin/src/names.h). A std::string's buffer is not
// static: it is reused by later ops with other names. So the simulator passes NCCL's literals.
const char* NcclFuncName(const std::string& func) {
  static const char* const kNames[] = {"AllReduce", "AllGather", "ReduceScatter", "Broadcast",
                                       "Reduce",    "Send",      "Recv"};
  for (const char* name : kNames) {
    if (func == name) return name;
  }
  return "Unknown";
}

// The proxy-side handles of one enqueued op.
struct OpRuntime {
  replay::ReplayComm* comm = nullptr;
  replay::EnqueuedOp op;
  std::vector<void*> kernel;
  std::vector<void*> proxy;
  std::vector<void*> step;
};

// Sleeps until the tick boundary at or before `at_ns` (an op is enqueued early rather than late:
// its proxy-side events must not start behind their times), returning early when `stop` is set.
void SleepUntil(std::uint64_t at_ns, std::uint64_t tick_ns, const std::atomic<bool>& stop) {
  const std::uint64_t target = at_ns / tick_ns * tick_ns;
  while (!stop.load(std::memory_order_relaxed)) {
    const std::uint64_t now = platform::RealtimeNs();
    if (now >= target) return;
    const std::uint64_t slice = std::min<std::uint64_t>(target - now, 100'000'000);
    std::this_thread::sleep_for(std::chrono::nanoseconds(slice));
  }
}

// Posts the proxy-side events of network op `k` of an op: its ProxyOpStart, each step's start,
// states and stop, and its ProxyOpStop. A time that never comes (a hang) ends the schedule there.
void ScheduleNetOp(TimedExecutor& executor, const std::shared_ptr<OpRuntime>& rt, std::size_t k,
                   const NetOp& net) {
  replay::ProxyOpSpec spec;
  spec.channel = net.channel;
  spec.peer = net.peer;
  spec.send = net.send;
  spec.steps = static_cast<int>(net.steps.size());
  spec.chunk_bytes = net.step_bytes;
  if (net.steps.empty() || net.steps[0].start == kNever) return;
  executor.Post(net.steps[0].start, true,
                [rt, k, spec] { rt->proxy[k] = rt->comm->ProxyOpStart(rt->op, spec); });
  const int first = net.send ? abi::kProxyStepSendGpuWait : abi::kProxyStepRecvWait;
  const int second = net.send ? abi::kProxyStepSendPeerWait : abi::kProxyStepRecvFlushWait;
  const int third = net.send ? abi::kProxyStepSendWait : abi::kProxyStepRecvGpuWait;
  const std::size_t bytes = net.step_bytes;
  bool finished = true;
  for (std::size_t s = 0; s < net.steps.size() && finished; ++s) {
    const StepTimes& t = net.steps[s];
    if (t.start == kNever) {
      finished = false;
      break;
    }
    executor.Post(t.start, true, [rt, k, spec, s, first, bytes] {
      rt->step[k] = rt->comm->ProxyStepStart(rt->op, rt->proxy[k], spec, static_cast<int>(s));
      rt->comm->ProxyStepState(rt->step[k], first, bytes);
    });
    // Each state closes the previous one in the plugin's clock; a hung step stays where it is.
    const std::pair<std::uint64_t, int> states[] = {{t.t1, second}, {t.t2, third}};
    for (const auto& [at, state] : states) {
      if (at == kNever) {
        finished = false;
        break;
      }
      executor.Post(at, true, [rt, k, state = state, bytes] {
        rt->comm->ProxyStepState(rt->step[k], state, bytes);
      });
    }
    if (!finished || t.end == kNever) {
      finished = false;
      break;
    }
    executor.Post(t.end, true, [rt, k] { rt->comm->ProxyStepStop(rt->step[k]); });
  }
  if (finished) {
    executor.Post(net.steps.back().end, true, [rt, k] { rt->comm->ProxyOpStop(rt->proxy[k]); });
  }
}

using SetDeviceFn = void (*)(int, int);

}  // namespace

RankRunner::RankRunner(const Options& options, const replay::ProfilerPlugin& plugin, int local,
                       std::uint64_t t0_ns, const std::atomic<bool>& stop)
    : options_(options), plugin_(plugin), local_(local), t0_ns_(t0_ns), stop_(stop) {}

bool RankRunner::Run() {
  // The simulated CUDA driver (sim_cuda.c) names this thread's GPU, if the simulator loaded it.
  if (auto set = reinterpret_cast<SetDeviceFn>(dlsym(RTLD_DEFAULT, "ncclscope_sim_set_device"))) {
    set(local_, options_.node);
  }
  replay::ReplayProcess process(plugin_, options_.abi);
  JobModel model(options_, t0_ns_);
  const int global = model.GlobalRank(local_);
  std::vector<std::unique_ptr<replay::ReplayComm>> comms;
  std::map<std::uint64_t, replay::ReplayComm*> by_id;
  if (!InitComms(process, model, comms, by_id)) return false;

  auto executor = std::make_unique<TimedExecutor>(options_.tick_ns);
  const std::uint64_t deadline =
      options_.duration_s > 0 ? t0_ns_ + static_cast<std::uint64_t>(options_.duration_s * 1e9)
                              : kNever;
  const bool blocked = RunIterations(model, by_id, *executor, deadline);
  if (blocked) {
    // A hang: the ops in flight stay in flight until we are told to stop or time runs out.
    while (!stop_.load() && platform::RealtimeNs() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  executor->Drain();
  executor.reset();
  // What this rank completed, for tests, before it lingers (one write: ranks share stdout).
  if (!options_.quiet) {
    const std::string summary = Summary() + "done rank=" + std::to_string(global) + "\n";
    std::fwrite(summary.data(), 1, summary.size(), stdout);
    std::fflush(stdout);
  }
  if (!blocked && options_.linger_s > 0) {
    const std::uint64_t until =
        platform::RealtimeNs() + static_cast<std::uint64_t>(options_.linger_s * 1e9);
    while (!stop_.load() && platform::RealtimeNs() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  for (auto& comm : comms) comm->Finalize();  // in-flight ops are flushed by the plugin
  return true;
}

bool RankRunner::InitComms(replay::ReplayProcess& process, const JobModel& model,
                           std::vector<std::unique_ptr<replay::ReplayComm>>& comms,
                           std::map<std::uint64_t, replay::ReplayComm*>& by_id) {
  const int global = model.GlobalRank(local_);
  for (const CommInstance* c : model.CommsOf(local_)) {
    auto comm = std::make_unique<replay::ReplayComm>(process, c->id, c->name, c->nnodes,
                                                     c->nranks(), c->RankOf(global), nullptr);
    if (!comm->Init()) {
      std::fprintf(stderr, "ncclscope-sim: rank %d: the plugin did not initialize %s\n", global,
                   c->name.c_str());
      return false;
    }
    by_id[c->id] = comm.get();
    comms.push_back(std::move(comm));
  }
  return true;
}

bool RankRunner::RunIterations(JobModel& model, std::map<std::uint64_t, replay::ReplayComm*>& by_id,
                               TimedExecutor& executor, std::uint64_t deadline) {
  bool blocked = false;
  bool out_of_time = false;
  while (!stop_.load() && !blocked && !out_of_time) {
    if (options_.iterations != 0 && model.iteration() >= options_.iterations) break;
    const std::vector<RankOp> ops =
        std::move(model.NextIteration()[static_cast<std::size_t>(local_)]);
    if (ops.empty()) return true;  // hung, or waiting inside a collective that never ends
    blocked = RunIteration(ops, by_id, executor, deadline, &out_of_time);
  }
  return blocked;
}

bool RankRunner::RunIteration(const std::vector<RankOp>& ops,
                              std::map<std::uint64_t, replay::ReplayComm*>& by_id,
                              TimedExecutor& executor, std::uint64_t deadline, bool* out_of_time) {
  bool blocked = false;
  for (std::size_t i = 0; i < ops.size() && !stop_.load();) {
    const RankOp& op = ops[i];
    if (op.enqueue_ns >= deadline) {
      *out_of_time = true;
      break;
    }
    SleepUntil(op.enqueue_ns, options_.tick_ns, stop_);
    if (stop_.load()) break;
    replay::ReplayComm* comm = by_id[op.comm->id];
    if (op.p2p) {
      const std::size_t j = EnqueueP2pGroup(ops, i, comm, executor);
      for (std::size_t k = i; k < j; ++k) blocked = blocked || !ops[k].finishes();
      i = j;
    } else {
      EnqueueCollective(op, comm, executor);
      blocked = blocked || !op.finishes();
      ++i;
    }
    if (blocked) break;  // stuck inside this op, as NCCL's caller would be
  }
  return blocked;
}

std::size_t RankRunner::EnqueueP2pGroup(const std::vector<RankOp>& ops, std::size_t i,
                                        replay::ReplayComm* comm, TimedExecutor& executor) {
  const RankOp& op = ops[i];
  std::size_t j = i;
  std::vector<replay::P2pSpec> tasks;
  while (j < ops.size() && ops[j].p2p && ops[j].group == op.group) {
    replay::P2pSpec task;
    task.func = ops[j].func == "Send" ? "Send" : "Recv";
    task.count = ops[j].bytes;
    task.datatype = "ncclInt8";
    task.peer = ops[j].peer;
    task.channels = static_cast<std::uint8_t>(ops[j].channel_start.size());
    tasks.push_back(task);
    ++j;
  }
  const replay::P2pEnqueue e = comm->BeginP2pGroup(tasks);
  for (std::size_t k = i; k < j; ++k) Schedule(executor, ops[k], comm, e.ops[k - i]);
  comm->EndP2pGroup(e);
  return j;
}

void RankRunner::EnqueueCollective(const RankOp& op, replay::ReplayComm* comm,
                                   TimedExecutor& executor) {
  replay::CollSpec spec;
  spec.func = NcclFuncName(op.func);
  spec.count = op.bytes / 4;
  spec.datatype = "ncclFloat32";
  spec.algo = options_.algo.c_str();
  spec.proto = options_.proto.c_str();
  spec.channels = static_cast<std::uint8_t>(op.channel_start.size());
  if (op.bytes % 4 != 0) {
    spec.count = op.bytes;
    spec.datatype = "ncclInt8";
  }
  const replay::CollectiveEnqueue e = comm->BeginCollective(spec, op.seq);
  Schedule(executor, op, comm, e.op);
  comm->EndCollective(e);
}

void RankRunner::Schedule(TimedExecutor& executor, const RankOp& op, replay::ReplayComm* comm,
                          const replay::EnqueuedOp& e) {
  auto rt = std::make_shared<OpRuntime>();
  rt->comm = comm;
  rt->op = e;
  const std::size_t channels = op.channel_start.size();
  rt->kernel.assign(channels, nullptr);
  rt->proxy.assign(op.net.size(), nullptr);
  rt->step.assign(op.net.size(), nullptr);
  executor.Post(op.arrival_ns, false, [rt, starts = op.channel_start] {
    for (std::size_t c = 0; c < starts.size(); ++c) {
      rt->kernel[c] = rt->comm->KernelChannelStart(rt->op, static_cast<int>(c), starts[c]);
    }
  });
  for (std::size_t k = 0; k < op.net.size(); ++k) ScheduleNetOp(executor, rt, k, op.net[k]);
  if (!op.finishes()) return;  // its kernel channels never stop: the op stays in flight
  const std::uint64_t end = *std::max_element(op.channel_end.begin(), op.channel_end.end());
  executor.Post(end, false, [rt, ends = op.channel_end] {
    for (std::size_t c = 0; c < ends.size(); ++c)
      rt->comm->KernelChannelStop(rt->kernel[c], ends[c]);
  });
  Expect(op, end);
}

void RankRunner::Expect(const RankOp& op, std::uint64_t end) {
  const bool p2p = op.p2p;
  Expectation& x =
      expected_[{analytics::CommLabel(op.comm->id), op.comm_rank, op.func,
                 p2p ? "none" : options_.algo, p2p ? "none" : options_.proto,
                 std::string(analytics::SizeBucketLabel(analytics::SizeBucketIndex(op.bytes)))}];
  ++x.ops;
  x.bytes += op.bytes;
  x.bus_bytes += op.bus_bytes;
  x.gpu_ns += end - *std::min_element(op.channel_start.begin(), op.channel_start.end());
}

std::string RankRunner::Summary() const {
  std::string out;
  for (const auto& [key, x] : expected_) {
    const auto& [comm, rank, func, algo, proto, size] = key;
    char line[512];
    std::snprintf(line, sizeof(line),
                  "expect comm=%s rank=%d func=%s algo=%s proto=%s size=%s ops=%llu bytes=%llu "
                  "bus_bytes=%.17g gpu_seconds=%.17g\n",
                  comm.c_str(), rank, func.c_str(), algo.c_str(), proto.c_str(), size.c_str(),
                  static_cast<unsigned long long>(x.ops), static_cast<unsigned long long>(x.bytes),
                  x.bus_bytes, static_cast<double>(x.gpu_ns) * 1e-9);
    out += line;
  }
  return out;
}

}  // namespace ncclscope::sim
