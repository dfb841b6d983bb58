#include "plugin/src/pools.h"

#include <pthread.h>
#include <sys/mman.h>

#include <cstdint>

namespace ncclscope::plugin {
namespace {

constexpr std::uint32_t kMaxThreadCaches = 1024;
constexpr std::uint32_t kCarveBatch = 32;

enum CacheState : std::uint32_t { kCacheUnused = 0, kCacheOwned = 1, kCacheOrphaned = 2 };

struct alignas(64) FreeList {
  std::uint32_t head = 0;                // owner only: index + 1, 0 = empty
  std::atomic<std::uint32_t> remote{0};  // pushed by other threads
};

struct alignas(64) ThreadCache {
  std::atomic<std::uint32_t> state{kCacheUnused};
  FreeList lists[kArenaCount];
};

ThreadCache g_caches[kMaxThreadCaches];
std::atomic<std::uint32_t> g_cache_count{0};
std::atomic<std::uint32_t> g_lane_counter{0};

// Plain thread-locals (trivially destructible, so access is a TLS load and no guard). They use the
// dynamic TLS model, never initial-exec: a library loaded with dlopen() that needs static TLS
// (DF_STATIC_TLS) fails to load ("cannot allocate memory in static TLS block") once the
// process's small static TLS surplus is used up, which happens in crowded processes (PyTorch).
// The plugin is built with TLS descriptors (-mtls-dialect=gnu2 on x86-64, the default on Arm), so
// an access is a load through the descriptor, not a __tls_get_addr call.
thread_local std::uint32_t t_cache = 0;  // index + 1
thread_local std::uint32_t t_lane = 0;   // hint + 1

// Gives the thread's cache back when the thread exits: a pthread key's destructor, which runs at
// thread exit for a non-NULL value (here the cache's index + 1). A thread_local with a destructor
// would need the C++ run time (__cxa_thread_atexit), which the plugin does without
// (platform/README.md).
pthread_key_t g_release_key;
pthread_once_t g_release_once = PTHREAD_ONCE_INIT;

void ReleaseCache(void* value) {
  const auto cache = static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(value));
  if (cache != 0 && cache <= kMaxThreadCaches) {
    g_caches[cache - 1].state.store(kCacheOrphaned, std::memory_order_release);
  }
}

std::uint32_t ClaimCache() {
  const std::uint32_t known = g_cache_count.load(std::memory_order_acquire);
  for (std::uint32_t i = 0; i < known && i < kMaxThreadCaches; ++i) {
    std::uint32_t expected = kCacheOrphaned;
    if (g_caches[i].state.compare_exchange_strong(expected, kCacheOwned,
                                                  std::memory_order_acquire)) {
      return i + 1;
    }
  }
  const std::uint32_t index = g_cache_count.fetch_add(1, std::memory_order_acq_rel);
  if (index >= kMaxThreadCaches) return 0;
  g_caches[index].state.store(kCacheOwned, std::memory_order_release);
  return index + 1;
}

// The calling thread's cache (index + 1), claimed on first use; 0 when none is left.
std::uint32_t MyCache() {
  if (t_cache != 0) return t_cache;
  const std::uint32_t cache = ClaimCache();
  if (cache != 0) {
    pthread_once(&g_release_once, [] { pthread_key_create(&g_release_key, ReleaseCache); });
    // The key's value is the cache's number in pointer clothing, never dereferenced.
    // NOLINTNEXTLINE(performance-no-int-to-ptr)
    pthread_setspecific(g_release_key, reinterpret_cast<void*>(static_cast<std::uintptr_t>(cache)));
    t_cache = cache;
  }
  return cache;
}

}  // namespace

bool SlotArena::Reserve(ArenaId id, std::size_t stride, std::uint32_t capacity) {
  if (base_ != nullptr) return true;
  const std::size_t bytes = stride * capacity;
  void* map = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map == MAP_FAILED) return false;
  id_ = id;
  stride_ = stride;
  capacity_ = capacity;
  base_ = static_cast<unsigned char*>(map);
  return true;
}

std::uint32_t SlotArena::Allocate(PoolSlot** found) {
  const std::uint32_t cache = MyCache();
  if (cache == 0 || base_ == nullptr) return UINT32_MAX;
  FreeList& list = g_caches[cache - 1].lists[id_];
  if (list.head == 0) list.head = list.remote.exchange(0, std::memory_order_acquire);
  if (list.head == 0) {
    // Carve a fresh batch and chain it onto the local list.
    std::uint32_t first = carved_.load(std::memory_order_relaxed);
    std::uint32_t count = 0;
    do {
      if (first >= capacity_) return UINT32_MAX;
      count = capacity_ - first < kCarveBatch ? capacity_ - first : kCarveBatch;
    } while (!carved_.compare_exchange_weak(first, first + count, std::memory_order_acq_rel));
    for (std::uint32_t i = 0; i < count; ++i) {
      PoolSlot* s = At(first + i);
      s->owner.store(cache, std::memory_order_relaxed);
      s->next_free.store(i + 1 < count ? first + i + 2 : 0, std::memory_order_relaxed);
    }
    list.head = first + 1;
  }
  const std::uint32_t index = list.head - 1;
  PoolSlot* slot = At(index);
  list.head = slot->next_free.load(std::memory_order_relaxed);
  slot->in_use.store(1, std::memory_order_relaxed);
  if (found != nullptr) *found = slot;
  return index;
}

void SlotArena::Free(std::uint32_t index, PoolSlot* slot) {
  slot->generation.store((slot->generation.load(std::memory_order_relaxed) + 1) & 0xFFFFF,
                         std::memory_order_release);
  slot->in_use.store(0, std::memory_order_release);
  const std::uint32_t owner = slot->owner.load(std::memory_order_relaxed);
  if (owner == 0 || owner > kMaxThreadCaches) return;  // cannot happen; leak rather than corrupt
  FreeList& list = g_caches[owner - 1].lists[id_];
  if (owner == t_cache) {
    slot->next_free.store(list.head, std::memory_order_relaxed);
    list.head = index + 1;
    return;
  }
  std::uint32_t head = list.remote.load(std::memory_order_relaxed);
  do {
    slot->next_free.store(head, std::memory_order_relaxed);
  } while (!list.remote.compare_exchange_weak(head, index + 1, std::memory_order_release,
                                              std::memory_order_relaxed));
}

void SlotArena::DisownAfterFork() {
  const std::uint32_t n = carved();
  for (std::uint32_t i = 0; i < n; ++i) {
    PoolSlot* slot = At(i);
    if (slot->in_use.load(std::memory_order_relaxed) == 0) continue;
    slot->generation.store((slot->generation.load(std::memory_order_relaxed) + 1) & 0xFFFFF,
                           std::memory_order_relaxed);
    slot->in_use.store(0, std::memory_order_relaxed);
  }
}

std::uint32_t ThreadToken() { return MyCache(); }

std::uint32_t ThreadLaneHint() {
  if (t_lane == 0) t_lane = g_lane_counter.fetch_add(1, std::memory_order_relaxed) + 1;
  return t_lane - 1;
}

}  // namespace ncclscope::plugin
