#pragma once

// Host timestamps for the hot path: CLOCK_REALTIME nanoseconds (one clock for every process on the
// node, so records from different ranks line up), read through the CPU's invariant TSC where it
// has one. A clock_gettime() costs ~25 ns in a VM and an op needs three timestamps; rdtsc plus a
// multiply is ~10 ns. The TSC is mapped onto CLOCK_REALTIME by an anchor (tsc, ns, ns-per-tick)
// that Recalibrate() refreshes about once a second from the plugin's maintenance thread, so NTP
// steps and slews show up within a second and the error between anchors stays in the
// sub-microsecond range. Without an invariant TSC (or with NCCLSCOPE_CLOCK=realtime) Now() is
// clock_gettime(CLOCK_REALTIME).

#include <cstdint>
#include <string_view>

namespace ncclscope::plugin::clock {

// Picks the time source ("auto", "tsc", "realtime") and takes the first anchor. Cold path; call
// once before Now(). Later calls re-read nothing.
void Init(std::string_view mode);

// CLOCK_REALTIME now, in ns.
std::uint64_t Now();

// platform::RealtimeNs(): the clock_gettime(CLOCK_REALTIME) value, always exact (cold paths,
// calibration).
std::uint64_t RealtimeNow();

// Refreshes the TSC anchor and its rate (no-op for the realtime source).
void Recalibrate();

// Whether Now() reads the TSC.
bool UsesTsc();

// A cheap monotonic-enough tick count for measuring short intervals on one thread (the overhead
// governor's timing): the raw TSC where Now() uses it, else Now() itself (ns). TicksToNs converts
// a difference of two Ticks() with the current rate.
std::uint64_t Ticks();
std::uint64_t TicksToNs(std::uint64_t ticks);
std::uint64_t NsToTicks(std::uint64_t ns);

}  // namespace ncclscope::plugin::clock
