#pragma once

// Our own declarations of the handful of NVML types, constants and entry points the NVLink source
// uses, matching NVML's C ABI (NVML 13.x, as in NVIDIA/go-nvml gen/nvml/nvml.h; fabric.md 3).
// No NVML header exists on build machines (CUDA pip layouts and Debian ship none), and the library
// is loaded with dlopen at run time, so these must agree with the real library byte for byte: the
// static_asserts pin the layouts, and tests drive a fake libnvidia-ml.so.1 whose C definitions
// were written separately.

#include <cstddef>
#include <cstdint>

namespace ncclscope::rdma::nvml {

using Return = int;  // nvmlReturn_t
inline constexpr Return kSuccess = 0;
inline constexpr Return kErrorUninitialized = 1;
inline constexpr Return kErrorInvalidArgument = 2;
inline constexpr Return kErrorNotSupported = 3;
inline constexpr Return kErrorNotFound = 6;
inline constexpr Return kErrorInsufficientSize = 7;
inline constexpr Return kErrorLibraryNotFound = 12;
inline constexpr Return kErrorGpuIsLost = 15;
inline constexpr Return kErrorUnknown = 999;

struct DeviceOpaque;
using Device = DeviceOpaque*;  // nvmlDevice_t: an opaque pointer

using EnableState = int;  // nvmlEnableState_t: 0 disabled (inactive), 1 enabled (active)

// nvmlNvLinkErrorCounter_t
enum class NvLinkErrorCounter : int {
  kReplay = 0,
  kRecovery = 1,
  kCrcFlit = 2,
  kCrcData = 3,
  kEccData = 4,
};

inline constexpr unsigned kNvLinkMaxLinks = 36;          // NVML_NVLINK_MAX_LINKS (13.x)
inline constexpr unsigned kDeviceUuidBufferSize = 80;    // NVML_DEVICE_UUID_BUFFER_SIZE
inline constexpr unsigned kDeviceNameBufferSize = 96;    // NVML_DEVICE_NAME_V2_BUFFER_SIZE
inline constexpr unsigned kScopeAllLinks = 0xFFFFFFFFu;  // scopeId UINT_MAX: sum over links

// nvmlPciInfo_t
struct PciInfo {
  char busIdLegacy[16];  // NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];  // NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE: "00000000:18:00.0"
};
static_assert(sizeof(PciInfo) == 68);
static_assert(offsetof(PciInfo, busId) == 36);

// nvmlValueType_t
enum class ValueType : int {
  kDouble = 0,
  kUnsignedInt = 1,
  kUnsignedLong = 2,
  kUnsignedLongLong = 3,
  kSignedLongLong = 4,
  kSignedInt = 5,
  kUnsignedShort = 6,
};

// nvmlValue_t
union Value {
  double dVal;
  int siVal;
  unsigned int uiVal;
  unsigned long ulVal;        // NOLINT(google-runtime-int): ABI type
  unsigned long long ullVal;  // NOLINT(google-runtime-int): ABI type
  signed long long sllVal;    // NOLINT(google-runtime-int): ABI type
  unsigned short usVal;       // NOLINT(google-runtime-int): ABI type
};
static_assert(sizeof(Value) == 8);

// nvmlFieldValue_t: set fieldId and scopeId before nvmlDeviceGetFieldValues.
struct FieldValue {
  unsigned int fieldId;
  unsigned int scopeId;
  long long timestamp;    // NOLINT(google-runtime-int): ABI type; microseconds since 1970
  long long latencyUsec;  // NOLINT(google-runtime-int): ABI type
  ValueType valueType;
  Return nvmlReturn;
  Value value;
};
static_assert(sizeof(FieldValue) == 40);
static_assert(offsetof(FieldValue, fieldId) == 0);
static_assert(offsetof(FieldValue, scopeId) == 4);
static_assert(offsetof(FieldValue, timestamp) == 8);
static_assert(offsetof(FieldValue, latencyUsec) == 16);
static_assert(offsetof(FieldValue, valueType) == 24);
static_assert(offsetof(FieldValue, nvmlReturn) == 28);
static_assert(offsetof(FieldValue, value) == 32);

// Field ids (nvmlDeviceGetFieldValues), fabric.md 3.2.
namespace field {
inline constexpr unsigned kNvLinkLinkCount = 91;
inline constexpr unsigned kThroughputDataTx = 138;  // KiB, cumulative; scopeId = link
inline constexpr unsigned kThroughputDataRx = 139;
inline constexpr unsigned kThroughputRawTx = 140;  // data + protocol overhead, KiB
inline constexpr unsigned kThroughputRawRx = 141;
// NVLink5 (Blackwell): the DL error counters are unsupported there; these replace them.
inline constexpr unsigned kCountXmitPackets = 201;
inline constexpr unsigned kCountXmitBytes = 202;
inline constexpr unsigned kCountRcvPackets = 203;
inline constexpr unsigned kCountRcvBytes = 204;
inline constexpr unsigned kCountMalformedPacketErrors = 206;
inline constexpr unsigned kCountBufferOverrunErrors = 207;
inline constexpr unsigned kCountRcvErrors = 208;
inline constexpr unsigned kCountRcvRemoteErrors = 209;
inline constexpr unsigned kCountRcvGeneralErrors = 210;
inline constexpr unsigned kCountLocalLinkIntegrityErrors = 211;
inline constexpr unsigned kCountXmitDiscards = 212;
inline constexpr unsigned kCountLinkRecoverySuccessfulEvents = 213;
inline constexpr unsigned kCountLinkRecoveryFailedEvents = 214;
inline constexpr unsigned kCountLinkRecoveryEvents = 215;
inline constexpr unsigned kCountEffectiveErrors = 219;
inline constexpr unsigned kCountEffectiveBer = 220;  // packed: bits 0-7 exponent, 8-11 mantissa
inline constexpr unsigned kCountSymbolErrors = 221;
inline constexpr unsigned kCountSymbolBer = 222;
}  // namespace field

// Entry points, by their exported (versioned) names.
extern "C" {
using InitFn = Return (*)();                                         // nvmlInit_v2
using ShutdownFn = Return (*)();                                     // nvmlShutdown
using ErrorStringFn = const char* (*)(Return);                       // nvmlErrorString
using DeviceGetCountFn = Return (*)(unsigned int*);                  // nvmlDeviceGetCount_v2
using DeviceGetHandleByIndexFn = Return (*)(unsigned int, Device*);  // ..._v2
using DeviceGetUuidFn = Return (*)(Device, char*, unsigned int);     // nvmlDeviceGetUUID
using DeviceGetNameFn = Return (*)(Device, char*, unsigned int);     // nvmlDeviceGetName
using DeviceGetPciInfoFn = Return (*)(Device, PciInfo*);             // nvmlDeviceGetPciInfo_v3
using DeviceGetNvLinkStateFn = Return (*)(Device, unsigned int, EnableState*);
using DeviceGetNvLinkErrorCounterFn =
    Return (*)(Device, unsigned int, NvLinkErrorCounter,
               unsigned long long*);  // NOLINT(google-runtime-int)
using DeviceGetFieldValuesFn = Return (*)(Device, int, FieldValue*);
}

// Decodes a packed NVLink5 BER field: mantissa x 10^-exponent.
double DecodeBer(unsigned long long packed);  // NOLINT(google-runtime-int): ABI type

}  // namespace ncclscope::rdma::nvml
