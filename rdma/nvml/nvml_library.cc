#include "rdma/nvml/nvml_library.h"

#include <dlfcn.h>

#include <cmath>

namespace ncclscope::rdma::nvml {
namespace {

template <typename Fn>
bool Resolve(void* handle, const char* name, Fn* out, std::string* error) {
  void* symbol = dlsym(handle, name);
  if (symbol == nullptr) {
    *error = std::string("missing symbol ") + name;
    return false;
  }
  *out = reinterpret_cast<Fn>(symbol);  // NOLINT: dlsym returns object pointers for functions
  return true;
}

}  // namespace

double DecodeBer(unsigned long long packed) {  // NOLINT(google-runtime-int)
  const unsigned exponent = static_cast<unsigned>(packed & 0xFFu);
  const unsigned mantissa = static_cast<unsigned>((packed >> 8) & 0xFu);
  return static_cast<double>(mantissa) * std::pow(10.0, -static_cast<double>(exponent));
}

std::unique_ptr<Library> Library::Open(const std::string& path, std::string* error) {
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();  // NOLINT(concurrency-mt-unsafe): only the poller thread loads
    *error = why != nullptr ? why : (path + ": cannot be loaded");
    return nullptr;
  }
  std::unique_ptr<Library> library(new Library());
  library->handle_ = handle;
  if (!Resolve(handle, "nvmlInit_v2", &library->init, error) ||
      !Resolve(handle, "nvmlShutdown", &library->shutdown, error) ||
      !Resolve(handle, "nvmlErrorString", &library->error_string, error) ||
      !Resolve(handle, "nvmlDeviceGetCount_v2", &library->device_get_count, error) ||
      !Resolve(handle, "nvmlDeviceGetHandleByIndex_v2", &library->device_get_handle_by_index,
               error) ||
      !Resolve(handle, "nvmlDeviceGetUUID", &library->device_get_uuid, error) ||
      !Resolve(handle, "nvmlDeviceGetName", &library->device_get_name, error) ||
      !Resolve(handle, "nvmlDeviceGetPciInfo_v3", &library->device_get_pci_info, error) ||
      !Resolve(handle, "nvmlDeviceGetNvLinkState", &library->device_get_nvlink_state, error) ||
      !Resolve(handle, "nvmlDeviceGetNvLinkErrorCounter", &library->device_get_nvlink_error_counter,
               error) ||
      !Resolve(handle, "nvmlDeviceGetFieldValues", &library->device_get_field_values, error)) {
    *error = path + ": " + *error;
    return nullptr;  // the destructor dlcloses
  }
  const Return init = library->init();
  if (init != kSuccess) {
    *error = "nvmlInit_v2: " + library->ErrorString(init);
    return nullptr;
  }
  library->initialized_ = true;
  return library;
}

Library::~Library() {
  if (initialized_ && shutdown != nullptr) shutdown();
  if (handle_ != nullptr) dlclose(handle_);
}

std::string Library::ErrorString(Return code) const {
  const char* text = error_string != nullptr ? error_string(code) : nullptr;
  return text != nullptr ? std::string(text) : "NVML error " + std::to_string(code);
}

}  // namespace ncclscope::rdma::nvml
