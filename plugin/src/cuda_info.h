#pragma once

// Which GPU a communicator runs on, without linking CUDA: if the process has already loaded the
// CUDA driver (libcuda.so.1; every CUDA program has, static cudart or not), look up three driver
// entry points with dlopen(RTLD_NOLOAD) and ask for the current context's device, its UUID and PCI
// bus id. NCCL calls the profiler's init on a thread whose current device is the communicator's,
// so this names the right GPU. Never loads a library, never creates a context; on any failure
// the fields stay empty (-1 / "").

namespace ncclscope::plugin {

struct GpuInfo {
  int cuda_device = -1;      // ordinal in the process's visible devices
  char uuid[48] = {};        // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (the UUID label of DCGM)
  char pci_bus_id[32] = {};  // "0000:19:00.0"
};

GpuInfo CurrentGpu();

}  // namespace ncclscope::plugin
