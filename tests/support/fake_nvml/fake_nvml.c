// A fake libnvidia-ml.so.1 for tests: the NVML entry points the nvlink source uses, with NVML's
// C ABI written out here independently of the agent's declarations (rdma/nvml/nvml_abi.h), so a
// layout mistake on either side shows up as a wrong reading in the tests.
//
// It simulates GPUs and links from a text state file, re-read whenever it changes (tests replace
// it atomically with rename), whose path comes from $FAKE_NVML_STATE or fakeNvmlSetStatePath():
//   init <code>                                   nvmlInit_v2 result (default 0)
//   gpu <index> <uuid> <busId> <name> <links> [lost] [blackwell] [nolinkcount]
//   state <gpu> <link> <0|1>                      link state (default 1 = active)
//   error <gpu> <link> <counter 0..4> <value>     nvmlDeviceGetNvLinkErrorCounter (default 0;
//                                                 NOT_SUPPORTED on blackwell GPUs)
//   field <gpu> <link|all> <fieldId> <value>      nvmlDeviceGetFieldValues (absent: NOT_SUPPORTED)
// Names use '_' for spaces. fakeNvmlCalls(name) counts calls per entry point and
// fakeNvmlFieldRequests() the field values requested, so tests can check what is not re-asked.

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

// ---- NVML ABI (NVML 13.x) ----
typedef int nvmlReturn_t;
#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_DRIVER_NOT_LOADED 9
#define NVML_ERROR_GPU_IS_LOST 15

typedef struct nvmlDevice_st* nvmlDevice_t;
typedef int nvmlEnableState_t;
typedef int nvmlNvLinkErrorCounter_t;

typedef struct nvmlPciInfo_st {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;

typedef union nvmlValue_st {
  double dVal;
  int siVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  signed long long sllVal;
  unsigned short usVal;
} nvmlValue_t;

typedef struct nvmlFieldValue_st {
  unsigned int fieldId;
  unsigned int scopeId;
  long long timestamp;
  long long latencyUsec;
  int valueType;  // nvmlValueType_t
  nvmlReturn_t nvmlReturn;
  nvmlValue_t value;
} nvmlFieldValue_t;

#define NVML_VALUE_TYPE_UNSIGNED_LONG_LONG 3
#define NVML_FI_DEV_NVLINK_LINK_COUNT 91
#define FAKE_MAX_GPUS 16
#define FAKE_MAX_LINKS 36
#define FAKE_MAX_FIELDS 512
#define FAKE_SCOPE_ALL 0xFFFFFFFFu

// ---- simulated state ----
struct nvmlDevice_st {
  int present;
  char uuid[80];
  char bus_id[32];
  char name[96];
  unsigned links;
  int lost, blackwell, no_link_count;
  int state[FAKE_MAX_LINKS];
  unsigned long long errors[FAKE_MAX_LINKS][5];
};

struct field_entry {
  unsigned gpu, scope, field;
  unsigned long long value;
};

static pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
static char g_path[4096];
static struct stat g_loaded_stat;
static int g_loaded;
static int g_init_code;
static int g_initialized;
static struct nvmlDevice_st g_gpus[FAKE_MAX_GPUS];
static unsigned g_gpu_count;
static struct field_entry g_fields[FAKE_MAX_FIELDS];
static unsigned g_field_count;

struct call_count {
  const char* name;
  unsigned long long count;
};
static struct call_count g_calls[] = {
    {"nvmlInit_v2", 0},
    {"nvmlShutdown", 0},
    {"nvmlDeviceGetCount_v2", 0},
    {"nvmlDeviceGetHandleByIndex_v2", 0},
    {"nvmlDeviceGetNvLinkState", 0},
    {"nvmlDeviceGetNvLinkErrorCounter", 0},
    {"nvmlDeviceGetFieldValues", 0},
};
static unsigned long long g_field_requests;

static void count_call(const char* name) {
  for (size_t i = 0; i < sizeof(g_calls) / sizeof(g_calls[0]); ++i) {
    if (strcmp(g_calls[i].name, name) == 0) ++g_calls[i].count;
  }
}

static void reset_state(void) {
  memset(g_gpus, 0, sizeof(g_gpus));
  g_gpu_count = 0;
  g_field_count = 0;
  g_init_code = NVML_SUCCESS;
}

static void underscores_to_spaces(char* s) {
  for (; *s; ++s) {
    if (*s == '_') *s = ' ';
  }
}

// Splits `line` into at most `max` whitespace-separated tokens, in place.
static int tokenize(char* line, char** tokens, int max) {
  int n = 0;
  char* save = NULL;
  for (char* token = strtok_r(line, " \t\r\n", &save); token != NULL && n < max;
       token = strtok_r(NULL, " \t\r\n", &save)) {
    tokens[n++] = token;
  }
  return n;
}

// Whole-token number parsing: 0 on anything that is not entirely a number.
static int parse_u64_base(const char* text, int base, unsigned long long* out) {
  char* end = NULL;
  errno = 0;
  const unsigned long long value = strtoull(text, &end, base);
  if (errno != 0 || end == text || *end != '\0') return 0;
  *out = value;
  return 1;
}

static int parse_u64(const char* text, unsigned long long* out) {
  return parse_u64_base(text, 10, out);
}

static int parse_i64(const char* text, long long* out) {
  char* end = NULL;
  errno = 0;
  const long long value = strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0') return 0;
  *out = value;
  return 1;
}

// Re-reads the state file if it changed (a new inode after rename, or new size/mtime).
static void load_locked(void) {
  if (g_path[0] == '\0') {
    const char* env = getenv("FAKE_NVML_STATE");
    if (env != NULL) snprintf(g_path, sizeof(g_path), "%s", env);
  }
  struct stat st;
  if (g_path[0] == '\0' || stat(g_path, &st) != 0) {
    if (g_loaded) reset_state();
    g_loaded = 0;
    return;
  }
  if (g_loaded && st.st_ino == g_loaded_stat.st_ino && st.st_size == g_loaded_stat.st_size &&
      st.st_mtim.tv_sec == g_loaded_stat.st_mtim.tv_sec &&
      st.st_mtim.tv_nsec == g_loaded_stat.st_mtim.tv_nsec) {
    return;
  }
  FILE* file = fopen(g_path, "r");
  if (file == NULL) return;
  reset_state();
  char line[512];
  while (fgets(line, sizeof(line), file) != NULL) {
    char* t[12];
    const int n = tokenize(line, t, 12);
    if (n == 0 || t[0][0] == '#') continue;
    unsigned long long a = 0, b = 0, c = 0, value = 0;
    if (strcmp(t[0], "init") == 0 && n >= 2) {
      long long code = 0;
      if (parse_i64(t[1], &code)) g_init_code = (int)code;
    } else if (strcmp(t[0], "gpu") == 0 && n >= 6) {
      if (!parse_u64(t[1], &a) || a >= FAKE_MAX_GPUS || !parse_u64(t[5], &b)) continue;
      struct nvmlDevice_st* gpu = &g_gpus[a];
      gpu->present = 1;
      snprintf(gpu->uuid, sizeof(gpu->uuid), "%s", t[2]);
      snprintf(gpu->bus_id, sizeof(gpu->bus_id), "%s", t[3]);
      snprintf(gpu->name, sizeof(gpu->name), "%s", t[4]);
      underscores_to_spaces(gpu->name);
      gpu->links = b > FAKE_MAX_LINKS ? FAKE_MAX_LINKS : (unsigned)b;
      for (int i = 6; i < n; ++i) {
        if (strcmp(t[i], "lost") == 0) gpu->lost = 1;
        if (strcmp(t[i], "blackwell") == 0) gpu->blackwell = 1;
        if (strcmp(t[i], "nolinkcount") == 0) gpu->no_link_count = 1;
      }
      for (unsigned l = 0; l < FAKE_MAX_LINKS; ++l) gpu->state[l] = 1;
      if (a + 1 > g_gpu_count) g_gpu_count = (unsigned)a + 1;
    } else if (strcmp(t[0], "state") == 0 && n >= 4) {
      if (parse_u64(t[1], &a) && parse_u64(t[2], &b) && parse_u64(t[3], &value) &&
          a < FAKE_MAX_GPUS && b < FAKE_MAX_LINKS) {
        g_gpus[a].state[b] = value != 0;
      }
    } else if (strcmp(t[0], "error") == 0 && n >= 5) {
      if (parse_u64(t[1], &a) && parse_u64(t[2], &b) && parse_u64(t[3], &c) &&
          parse_u64(t[4], &value) && a < FAKE_MAX_GPUS && b < FAKE_MAX_LINKS && c < 5) {
        g_gpus[a].errors[b][c] = value;
      }
    } else if (strcmp(t[0], "field") == 0 && n >= 5 && g_field_count < FAKE_MAX_FIELDS) {
      const int all = strcmp(t[2], "all") == 0;
      if (parse_u64(t[1], &a) && (all || parse_u64(t[2], &b)) && parse_u64(t[3], &c) &&
          parse_u64(t[4], &value)) {
        struct field_entry* entry = &g_fields[g_field_count++];
        entry->gpu = (unsigned)a;
        entry->scope = all ? FAKE_SCOPE_ALL : (unsigned)b;
        entry->field = (unsigned)c;
        entry->value = value;
      }
    }
  }
  fclose(file);
  g_loaded_stat = st;
  g_loaded = 1;
}

static int gpu_index(nvmlDevice_t device) {
  const long index = device - g_gpus;
  return (index >= 0 && index < FAKE_MAX_GPUS && g_gpus[index].present) ? (int)index : -1;
}

// ---- test controls ----
void fakeNvmlSetStatePath(const char* path) {
  pthread_mutex_lock(&g_mutex);
  snprintf(g_path, sizeof(g_path), "%s", path);
  g_loaded = 0;
  pthread_mutex_unlock(&g_mutex);
}

unsigned long long fakeNvmlCalls(const char* name) {
  pthread_mutex_lock(&g_mutex);
  unsigned long long count = 0;
  for (size_t i = 0; i < sizeof(g_calls) / sizeof(g_calls[0]); ++i) {
    if (strcmp(g_calls[i].name, name) == 0) count = g_calls[i].count;
  }
  pthread_mutex_unlock(&g_mutex);
  return count;
}

unsigned long long fakeNvmlFieldRequests(void) {
  pthread_mutex_lock(&g_mutex);
  const unsigned long long count = g_field_requests;
  pthread_mutex_unlock(&g_mutex);
  return count;
}

// ---- NVML entry points ----
nvmlReturn_t nvmlInit_v2(void) {
  pthread_mutex_lock(&g_mutex);
  count_call("nvmlInit_v2");
  load_locked();
  const nvmlReturn_t code = g_init_code;
  if (code == NVML_SUCCESS) ++g_initialized;
  pthread_mutex_unlock(&g_mutex);
  return code;
}

nvmlReturn_t nvmlShutdown(void) {
  pthread_mutex_lock(&g_mutex);
  count_call("nvmlShutdown");
  const nvmlReturn_t code = g_initialized > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
  if (g_initialized > 0) --g_initialized;
  pthread_mutex_unlock(&g_mutex);
  return code;
}

const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_UNINITIALIZED:
      return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU is lost";
    default:
      return "Unknown Error";
  }
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  pthread_mutex_lock(&g_mutex);
  count_call("nvmlDeviceGetCount_v2");
  load_locked();
  nvmlReturn_t code = NVML_SUCCESS;
  if (g_initialized == 0) {
    code = NVML_ERROR_UNINITIALIZED;
  } else if (count == NULL) {
    code = NVML_ERROR_INVALID_ARGUMENT;
  } else {
    *count = g_gpu_count;
  }
  pthread_mutex_unlock(&g_mutex);
  return code;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  pthread_mutex_lock(&g_mutex);
  count_call("nvmlDeviceGetHandleByIndex_v2");
  load_locked();
  nvmlReturn_t code = NVML_SUCCESS;
  if (index >= FAKE_MAX_GPUS || !g_gpus[index].present || device == NULL) {
    code = NVML_ERROR_INVALID_ARGUMENT;
  } else if (g_gpus[index].lost) {
    code = NVML_ERROR_GPU_IS_LOST;
  } else {
    *device = &g_gpus[index];
  }
  pthread_mutex_unlock(&g_mutex);
  return code;
}

// Common checks for per-device calls: valid handle, not lost.
static nvmlReturn_t device_check(nvmlDevice_t device, int* index) {
  load_locked();
  *index = gpu_index(device);
  if (*index < 0) return NVML_ERROR_INVALID_ARGUMENT;
  if (g_gpus[*index].lost) return NVML_ERROR_GPU_IS_LOST;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  pthread_mutex_lock(&g_mutex);
  int index = -1;
  nvmlReturn_t code = device_check(device, &index);
  if (code == NVML_SUCCESS) {
    if (uuid == NULL || length <= strlen(g_gpus[index].uuid)) {
      code = NVML_ERROR_INSUFFICIENT_SIZE;
    } else {
      snprintf(uuid, length, "%s", g_gpus[index].uuid);
    }
  }
  pthread_mutex_unlock(&g_mutex);
  return code;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  pthread_mutex_lock(&g_mutex);
  int index = -1;
  nvmlReturn_t code = device_check(device, &index);
  if (code == NVML_SUCCESS) {
    if (name == NULL || length <= strlen(g_gpus[index].name)) {
      code = NVML_ERROR_INSUFFICIENT_SIZE;
    } else {
      snprintf(name, length, "%s", g_gpus[index].name);
    }
  }
  pthread_mutex_unlock(&g_mutex);
  return code;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  pthread_mutex_lock(&g_mutex);
  int index = -1;
  nvmlReturn_t code = device_check(device, &index);
  if (code == NVML_SUCCESS) {
    if (pci == NULL) {
      code = NVML_ERROR_INVALID_ARGUMENT;
    } else {
      memset(pci, 0, sizeof(*pci));
      snprintf(pci->busId, sizeof(pci->busId), "%s", g_gpus[index].bus_id);
      // "00000000:18:00.0" -> domain, bus, device.
      char parts[32];
      snprintf(parts, sizeof(parts), "%s", g_gpus[index].bus_id);
      unsigned long long domain = 0, bus = 0, dev = 0;
      char* save = NULL;
      const char* d = strtok_r(parts, ":", &save);
      const char* b = strtok_r(NULL, ":", &save);
      const char* v = strtok_r(NULL, ".", &save);
      if (d != NULL && b != NULL && v != NULL) {
        parse_u64_base(d, 16, &domain);
        parse_u64_base(b, 16, &bus);
        parse_u64_base(v, 16, &dev);
      }
      pci->domain = (unsigned)domain;
      pci->bus = (unsigned)bus;
      pci->device = (unsigned)dev;
      snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%04X:%02X:%02X.0", domain & 0xffff, bus,
               dev);
      pci->pciDeviceId = 0x233010de;
    }
  }
  pthread_mutex_unlock(&g_mutex);
  return code;
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                      nvmlEnableState_t* is_active) {
  pthread_mutex_lock(&g_mutex);
  count_call("nvmlDeviceGetNvLinkState");
  int index = -1;
  nvmlReturn_t code = device_check(device, &index);
  if (code == NVML_SUCCESS) {
    if (is_active == NULL) {
      code = NVML_ERROR_INVALID_ARGUMENT;
    } else if (link >= g_gpus[index].links) {
      code = NVML_ERROR_NOT_SUPPORTED;  // no such link on this GPU
    } else {
      *is_active = g_gpus[index].state[link] ? 1 : 0;
    }
  }
  pthread_mutex_unlock(&g_mutex);
  return code;
}

nvmlReturn_t nvmlDeviceGetNvLinkErrorCounter(nvmlDevice_t device, unsigned int link,
                                             nvmlNvLinkErrorCounter_t counter,
                                             unsigned long long* value) {
  pthread_mutex_lock(&g_mutex);
  count_call("nvmlDeviceGetNvLinkErrorCounter");
  int index = -1;
  nvmlReturn_t code = device_check(device, &index);
  if (code == NVML_SUCCESS) {
    if (value == NULL || counter < 0 || counter > 4) {
      code = NVML_ERROR_INVALID_ARGUMENT;
    } else if (link >= g_gpus[index].links || g_gpus[index].blackwell) {
      code = NVML_ERROR_NOT_SUPPORTED;  // Blackwell: DL counters are gone, NVLink5 fields instead
    } else {
      *value = g_gpus[index].errors[link][counter];
    }
  }
  pthread_mutex_unlock(&g_mutex);
  return code;
}

#ifndef FAKE_NVML_INCOMPLETE
// Left out of the "incomplete" build, to test that a library missing an entry point is refused.
nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int count, nvmlFieldValue_t* values) {
  pthread_mutex_lock(&g_mutex);
  count_call("nvmlDeviceGetFieldValues");
  int index = -1;
  nvmlReturn_t code = device_check(device, &index);
  if (code == NVML_SUCCESS && (values == NULL || count <= 0)) code = NVML_ERROR_INVALID_ARGUMENT;
  if (code == NVML_SUCCESS) {
    g_field_requests += (unsigned long long)count;
    for (int i = 0; i < count; ++i) {
      nvmlFieldValue_t* v = &values[i];
      v->timestamp = 1700000000000000LL;
      v->latencyUsec = 1;
      v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
      if (v->fieldId == NVML_FI_DEV_NVLINK_LINK_COUNT && !g_gpus[index].no_link_count) {
        v->valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
        v->value.ullVal = g_gpus[index].links;
        v->nvmlReturn = NVML_SUCCESS;
        continue;
      }
      for (unsigned f = 0; f < g_field_count; ++f) {
        const struct field_entry* e = &g_fields[f];
        if (e->gpu == (unsigned)index && e->field == v->fieldId && e->scope == v->scopeId) {
          v->valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
          v->value.ullVal = e->value;
          v->nvmlReturn = NVML_SUCCESS;
        }
      }
    }
  }
  pthread_mutex_unlock(&g_mutex);
  return code;
}
#endif  // FAKE_NVML_INCOMPLETE
