#include "tools/sim/sim_options.h"

#include <cstdlib>
#include <string_view>
#include <type_traits>

#include "agent/config/duration.h"

namespace ncclscope::sim {
namespace {

bool ParseSize(std::string_view text, std::uint64_t* out) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || digits > 15) return false;
  std::uint64_t value = std::strtoull(std::string(text.substr(0, digits)).c_str(), nullptr, 10);
  const std::string_view unit = text.substr(digits);
  if (unit == "KiB") {
    value <<= 10;
  } else if (unit == "MiB") {
    value <<= 20;
  } else if (unit == "GiB") {
    value <<= 30;
  } else if (!unit.empty() && unit != "B") {
    return false;
  }
  *out = value;
  return true;
}

bool ParseKind(std::string_view text, CommKind* kind) {
  if (text == "world") {
    *kind = CommKind::kWorld;
  } else if (text == "tp") {
    *kind = CommKind::kTensor;
  } else if (text == "dp") {
    *kind = CommKind::kData;
  } else {
    return false;
  }
  return true;
}

// "AllReduce:world:64MiB,AllGather:tp:16MiB:20ms" (the last field, compute before the op, is
// optional).
bool ParseWorkload(std::string_view text, std::vector<WorkItem>* out, std::string* error) {
  out->clear();
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const std::size_t c1 = item.find(':');
    const std::size_t c2 = c1 == std::string_view::npos ? c1 : item.find(':', c1 + 1);
    const std::size_t c3 = c2 == std::string_view::npos ? c2 : item.find(':', c2 + 1);
    WorkItem w;
    bool compute_ok = true;
    if (c3 != std::string_view::npos) {
      std::string why;
      const auto d = config::Duration::Parse(std::string(item.substr(c3 + 1)), &why);
      compute_ok = d.has_value();
      if (d) w.compute_ns = static_cast<std::uint64_t>(d->value().count());
    }
    const std::string_view size =
        c3 == std::string_view::npos ? item.substr(c2 + 1) : item.substr(c2 + 1, c3 - c2 - 1);
    if (c2 == std::string_view::npos || !ParseKind(item.substr(c1 + 1, c2 - c1 - 1), &w.comm) ||
        !ParseSize(size, &w.bytes) || !compute_ok) {
      *error = "bad --workload item '" + std::string(item) +
               "' (FUNC:world|tp|dp:SIZE[:COMPUTE], e.g. AllReduce:dp:64MiB:20ms)";
      return false;
    }
    w.func = std::string(item.substr(0, c1));
    static const char* const kFuncs[] = {"AllReduce", "AllGather", "ReduceScatter",
                                         "Broadcast", "Reduce",    "SendRecv"};
    bool known = false;
    for (const char* f : kFuncs) known = known || w.func == f;
    if (!known) {
      *error = "unknown function '" + w.func + "' in --workload";
      return false;
    }
    out->push_back(w);
  }
  return !out->empty();
}

}  // namespace

const char* CommKindName(CommKind kind) {
  switch (kind) {
    case CommKind::kWorld:
      return "world";
    case CommKind::kTensor:
      return "tp";
    default:
      return "dp";
  }
}

std::string UsageText() {
  return R"(usage: ncclscope-sim [options]

A SIMULATED training job on this node: it drives the real NCCL profiler plugin
(libnccl-profiler-ncclscope.so) through its ABI exactly as NCCL would, one process per
local GPU rank, with GPU timestamps from a job model (no GPU is used). Records land in
$NCCLSCOPE_RING_DIR (default /run/ncclscope), where ncclscope-agent reads them.

Job:      --nodes N (2)  --gpus G (8)  --node K (0: which node this machine plays)
          --channels C (8)  --algo RING|TREE|...  --proto SIMPLE|LL|LL128
          --workload LIST  operations of one iteration, FUNC:COMM:SIZE[:COMPUTE] comma-
                   separated; FUNC AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|SendRecv,
                   COMM world|tp|dp, SIZE per rank (e.g. 64MiB), COMPUTE the GPU's work before
                   the op (default --compute-gap)
                   (AllReduce:world:64MiB,AllGather:tp:16MiB,ReduceScatter:tp:16MiB,SendRecv:dp:4MiB)
Pace:     --rate R iterations/s (5; an iteration longer than 1/R starts the next at once)
          --iterations N (0: unbounded)  --duration 30s
          --linger 10s   after the last iteration, stay (idle, communicators alive) this long
          --compute-gap 2ms  --jitter 20us  --latency 10us
Noise:    --pause-every 2m --pause-for 5s   every rank pauses together (checkpoint, eval)
          --resize-every 1m --resize-factor 4  message sizes switch between x1 and x4
Links:    --nvlink-gbps 300  --network-gbps 50   (GB/s per GPU and direction)
Faults:   --slow-rank R --slow-by 5ms       rank R (global) computes longer before each op
          --slow-channel C --slow-factor 4  channel C's network hop is 4x slower
          --slow-node K                     only the hop node K sends on channel C is slow
          --fault-start 30s --fault-end 2m  slow rank / slow channel only in this window
          --fault-end-file PATH  ... or until the ms after the job start written into PATH
          --hang-rank R --hang-iteration N  rank R never arrives at iteration N
          --hang-at 1m                      ... or at the first iteration from 1m on
Other:    --plugin PATH  --abi 4|5|6 (6)  --threads (ranks as threads of one process)
          --start-at MS  the job's start, unix ms (the same on every node's simulator)
          --seed S  --job-id ID (simulated)  --tick 1ms  --quiet
)";
}

std::optional<Options> ParseOptions(int argc, char** argv, std::string* error) {
  Options o;
  ParseWorkload("AllReduce:world:64MiB,AllGather:tp:16MiB,ReduceScatter:tp:16MiB,SendRecv:dp:4MiB",
                &o.workload, error);
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::optional<std::string> {
      if (i + 1 >= argc) {
        *error = arg + " needs a value";
        return std::nullopt;
      }
      return std::string(argv[++i]);
    };
    auto integer = [&](auto* out, long long min, long long max) {
      const auto v = value();
      if (!v) return false;
      char* end = nullptr;
      const long long n = std::strtoll(v->c_str(), &end, 10);
      if (end == v->c_str() || *end != '\0' || n < min || n > max) {
        *error = arg + ": '" + *v + "' is not a number in [" + std::to_string(min) + ", " +
                 std::to_string(max) + "]";
        return false;
      }
      *out = static_cast<std::remove_pointer_t<decltype(out)>>(n);
      return true;
    };
    auto real = [&](double* out, double min) {
      const auto v = value();
      if (!v) return false;
      char* end = nullptr;
      const double d = std::strtod(v->c_str(), &end);
      if (end == v->c_str() || *end != '\0' || !(d >= min)) {
        *error = arg + ": '" + *v + "' is not a number >= " + std::to_string(min);
        return false;
      }
      *out = d;
      return true;
    };
    auto duration = [&](std::uint64_t* out) {
      const auto v = value();
      if (!v) return false;
      std::string why;
      const auto d = config::Duration::Parse(*v, &why);
      if (!d) {
        *error = arg;
        *error += ": ";
        *error += why;
        return false;
      }
      *out = static_cast<std::uint64_t>(d->value().count());
      return true;
    };
    bool ok = true;
    if (arg == "--help" || arg == "-h") {
      *error = "";
      return std::nullopt;
    } else if (arg == "--plugin") {
      const auto v = value();
      ok = v.has_value();
      if (ok) o.plugin = *v;
    } else if (arg == "--abi") {
      ok = integer(&o.abi, 4, 6);
    } else if (arg == "--nodes") {
      ok = integer(&o.nodes, 1, 4096);
    } else if (arg == "--gpus") {
      ok = integer(&o.gpus, 1, 64);
    } else if (arg == "--node") {
      ok = integer(&o.node, 0, 4095);
    } else if (arg == "--channels") {
      ok = integer(&o.channels, 1, 64);
    } else if (arg == "--algo") {
      const auto v = value();
      ok = v.has_value();
      if (ok) o.algo = *v;
    } else if (arg == "--proto") {
      const auto v = value();
      ok = v.has_value();
      if (ok) o.proto = *v;
    } else if (arg == "--workload") {
      const auto v = value();
      ok = v.has_value() && ParseWorkload(*v, &o.workload, error);
    } else if (arg == "--rate") {
      ok = real(&o.rate, 0.001);
    } else if (arg == "--iterations") {
      ok = integer(&o.iterations, 0, 1LL << 40);
    } else if (arg == "--duration") {
      std::uint64_t ns = 0;
      ok = duration(&ns);
      o.duration_s = static_cast<double>(ns) * 1e-9;
    } else if (arg == "--linger") {
      std::uint64_t ns = 0;
      ok = duration(&ns);
      o.linger_s = static_cast<double>(ns) * 1e-9;
    } else if (arg == "--compute-gap") {
      ok = duration(&o.compute_gap_ns);
    } else if (arg == "--jitter") {
      ok = duration(&o.jitter_ns);
    } else if (arg == "--latency") {
      ok = duration(&o.latency_ns);
    } else if (arg == "--nvlink-gbps") {
      ok = real(&o.nvlink_gbps, 0.001);
    } else if (arg == "--network-gbps") {
      ok = real(&o.network_gbps, 0.001);
    } else if (arg == "--slow-rank") {
      ok = integer(&o.slow_rank, 0, 1 << 24);
    } else if (arg == "--slow-by") {
      ok = duration(&o.slow_by_ns);
    } else if (arg == "--slow-channel") {
      ok = integer(&o.slow_channel, 0, 63);
    } else if (arg == "--slow-node") {
      ok = integer(&o.slow_node, 0, 4095);
    } else if (arg == "--fault-start") {
      ok = duration(&o.fault_start_ns);
    } else if (arg == "--fault-end") {
      ok = duration(&o.fault_end_ns);
    } else if (arg == "--fault-end-file") {
      const auto v = value();
      ok = v.has_value();
      if (ok) o.fault_end_file = *v;
    } else if (arg == "--hang-at") {
      ok = duration(&o.hang_at_ns);
    } else if (arg == "--pause-every") {
      ok = duration(&o.pause_every_ns);
    } else if (arg == "--pause-for") {
      ok = duration(&o.pause_for_ns);
    } else if (arg == "--resize-every") {
      ok = duration(&o.resize_every_ns);
    } else if (arg == "--resize-factor") {
      ok = real(&o.resize_factor, 0.001);
    } else if (arg == "--slow-factor") {
      ok = real(&o.slow_factor, 1);
    } else if (arg == "--hang-rank") {
      ok = integer(&o.hang_rank, 0, 1 << 24);
    } else if (arg == "--hang-iteration") {
      ok = integer(&o.hang_iteration, 0, 1LL << 40);
    } else if (arg == "--start-at") {
      const auto v = value();
      char* end = nullptr;
      const double ms = v ? std::strtod(v->c_str(), &end) : 0;
      ok = v.has_value() && end != v->c_str() && *end == '\0' && ms > 0;
      if (!ok && v) *error = arg + ": '" + *v + "' is not a unix time in milliseconds";
      o.start_at_ns = static_cast<std::uint64_t>(ms * 1e6);
    } else if (arg == "--threads") {
      o.threads = true;
    } else if (arg == "--seed") {
      ok = integer(&o.seed, 0, 1LL << 62);
    } else if (arg == "--job-id") {
      const auto v = value();
      ok = v.has_value();
      if (ok) o.job_id = *v;
    } else if (arg == "--tick") {
      ok = duration(&o.tick_ns);
    } else if (arg == "--quiet") {
      o.quiet = true;
    } else {
      *error = "unknown option " + arg;
      return std::nullopt;
    }
    if (!ok) return std::nullopt;
  }
  if (o.node >= o.nodes) {
    *error = "--node must be below --nodes";
    return std::nullopt;
  }
  const int ranks = o.nodes * o.gpus;
  if (o.slow_rank >= ranks || o.hang_rank >= ranks) {
    *error = "--slow-rank/--hang-rank must name a rank below nodes x gpus";
    return std::nullopt;
  }
  if (o.slow_channel >= o.channels) {
    *error = "--slow-channel must be below --channels";
    return std::nullopt;
  }
  if (o.slow_node >= o.nodes) {
    *error = "--slow-node must be below --nodes";
    return std::nullopt;
  }
  if (o.fault_end_ns <= o.fault_start_ns) {
    *error = "--fault-end must be after --fault-start";
    return std::nullopt;
  }
  if (o.tick_ns == 0) o.tick_ns = 1;
  return o;
}

}  // namespace ncclscope::sim
