/* A stand-in for the CUDA driver library (SONAME libcuda.so.1) with the three entry points the
 * plugin looks up, for tests on machines without a GPU: device 3, a fixed UUID, bus 0000:19:00.0.
 * Signatures as in the CUDA driver API reference. */
#include <stdio.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct {
  char bytes[16];
} CUuuid;

CUresult cuCtxGetDevice(CUdevice* device) {
  *device = 3;
  return 0;
}

CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice device) {
  for (int i = 0; i < 16; ++i) uuid->bytes[i] = (char)(0x10 * (i % 16) + device);
  return 0;
}

CUresult cuDeviceGetPCIBusId(char* bus, int len, CUdevice device) {
  (void)device;
  snprintf(bus, (size_t)len, "%s", "0000:19:00.0");
  return 0;
}
