// A stand-in NCCL application that loads the ncclscope profiler plugin, for the coverage and pod
// attribution tests: dlopens an NCCL library, prints "ready" and waits until GO_FILE exists; then
// creates one communicator in the plugin the way NCCL does when a communicator is created
// (ncclProfiler_v5.init: the plugin creates its ring and takes its lock), makes ROUNDS
// ncclAllReduce calls (comm NULL: the real NCCL refuses them, the probes count them), prints
// "done" and waits until EXIT_FILE exists, then finalizes the plugin's communicator.
// NCCL itself would call init from ncclCommInitRank (src/plugin/profiler.cc
// ncclProfilerPluginInit); that needs a GPU, so this program makes the call in its place.
//
// usage: profiled_nccl_calls PLUGIN LIBRARY ROUNDS GO_FILE [EXIT_FILE]   (NCCLSCOPE_RING_DIR set)

#include <dlfcn.h>
#include <nccl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "plugin/abi/nccl_profiler_abi.h"

namespace {

void WaitFor(const char* path) {
  while (access(path, F_OK) != 0) usleep(5000);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s PLUGIN LIBRARY ROUNDS GO_FILE [EXIT_FILE]\n", argv[0]);
    return 2;
  }
  void* nccl = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
  if (nccl == nullptr) {
    std::fprintf(stderr, "dlopen %s: %s\n", argv[2], dlerror());
    return 3;
  }
  auto all_reduce = reinterpret_cast<decltype(&ncclAllReduce)>(dlsym(nccl, "ncclAllReduce"));
  if (all_reduce == nullptr) return 3;
  std::printf("ready\n");
  std::fflush(stdout);
  WaitFor(argv[4]);

  void* plugin = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  auto* profiler = plugin != nullptr
                       ? static_cast<ncclscope::abi::ProfilerV5*>(dlsym(plugin, "ncclProfiler_v5"))
                       : nullptr;
  if (profiler == nullptr) {
    std::fprintf(stderr, "cannot load the plugin %s: %s\n", argv[1], dlerror());
    return 4;
  }
  void* context = nullptr;
  int mask = 0;
  if (profiler->init(&context, 0xc0ffee, &mask, "coverage-test", 1, 1, 0, nullptr) != 0 ||
      context == nullptr) {
    std::fprintf(stderr, "plugin init returned no communicator\n");
    return 5;
  }
  const long rounds = std::strtol(argv[3], nullptr, 10);
  char a[8];
  char b[8];
  for (long i = 0; i < rounds; ++i) all_reduce(a, b, 2, ncclFloat32, ncclSum, nullptr, nullptr);
  std::printf("done\n");
  std::fflush(stdout);
  if (argc > 5) WaitFor(argv[5]);
  profiler->finalize(context);
  return 0;
}
