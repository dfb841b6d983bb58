/* Stand-ins for the CUDA runtime and driver calls NVIDIA's NCCL Inspector makes, so that
 * bench/inspector_ab.sh can run it on a machine without a GPU: cudaGetDevice and
 * cudaGetErrorString (linked from libcudart.so.13, versioned as CUDA 13's runtime exports them),
 * and cuGetErrorString, cuDeviceGet, cuDeviceGetUuid (looked up with dlsym in libcuda.so.1:
 * plugins/profiler/inspector/inspector_cudawrap.cc at v2.30.7-1). The Inspector calls them once
 * per communicator, at init, never per collective: they do not enter what the benchmark times.
 * Built by bench/inspector_ab.sh into one .so linked under both names. */
#include <string.h>

typedef int cudaError_t;
typedef int CUresult;
typedef int CUdevice;
typedef struct {
  char bytes[16];
} CUuuid;

cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return 0;
}

const char* cudaGetErrorString(cudaError_t error) { return error == 0 ? "no error" : "error"; }

CUresult cuGetErrorString(CUresult error, const char** text) {
  *text = error == 0 ? "no error" : "error";
  return 0;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  *device = ordinal;
  return 0;
}

CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice device) {
  memset(uuid->bytes, 0, sizeof(uuid->bytes));
  uuid->bytes[15] = (char)device;
  return 0;
}
