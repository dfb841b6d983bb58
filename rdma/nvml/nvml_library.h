#pragma once

// NVML loaded at run time with dlopen (fabric.md 3.3): no link-time dependency, so the agent runs
// on nodes without a GPU driver, and the NVLink source retries until the driver (e.g. the GPU
// Operator's driver container) appears. Every entry point is resolved by name; nvmlInit_v2 runs in
// Open() and nvmlShutdown + dlclose in the destructor.

#include <memory>
#include <string>

#include "rdma/nvml/nvml_abi.h"

namespace ncclscope::rdma::nvml {

class Library {
 public:
  // Loads `path` (a name searched like any dlopen, or an absolute path), resolves the entry points
  // and initializes NVML. Null with *error set ("libnvidia-ml.so.1: cannot open shared object
  // file", "missing symbol nvmlDeviceGetFieldValues", "nvmlInit_v2: Driver Not Loaded") on failure.
  static std::unique_ptr<Library> Open(const std::string& path, std::string* error);
  ~Library();
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  // NVML's text for a return code (or "NVML error N").
  std::string ErrorString(Return code) const;

  InitFn init = nullptr;
  ShutdownFn shutdown = nullptr;
  ErrorStringFn error_string = nullptr;
  DeviceGetCountFn device_get_count = nullptr;
  DeviceGetHandleByIndexFn device_get_handle_by_index = nullptr;
  DeviceGetUuidFn device_get_uuid = nullptr;
  DeviceGetNameFn device_get_name = nullptr;
  DeviceGetPciInfoFn device_get_pci_info = nullptr;
  DeviceGetNvLinkStateFn device_get_nvlink_state = nullptr;
  DeviceGetNvLinkErrorCounterFn device_get_nvlink_error_counter = nullptr;
  DeviceGetFieldValuesFn device_get_field_values = nullptr;

 private:
  Library() = default;
  void* handle_ = nullptr;
  bool initialized_ = false;
};

}  // namespace ncclscope::rdma::nvml
