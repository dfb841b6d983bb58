/* The CUDA driver as ncclscope-sim's ranks present it to the profiler plugin: the three driver
 * entry points the plugin looks up to name a communicator's GPU (plugin/src/cuda_info.cc), with
 * the signatures of the CUDA driver API reference. Built with SONAME libcuda.so.1 and loaded by
 * the simulator before its communicators exist, so the plugin's dlopen("libcuda.so.1",
 * RTLD_NOLOAD) finds it. Each simulated rank sets its device with ncclscope_sim_set_device();
 * UUIDs and PCI bus ids are visibly simulated ("GPU-5117....", buses 0x51..). */
#include <stdio.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct {
  unsigned char bytes[16];
} CUuuid;

static __thread int t_device = -1;
static int g_node = 0;

void ncclscope_sim_set_device(int device, int node) {
  t_device = device;
  g_node = node;
}

CUresult cuCtxGetDevice(CUdevice* device) {
  if (t_device < 0) return 201; /* CUDA_ERROR_INVALID_CONTEXT */
  *device = t_device;
  return 0;
}

CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice device) {
  static const unsigned char prefix[8] = {0x51, 0x17, 0x00, 0x00, 0x51, 0x17, 0x00, 0x00};
  for (int i = 0; i < 8; ++i) uuid->bytes[i] = prefix[i];
  for (int i = 8; i < 14; ++i) uuid->bytes[i] = 0;
  uuid->bytes[14] = (unsigned char)g_node;
  uuid->bytes[15] = (unsigned char)device;
  return 0;
}

CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice device) { return cuDeviceGetUuid_v2(uuid, device); }

CUresult cuDeviceGetPCIBusId(char* bus, int len, CUdevice device) {
  snprintf(bus, (size_t)len, "0000:%02x:00.0", 0x51 + device);
  return 0;
}
