#pragma once

// In-process control of the fake libnvidia-ml.so.1: dlopen of the same path returns the library
// the code under test loaded, so these calls reach the same simulated GPUs.

#include <dlfcn.h>

#include <stdexcept>
#include <string>

#include "tests/support/fake_nvml.h"
#include "tests/support/temp_dir.h"

namespace ncclscope::rdma::testing {

class FakeNvmlControl {
 public:
  explicit FakeNvmlControl(const ncclscope::testing::TempDir& dir)
      : state_path_(dir.path() + "/nvml-state") {
    handle_ = dlopen(NCCLSCOPE_FAKE_NVML, RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) throw std::runtime_error("cannot load the fake NVML");
    Write("");
    Call<void (*)(const char*)>("fakeNvmlSetStatePath")(state_path_.c_str());
  }
  ~FakeNvmlControl() {
    Call<void (*)(const char*)>("fakeNvmlSetStatePath")("");
    dlclose(handle_);
  }
  FakeNvmlControl(const FakeNvmlControl&) = delete;
  FakeNvmlControl& operator=(const FakeNvmlControl&) = delete;

  void Write(const std::string& state) {
    ncclscope::testing::WriteFakeNvmlState(state_path_, state);
  }
  unsigned long long Calls(const char* name) {  // NOLINT(google-runtime-int): C ABI
    return Call<unsigned long long (*)(const char*)>("fakeNvmlCalls")(name);  // NOLINT
  }
  unsigned long long FieldRequests() {  // NOLINT(google-runtime-int): C ABI
    return Call<unsigned long long (*)()>("fakeNvmlFieldRequests")();  // NOLINT
  }
  const std::string& state_path() const { return state_path_; }

 private:
  template <typename Fn>
  Fn Call(const char* name) {
    void* symbol = dlsym(handle_, name);
    if (symbol == nullptr) throw std::runtime_error(std::string("fake NVML lacks ") + name);
    return reinterpret_cast<Fn>(symbol);  // NOLINT: dlsym for functions
  }

  std::string state_path_;
  void* handle_ = nullptr;
};

}  // namespace ncclscope::rdma::testing
