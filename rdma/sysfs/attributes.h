#pragma once

// Parsers for the text of /sys/class/infiniband attributes (formats from the kernel's
// drivers/infiniband/core/sysfs.c, see fabric.md 1.1). Each returns nullopt on text it does not
// recognise; callers count that as a parse error for that one file.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ncclscope::rdma::sysfs {

// "4: ACTIVE" (state) or "5: LinkUp" (phys_state): the numeric id and the name.
struct IdName {
  int id = 0;
  std::string name;
};
std::optional<IdName> ParseIdName(std::string_view text);

// "400 Gb/sec (4X NDR)", "2.5 Gb/sec (1X SDR)", "10 Gb/sec (4X)". The rate is nominal (lanes x
// lane speed); a degraded link shows a narrower width or a lower speed.
struct Rate {
  double gbps = 0;
  std::string width;  // "4X", empty when absent
  std::string speed;  // "NDR", empty when absent
  double BytesPerSecond() const { return gbps * 125'000'000.0; }
};
std::optional<Rate> ParseRate(std::string_view text);

// A counter file: a decimal integer, or the literal "N/A (no PMA)" that the kernel prints when the
// PMA query failed (iWARP, some VFs): that counter is absent, not zero.
struct CounterText {
  enum class Kind { kValue, kNoPma, kMalformed };
  Kind kind = Kind::kMalformed;
  std::uint64_t value = 0;
};
CounterText ParseCounter(std::string_view text);

// Text with surrounding whitespace and newlines removed.
std::string_view Trim(std::string_view text);

// State ids (IB spec / ib_port_state) and names used in labels.
inline constexpr int kStateActive = 4;
inline constexpr int kPhysStateLinkUp = 5;
// Lower-case label value for a port state id: "down", "init", "armed", "active", ...
std::string StateLabel(int state_id);

}  // namespace ncclscope::rdma::sysfs
