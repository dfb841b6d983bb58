// Added cost of the eBPF probes per NCCL call: the real libnccl.so.2's ncclAllReduce (comm = NULL,
// so NCCL returns ncclInvalidArgument after its argument checks) called in a loop, in one run:
//   unprobed_ns  no probes;
//   floor_ns     an EMPTY uprobe + uretprobe pair (bpf/floor.bpf.c): what the kernel's trap and
//                return trampoline cost on this machine, whatever the program does;
//   probed_ns    the agent's entry + return programs attached exactly as the agent attaches them
//                (ELF reader offsets, pid = -1, op cookie; decode arguments, per-thread entry
//                state, count calls and bytes per process, record the result).
// Counters: added_ns = probed - unprobed, program_ns = probed - floor, ratio = probed / unprobed.
// Needs root; see docs/benchmarks.md for the command and results.

#include <benchmark/benchmark.h>
#include <bpf/libbpf.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <memory>

#include "agent/ebpf/attach/bpf_attacher.h"
#include "agent/ebpf/bpf_objects.h"
#include "agent/ebpf/functions.h"
#include "floor.skel.h"

namespace {

constexpr const char* kNccl = "/usr/local/cuda/lib/libnccl.so.2";
// ncclAllReduce in NCCL 2.28.9 (checked by tests/unit/ebpf/elf_symbols_test.cc).
constexpr std::size_t kAllReduceOffset = 0x64a30;
using AllReduce = int (*)(const void*, void*, std::size_t, int, int, void*, void*);

AllReduce LoadAllReduce() {
  void* lib = dlopen(kNccl, RTLD_NOW | RTLD_LOCAL);
  return lib ? reinterpret_cast<AllReduce>(dlsym(lib, "ncclAllReduce")) : nullptr;
}

double NsPerCall(AllReduce f, int calls) {
  char a[8], b[8];
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) benchmark::DoNotOptimize(f(a, b, 1000, 7, 0, nullptr, nullptr));
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start)
             .count() /
         calls;
}

void BM_NcclAllReduceProbed(benchmark::State& state) {
  if (geteuid() != 0) {
    state.SkipWithError("needs root (attaches uprobes)");
    return;
  }
  AllReduce all_reduce = LoadAllReduce();
  if (all_reduce == nullptr) {
    state.SkipWithError("cannot load /usr/local/cuda/lib/libnccl.so.2");
    return;
  }
  NsPerCall(all_reduce, 100000);  // warm up
  const double unprobed = NsPerCall(all_reduce, 1000000);

  double floor = 0;
  {
    ncclscope_floor* empty = ncclscope_floor__open_and_load();
    if (empty == nullptr) {
      state.SkipWithError("cannot load the floor programs");
      return;
    }
    bpf_uprobe_opts entry_opts{};
    entry_opts.sz = sizeof(entry_opts);
    bpf_uprobe_opts return_opts = entry_opts;
    return_opts.retprobe = true;
    ncclscope::ebpf::AttachedProbe entry(bpf_program__attach_uprobe_opts(
        empty->progs.ncclscope_floor_entry, -1, kNccl, kAllReduceOffset, &entry_opts));
    ncclscope::ebpf::AttachedProbe ret(bpf_program__attach_uprobe_opts(
        empty->progs.ncclscope_floor_return, -1, kNccl, kAllReduceOffset, &return_opts));
    if (entry.valid() && ret.valid()) floor = NsPerCall(all_reduce, 200000);
    ncclscope_floor__destroy(empty);
  }

  std::string error;
  auto objects = ncclscope::ebpf::BpfObjects::Load(&error);
  if (!objects) {
    state.SkipWithError(error.c_str());
    return;
  }
  ncclscope::ebpf::BpfAttacher attacher(objects->entry_program(), objects->return_program());
  ncclscope::ebpf::proc::OpenedFile file;
  file.fd = ncclscope::ebpf::UniqueFd(open(kNccl, O_RDONLY | O_CLOEXEC));
  std::vector<std::string> missing;
  auto attached =
      attacher.Attach(file, ncclscope::ebpf::Library::kNccl,
                      {ncclscope::ebpf::FindFunction("ncclAllReduce")}, &missing, &error);
  if (!attached) {
    state.SkipWithError(error.c_str());
    return;
  }
  char a[8], b[8];
  for (auto _ : state) {
    benchmark::DoNotOptimize(all_reduce(a, b, 1000, 7, 0, nullptr, nullptr));
  }
  const double probed = NsPerCall(all_reduce, 200000);
  state.counters["unprobed_ns"] = unprobed;
  state.counters["probed_ns"] = probed;
  state.counters["floor_ns"] = floor;
  state.counters["added_ns"] = probed - unprobed;
  state.counters["program_ns"] = probed - floor;
  state.counters["ratio"] = probed / unprobed;
}
BENCHMARK(BM_NcclAllReduceProbed)->Unit(benchmark::kNanosecond)->Iterations(1000000);

}  // namespace

BENCHMARK_MAIN();
