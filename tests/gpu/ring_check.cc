// ring-check: reads the plugin rings a job left in a directory, with the agent's own reader
// (agent/profiler, which needs nothing but the C++ standard library), and checks them against the
// job's manifest (workload.h): what every rank issued per (communicator, func, bytes, peer).
// Used by tests/gpu/run.sh on a GPU machine (real NCCL) and, with rings from the replay driver
// (replay_job.cc), by the unit test tests/gpu/replay_check.sh.
//
// Usage: ring-check DIR --manifest FILE --abi N [--network expect|none|any] [--net NAME]
//   --abi      the profiler ABI NCCL must have chosen (2.23: 1, 2.24/2.25: 2, 2.26: 3, 2.27: 4,
//              2.28: 5, 2.29/2.30: 6, 2.31: 7)
//   --network  expect: the ranks are on different "nodes", every op but self send/recv has
//              network ProxyOp records; none: no PROXY_OP record at all; any: report only
//   --net      the network NCCL used ("IB": every network op must name its NIC and a QP; under
//              v1/v2, which have no net-plugin events, none may)
// Prints one line per check category (ok / FAIL with examples) and exits 0 when all pass, 1 when
// one fails, 2 on bad usage or an unreadable manifest.
//
// What each ABI carries decides what is checked; what a version cannot carry must be absent from
// the records, never invented (plugin/abi, tools/replay/nccl_replay.h):
//   v1-v3 (2.23-2.26)  init has no identity: the communicator's id and rank come with its first
//                      op, with no name (NCCL passes NULL) and nranks = nnodes = 0 (unknown);
//                      names are mapped from the manifest's `comm name=NAME id=0xHEX` lines.
//   v1, v2             no KernelCh: no GPU timing, KERNEL_NOT_REQUESTED on every op; no
//                      net-plugin events (no NIC, no QP).
//   v3                 KernelCh without timestamps: KERNEL_UNTIMED on every op that had a
//                      kernel, no GPU timing.
//   v4+                GPU timing on every channel of every op but self send/recv.
//   v5+                AllGather/Broadcast carry the API's count and type (CollApi).
//   v7                 kernel phases (OP_PHASES) on every timed collective.
//   every ABI          the count table: exact counts per (comm, rank) total the manifest's ops.

#include <dirent.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "agent/profiler/ring_directory.h"
#include "agent/profiler/ring_file.h"

namespace {

using ncclscope::profiler::OpView;
using ncclscope::profiler::RingOrigin;

// ---- The manifest ----

struct Key {
  std::string comm;
  std::string func;
  std::uint64_t bytes = 0;
  std::string peer;  // none | self | other
  bool operator<(const Key& o) const {
    return std::tie(comm, func, bytes, peer) < std::tie(o.comm, o.func, o.bytes, o.peer);
  }
};

struct Expected {
  std::uint64_t count = 0;  // API count
  bool timed = true;
  std::uint64_t ops = 0;  // per rank
  std::string what;
  std::uint64_t tag = 0;  // the calls' user profiler tag (v7; 0: untagged)
};

struct Manifest {
  std::string mode;
  int ranks = 0;
  int nnodes = 0;
  int processes = 0;
  long nccl = 0;
  std::map<Key, Expected> expect;
  std::set<std::string> comms;
  std::map<std::uint64_t, std::string> comm_ids;  // `comm name=NAME id=0xHEX` lines
};

// The profiler ABI an NCCL release loads first (NCCL_VERSION_CODE major*10000 + minor*100 +
// patch; src/misc/profiler.cc:119 at v2.23.4-1 and :220-234 at v2.24.3-1, src/plugin/profiler.cc
// :52-58 at v2.26.6-1, :53-61 at v2.27.7-1, :70-81 at v2.28.9-1, :123-141 at 2.31.2); 0 before
// 2.23, which has no profiler plugins.
int AbiOfNccl(long code) {
  if (code < 20900) return 0;
  const long minor = code / 100 % 100;
  if (code / 10000 != 2 || minor < 23) return 0;
  if (minor == 23) return 1;
  if (minor <= 25) return 2;
  if (minor == 26) return 3;
  if (minor == 27) return 4;
  if (minor == 28) return 5;
  if (minor <= 30) return 6;
  return 7;
}

std::map<std::string, std::string> Fields(const std::string& line) {
  std::map<std::string, std::string> fields;
  std::istringstream in(line);
  std::string token;
  in >> token;  // the line's kind
  while (in >> token) {
    const auto eq = token.find('=');
    if (eq != std::string::npos) fields[token.substr(0, eq)] = token.substr(eq + 1);
  }
  return fields;
}

bool ReadManifest(const std::string& path, Manifest* m, std::string* error) {
  std::ifstream in(path);
  if (!in) {
    *error = "cannot read " + path;
    return false;
  }
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    auto f = Fields(line);
    auto num = [&](const char* k) { return std::strtoull(f[k].c_str(), nullptr, 10); };
    if (line.rfind("job ", 0) == 0) {
      m->mode = f["mode"];
      m->ranks = static_cast<int>(num("ranks"));
      m->nnodes = static_cast<int>(num("nnodes"));
      m->processes = static_cast<int>(num("processes"));
      m->nccl = static_cast<long>(num("nccl"));
    } else if (line.rfind("expect ", 0) == 0) {
      Key key{f["comm"], f["func"], num("bytes"), f["peer"]};
      if (key.comm.empty() || key.func.empty() || key.bytes == 0 ||
          (key.peer != "none" && key.peer != "self" && key.peer != "other") || num("ops") == 0) {
        std::ostringstream message;
        message << path << ":" << number << ": bad expect line";
        *error = message.str();
        return false;
      }
      Expected& e = m->expect[key];
      e.count = num("count");
      e.timed = f["timing"] != "none";
      e.ops += num("ops");
      e.what = f["what"];
      e.tag = num("tag");
      m->comms.insert(key.comm);
    } else if (line.rfind("comm ", 0) == 0) {
      const std::uint64_t id = std::strtoull(f["id"].c_str(), nullptr, 16);
      if (f["name"].empty() || id == 0) {
        std::ostringstream message;
        message << path << ":" << number << ": bad comm line";
        *error = message.str();
        return false;
      }
      m->comm_ids[id] = f["name"];
    }
  }
  if (m->ranks < 2 || m->processes < 1 || m->expect.empty()) {
    *error = path + ": no job line with ranks >= 2 and processes, or no expect lines";
    return false;
  }
  return true;
}

// ---- Checks, reported per category ----

class Checks {
 public:
  // `detail` parts are streamed into one example line, only when the check fails.
  template <typename... Parts>
  void Expect(const std::string& category, bool ok, const Parts&... detail) {
    auto it = index_.find(category);
    if (it == index_.end()) {
      it = index_.emplace(category, categories_.size()).first;
      categories_.push_back({category, 0, 0, {}});
    }
    Category& c = categories_[it->second];
    if (ok) {
      ++c.passed;
      return;
    }
    ++c.failed;
    if (c.examples.size() < 3) {
      std::ostringstream line;
      (line << ... << detail);
      c.examples.push_back(line.str());
    }
  }
  int failed_categories() const {
    int n = 0;
    for (const Category& c : categories_) n += c.failed != 0 ? 1 : 0;
    return n;
  }
  void Print() const {
    for (const Category& c : categories_) {
      if (c.failed == 0) {
        std::printf("ok   %s (%llu)\n", c.name.c_str(), static_cast<unsigned long long>(c.passed));
        continue;
      }
      const std::uint64_t all = c.failed + c.passed;
      std::printf("FAIL %s: %llu of %llu\n", c.name.c_str(),
                  static_cast<unsigned long long>(c.failed), static_cast<unsigned long long>(all));
      for (const std::string& e : c.examples) std::printf("       e.g. %s\n", e.c_str());
    }
  }

 private:
  struct Category {
    std::string name;
    std::uint64_t passed;
    std::uint64_t failed;
    std::vector<std::string> examples;
  };
  std::vector<Category> categories_;
  std::map<std::string, std::size_t> index_;
};

// ---- Records ----

struct Collect : ncclscope::profiler::RecordSink {
  std::vector<ncclscope_comm_init_record> inits;
  std::vector<ncclscope_comm_finalize_record> finals;
  std::vector<OpView> ops;
  std::vector<ncclscope_proxy_op_record> net;
  std::vector<ncclscope::profiler::OpCounts> counts;
  void OnCommInit(const RingOrigin&, const ncclscope_comm_init_record& r) override {
    inits.push_back(r);
  }
  void OnCommFinalize(const RingOrigin&, const ncclscope_comm_finalize_record& r) override {
    finals.push_back(r);
  }
  void OnOp(const RingOrigin&, const OpView& v) override { ops.push_back(v); }
  void OnProxyOp(const RingOrigin&, const ncclscope_proxy_op_record& r) override {
    net.push_back(r);
  }
  void OnOpCounts(const RingOrigin& /*origin*/, const ncclscope::profiler::OpCounts& r) override {
    counts.push_back(r);
  }
};

std::string Hex(std::uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

bool IsAllGatherOrBroadcast(const std::string& func) {
  return func == "AllGather" || func == "Broadcast";
}

struct Options {
  std::string dir;
  std::string manifest;
  int abi = 0;
  std::string network = "any";
  std::string net;
};

int Usage() {
  std::fprintf(stderr,
               "usage: ring-check DIR --manifest FILE --abi 1..7 [--network expect|none|any] "
               "[--net NAME]\n");
  return 2;
}

// The ring files (before the reader reclaims them): their headers name NCCL's ABI choice.
void CheckRingHeaders(const Options& o, const Manifest& m, Checks& checks) {
  std::vector<std::string> rings;
  if (DIR* d = opendir(o.dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.size() > 5 && name.compare(name.size() - 5, 5, NCCLSCOPE_RING_SUFFIX) == 0) {
        rings.push_back(o.dir);
        rings.back().append("/").append(name);
      }
    }
    closedir(d);
  }
  std::sort(rings.begin(), rings.end());
  checks.Expect("one ring per job process", static_cast<int>(rings.size()) == m.processes,
                rings.size(), " rings, ", m.processes, " processes");
  for (const std::string& path : rings) {
    std::string reason;
    std::unique_ptr<ncclscope::profiler::RingFile> ring =
        ncclscope::profiler::RingFile::Open(path, &reason);
    checks.Expect("ring file valid", ring != nullptr, path, ": ", reason);
    if (!ring) continue;
    ncclscope::profiler::RingHeaderSnapshot h;
    const bool read = ring->ReadHeader(&h);
    checks.Expect("ring header readable", read, path);
    if (!read) continue;
    std::printf("ring pid %d: NCCL ABI v%u, state %s, event mask 0x%x\n", ring->origin().pid,
                h.nccl_abi, h.state == NCCLSCOPE_RING_CLOSED ? "closed" : "live", h.effective_mask);
    checks.Expect("ring header: the ABI NCCL chose is the one its version picks",
                  static_cast<int>(h.nccl_abi) == o.abi, "v", h.nccl_abi, ", want v", o.abi);
    checks.Expect("ring closed (every communicator finalized)", h.state == NCCLSCOPE_RING_CLOSED,
                  path);
    checks.Expect("ring header: exact op counts (features EXACT_COUNTS)", ring->exact_counts(),
                  path);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Usage();
  Options o;
  o.dir = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) return Usage();
    const std::string value = argv[++i];
    if (arg == "--manifest") {
      o.manifest = value;
    } else if (arg == "--abi") {
      o.abi = static_cast<int>(std::strtol(value.c_str(), nullptr, 10));
    } else if (arg == "--network") {
      o.network = value;
    } else if (arg == "--net") {
      o.net = value;
    } else {
      return Usage();
    }
  }
  if (o.manifest.empty() || o.abi < 1 || o.abi > 7 ||
      (o.network != "expect" && o.network != "none" && o.network != "any")) {
    return Usage();
  }
  Manifest m;
  std::string error;
  if (!ReadManifest(o.manifest, &m, &error)) {
    std::fprintf(stderr, "ring-check: %s\n", error.c_str());
    return 2;
  }
  Checks checks;
  // What the ABI can carry (see the top of this file).
  const bool identity_at_init = o.abi >= 4;  // v1-v3: from the first op, without a name
  const bool kernel_ch = o.abi >= 3;         // v1/v2: no KernelCh
  const bool gpu_timing = o.abi >= 4;        // v3: KernelCh without timestamps
  const bool net_plugin = o.abi >= 3;        // v1/v2: no NetPlugin events
  const bool api_count = o.abi >= 5;         // CollApi: AllGather/Broadcast's API count
  const bool phases = o.abi >= 7;            // KernelPhase
  checks.Expect("job line: the NCCL version the job ran picks this ABI", AbiOfNccl(m.nccl) == o.abi,
                "nccl=", m.nccl, " picks v", AbiOfNccl(m.nccl), ", want v", o.abi);

  // ---- Rings: headers, then every record through the agent's reader ----
  CheckRingHeaders(o, m, checks);
  ncclscope::profiler::RingDirectory directory(o.dir);
  Collect c;
  for (int pass = 0; pass < 20; ++pass) {
    while (directory.Poll(c)) {
    }
    if (directory.snapshot().rings_reclaimed >= static_cast<std::uint64_t>(m.processes)) break;
  }
  const auto& snap = directory.snapshot();
  std::printf(
      "rings reclaimed %llu; records: init %zu, op %zu, proxy_op %zu, op_counts %zu, finalize "
      "%zu\n",
      static_cast<unsigned long long>(snap.rings_reclaimed), c.inits.size(), c.ops.size(),
      c.net.size(), c.counts.size(), c.finals.size());
  checks.Expect("every ring drained and reclaimed (its process exited)",
                snap.rings_reclaimed == static_cast<std::uint64_t>(m.processes),
                snap.rings_reclaimed, " reclaimed");
  checks.Expect("no ring rejected or broken", snap.rings_rejected.empty() && snap.ring_faults == 0,
                snap.rings_rejected.size(), " rejected, ", snap.ring_faults, " faults");
  std::uint64_t corrupt = 0;
  for (std::uint64_t n : snap.corrupt) corrupt += n;
  checks.Expect("no corrupt records, no lane resyncs", corrupt == 0 && snap.lane_resyncs == 0,
                corrupt, " corrupt, ", snap.lane_resyncs, " resyncs");
  checks.Expect("no records dropped (ring full)", snap.dropped_ring_full == 0,
                snap.dropped_ring_full);
  const struct {
    ncclscope_counter counter;
    const char* what;
  } kZeroCounters[] = {
      {NCCLSCOPE_CTR_DROPPED_CONTENTION, "records dropped (lanes busy)"},
      {NCCLSCOPE_CTR_OPS_FILTERED, "ops filtered"},
      {NCCLSCOPE_CTR_HANDLES_EXHAUSTED, "handle pools exhausted"},
      {NCCLSCOPE_CTR_INVALID_HANDLE, "invalid handles from NCCL"},
      {NCCLSCOPE_CTR_LATE_EVENT, "child events after their op completed"},
      {NCCLSCOPE_CTR_OPS_INCOMPLETE, "ops without full GPU timing"},
      {NCCLSCOPE_CTR_COMMS_WITHOUT_SLOT, "communicators without a slot"},
      {NCCLSCOPE_CTR_OPS_FLUSHED, "ops in flight at finalize"},
      {NCCLSCOPE_CTR_CHAIN_ERRORS, "chained-plugin errors"},
  };
  std::printf("plugin counters:");
  for (std::size_t i = 0; i < NCCLSCOPE_COUNTER_MAX; ++i) {
    if (snap.plugin_counters[i] != 0) {
      std::printf(" [%zu]=%llu", i, static_cast<unsigned long long>(snap.plugin_counters[i]));
    }
  }
  std::printf("\n");
  for (const auto& z : kZeroCounters) {
    checks.Expect(std::string("plugin counter zero: ") + z.what,
                  snap.plugin_counters[z.counter] == 0, snap.plugin_counters[z.counter]);
  }

  // ---- Communicators ----
  std::map<std::uint64_t, std::string> comm_name;        // comm id -> name
  std::map<std::string, std::set<std::uint64_t>> ids;    // name -> comm ids
  std::map<std::string, std::map<int, int>> init_ranks;  // name -> rank -> init records
  for (const auto& init : c.inits) {
    // v4+ name the communicator at init; v1-v3 cannot (NCCL passes name NULL): the job's own
    // list of ids names it.
    const auto listed = m.comm_ids.find(init.comm_id);
    const std::string name = identity_at_init             ? std::string(init.name)
                             : listed != m.comm_ids.end() ? listed->second
                                                          : Hex(init.comm_id);
    comm_name[init.comm_id] = name;
    ids[name].insert(init.comm_id);
    ++init_ranks[name][init.rank];
    std::printf("comm %s \"%s\" (%s) rank %d/%d nnodes %d cuda_device %d %s %s abi v%u\n",
                Hex(init.comm_id).c_str(), init.name, name.c_str(), init.rank, init.nranks,
                init.nnodes, init.cuda_device, init.gpu_uuid, init.pci_bus_id, init.nccl_abi);
    std::string who = name;
    who.append(" rank ").append(std::to_string(init.rank));
    if (identity_at_init) {
      checks.Expect("communicator is one the job created (by name)", m.comms.count(name) != 0, "\"",
                    name, "\"");
      checks.Expect("comm init: nranks and nnodes as the job ran",
                    init.nranks == m.ranks && init.nnodes == m.nnodes, who, ": nranks ",
                    init.nranks, " nnodes ", init.nnodes);
    } else {
      checks.Expect("communicator is one the job created (by id: no name before v4)",
                    listed != m.comm_ids.end() && m.comms.count(name) != 0, Hex(init.comm_id),
                    " is not a `comm` line of the manifest");
      checks.Expect("comm init under v1-v3: no name, nranks and nnodes unknown (0)",
                    init.name[0] == '\0' && init.nranks == 0 && init.nnodes == 0, who, ": name \"",
                    init.name, "\" nranks ", init.nranks, " nnodes ", init.nnodes);
      checks.Expect("comm init under v1-v3: the rank from the first op",
                    init.rank >= 0 && init.rank < m.ranks, who);
    }
    checks.Expect("comm init: ABI version matches NCCL's", static_cast<int>(init.nccl_abi) == o.abi,
                  who, ": v", init.nccl_abi, ", want v", o.abi);
    checks.Expect("comm init: GPU named (CUDA device, UUID, PCI bus id)",
                  init.cuda_device >= 0 && std::string(init.gpu_uuid).rfind("GPU-", 0) == 0 &&
                      init.pci_bus_id[0] != '\0',
                  who);
  }
  std::set<std::uint64_t> all_ids;
  for (const std::string& name : m.comms) {
    checks.Expect("one communicator id per communicator, shared by all ranks",
                  ids[name].size() == 1, name, ": ", ids[name].size(), " ids");
    for (std::uint64_t id : ids[name]) all_ids.insert(id);
    bool every_rank = static_cast<int>(init_ranks[name].size()) == m.ranks;
    for (const auto& [rank, n] : init_ranks[name]) every_rank &= rank < m.ranks && n == 1;
    checks.Expect("one init record per rank of each communicator", every_rank, name);
  }
  checks.Expect("distinct ids for distinct communicators", all_ids.size() == m.comms.size(),
                all_ids.size(), " ids");

  // ---- Ops, one by one ----
  std::map<Key, std::map<int, std::uint64_t>> got;  // key -> rank -> ops
  std::map<std::tuple<std::string, std::string, int>, std::vector<std::uint64_t>> coll_seqs;
  std::map<std::tuple<std::string, std::string, std::uint64_t>, std::map<int, std::uint64_t>>
      coll_bytes;  // (comm, func, seq) -> rank -> bytes
  std::map<std::tuple<std::string, std::string, int, int>, std::map<std::uint64_t, std::uint64_t>>
      p2p_seqs;  // (comm, func, rank, peer) -> seq -> bytes
  std::map<std::pair<std::string, int>, std::vector<std::uint64_t>> op_indexes;
  std::map<std::tuple<std::uint64_t, int, std::uint64_t>, const OpView*> by_index;
  std::map<std::string, std::vector<double>> durations_us;
  for (const OpView& v : c.ops) {
    const ncclscope_op_record& op = v.op;
    const auto name_it = comm_name.find(op.comm_id);
    const std::string comm = name_it == comm_name.end() ? Hex(op.comm_id) : name_it->second;
    const std::string func = ncclscope_func_name(op.func);
    const bool p2p = op.kind == NCCLSCOPE_KIND_P2P;
    const std::string peer = !p2p ? "none" : op.peer == op.rank ? "self" : "other";
    char what[256];
    std::snprintf(what, sizeof(what),
                  "%s rank %d %s seq %llu bytes %llu peer %d flags 0x%x channels %u/%u "
                  "count %llu %s",
                  comm.c_str(), op.rank, func.c_str(), static_cast<unsigned long long>(op.seq),
                  static_cast<unsigned long long>(op.bytes), op.peer, op.flags, op.n_timed,
                  op.n_channels, static_cast<unsigned long long>(op.count),
                  ncclscope_datatype_name(op.datatype));
    const Key key{comm, func, op.bytes, peer};
    ++got[key][op.rank];
    op_indexes[{comm, op.rank}].push_back(op.op_index);
    by_index[{op.comm_id, op.rank, op.op_index}] = &v;
    if (p2p) {
      p2p_seqs[{comm, func, op.rank, op.peer}][op.seq] = op.bytes;
    } else {
      coll_seqs[{comm, func, op.rank}].push_back(op.seq);
      coll_bytes[{comm, func, op.seq}][op.rank] = op.bytes;
    }
    const auto e = m.expect.find(key);
    checks.Expect("every op is one the job issued (comm, func, bytes, peer)", e != m.expect.end(),
                  what);
    if (e == m.expect.end()) continue;

    const std::uint16_t f = op.flags;
    checks.Expect(
        "op ended normally (enqueue stopped; not flushed; no saturated time, no assumed "
        "datatype)",
        (f & (NCCLSCOPE_OP_FLUSHED | NCCLSCOPE_OP_NO_ENQUEUE_STOP | NCCLSCOPE_OP_TIME_SATURATED |
              NCCLSCOPE_OP_DATATYPE_ASSUMED)) == 0,
        what);
    const bool untimed = (f & (NCCLSCOPE_OP_GPU_TIMING | NCCLSCOPE_OP_GPU_TIMING_PARTIAL)) == 0 &&
                         op.n_timed == 0 && v.n_channels == 0;
    if (kernel_ch) {
      checks.Expect(
          "kernel_ch requested and the GPU's own events ended the wait (no "
          "KERNEL_NOT_REQUESTED, no KERNEL_NEVER_CAME)",
          (f & (NCCLSCOPE_OP_KERNEL_NOT_REQUESTED | NCCLSCOPE_OP_KERNEL_NEVER_CAME)) == 0, what);
    } else {
      checks.Expect(
          "v1/v2 (no KernelCh in NCCL 2.23-2.25): KERNEL_NOT_REQUESTED, no GPU timing, not partial",
          (f & (NCCLSCOPE_OP_KERNEL_NOT_REQUESTED | NCCLSCOPE_OP_KERNEL_NEVER_CAME |
                NCCLSCOPE_OP_KERNEL_UNTIMED)) == NCCLSCOPE_OP_KERNEL_NOT_REQUESTED &&
              untimed,
          what);
    }
    checks.Expect("proxy events requested (PROXY_REQUESTED: proxy duty 1)",
                  (f & NCCLSCOPE_OP_PROXY_REQUESTED) != 0, what);
    if (e->second.timed && gpu_timing) {
      const bool timed =
          (f & NCCLSCOPE_OP_GPU_TIMING) != 0 &&
          (f & (NCCLSCOPE_OP_GPU_TIMING_PARTIAL | NCCLSCOPE_OP_KERNEL_UNTIMED)) == 0 &&
          op.n_channels > 0 && op.n_timed == op.n_channels && v.n_channels == op.n_timed &&
          op.gpu_end_ns > op.gpu_start_ns;
      checks.Expect("GPU timing on every announced channel (all ops but self send/recv)", timed,
                    what);
      if (timed) {
        durations_us[func].push_back(static_cast<double>(op.gpu_end_ns - op.gpu_start_ns) / 1e3);
      }
    } else if (e->second.timed && kernel_ch) {
      checks.Expect(
          "v3 (KernelCh without timestamps): KERNEL_UNTIMED, no GPU timing, not partial "
          "(all ops but self send/recv)",
          (f & NCCLSCOPE_OP_KERNEL_UNTIMED) != 0 && untimed, what);
    } else if (!e->second.timed) {
      checks.Expect("self send/recv complete without GPU timing and not partial",
                    untimed && (f & NCCLSCOPE_OP_KERNEL_UNTIMED) == 0, what);
    }
    // v7: kernel phases on every channel of a timed collective: NCCL 2.31's regular collective
    // kernels stamp them around each work batch (src/device/common.h:323-346 at 2.31.2), so there
    // is a compute phase at least. Whether its p2p kernels do is unverified (research: nccl-v7.md
    // section 3; the replay gives them phases too): a p2p op's phases, if any, are well formed.
    // None before v7, none without a kernel.
    if (phases && e->second.timed) {
      bool well_formed = v.n_phase_channels <= v.n_channels &&
                         ((f & NCCLSCOPE_OP_HAS_PHASES) != 0) == (v.n_phase_channels != 0);
      bool compute = true;
      for (std::uint32_t k = 0; k < v.n_phase_channels; ++k) {
        well_formed &= v.phases[k].present != 0 && (v.phases[k].present & ~7u) == 0;
        compute &= (v.phases[k].present & 2u) != 0 && v.phases[k].ns[1] > 0;
      }
      if (p2p) {
        checks.Expect("v7: p2p kernel phases, where present, well formed", well_formed, what);
      } else {
        checks.Expect(
            "v7: kernel phases (OP_PHASES) with compute time on every timed channel of a "
            "collective",
            well_formed && compute && v.n_phase_channels == v.n_channels, what, " phase channels ",
            v.n_phase_channels);
      }
    } else {
      checks.Expect("no kernel phases (none before v7, none without a kernel)",
                    v.n_phase_channels == 0 && (f & NCCLSCOPE_OP_HAS_PHASES) == 0, what);
    }
    if (o.abi >= 7 && e->second.tag != 0) {
      // v7: the call's ncclCollConfig_t.userProfilerTag, handed to the plugin on CollApi and Coll
      // (src/include/plugin/profiler/profiler_v7.h at 2.31.2), recorded in OP_DETAIL.
      checks.Expect("v7: the call's user tag (OP_DETAIL), no symmetric kernel",
                    (f & NCCLSCOPE_OP_HAS_DETAIL) != 0 && (f & NCCLSCOPE_OP_SYMMETRIC) == 0 &&
                        v.user_tag == e->second.tag,
                    what, " user_tag ", v.user_tag, " want ", e->second.tag);
    } else {
      checks.Expect("no OP_DETAIL (no user tag, no symmetric kernel in this job)",
                    (f & (NCCLSCOPE_OP_HAS_DETAIL | NCCLSCOPE_OP_SYMMETRIC)) == 0 &&
                        v.user_tag == 0 && v.kernel_variant == NCCLSCOPE_KV_NONE,
                    what);
    }
    // AllGather/Broadcast reach the Coll event in bytes and ncclInt8; 2.28+ (v5+) records the
    // API's count and type from the CollApi event, older versions what the Coll event said.
    const bool api = IsAllGatherOrBroadcast(func) && api_count;
    const bool bytes_int8 = IsAllGatherOrBroadcast(func) && !api_count;
    const bool count_ok = api ? (f & NCCLSCOPE_OP_API_COUNT) != 0 && op.count == e->second.count &&
                                    op.datatype == NCCLSCOPE_DT_FLOAT32
                          : bytes_int8
                              ? (f & NCCLSCOPE_OP_API_COUNT) == 0 && op.count == op.bytes &&
                                    op.datatype == NCCLSCOPE_DT_INT8
                              : (f & NCCLSCOPE_OP_API_COUNT) == 0 && op.count == e->second.count &&
                                    op.datatype == NCCLSCOPE_DT_FLOAT32;
    checks.Expect(IsAllGatherOrBroadcast(func)
                      ? (api_count ? "AllGather/Broadcast: the API's count and float32 (API_COUNT)"
                                   : "AllGather/Broadcast before v5 (no CollApi): count in bytes, "
                                     "int8")
                      : "count and datatype as the API call's",
                  count_ok, what);
    checks.Expect("kind, algorithm and protocol named",
                  p2p ? (f & NCCLSCOPE_OP_P2P_SEQ_PER_PEER) != 0 && op.algo == NCCLSCOPE_ALGO_NONE
                      : op.kind == NCCLSCOPE_KIND_COLL && op.algo != NCCLSCOPE_ALGO_UNKNOWN &&
                            op.algo != NCCLSCOPE_ALGO_NONE && op.proto != NCCLSCOPE_PROTO_UNKNOWN &&
                            op.proto != NCCLSCOPE_PROTO_NONE,
                  what);
    if (func == "Broadcast") checks.Expect("Broadcast root recorded", op.peer == 0, what);
    checks.Expect("host times ordered (enqueue <= completion)", op.enqueue_ns <= op.complete_ns,
                  what);
  }

  // ---- Exact counts per (comm, func, bytes, peer) on every rank ----
  std::printf("ops per rank (want / got on each rank):\n");
  std::map<std::string, std::uint64_t> comm_total;                          // per rank
  std::map<std::pair<std::string, std::string>, std::uint64_t> func_total;  // collectives
  for (const auto& [key, e] : m.expect) {
    comm_total[key.comm] += e.ops;
    if (key.peer == "none") func_total[{key.comm, key.func}] += e.ops;
    std::string line;
    bool ok = true;
    for (int r = 0; r < m.ranks; ++r) {
      const auto it = got.find(key);
      const std::uint64_t n = it == got.end() || it->second.count(r) == 0 ? 0 : it->second.at(r);
      ok &= n == e.ops;
      line.append(" ").append(std::to_string(n));
    }
    std::printf("  %-5s %s %-13s %9llu B peer %-5s %-4s x %4llu /%s  (%s)\n", ok ? "ok" : "FAIL",
                key.comm.c_str(), key.func.c_str(), static_cast<unsigned long long>(key.bytes),
                key.peer.c_str(), e.timed ? "gpu" : "none", static_cast<unsigned long long>(e.ops),
                line.c_str(), e.what.c_str());
    checks.Expect("exact op count per (comm, func, bytes, peer) on every rank", ok, key.comm, " ",
                  key.func, " ", key.bytes, " B ", key.peer, ": want ", e.ops, ", got", line);
  }

  // ---- Join keys ----
  // Collectives: NCCL's seqNumber per (comm, func) counts 0, 1, ... on every rank (graph launches
  // included: captured with KernelCh, src/plugin/profiler.cc:425-427 at v2.28.9-1), and an op
  // has the same bytes on every rank.
  for (const auto& [cf, want] : func_total) {
    for (int r = 0; r < m.ranks; ++r) {
      std::vector<std::uint64_t> seqs = coll_seqs[{cf.first, cf.second, r}];
      std::sort(seqs.begin(), seqs.end());
      bool ok = seqs.size() == want;
      for (std::size_t i = 0; ok && i < seqs.size(); ++i) ok = seqs[i] == i;
      checks.Expect("collective seq numbers 0..N-1 per (comm, func) on every rank", ok, cf.first,
                    " ", cf.second, " rank ", r, ": ", seqs.size(), " ops, want ", want);
    }
  }
  for (const auto& [k, per_rank] : coll_bytes) {
    bool ok = static_cast<int>(per_rank.size()) == m.ranks;
    for (const auto& [rank, bytes] : per_rank) ok &= bytes == per_rank.begin()->second;
    checks.Expect("(comm, func, seq) on every rank with the same bytes (cross-rank join key)", ok,
                  std::get<0>(k), " ", std::get<1>(k), " seq ", std::get<2>(k), " on ",
                  per_rank.size(), " ranks");
  }
  // P2p: the plugin counts per (comm, direction, peer), so the k-th send from a to b is b's
  // k-th receive from a.
  for (const auto& [k, seqs] : p2p_seqs) {
    const auto& [comm, func, rank, peer] = k;
    bool contiguous = true;
    std::uint64_t i = 0;
    for (const auto& [seq, bytes] : seqs) contiguous &= seq == i++;
    checks.Expect("p2p seq numbers 0..N-1 per (comm, direction, peer)", contiguous, comm, " ", func,
                  " rank ", rank, " peer ", peer);
    if (func != "Send") continue;
    const auto match = p2p_seqs.find({comm, "Recv", peer, rank});
    checks.Expect("k-th send from a to b has the bytes of b's k-th receive from a",
                  match != p2p_seqs.end() && match->second == seqs, comm, " ", rank, " -> ", peer);
  }
  // Every op of a communicator once: op_index 0..M-1 per (comm, rank).
  for (const auto& [comm, want] : comm_total) {
    for (int r = 0; r < m.ranks; ++r) {
      std::vector<std::uint64_t> idx = op_indexes[{comm, r}];
      std::sort(idx.begin(), idx.end());
      bool ok = idx.size() == want;
      for (std::size_t i = 0; ok && i < idx.size(); ++i) ok = idx[i] == i;
      checks.Expect("op_index 0..M-1 per (comm, rank): nothing lost or doubled", ok, comm, " rank ",
                    r, ": ", idx.size(), " ops, want ", want);
    }
  }

  // ---- Finalize: nothing in flight ----
  std::map<std::pair<std::string, int>, int> finals;
  for (const auto& f : c.finals) {
    const auto it = comm_name.find(f.comm_id);
    const std::string comm = it == comm_name.end() ? Hex(f.comm_id) : it->second;
    ++finals[{comm, f.rank}];
    const std::uint64_t want = comm_total.count(comm) != 0 ? comm_total[comm] : 0;
    checks.Expect("finalize: ops enqueued = completed = issued, none flushed",
                  f.ops_enqueued == want && f.ops_completed == want && f.ops_flushed == 0, comm,
                  " rank ", f.rank, ": enqueued ", f.ops_enqueued, " completed ", f.ops_completed,
                  " flushed ", f.ops_flushed, ", issued ", want);
  }
  for (const std::string& comm : m.comms) {
    for (int r = 0; r < m.ranks; ++r) {
      checks.Expect("one finalize record per communicator rank", finals[{comm, r}] == 1, comm,
                    " rank ", r);
    }
  }

  // ---- Network operations ----
  std::uint64_t net_bytes = 0;
  std::map<std::uint32_t, std::uint64_t> by_net_type;
  std::map<std::tuple<std::uint64_t, int, std::uint64_t>, int> proxies_of;
  for (const auto& n : c.net) {
    net_bytes += n.bytes;
    ++by_net_type[n.net_type];
    char what[200];
    std::snprintf(what, sizeof(what),
                  "rank %d comm %s %s seq %llu op_index %llu channel %u peer %d %s flags 0x%x "
                  "steps %d/%d net_type %u dev %d qp %u",
                  n.rank, Hex(n.comm_id).c_str(), ncclscope_func_name(n.func),
                  static_cast<unsigned long long>(n.seq),
                  static_cast<unsigned long long>(n.op_index), n.channel, n.peer,
                  n.is_send ? "send" : "recv", n.flags, n.steps_done, n.n_steps, n.net_type,
                  n.net_dev_index, n.qp_num[0]);
    if (o.network == "none") continue;
    checks.Expect("network op of this process with its parent op known, not flushed",
                  (n.flags & (NCCLSCOPE_PROXY_FOREIGN | NCCLSCOPE_PROXY_FLUSHED)) == 0 &&
                      (n.flags & NCCLSCOPE_PROXY_PARENT_KNOWN) != 0 && comm_name.count(n.comm_id),
                  what);
    const auto parent = by_index.find({n.comm_id, n.rank, n.op_index});
    bool joined = parent != by_index.end() && parent->second->op.func == n.func &&
                  parent->second->op.seq == n.seq;
    checks.Expect("network op joins its op record (comm, rank, op_index, func, seq)", joined, what);
    if (!joined) continue;
    const OpView& v = *parent->second;
    ++proxies_of[{n.comm_id, n.rank, n.op_index}];
    checks.Expect("no network op for a self send/recv",
                  !(v.op.kind == NCCLSCOPE_KIND_P2P && v.op.peer == v.op.rank), what);
    // Only a timed op (v4+) says which channels it ran on.
    if (gpu_timing && (v.op.flags & NCCLSCOPE_OP_GPU_TIMING) != 0) {
      bool on_channel = false;
      for (std::uint32_t k = 0; k < v.n_channels; ++k) on_channel |= v.channel_ids[k] == n.channel;
      checks.Expect("network op on one of its op's timed channels", on_channel, what);
    }
    checks.Expect("network op moved bytes in all its steps (ProxyStep; v1-v3 ProxyOp states)",
                  n.steps_done == n.n_steps && n.steps_done > 0 && n.bytes > 0, what);
    if (o.net == "IB" && n.steps_done > 0 && net_plugin) {
      checks.Expect("IB: network op names its NIC and a queue pair (net-plugin events)",
                    n.net_type == NCCLSCOPE_NET_IB && n.qp_num[0] != 0 && n.net_dev_index >= 0,
                    what);
    } else if (!net_plugin) {
      checks.Expect(
          "v1/v2 (no net-plugin events before NCCL 2.26): no NIC, no queue pair",
          n.net_type == NCCLSCOPE_NET_UNKNOWN && n.qp_num[0] == 0 && n.net_dev_index == -1, what);
    }
  }
  std::printf("network: %zu proxy ops, %llu bytes; by net_type:", c.net.size(),
              static_cast<unsigned long long>(net_bytes));
  for (const auto& [type, n] : by_net_type) {
    std::printf(" %u=%llu", type, static_cast<unsigned long long>(n));
  }
  std::printf(" (0 unknown, 1 IB, 2 socket, 3 other)\n");
  if (o.network == "expect") {
    checks.Expect("network proxy ops recorded, with bytes", !c.net.empty() && net_bytes > 0,
                  c.net.size(), " ops, ", net_bytes, " bytes");
    for (const OpView& v : c.ops) {
      const ncclscope_op_record& op = v.op;
      if (op.kind == NCCLSCOPE_KIND_P2P && op.peer == op.rank) continue;
      checks.Expect("every op between two nodes has network op records",
                    proxies_of.count({op.comm_id, op.rank, op.op_index}) != 0,
                    std::string(ncclscope_func_name(op.func)), " rank ", op.rank, " seq ", op.seq,
                    " op_index ", op.op_index);
    }
  } else if (o.network == "none") {
    checks.Expect("no network op records (one node)", c.net.empty(), c.net.size(), " records");
  }

  // ---- Exact counts (the rings' count tables): every op the job issued, whatever was recorded
  // ---- Running totals, delivered every pass and once more when the process is gone: the latest
  // per (comm, rank) is the final one.
  struct Counted {
    std::map<std::uint32_t, std::pair<std::uint64_t, std::uint64_t>> keys;  // key -> ops, bytes
  };
  std::map<std::pair<std::string, int>, Counted> flushes;
  for (const ncclscope::profiler::OpCounts& r : c.counts) {
    const auto it = comm_name.find(r.comm_id);
    const std::string comm = it == comm_name.end() ? Hex(r.comm_id) : it->second;
    Counted& fl = flushes[{comm, r.rank}];
    fl = Counted{};  // a later read carries every total
    for (const ncclscope_op_count& e : r.counts) fl.keys[e.key] = {e.ops, e.bytes};
  }
  std::map<std::pair<std::string, std::string>, std::pair<std::uint64_t, std::uint64_t>>
      want_func;  // (comm, func) -> ops, bytes per rank
  for (const auto& [key, e] : m.expect) {
    auto& w = want_func[{key.comm, key.func}];
    w.first += e.ops;
    w.second += e.ops * key.bytes;
  }
  for (const std::string& comm : m.comms) {
    for (int r = 0; r < m.ranks; ++r) {
      const auto it = flushes.find({comm, r});
      const std::uint64_t want = comm_total[comm];
      std::uint64_t sum = 0;
      std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> by_func;
      if (it != flushes.end()) {
        for (const auto& [key, n] : it->second.keys) {
          sum += n.first;
          auto& f = by_func[ncclscope_func_name(key & 0x1Fu)];
          f.first += n.first;
          f.second += n.second;
        }
      }
      checks.Expect("exact counts: the count table totals the manifest's ops per (comm, rank)",
                    sum == want, comm, " rank ", r, ": ", sum, " counted, want ", want);
      for (const auto& [cf, w] : want_func) {
        if (cf.first != comm) continue;
        const auto got_func = by_func.find(cf.second);
        const std::pair<std::uint64_t, std::uint64_t> got_n =
            got_func == by_func.end() ? std::pair<std::uint64_t, std::uint64_t>{}
                                      : got_func->second;
        checks.Expect("exact counts: ops and bytes per (comm, rank, func) as the manifest's",
                      got_n == w, comm, " rank ", r, " ", cf.second, ": want ", w.first, " ops ",
                      w.second, " bytes, got ", got_n.first, " ops ", got_n.second, " bytes");
      }
    }
  }

  for (auto& [func, d] : durations_us) {
    std::sort(d.begin(), d.end());
    std::printf("GPU time %-13s %5zu ops: min %.1f us, median %.1f us, max %.1f us\n", func.c_str(),
                d.size(), d.front(), d[d.size() / 2], d.back());
  }
  checks.Print();
  const int failed = checks.failed_categories();
  std::printf("%s (%d failed check categories)\n", failed == 0 ? "PASS" : "FAIL", failed);
  return failed == 0 ? 0 : 1;
}
