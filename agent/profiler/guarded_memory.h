#pragma once

// Reads and writes of a shared-memory ring that survive the file being truncated under the
// mapping. A ring is another process's file: if it shrinks after we mapped it, touching the lost
// pages raises SIGBUS. These helpers run the access under a per-thread recovery point; the SIGBUS
// handler (installed once) jumps back to it and the call returns false, so a hostile or broken
// process costs us one ring, never the agent. Faults outside these helpers keep their default
// (fatal) behaviour.

#include <cstddef>
#include <cstdint>

namespace ncclscope::profiler {

// Runs access(arg) under the recovery point: false when it faulted. For loops over many fields of
// a mapping in one guarded region; `access` must not allocate or own anything with a destructor
// (a fault leaves it by a long jump).
bool GuardedCall(void (*access)(void*), void* arg);

// Copies `n` bytes from mapped memory. False when the mapping faulted.
bool GuardedCopy(void* dst, const void* src, std::size_t n);

// Atomic 64/32-bit load (acquire) and store (release) on mapped memory. False when it faulted.
bool GuardedLoad(const std::uint64_t* src, std::uint64_t* out);
bool GuardedLoad(const std::uint32_t* src, std::uint32_t* out);
bool GuardedStore(std::uint64_t* dst, std::uint64_t value);
bool GuardedStore(std::uint32_t* dst, std::uint32_t value);

// Orders the plain loads of a guarded copy before a following version re-check (seqlock reads of
// another process's memory; needed on Arm). ThreadSanitizer does not model fences, and it cannot
// see the other process anyway, so its builds leave it out.
void OrderLoads();
// Orders earlier stores (a seqlock's odd version) before later ones (the fields), same caveat.
void OrderStores();

}  // namespace ncclscope::profiler
