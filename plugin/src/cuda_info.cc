#include "plugin/src/cuda_info.h"

#include <dlfcn.h>

#include <cstdio>

namespace ncclscope::plugin {
namespace {

// CUDA driver API types, as documented in the CUDA driver API reference.
using CuResult = int;  // CUresult, CUDA_SUCCESS = 0
using CuDevice = int;  // CUdevice
struct CuUuid {
  unsigned char bytes[16];
};
using CtxGetDeviceFn = CuResult (*)(CuDevice*);
using DeviceGetUuidFn = CuResult (*)(CuUuid*, CuDevice);
using DeviceGetPciBusIdFn = CuResult (*)(char*, int, CuDevice);

template <typename Fn>
Fn Symbol(void* lib, const char* name) {
  return reinterpret_cast<Fn>(dlsym(lib, name));
}

void FormatUuid(const CuUuid& uuid, char (&text)[48]) {
  const unsigned char* b = uuid.bytes;
  std::snprintf(text, sizeof(text),
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
}

}  // namespace

GpuInfo CurrentGpu() {
  GpuInfo info;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) return info;
  const auto get_device = Symbol<CtxGetDeviceFn>(lib, "cuCtxGetDevice");
  auto get_uuid = Symbol<DeviceGetUuidFn>(lib, "cuDeviceGetUuid_v2");
  if (get_uuid == nullptr) get_uuid = Symbol<DeviceGetUuidFn>(lib, "cuDeviceGetUuid");
  const auto get_pci = Symbol<DeviceGetPciBusIdFn>(lib, "cuDeviceGetPCIBusId");
  CuDevice device = -1;
  if (get_device != nullptr && get_device(&device) == 0 && device >= 0) {
    info.cuda_device = device;
    CuUuid uuid{};
    if (get_uuid != nullptr && get_uuid(&uuid, device) == 0) FormatUuid(uuid, info.uuid);
    if (get_pci != nullptr &&
        get_pci(info.pci_bus_id, static_cast<int>(sizeof(info.pci_bus_id)), device) == 0) {
      info.pci_bus_id[sizeof(info.pci_bus_id) - 1] = '\0';
    } else {
      info.pci_bus_id[0] = '\0';
    }
  }
  dlclose(lib);  // drops only the reference RTLD_NOLOAD took
  return info;
}

}  // namespace ncclscope::plugin
