// The replay driver against what each NCCL version does, independent of ncclscope's plugin: the
// recording plugin (tests/support/trace_profiler) exports every table, the replay is told which
// NCCL it plays (ReplayProcess(plugin, v), v = 1..7), and the calls that reach that version's
// table are compared with the sequence that NCCL release makes (tools/replay/nccl_replay.h cites
// the source of each rule). Events are named by type and the order in which they were started
// ("Coll2" = the second Coll event), parents by the name of the parent's start.

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "plugin/abi/nccl_profiler_abi.h"
#include "tests/support/trace_profiler.h"
#include "tools/replay/nccl_replay.h"

namespace {

namespace abi = ncclscope::abi;
namespace replay = ncclscope::replay;
namespace trace = ncclscope::testing::trace;

using Tokens = std::vector<std::string>;

constexpr std::uint64_t kHash = 0xABCD'0123'4567'89EFull;
constexpr int kRank = 1;
constexpr int kRanks = 4;
constexpr int kAll = 0xFFFF;  // every event bit, KernelPhase included

// The recording plugin: the replay's ProfilerPlugin and, on the same loaded library, the
// plugin's record accessors.
struct TraceLib {
  std::size_t (*count)() = nullptr;
  int (*get)(std::size_t, trace::Record*) = nullptr;
  void (*reset)() = nullptr;
  void (*set_init_mask)(int) = nullptr;
  void (*set_null_context)(int) = nullptr;
};

const replay::ProfilerPlugin& Plugin() {
  static const replay::ProfilerPlugin* const plugin =
      new replay::ProfilerPlugin(NCCLSCOPE_TRACE_PROFILER);
  return *plugin;
}

const TraceLib& Trace() {
  static const TraceLib lib = [] {
    TraceLib t;
    void* handle = dlopen(NCCLSCOPE_TRACE_PROFILER, RTLD_NOW | RTLD_LOCAL);  // never closed
    if (handle == nullptr) return t;
    t.count = reinterpret_cast<std::size_t (*)()>(dlsym(handle, "ncclscope_trace_count"));
    t.get = reinterpret_cast<int (*)(std::size_t, trace::Record*)>(
        dlsym(handle, "ncclscope_trace_get"));
    t.reset = reinterpret_cast<void (*)()>(dlsym(handle, "ncclscope_trace_reset"));
    t.set_init_mask =
        reinterpret_cast<void (*)(int)>(dlsym(handle, "ncclscope_trace_set_init_mask"));
    t.set_null_context =
        reinterpret_cast<void (*)(int)>(dlsym(handle, "ncclscope_trace_set_null_context"));
    return t;
  }();
  return lib;
}

std::vector<trace::Record> Records() {
  std::vector<trace::Record> out;
  const std::size_t n = Trace().count();
  for (std::size_t i = 0; i < n; ++i) {
    trace::Record r;
    if (Trace().get(i, &r) != 0) out.push_back(r);
  }
  return out;
}

// The records as tokens: "S Coll1<Group1" (start, parent), "X Coll1" (stop), "R ProxyOp1 19"
// (record, state); init and finalize left out. `labels` maps ids to names, `starts` names to
// their start records, `records` names to their state records (in order).
struct Seen {
  Tokens all;
  std::map<int, Tokens> by_thread;
  std::map<std::uint64_t, std::string> labels;
  std::map<std::string, trace::Record> starts;
  std::map<std::string, std::vector<trace::Record>> records;
  std::vector<trace::Record> raw;
  std::set<int> versions;  // the tables that were called
};

std::string Label(const Seen& t, std::uint64_t id) {
  if (id == 0) return "-";
  if (id == trace::kForeign) return "?";
  const auto it = t.labels.find(id);
  return it == t.labels.end() ? "#" + std::to_string(id) : it->second;
}

Seen Collect() {
  Seen t;
  t.raw = Records();
  std::map<std::string, int> ordinals;
  for (const trace::Record& r : t.raw) {
    t.versions.insert(r.version);
    std::string token;
    switch (r.call) {
      case trace::kStart: {
        const std::string name = abi::EventTypeName(r.type);
        const std::string label = name + std::to_string(++ordinals[name]);
        t.labels[r.id] = label;
        t.starts[label] = r;
        token = "S " + label + "<" + Label(t, r.parent);
        break;
      }
      case trace::kStop:
        token = "X " + (r.id == 0 ? std::string("NULL") : Label(t, r.id));
        break;
      case trace::kRecord:
        token = "R " + Label(t, r.id) + " " + std::to_string(r.state);
        t.records[Label(t, r.id)].push_back(r);
        break;
      default:
        continue;
    }
    t.all.push_back(token);
    t.by_thread[r.thread].push_back(token);
  }
  return t;
}

// The tokens of the listed event types only (starts, stops and records of their handles).
Tokens Only(const Tokens& tokens, std::initializer_list<const char*> types) {
  Tokens out;
  for (const std::string& token : tokens) {
    std::string name = token.substr(2, token.find_first_of("< ", 2) - 2);  // "P2p12"
    while (!name.empty() && std::isdigit(static_cast<unsigned char>(name.back())) != 0) {
      name.pop_back();
    }
    for (const char* type : types) {
      if (name == type) out.push_back(token);
    }
  }
  return out;
}

int Count(const Seen& t, const std::string& type, const std::string& parent) {
  int n = 0;
  for (const auto& [label, r] : t.starts) {
    if (label.rfind(type, 0) == 0 && std::isdigit(static_cast<unsigned char>(label[type.size()])) &&
        Label(t, r.parent) == parent) {
      ++n;
    }
  }
  return n;
}

int CountType(const Seen& t, const std::string& type) {
  int n = 0;
  for (const auto& [label, r] : t.starts) {
    if (label.rfind(type, 0) == 0 && std::isdigit(static_cast<unsigned char>(label[type.size()]))) {
      ++n;
    }
  }
  return n;
}

// Tokens: a start with its parent, a stop, a state record.
std::string S(const std::string& label, const std::string& parent) {
  return std::string("S ").append(label).append("<").append(parent);
}
std::string X(const std::string& label) { return std::string("X ").append(label); }
std::string R(const std::string& label, int state) {
  return std::string("R ").append(label).append(" ").append(std::to_string(state));
}

void Add(Tokens& e, std::initializer_list<std::string> tokens) {
  e.insert(e.end(), tokens.begin(), tokens.end());
}

replay::GroupTask AllReduce(std::size_t count, int channels) {
  replay::GroupTask t;
  t.coll.func = "AllReduce";
  t.coll.count = count;
  t.coll.datatype = "ncclFloat32";
  t.coll.channels = static_cast<std::uint8_t>(channels);
  t.coll.warps = 8;
  return t;
}

replay::GroupTask SendRecv(const char* func, int peer, std::uint64_t tag = 0) {
  replay::GroupTask t;
  t.p2p = true;
  t.send_recv.func = func;
  t.send_recv.count = 256;
  t.send_recv.datatype = "ncclFloat32";
  t.send_recv.peer = peer;
  t.send_recv.channels = 1;
  t.send_recv.user_tag = tag;
  return t;
}

class ReplayVersionsTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(Plugin().ok()) << Plugin().error();
    ASSERT_NE(Trace().reset, nullptr);
    ASSERT_TRUE(Plugin().Has(v()));
    Trace().reset();
    Trace().set_init_mask(-1);
    Trace().set_null_context(0);
    replay::ReplayProcess::ClearRasOverride();
    *replay::ReplayProcess::mask() = 0;
  }
  void TearDown() override { replay::ReplayProcess::ClearRasOverride(); }
  int v() const { return GetParam(); }
  // Every call reached the table of the version under test, and no other.
  void ExpectOnlyOwnTable(const Seen& t) const { EXPECT_EQ(t.versions, std::set<int>{v()}); }
};

// ---- One eager AllReduce with every event bit on: the whole sequence. ----

// One network transfer of a ProxyOp as each version records it.
void Transfer(Tokens& e, int v, const std::string& op, const std::string& step, bool send) {
  // The records after the step's start: on the ProxyOp (v1-v3 states 0-7) or on the step; -1 =
  // the step's stop.
  struct Next {
    bool on_op;
    int state;
  };
  std::vector<Next> order;
  if (v >= 4) {
    order = send ? std::vector<Next>{{false, 8}, {false, 20}, {false, 9}, {false, -1}}
                 : std::vector<Next>{{false, 10}, {false, 11}, {false, 12}, {false, -1}};
  } else {
    order = send ? std::vector<Next>{{true, 0},  {false, 8},  {true, 1}, {true, 2},
                                     {false, 9}, {false, -1}, {true, 3}}
                 : std::vector<Next>{{true, 4}, {false, 10}, {true, 5},   {false, 11},
                                     {true, 6}, {false, 12}, {false, -1}, {true, 7}};
  }
  Add(e, {"S " + step + "<" + op});
  for (const Next& n : order) {
    const std::string& target = n.on_op ? op : step;
    e.push_back(n.state < 0 ? "X " + target : "R " + target + " " + std::to_string(n.state));
  }
}

TEST_P(ReplayVersionsTest, EagerAllReduceWithEveryEventBit) {
  replay::ProxyThread profiler_thread;
  replay::ReplayProcess process(Plugin(), v());
  replay::ReplayComm comm(process, kHash, "trace", 2, kRanks, kRank, nullptr,
                          v() >= 7 ? &profiler_thread : nullptr);
  ASSERT_TRUE(comm.Init());
  *replay::ReplayProcess::mask() = kAll;
  replay::GroupTask task = AllReduce(1024, 2);
  task.coll.user_tag = 7;
  replay::PlanTiming timing;
  timing.base_ns = 1'000'000;
  timing.duration_ns = {50'000};
  timing.skew_ns = 100;
  replay::ProxyPlan net;
  net.steps = 2;
  net.step_bytes = 4096;
  comm.RunPlan(comm.Group({task}), timing, net);
  profiler_thread.Drain();
  comm.Finalize();
  const Seen t = Collect();
  ExpectOnlyOwnTable(t);

  Tokens e;  // the user (here also proxy) thread
  if (v() >= 5) {
    Add(e, {"S GroupApi1<-", "R GroupApi1 23", "S CollApi1<GroupApi1", "X CollApi1",
            "R GroupApi1 24"});
  }
  Add(e, {"S Group1<-", v() >= 5 ? "S Coll1<CollApi1" : "S Coll1<Group1", "X Coll1", "X Group1"});
  if (v() >= 5) Add(e, {"X GroupApi1"});
  // RunPlan: ProxyOps per channel (recv, then send), KernelCh starts, network, KernelCh stops.
  Add(e, {"S ProxyOp1<Coll1", "S ProxyOp2<Coll1", "S ProxyOp3<Coll1", "S ProxyOp4<Coll1"});
  Tokens kernel;  // v7: the profiler thread's
  if (v() >= 3) Add(kernel, {"S KernelCh1<Coll1", "S KernelCh2<Coll1"});
  if (v() < 7) e.insert(e.end(), kernel.begin(), kernel.end());
  int step = 0;
  for (int op = 1; op <= 4; ++op) {
    const std::string name = "ProxyOp" + std::to_string(op);
    const bool send = op % 2 == 0;
    if (v() >= 4) Add(e, {"R " + name + " 19"});
    for (int k = 0; k < 2; ++k) Transfer(e, v(), name, "ProxyStep" + std::to_string(++step), send);
    Add(e, {"X " + name});
  }
  kernel.clear();
  for (int ch = 1; ch <= 2 && v() >= 3; ++ch) {
    const std::string kc = "KernelCh" + std::to_string(ch);
    const std::string phase = "KernelPhase" + std::to_string(ch);
    if (v() >= 7) Add(kernel, {S(phase, kc), R(phase, 31), X(phase)});
    if (v() >= 4) Add(kernel, {R(kc, 22)});
    Add(kernel, {X(kc)});
  }
  if (v() < 7) {
    e.insert(e.end(), kernel.begin(), kernel.end());
    EXPECT_EQ(t.all, e);
  } else {
    ASSERT_EQ(t.by_thread.size(), 2u);
    EXPECT_EQ(t.by_thread.at(1), e);
    Tokens profiler = {"S KernelCh1<Coll1", "S KernelCh2<Coll1"};
    profiler.insert(profiler.end(), kernel.begin(), kernel.end());
    EXPECT_EQ(t.by_thread.at(2), profiler);  // the profiler thread, not the proxy's
  }

  // The Coll descriptor in each version's layout.
  const trace::Record& coll = t.starts.at("Coll1");
  EXPECT_EQ(coll.rank, kRank);
  EXPECT_EQ(coll.seq, 0u);
  EXPECT_EQ(coll.count, 1024u);
  EXPECT_EQ(coll.channels, 2);  // nMaxChannels (v1-v3) / nChannels
  EXPECT_EQ(coll.warps, 8);
  if (v() == 1) {
    EXPECT_EQ(coll.func_num, abi::kFuncV1AllReduce);
    EXPECT_EQ(coll.datatype_num, abi::kDatatypeV1Float32);
    EXPECT_EQ(coll.algo_num, abi::kAlgoV1Ring);
    EXPECT_EQ(coll.proto_num, abi::kProtoV1Simple);
    EXPECT_EQ(coll.op_num, 0);
    EXPECT_EQ(coll.is_collnet, 0);
    EXPECT_EQ(coll.is_nvls, 0);
  } else {
    EXPECT_STREQ(coll.func, "AllReduce");
    EXPECT_STREQ(coll.datatype, "ncclFloat32");
    EXPECT_STREQ(coll.algo, "RING");
    EXPECT_STREQ(coll.proto, "SIMPLE");
  }
  if (v() <= 3) {
    EXPECT_TRUE(coll.name_null);
    EXPECT_EQ(coll.comm_hash, kHash);
  }
  // trafficBytes = 1024 x 4 bytes x 2 (AllReduce); v3 has no such member.
  EXPECT_EQ(coll.traffic_bytes, v() <= 2 ? 8192u : 0u);
  if (v() >= 5) {
    EXPECT_EQ(Label(t, coll.parent_group), "Group1");
  }
  EXPECT_EQ(coll.user_tag, v() >= 7 ? 7u : 0u);
  if (v() >= 7) {
    EXPECT_FALSE(coll.is_sym);
    EXPECT_STREQ(coll.variant, "(null)");
    EXPECT_EQ(t.starts.at("CollApi1").user_tag, 7u);
  }
  if (v() == 5 || v() == 6) {
    EXPECT_EQ(t.starts.at("CollApi1").user_tag, 0u);
  }

  // ProxyOps: channel 0 recv from rank 0, send to rank 2, 2 steps of 4096 bytes.
  const trace::Record& recv = t.starts.at("ProxyOp1");
  const trace::Record& send = t.starts.at("ProxyOp2");
  EXPECT_EQ(recv.is_send, 0);
  EXPECT_EQ(recv.peer, 0);
  EXPECT_EQ(send.is_send, 1);
  EXPECT_EQ(send.peer, 2);
  EXPECT_EQ(send.n_steps, 2);
  EXPECT_EQ(send.chunk_size, 4096);
  EXPECT_EQ(t.starts.at("ProxyOp3").channel, 1);
  EXPECT_EQ(t.starts.at("ProxyStep2").step, 1);
  if (v() <= 3) {
    // {state, transSize, steps}: cumulative bytes; 2.23 counts a sent transfer after its
    // SendTransmitted record, 2.24+ before.
    using Args = std::vector<std::vector<std::size_t>>;
    auto args = [&](const std::string& op) {
      Args out;
      for (const trace::Record& r : t.records.at(op)) {
        out.push_back(
            {static_cast<std::size_t>(r.state), r.trans_size, static_cast<std::size_t>(r.steps)});
      }
      return out;
    };
    EXPECT_EQ(args("ProxyOp1"), (Args{{4, 0, 1},
                                      {5, 4096, 1},
                                      {6, 4096, 1},
                                      {7, 4096, 1},
                                      {4, 4096, 2},
                                      {5, 8192, 2},
                                      {6, 8192, 2},
                                      {7, 8192, 2}}));
    const std::size_t transmitted_1 = v() == 1 ? 0 : 4096;
    const std::size_t transmitted_2 = v() == 1 ? 4096 : 8192;
    EXPECT_EQ(args("ProxyOp2"), (Args{{0, 0, 1},
                                      {1, 0, 1},
                                      {2, transmitted_1, 1},
                                      {3, 4096, 1},
                                      {0, 4096, 2},
                                      {1, 4096, 2},
                                      {2, transmitted_2, 2},
                                      {3, 8192, 2}}));
  }
  for (const trace::Record& r : t.records.at("ProxyStep1")) {
    EXPECT_EQ(r.args_null, v() <= 3) << r.state;  // NULL step args before 2.27
    if (v() >= 4) {
      EXPECT_EQ(r.trans_size, 4096u);
    }
  }
  // KernelCh: v3 without timestamp (and without record); v4+ GPU start and stop times.
  if (v() >= 3) {
    const trace::Record& k2 = t.starts.at("KernelCh2");
    EXPECT_EQ(k2.channel, 1);
    EXPECT_EQ(k2.rank, 0);
    EXPECT_EQ(k2.timer, v() >= 4 ? 1'000'100u : 0u);
    if (v() >= 4) {
      EXPECT_EQ(t.records.at("KernelCh2").at(0).timer, 1'050'200u);
    }
  }
  if (v() >= 7) {
    const trace::Record& phase = t.starts.at("KernelPhase2");
    EXPECT_EQ(phase.channel, 1);
    EXPECT_EQ(phase.phase_id, abi::kPhaseCompute);
    EXPECT_STREQ(phase.phase_name, "compute");
    EXPECT_EQ(phase.timer, 1'000'100u);
    EXPECT_EQ(t.records.at("KernelPhase2").at(0).timer, 1'050'200u);
  }
  EXPECT_EQ(CountType(t, "KernelPhase"), v() >= 7 ? 2 : 0);
  EXPECT_EQ(CountType(t, "NetPlugin"), 0);
}

// ---- A grouped AllReduce + AllGather, twice. ----

TEST_P(ReplayVersionsTest, GroupedAllReduceAndAllGather) {
  replay::ReplayProcess process(Plugin(), v());
  replay::ReplayComm comm(process, kHash, "trace", 2, kRanks, kRank, nullptr);
  ASSERT_TRUE(comm.Init());
  *replay::ReplayProcess::mask() = kAll;
  replay::GroupTask gather = AllReduce(1024, 2);
  gather.coll.func = "AllGather";
  replay::ProxyPlan net;
  net.steps = 1;
  for (int round = 0; round < 2; ++round) {
    comm.RunPlan(comm.Group({AllReduce(1 << 20, 2), gather}), {}, net);
  }
  const Seen t = Collect();
  ExpectOnlyOwnTable(t);

  Tokens e;
  for (int round = 0; round < 2; ++round) {
    const std::string g = "Group" + std::to_string(round + 1);
    const std::string api = "GroupApi" + std::to_string(round + 1);
    const std::string c1 = "Coll" + std::to_string(2 * round + 1);
    const std::string c2 = "Coll" + std::to_string(2 * round + 2);
    const std::string a1 = "CollApi" + std::to_string(2 * round + 1);
    const std::string a2 = "CollApi" + std::to_string(2 * round + 2);
    if (v() >= 5)
      Add(e, {S(api, "-"), R(api, 23), S(a1, api), X(a1), S(a2, api), X(a2), R(api, 24)});
    Add(e, {S(g, "-"), S(c1, v() >= 5 ? a1 : g), S(c2, v() >= 5 ? a2 : g), X(c1), X(c2), X(g)});
    if (v() >= 5) Add(e, {X(api)});
  }
  EXPECT_EQ(Only(t.all, {"GroupApi", "CollApi", "Group", "Coll"}), e);

  // Plan order: the larger AllReduce first. AllGather in bytes and int8.
  for (int round = 0; round < 2; ++round) {
    const trace::Record& reduce = t.starts.at("Coll" + std::to_string(2 * round + 1));
    const trace::Record& allgather = t.starts.at("Coll" + std::to_string(2 * round + 2));
    EXPECT_EQ(reduce.seq, static_cast<std::uint64_t>(round));
    EXPECT_EQ(allgather.seq, static_cast<std::uint64_t>(round));
    EXPECT_EQ(allgather.count, 4096u);
    if (v() == 1) {
      EXPECT_EQ(reduce.func_num, abi::kFuncV1AllReduce);
      EXPECT_EQ(allgather.func_num, abi::kFuncV1AllGather);
      EXPECT_EQ(allgather.datatype_num, abi::kDatatypeV1Int8);
    } else {
      EXPECT_STREQ(reduce.func, "AllReduce");
      EXPECT_STREQ(allgather.func, "AllGather");
      EXPECT_STREQ(allgather.datatype, "ncclInt8");
    }
    // trafficBytes: AllReduce bytes x 2, AllGather bytes x nRanks.
    EXPECT_EQ(reduce.traffic_bytes, v() <= 2 ? (4u << 20) * 2 : 0u);
    EXPECT_EQ(allgather.traffic_bytes, v() <= 2 ? 4096u * kRanks : 0u);
    if (v() <= 3) {
      EXPECT_EQ(allgather.comm_hash, kHash);
    }
  }
  // Each collective's proxy side: 2 channels x (recv, send) ProxyOps; KernelCh (2.26+) on its own
  // channels.
  for (const char* coll : {"Coll1", "Coll2", "Coll3", "Coll4"}) {
    EXPECT_EQ(Count(t, "ProxyOp", coll), 4) << coll;
    EXPECT_EQ(Count(t, "KernelCh", coll), v() >= 3 ? 2 : 0) << coll;
  }
  if (v() >= 3) {
    EXPECT_EQ(t.starts.at("KernelCh1").channel, 0);
    EXPECT_EQ(t.starts.at("KernelCh3").channel, 2);  // AllGather after AllReduce's two
  }
  EXPECT_EQ(comm.NextSeq("AllReduce"), 2u);
}

// ---- A send/recv pair and a self send/recv. ----

TEST_P(ReplayVersionsTest, SendRecvPairAndSelfSendRecv) {
  replay::ReplayProcess process(Plugin(), v());
  replay::ReplayComm comm(process, kHash, "trace", 2, kRanks, kRank, nullptr);
  ASSERT_TRUE(comm.Init());
  *replay::ReplayProcess::mask() = kAll;
  replay::ProxyPlan net;
  net.steps = 1;
  comm.RunPlan(comm.Group({SendRecv("Send", 2, 9), SendRecv("Recv", 2), SendRecv("Send", kRank),
                           SendRecv("Recv", kRank)}),
               {}, net);
  const Seen t = Collect();
  ExpectOnlyOwnTable(t);

  Tokens e;
  if (v() >= 5) {
    Add(e, {"S GroupApi1<-", "R GroupApi1 23"});
    for (int i = 1; i <= 4; ++i) {
      Add(e, {"S P2pApi" + std::to_string(i) + "<GroupApi1", "X P2pApi" + std::to_string(i)});
    }
    Add(e, {"R GroupApi1 24"});
  }
  Add(e, {"S Group1<-"});
  for (int i = 1; i <= 4; ++i) {
    Add(e, {"S P2p" + std::to_string(i) + "<" +
            (v() >= 5 ? "P2pApi" + std::to_string(i) : std::string("Group1"))});
  }
  Add(e, {"X P2p1", "X P2p2", "X P2p3", "X P2p4", "X Group1"});
  if (v() >= 5) Add(e, {"X GroupApi1"});
  EXPECT_EQ(Only(t.all, {"GroupApi", "P2pApi", "Group", "P2p"}), e);

  const int funcs[] = {abi::kFuncV1Send, abi::kFuncV1Recv, abi::kFuncV1Send, abi::kFuncV1Recv};
  const int peers[] = {2, 2, kRank, kRank};
  for (int i = 0; i < 4; ++i) {
    const trace::Record& p = t.starts.at("P2p" + std::to_string(i + 1));
    EXPECT_EQ(p.peer, peers[i]);
    EXPECT_EQ(p.count, 256u);
    if (v() == 1) {
      EXPECT_EQ(p.func_num, funcs[i]);
      EXPECT_EQ(p.datatype_num, abi::kDatatypeV1Float32);
    } else {
      EXPECT_STREQ(p.func, i % 2 == 0 ? "Send" : "Recv");
    }
    if (v() <= 3) {
      EXPECT_EQ(p.comm_hash, kHash);
      EXPECT_TRUE(p.name_null);
    }
    if (v() >= 4) {
      EXPECT_EQ(p.channels, 1);
    }
    EXPECT_EQ(p.user_tag, v() >= 7 && i == 0 ? 9u : 0u);
  }
  if (v() >= 7) {
    EXPECT_EQ(t.starts.at("P2pApi1").user_tag, 9u);
  }
  // The pair gets one network ProxyOp each (the send's a send); the self pair none, and no
  // KernelCh (src/enqueue.cc:805).
  EXPECT_EQ(Count(t, "ProxyOp", "P2p1"), 1);
  EXPECT_EQ(Count(t, "ProxyOp", "P2p2"), 1);
  EXPECT_EQ(CountType(t, "ProxyOp"), 2);
  EXPECT_EQ(t.starts.at("ProxyOp1").is_send, 1);
  EXPECT_EQ(t.starts.at("ProxyOp2").is_send, 0);
  EXPECT_EQ(Count(t, "KernelCh", "P2p1"), v() >= 3 ? 1 : 0);
  EXPECT_EQ(Count(t, "KernelCh", "P2p2"), v() >= 3 ? 1 : 0);
  EXPECT_EQ(CountType(t, "KernelCh"), v() >= 3 ? 2 : 0);
}

// ---- A CUDA graph: capture, then launches. ----

TEST_P(ReplayVersionsTest, CudaGraphCaptureAndLaunches) {
  replay::ReplayProcess process(Plugin(), v());
  replay::ReplayComm comm(process, kHash, "trace", 2, kRanks, kRank, nullptr);
  ASSERT_TRUE(comm.Init());
  // Captured without KernelCh: 2.26+ do not count graph collectives then.
  const int mask = abi::kGroup | abi::kColl | abi::kProxyOp;
  *replay::ReplayProcess::mask() = mask;
  const replay::CapturedGraph graph = comm.CaptureGraph({AllReduce(4096, 1)});
  replay::ProxyPlan net;
  net.steps = 1;
  comm.RunPlan(comm.LaunchGraph(graph), {}, net);
  comm.RunPlan(comm.LaunchGraph(graph), {}, net);
  // 2.23-2.25 read the live mask at every launch; 2.26+ keep the capture's copy.
  *replay::ReplayProcess::mask() = 0;
  comm.RunPlan(comm.LaunchGraph(graph), {}, net);
  const Seen t = Collect();
  ExpectOnlyOwnTable(t);

  Tokens e;
  if (v() >= 5) {  // API events at capture only
    Add(e, {"S GroupApi1<-", "R GroupApi1 23", "S CollApi1<GroupApi1", "X CollApi1",
            "R GroupApi1 24", "X GroupApi1"});
  }
  const int launches = v() <= 2 ? 2 : 3;
  for (int l = 1; l <= launches; ++l) {
    const std::string n = std::to_string(l);
    Add(e, {"S Group" + n + "<-",
            "S Coll" + n + "<" + (v() >= 5 ? std::string("CollApi1") : "Group" + n), "X Coll" + n,
            "X Group" + n});
  }
  EXPECT_EQ(Only(t.all, {"GroupApi", "CollApi", "Group", "Coll"}), e);
  if (v() >= 5) {
    EXPECT_TRUE(t.starts.at("GroupApi1").graph_captured);
    EXPECT_TRUE(t.starts.at("CollApi1").graph_captured);
  }
  // seqNumber: 2.23-2.25 count every Coll event; 2.26+ no graph collective without KernelCh.
  for (int l = 1; l <= launches; ++l) {
    EXPECT_EQ(t.starts.at("Coll" + std::to_string(l)).seq,
              v() <= 2 ? static_cast<std::uint64_t>(l - 1) : 0u);
    EXPECT_EQ(Count(t, "ProxyOp", "Coll" + std::to_string(l)), 2);
  }
  EXPECT_EQ(comm.NextSeq("AllReduce"), v() <= 2 ? 2u : 0u);

  // Captured with KernelCh (every bit): 2.26+ count the launches too.
  replay::ReplayComm second(process, kHash + 1, "trace", 2, kRanks, kRank, nullptr);
  ASSERT_TRUE(second.Init());
  *replay::ReplayProcess::mask() = kAll;
  const replay::CapturedGraph with_kernel = second.CaptureGraph({AllReduce(4096, 1)});
  second.LaunchGraph(with_kernel);
  second.LaunchGraph(with_kernel);
  EXPECT_EQ(second.NextSeq("AllReduce"), 2u);
}

// Before 2.27 a graph launch of a plan without proxy ops raises nothing.
TEST_P(ReplayVersionsTest, GraphLaunchWithoutProxyOpsBefore227) {
  replay::ReplayProcess process(Plugin(), v());
  replay::ReplayComm comm(process, kHash, "trace", 1, kRanks, kRank, nullptr);  // one node
  ASSERT_TRUE(comm.Init());
  *replay::ReplayProcess::mask() = abi::kGroup | abi::kColl;
  const replay::CapturedGraph graph = comm.CaptureGraph({AllReduce(4096, 1)});
  comm.LaunchGraph(graph);
  const Seen t = Collect();
  EXPECT_EQ(CountType(t, "Coll"), v() <= 3 ? 0 : 1);
  EXPECT_EQ(CountType(t, "Group"), v() <= 3 ? 0 : 1);
}

// ---- When the mask is read, and which bits start which event. ----

TEST_P(ReplayVersionsTest, MaskReadTimeAndGating) {
  replay::ReplayProcess process(Plugin(), v());
  replay::ReplayComm comm(process, kHash, "trace", 2, kRanks, kRank, nullptr);
  ASSERT_TRUE(comm.Init());

  // Every bit at the API call, none at the launch: 2.23-2.25 read it at the launch.
  *replay::ReplayProcess::mask() = kAll;
  comm.Group({AllReduce(4096, 1)}, nullptr, {}, [] { *replay::ReplayProcess::mask() = 0; });
  Seen t = Collect();
  EXPECT_EQ(CountType(t, "Group"), v() <= 2 ? 0 : 1);
  EXPECT_EQ(CountType(t, "Coll"), v() <= 2 ? 0 : 1);
  EXPECT_EQ(comm.NextSeq("AllReduce"), v() <= 2 ? 0u : 1u);

  // The Group bit alone: nothing before 2.26, a Group without children since.
  Trace().reset();
  *replay::ReplayProcess::mask() = abi::kGroup;
  comm.Group({AllReduce(4096, 1)});
  t = Collect();
  Tokens e;
  if (v() >= 5) Add(e, {"S GroupApi1<-", "R GroupApi1 23", "R GroupApi1 24"});
  if (v() >= 3) Add(e, {"S Group1<-", "X Group1"});
  if (v() >= 5) Add(e, {"X GroupApi1"});
  EXPECT_EQ(t.all, e);

  // The P2p bit alone: before 2.26 a Group without the P2p (its start tests the Coll bits).
  Trace().reset();
  *replay::ReplayProcess::mask() = abi::kP2p;
  comm.Group({SendRecv("Send", 2)});
  t = Collect();
  e.clear();
  if (v() >= 5)
    Add(e,
        {"S GroupApi1<-", "R GroupApi1 23", "S P2pApi1<GroupApi1", "X P2pApi1", "R GroupApi1 24"});
  Add(e, {"S Group1<-"});
  if (v() >= 3) Add(e, {v() >= 5 ? "S P2p1<P2pApi1" : "S P2p1<Group1", "X P2p1"});
  Add(e, {"X Group1"});
  if (v() >= 5) Add(e, {"X GroupApi1"});
  EXPECT_EQ(t.all, e);

  // ProxyStep without ProxyOp: the ProxyOp comes anyway (the step's parent).
  Trace().reset();
  *replay::ReplayProcess::mask() = abi::kProxyStep;
  replay::ProxyPlan net;
  net.steps = 1;
  comm.RunPlan(comm.Group({AllReduce(4096, 1)}), {}, net);
  t = Collect();
  EXPECT_EQ(CountType(t, "ProxyOp"), 2);
  EXPECT_EQ(CountType(t, "ProxyStep"), 2);
  EXPECT_EQ(CountType(t, "Coll"), 1);  // implicit parent
}

// ---- Net-plugin events: 2.26+ only, under the current step. ----

TEST_P(ReplayVersionsTest, NetPluginEventsFrom226) {
  replay::ReplayProcess process(Plugin(), v());
  replay::ReplayComm comm(process, kHash, "trace", 2, kRanks, kRank, nullptr);
  ASSERT_TRUE(comm.Init());
  *replay::ReplayProcess::mask() = kAll;
  replay::ProxyPlan net;
  net.steps = 1;
  net.qp_base = 100;
  comm.RunPlan(comm.Group({AllReduce(4096, 1)}), {}, net);
  const Seen t = Collect();
  EXPECT_EQ(CountType(t, "NetPlugin"), v() >= 3 ? 2 : 0);
  if (v() >= 3) {
    EXPECT_EQ(Label(t, t.starts.at("NetPlugin1").parent), "ProxyStep1");
    EXPECT_EQ(t.starts.at("NetPlugin1").net_id, (1 << 16) | 1);
  }
}

// ---- Events and states a version does not know are not delivered. ----

TEST_P(ReplayVersionsTest, UnknownEventsAndStatesAreDropped) {
  replay::ReplayProcess process(Plugin(), v());
  replay::ReplayComm comm(process, kHash, "trace", 2, kRanks, kRank, nullptr);
  ASSERT_TRUE(comm.Init());
  const struct {
    std::uint64_t type;
    int since;
  } kTypes[] = {{abi::kGroup, 1},     {abi::kColl, 1},         {abi::kKernelCh, 3},
                {abi::kNetPlugin, 3}, {abi::kGroupApi, 5},     {abi::kCollApi, 5},
                {abi::kP2pApi, 5},    {abi::kKernelLaunch, 5}, {abi::kCeColl, 6},
                {abi::kCeSync, 6},    {abi::kCeBatch, 6},      {abi::kKernelPhase, 7}};
  for (const auto& k : kTypes) {
    abi::EventDescrV7 d{};
    std::memset(&d, 0, sizeof(d));
    d.type = k.type;
    void* handle = reinterpret_cast<void*>(0x1);
    EXPECT_EQ(Plugin().Start(v(), comm.context(), &handle, d), 0);
    EXPECT_EQ(handle != nullptr, v() >= k.since) << abi::EventTypeName(k.type);
  }
  abi::EventDescrV7 d{};
  std::memset(&d, 0, sizeof(d));
  d.type = abi::kGroup;
  void* group = nullptr;
  Plugin().Start(v(), comm.context(), &group, d);
  Trace().reset();
  const struct {
    int state;
    int since;
  } kStates[] = {{abi::kProxyStepSendWait, 1}, {abi::kProxyOpInProgress, 4},
                 {abi::kKernelChStop, 4},      {abi::kGroupStartApiStop, 5},
                 {abi::kGroupEndApiStart, 5},  {abi::kKernelPhaseStop, 7}};
  int delivered = 0;
  for (const auto& s : kStates) {
    abi::StateArgsV6 args{};
    Plugin().Record(v(), group, s.state, &args);
    if (v() >= s.since) ++delivered;
    EXPECT_EQ(static_cast<int>(Trace().count()), delivered) << s.state;
  }
  // Copy-engine collectives: CeColl from 2.29 (v6), with the call's tag from 2.31.
  Trace().reset();
  *replay::ReplayProcess::mask() = kAll;
  comm.CeCollective("AllGather", 64, "ncclFloat32", 3, 11);
  const Seen t = Collect();
  EXPECT_EQ(CountType(t, "CeColl"), v() >= 6 ? 1 : 0);
  if (v() >= 6) {
    EXPECT_EQ(t.starts.at("CeColl1").seq, 3u);
    EXPECT_EQ(t.starts.at("CeColl1").user_tag, v() >= 7 ? 11u : 0u);
  }
}

// ---- init and finalize. ----

TEST_P(ReplayVersionsTest, FinalizeForANullContextUpTo227) {
  Trace().set_null_context(1);
  replay::ReplayProcess process(Plugin(), v());
  replay::ReplayComm comm(process, kHash, "trace", 2, kRanks, kRank, nullptr);
  EXPECT_FALSE(comm.Init());  // success, but no context
  comm.Finalize();
  int finalizes = 0;
  for (const trace::Record& r : Records()) {
    if (r.call != trace::kFinalize) continue;
    ++finalizes;
    EXPECT_EQ(r.id, 0u);
  }
  EXPECT_EQ(finalizes, v() <= 4 ? 1 : 0);
}

TEST_P(ReplayVersionsTest, KernelPhaseImpliesKernelChAndRasOverride) {
  replay::ReplayProcess process(Plugin(), v());
  // A plugin asking for phases alone gets KernelCh too from 2.31's init (and nothing else does).
  Trace().set_init_mask(abi::kColl | abi::kKernelPhase);
  replay::ReplayComm first(process, kHash, "trace", 2, kRanks, kRank, nullptr);
  ASSERT_TRUE(first.Init());
  const int asked = abi::kColl | abi::kKernelPhase;
  EXPECT_EQ(*replay::ReplayProcess::mask(), v() >= 7 ? asked | abi::kKernelCh : asked);
  // The RAS override (2.31 only) replaces the mask, and comes back after the next plugin init.
  const bool has_ras = process.SetRasOverride(abi::kGroup | abi::kKernelPhase);
  EXPECT_EQ(has_ras, v() >= 7);
  const int ras = abi::kGroup | abi::kKernelPhase | abi::kKernelCh;
  EXPECT_EQ(*replay::ReplayProcess::mask(), v() >= 7 ? ras : asked);
  Trace().set_init_mask(abi::kP2p);
  replay::ReplayComm second(process, kHash + 1, "trace", 2, kRanks, kRank, nullptr);
  ASSERT_TRUE(second.Init());
  EXPECT_EQ(*replay::ReplayProcess::mask(), v() >= 7 ? ras : static_cast<int>(abi::kP2p));
  // A runtime write by the plugin is not overridden (nor made to follow the deps).
  *replay::ReplayProcess::mask() = abi::kKernelPhase;
  EXPECT_EQ(*replay::ReplayProcess::mask(), abi::kKernelPhase);
}

// ---- 2.31 (v7): phases, symmetric collectives, tags. ----

TEST_P(ReplayVersionsTest, KernelPhasesFollowTheirStamps) {
  replay::ReplayProcess process(Plugin(), v());
  replay::ReplayComm comm(process, kHash, "trace", 2, kRanks, kRank, nullptr);
  ASSERT_TRUE(comm.Init());
  *replay::ReplayProcess::mask() = kAll;
  replay::PlanTiming timing;
  timing.base_ns = 1'000'000;
  timing.duration_ns = {50'000};
  timing.initial_sync_ns = {5'000};
  timing.final_sync_ns = {2'000};
  replay::ProxyPlan net;
  net.enabled = false;
  comm.RunPlan(comm.Group({AllReduce(4096, 1)}), timing, net);  // no profiler thread: the proxy's
  // KernelPhase without KernelCh in the task's copy: no KernelCh, so no phases.
  *replay::ReplayProcess::mask() = abi::kColl | abi::kKernelPhase;
  comm.RunPlan(comm.Group({AllReduce(4096, 1)}), timing, net);
  // KernelCh without KernelPhase: no phases.
  *replay::ReplayProcess::mask() = abi::kColl | abi::kKernelCh;
  comm.RunPlan(comm.Group({AllReduce(4096, 1)}), timing, net);
  const Seen t = Collect();
  if (v() < 7) {
    EXPECT_EQ(CountType(t, "KernelPhase"), 0);
    return;
  }
  EXPECT_EQ(
      Only(t.all, {"KernelCh", "KernelPhase"}),
      (Tokens{"S KernelCh1<Coll1", "S KernelPhase1<KernelCh1", "R KernelPhase1 31",
              "X KernelPhase1", "S KernelPhase2<KernelCh1", "R KernelPhase2 31", "X KernelPhase2",
              "S KernelPhase3<KernelCh1", "R KernelPhase3 31", "X KernelPhase3", "R KernelCh1 22",
              "X KernelCh1", "S KernelCh2<Coll3", "R KernelCh2 22", "X KernelCh2"}));
  const std::uint64_t stamps[] = {1'000'000, 1'005'000, 1'048'000, 1'050'000};
  const char* names[] = {"initial_sync", "compute", "final_sync"};
  for (int i = 0; i < 3; ++i) {
    const std::string phase = "KernelPhase" + std::to_string(i + 1);
    EXPECT_EQ(t.starts.at(phase).phase_id, i);
    EXPECT_STREQ(t.starts.at(phase).phase_name, names[i]);
    EXPECT_EQ(t.starts.at(phase).timer, stamps[i]);
    EXPECT_EQ(t.records.at(phase).at(0).timer, stamps[i + 1]);
    EXPECT_EQ(t.starts.at(phase).rank, 0);
  }
}

TEST_P(ReplayVersionsTest, SymmetricCollectives) {
  replay::ProxyThread profiler_thread;
  replay::ReplayProcess process(Plugin(), v());
  replay::ReplayComm comm(process, kHash, "trace", 2, kRanks, kRank, nullptr);
  comm.SetProfilerThread(&profiler_thread);
  ASSERT_TRUE(comm.Init());
  *replay::ReplayProcess::mask() = kAll;
  auto sym = [](std::size_t count) {
    replay::GroupTask t = AllReduce(count, 4);
    t.coll.symmetric = true;
    t.coll.kernel_variant = "AllReduce_AGxLL_R";
    return t;
  };
  replay::ProxyPlan net;
  net.steps = 1;
  // One bin, smallest first: the 1024-element task heads the plan.
  comm.RunPlan(comm.Group({sym(2048), sym(1024)}), {}, net);
  profiler_thread.Drain();
  Seen t = Collect();
  const trace::Record& head = t.starts.at("Coll1");
  const trace::Record& other = t.starts.at("Coll2");
  EXPECT_EQ(head.count, 1024u);
  if (v() >= 7) {
    EXPECT_TRUE(head.is_sym);
    EXPECT_STREQ(head.variant, "AllReduce_AGxLL_R");
    EXPECT_STREQ(head.algo, "AGxLL_R");
    EXPECT_STREQ(head.proto, "");
    EXPECT_EQ(head.channels, 4);
    EXPECT_TRUE(other.is_sym);
    EXPECT_EQ(other.channels, 0);
    EXPECT_EQ(Count(t, "KernelCh", "Coll1"), 4);  // blocks 0..3 of the head
    EXPECT_EQ(Count(t, "KernelCh", "Coll2"), 0);
    EXPECT_EQ(t.starts.at("KernelCh4").channel, 3);
    EXPECT_EQ(CountType(t, "ProxyOp"), 0);
  } else {  // a regular collective for the replay before 2.31
    EXPECT_EQ(other.channels, 4);
    EXPECT_EQ(Count(t, "KernelCh", "Coll2"), v() >= 3 ? 4 : 0);
  }
  // Under graph capture the clean kernel runs: no KernelCh (nor phases), though the head still
  // announces its channels.
  Trace().reset();
  const replay::CapturedGraph graph = comm.CaptureGraph({sym(1024)});
  comm.RunPlan(comm.LaunchGraph(graph), {}, net);
  profiler_thread.Drain();
  t = Collect();
  ASSERT_EQ(CountType(t, "Coll"), 1);
  EXPECT_EQ(t.starts.at("Coll1").channels, 4);
  EXPECT_EQ(CountType(t, "KernelCh"), v() >= 7 ? 0 : (v() >= 3 ? 4 : 0));
  EXPECT_EQ(CountType(t, "KernelPhase"), 0);
}

// CollNet: no proxy events before 2.27 (only the network transport raised ProxyOps) and
// nMaxChannels = the channels it uses; 2.27+ announce 0 channels and start ProxyOps that never
// stop.
TEST_P(ReplayVersionsTest, CollNetBefore227AndSince) {
  replay::ReplayProcess process(Plugin(), v());
  replay::ReplayComm comm(process, kHash, "trace", 2, kRanks, kRank, nullptr);
  ASSERT_TRUE(comm.Init());
  *replay::ReplayProcess::mask() = kAll;
  replay::GroupTask task = AllReduce(4096, 2);
  task.coll.algo = "COLLNET_DIRECT";
  replay::ProxyPlan net;
  net.steps = 1;
  comm.RunPlan(comm.Group({task}), {}, net);
  const Seen t = Collect();
  const trace::Record& coll = t.starts.at("Coll1");
  EXPECT_EQ(coll.channels, v() <= 3 ? 2 : 0);
  if (v() == 1) {
    EXPECT_EQ(coll.algo_num, abi::kAlgoV1CollNetDirect);
    EXPECT_EQ(coll.is_collnet, 1);
    EXPECT_EQ(coll.is_nvls, 0);
  }
  EXPECT_EQ(CountType(t, "ProxyOp"), v() <= 3 ? 0 : 4);
  EXPECT_EQ(Only(t.all, {"ProxyOp"}).size(), v() <= 3 ? 0u : 4u);  // starts only, no stops
  EXPECT_EQ(CountType(t, "KernelCh"), v() >= 3 ? 2 : 0);
}

// The v6 layout entry point and the table names still work for every version.
TEST_P(ReplayVersionsTest, TablesAndTheV6Entry) {
  EXPECT_EQ(std::string(Plugin().Name(v())), "trace-v" + std::to_string(v()));
  replay::ReplayProcess process(Plugin(), v());
  replay::ReplayComm comm(process, kHash, "trace", 2, kRanks, kRank, nullptr);
  ASSERT_TRUE(comm.Init());
  Trace().reset();
  abi::EventDescrV6 d{};
  d.type = abi::kColl;
  d.coll.func = "Broadcast";
  d.coll.datatype = "ncclInt8";
  d.coll.seqNumber = 5;
  void* handle = nullptr;
  replay::LegacyFields legacy;
  legacy.comm_hash = kHash;
  EXPECT_EQ(Plugin().Start(v(), comm.context(), &handle, d, legacy), 0);
  ASSERT_NE(handle, nullptr);
  const Seen t = Collect();
  const trace::Record& coll = t.starts.at("Coll1");
  EXPECT_EQ(coll.seq, 5u);
  if (v() == 1) {
    EXPECT_EQ(coll.func_num, abi::kFuncV1Broadcast);
  } else {
    EXPECT_STREQ(coll.func, "Broadcast");
  }
  if (v() <= 3) {
    EXPECT_EQ(coll.comm_hash, kHash);
  }
  if (v() == 1) {  // NVLS across nodes counts as CollNet, NVLS_TREE does not
    legacy.nnodes = 2;
    d.coll.algo = "NVLS";
    Plugin().Start(v(), comm.context(), &handle, d, legacy);
    d.coll.algo = "NVLS_TREE";
    Plugin().Start(v(), comm.context(), &handle, d, legacy);
    const Seen nvls = Collect();
    EXPECT_EQ(nvls.starts.at("Coll2").is_collnet, 1);
    EXPECT_EQ(nvls.starts.at("Coll2").is_nvls, 1);
    EXPECT_EQ(nvls.starts.at("Coll2").algo_num, abi::kAlgoV1Nvls);
    EXPECT_EQ(nvls.starts.at("Coll3").is_collnet, 0);
    EXPECT_EQ(nvls.starts.at("Coll3").is_nvls, 1);
  }
}

INSTANTIATE_TEST_SUITE_P(Nccl, ReplayVersionsTest, ::testing::Range(1, 8),
                         [](const ::testing::TestParamInfo<int>& param) {
                           return "v" + std::to_string(param.param);
                         });

}  // namespace
