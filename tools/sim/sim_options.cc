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

namespace {

// The command line, one option at a time. Each reader takes the option's value, checks it and
// says what is wrong in *error.
class ArgReader {
 public:
  ArgReader(int argc, char** argv, std::string* error) : argc_(argc), argv_(argv), error_(error) {}

  bool Next() {
    if (++i_ >= argc_) return false;
    arg_ = argv_[i_];
    return true;
  }
  const std::string& arg() const { return arg_; }

  std::optional<std::string> Value() {
    if (i_ + 1 >= argc_) {
      *error_ = arg_ + " needs a value";
      return std::nullopt;
    }
    return std::string(argv_[++i_]);
  }
  bool Text(std::string* out) {
    const auto v = Value();
    if (v) *out = *v;
    return v.has_value();
  }
  template <typename T>
  bool Integer(T* out, long long min, long long max) {
    const auto v = Value();
    if (!v) return false;
    char* end = nullptr;
    const long long n = std::strtoll(v->c_str(), &end, 10);
    if (end == v->c_str() || *end != '\0' || n < min || n > max) {
      *error_ = arg_ + ": '" + *v + "' is not a number in [" + std::to_string(min) + ", " +
                std::to_string(max) + "]";
      return false;
    }
    *out = static_cast<T>(n);
    return true;
  }
  bool Real(double* out, double min) {
    const auto v = Value();
    if (!v) return false;
    char* end = nullptr;
    const double d = std::strtod(v->c_str(), &end);
    if (end == v->c_str() || *end != '\0' || !(d >= min)) {
      *error_ = arg_ + ": '" + *v + "' is not a number >= " + std::to_string(min);
      return false;
    }
    *out = d;
    return true;
  }
  bool Duration(std::uint64_t* out) {
    const auto v = Value();
    if (!v) return false;
    std::string why;
    const auto d = config::Duration::Parse(*v, &why);
    if (!d) {
      *error_ = arg_;
      *error_ += ": ";
      *error_ += why;
      return false;
    }
    *out = static_cast<std::uint64_t>(d->value().count());
    return true;
  }
  bool Workload(std::vector<WorkItem>* out) {
    const auto v = Value();
    return v.has_value() && ParseWorkload(*v, out, error_);
  }
  bool Seconds(double* out) {
    std::uint64_t ns = 0;
    const bool ok = Duration(&ns);
    *out = static_cast<double>(ns) * 1e-9;
    return ok;
  }
  bool UnixMs(std::uint64_t* out_ns) {
    const auto v = Value();
    char* end = nullptr;
    const double ms = v ? std::strtod(v->c_str(), &end) : 0;
    const bool ok = v.has_value() && end != v->c_str() && *end == '\0' && ms > 0;
    if (!ok && v) *error_ = arg_ + ": '" + *v + "' is not a unix time in milliseconds";
    *out_ns = static_cast<std::uint64_t>(ms * 1e6);
    return ok;
  }

 private:
  int argc_;
  char** argv_;
  std::string* error_;
  int i_ = 0;
  std::string arg_;
};

// Whether an option group knew the option, and whether its value was good.
enum class Took { kNotMine, kOk, kBad };
Took Result(bool ok) { return ok ? Took::kOk : Took::kBad; }

// The groups of the usage text: Job, Pace and Noise, Links and Faults, Other.
Took JobOption(ArgReader& in, Options& o) {
  const std::string& arg = in.arg();
  if (arg == "--nodes") return Result(in.Integer(&o.nodes, 1, 4096));
  if (arg == "--gpus") return Result(in.Integer(&o.gpus, 1, 64));
  if (arg == "--node") return Result(in.Integer(&o.node, 0, 4095));
  if (arg == "--channels") return Result(in.Integer(&o.channels, 1, 64));
  if (arg == "--algo") return Result(in.Text(&o.algo));
  if (arg == "--proto") return Result(in.Text(&o.proto));
  if (arg == "--workload") return Result(in.Workload(&o.workload));
  return Took::kNotMine;
}

Took PaceOption(ArgReader& in, Options& o) {
  const std::string& arg = in.arg();
  if (arg == "--rate") return Result(in.Real(&o.rate, 0.001));
  if (arg == "--iterations") return Result(in.Integer(&o.iterations, 0, 1LL << 40));
  if (arg == "--duration") return Result(in.Seconds(&o.duration_s));
  if (arg == "--linger") return Result(in.Seconds(&o.linger_s));
  if (arg == "--compute-gap") return Result(in.Duration(&o.compute_gap_ns));
  if (arg == "--jitter") return Result(in.Duration(&o.jitter_ns));
  if (arg == "--latency") return Result(in.Duration(&o.latency_ns));
  if (arg == "--pause-every") return Result(in.Duration(&o.pause_every_ns));
  if (arg == "--pause-for") return Result(in.Duration(&o.pause_for_ns));
  if (arg == "--resize-every") return Result(in.Duration(&o.resize_every_ns));
  if (arg == "--resize-factor") return Result(in.Real(&o.resize_factor, 0.001));
  return Took::kNotMine;
}

Took FaultOption(ArgReader& in, Options& o) {
  const std::string& arg = in.arg();
  if (arg == "--nvlink-gbps") return Result(in.Real(&o.nvlink_gbps, 0.001));
  if (arg == "--network-gbps") return Result(in.Real(&o.network_gbps, 0.001));
  if (arg == "--slow-rank") return Result(in.Integer(&o.slow_rank, 0, 1 << 24));
  if (arg == "--slow-by") return Result(in.Duration(&o.slow_by_ns));
  if (arg == "--slow-channel") return Result(in.Integer(&o.slow_channel, 0, 63));
  if (arg == "--slow-node") return Result(in.Integer(&o.slow_node, 0, 4095));
  if (arg == "--slow-factor") return Result(in.Real(&o.slow_factor, 1));
  if (arg == "--fault-start") return Result(in.Duration(&o.fault_start_ns));
  if (arg == "--fault-end") return Result(in.Duration(&o.fault_end_ns));
  if (arg == "--fault-end-file") return Result(in.Text(&o.fault_end_file));
  if (arg == "--hang-at") return Result(in.Duration(&o.hang_at_ns));
  if (arg == "--hang-rank") return Result(in.Integer(&o.hang_rank, 0, 1 << 24));
  if (arg == "--hang-iteration") return Result(in.Integer(&o.hang_iteration, 0, 1LL << 40));
  return Took::kNotMine;
}

Took OtherOption(ArgReader& in, Options& o) {
  const std::string& arg = in.arg();
  if (arg == "--plugin") return Result(in.Text(&o.plugin));
  if (arg == "--abi") return Result(in.Integer(&o.abi, 4, 6));
  if (arg == "--start-at") return Result(in.UnixMs(&o.start_at_ns));
  if (arg == "--seed") return Result(in.Integer(&o.seed, 0, 1LL << 62));
  if (arg == "--job-id") return Result(in.Text(&o.job_id));
  if (arg == "--tick") return Result(in.Duration(&o.tick_ns));
  if (arg == "--threads") {
    o.threads = true;
    return Took::kOk;
  }
  if (arg == "--quiet") {
    o.quiet = true;
    return Took::kOk;
  }
  return Took::kNotMine;
}

// What the options say together that none says alone; nullptr when they agree.
const char* Disagreement(const Options& o) {
  if (o.node >= o.nodes) return "--node must be below --nodes";
  const int ranks = o.nodes * o.gpus;
  if (o.slow_rank >= ranks || o.hang_rank >= ranks) {
    return "--slow-rank/--hang-rank must name a rank below nodes x gpus";
  }
  if (o.slow_channel >= o.channels) return "--slow-channel must be below --channels";
  if (o.slow_node >= o.nodes) return "--slow-node must be below --nodes";
  if (o.fault_end_ns <= o.fault_start_ns) return "--fault-end must be after --fault-start";
  return nullptr;
}

}  // namespace

std::optional<Options> ParseOptions(int argc, char** argv, std::string* error) {
  Options o;
  ParseWorkload("AllReduce:world:64MiB,AllGather:tp:16MiB,ReduceScatter:tp:16MiB,SendRecv:dp:4MiB",
                &o.workload, error);
  ArgReader in(argc, argv, error);
  while (in.Next()) {
    if (in.arg() == "--help" || in.arg() == "-h") {
      *error = "";
      return std::nullopt;
    }
    Took took = Took::kNotMine;
    for (Took (*group)(ArgReader&, Options&) : {JobOption, PaceOption, FaultOption, OtherOption}) {
      took = group(in, o);
      if (took != Took::kNotMine) break;
    }
    if (took == Took::kNotMine) {
      *error = "unknown option " + in.arg();
      return std::nullopt;
    }
    if (took == Took::kBad) return std::nullopt;
  }
  if (const char* why = Disagreement(o)) {
    *error = why;
    return std::nullopt;
  }
  if (o.tick_ns == 0) o.tick_ns = 1;
  return o;
}

}  // namespace ncclscope::sim
