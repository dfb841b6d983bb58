#include "rdma/netlink/nldev_parser.h"

#include <netlink/attr.h>
#include <netlink/msg.h>
#include <rdma/rdma_netlink.h>

#include <array>
#include <climits>
#include <cstring>

namespace ncclscope::rdma::netlink {
namespace {

// IB_DEVICE_NAME_MAX (include/rdma/ib_verbs.h), NUL included.
constexpr std::uint16_t kMaxDeviceName = 64;
// Kernel QPs name their module; generous next to TASK_COMM_LEN (16), which the kernel's own
// policy uses for this attribute.
constexpr std::uint16_t kMaxKernelName = 64;

using Policy = std::array<nla_policy, RDMA_NLDEV_ATTR_MAX>;

// The attributes we read, with the types of the kernel's nldev_policy (nldev.c). Strings must be
// non-empty and end in NUL (libnl's NLA_STRING check: the last byte is '\0'), u32 at least four
// bytes, u8 at least one. Attributes not listed (and types beyond what this uapi header knows,
// from a newer kernel) are skipped by nla_parse.
const Policy& NldevPolicy() {
  static const Policy policy = [] {
    Policy p{};
    auto u32 = [&p](int type) { p[type] = {NLA_U32, sizeof(std::uint32_t), 0}; };
    auto u8 = [&p](int type) { p[type] = {NLA_U8, sizeof(std::uint8_t), 0}; };
    auto str = [&p](int type, std::uint16_t max) { p[type] = {NLA_STRING, 1, max}; };
    u32(RDMA_NLDEV_ATTR_DEV_INDEX);
    str(RDMA_NLDEV_ATTR_DEV_NAME, kMaxDeviceName);
    u32(RDMA_NLDEV_ATTR_PORT_INDEX);
    p[RDMA_NLDEV_ATTR_RES_QP] = {NLA_NESTED, 0, 0};
    p[RDMA_NLDEV_ATTR_RES_QP_ENTRY] = {NLA_NESTED, 0, 0};
    u32(RDMA_NLDEV_ATTR_RES_LQPN);
    u32(RDMA_NLDEV_ATTR_RES_PID);
    str(RDMA_NLDEV_ATTR_RES_KERN_NAME, kMaxKernelName);
    u8(RDMA_NLDEV_ATTR_RES_TYPE);
    u8(RDMA_NLDEV_ATTR_RES_STATE);
    return p;
  }();
  return policy;
}

constexpr int kMaxType = RDMA_NLDEV_ATTR_MAX - 1;
using Attrs = std::array<nlattr*, RDMA_NLDEV_ATTR_MAX>;

// The message's attributes, or false when one fails the policy or the message is too short.
bool ParseAttrs(const nlmsghdr& message, Attrs* attrs) {
  attrs->fill(nullptr);
  // libnl takes a mutable header but only reads it.
  auto* nlh = const_cast<nlmsghdr*>(&message);
  return nlmsg_parse(nlh, 0, attrs->data(), kMaxType, NldevPolicy().data()) == 0;
}

// A NUL-terminated string attribute (the policy checked the terminator), bounded anyway.
std::string String(const nlattr* attr) {
  const auto* text = static_cast<const char*>(nla_data(attr));
  return std::string(text, strnlen(text, static_cast<std::size_t>(nla_len(attr))));
}

// NLMSG_LENGTH without the macro's C cast.
constexpr std::uint32_t MessageLength(std::size_t payload) {
  return static_cast<std::uint32_t>(NLMSG_ALIGN(sizeof(nlmsghdr)) + payload);
}

// The errno an NLMSG_ERROR or NLMSG_DONE carries (payload: int, negative errno or 0); 0 when the
// payload is too short to hold it (older kernels' bare NLMSG_DONE).
int PayloadErrno(const nlmsghdr& message) {
  if (message.nlmsg_len < MessageLength(sizeof(int))) return 0;
  int value = 0;
  std::memcpy(&value, nlmsg_data(&message), sizeof(value));
  return value < 0 ? -value : value;
}

}  // namespace

void DumpStats::Add(const DumpStats& other) {
  messages += other.messages;
  malformed_messages += other.malformed_messages;
  malformed_entries += other.malformed_entries;
  foreign_messages += other.foreign_messages;
  over_limit += other.over_limit;
  device_errors += other.device_errors;
}

std::uint16_t NldevType(std::uint32_t command) {
  return static_cast<std::uint16_t>(RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, command));
}

DumpReader::DumpReader(std::uint32_t command, std::uint32_t seq, std::uint32_t port)
    : DumpReader(command, seq, port, false) {}

DumpReader::DumpReader(std::uint32_t command, std::uint32_t seq, std::uint32_t port, bool recorded)
    : type_(NldevType(command)), seq_(seq), port_(port), recorded_(recorded) {}

DumpReader DumpReader::Recorded(std::uint32_t command) { return DumpReader(command, 0, 0, true); }

void DumpReader::End(int error, DumpStats* stats) {
  ++dumps_;
  if (recorded_) {
    if (error != 0) ++stats->device_errors;
    return;
  }
  error_ = error;
  state_ = error == 0 ? State::kDone : State::kFailed;
}

DumpReader::State DumpReader::Feed(const void* data, std::size_t size,
                                   const std::function<void(const nlmsghdr&)>& on_message,
                                   DumpStats* stats) {
  if (state_ != State::kMore || data == nullptr) return state_;
  // A receive buffer holds whole messages, at most what one datagram can carry; a replay file is
  // bounded by its reader. Either way it fits an int, which is what libnl's walk takes.
  if (size > static_cast<std::size_t>(INT_MAX)) size = static_cast<std::size_t>(INT_MAX);
  const auto* bytes = static_cast<const unsigned char*>(data);
  if (reinterpret_cast<std::uintptr_t>(bytes) % alignof(nlmsghdr) != 0) {
    aligned_.assign((size + sizeof(std::uint32_t) - 1) / sizeof(std::uint32_t), 0);
    std::memcpy(aligned_.data(), bytes, size);
    bytes = reinterpret_cast<const unsigned char*>(aligned_.data());
  }
  int remaining = static_cast<int>(size);
  // libnl's walk: nlmsg_ok() checks that the header fits, nlmsg_len covers at least the header
  // and stays within what remains; nlmsg_next() steps by the aligned length.
  auto* message = reinterpret_cast<nlmsghdr*>(const_cast<unsigned char*>(bytes));
  for (; nlmsg_ok(message, remaining); message = nlmsg_next(message, &remaining)) {
    const nlmsghdr& m = *message;
    if (!recorded_ && (m.nlmsg_seq != seq_ || m.nlmsg_pid != port_)) {
      ++stats->foreign_messages;  // not an answer to our request
      continue;
    }
    if (m.nlmsg_type == NLMSG_NOOP) continue;
    if (m.nlmsg_type == NLMSG_DONE || m.nlmsg_type == NLMSG_ERROR ||
        m.nlmsg_type == NLMSG_OVERRUN) {
      if (m.nlmsg_type == NLMSG_ERROR && m.nlmsg_len < MessageLength(sizeof(nlmsgerr::error))) {
        ++stats->malformed_messages;
        End(EBADMSG, stats);
      } else if (m.nlmsg_type == NLMSG_ERROR && PayloadErrno(m) == 0) {
        continue;  // an acknowledgement, not the end
      } else {
        End(m.nlmsg_type == NLMSG_OVERRUN ? EOVERFLOW : PayloadErrno(m), stats);
      }
      if (state_ != State::kMore) return state_;
      continue;
    }
    if (m.nlmsg_type != type_) {
      ++stats->foreign_messages;
      continue;
    }
    on_message(m);
  }
  // Bytes left that do not form a message: a truncated or inconsistent tail (a negative rest is
  // only the last message's missing alignment padding).
  if (remaining > 0) ++stats->malformed_messages;
  return state_;
}

bool ParseDeviceMessage(const nlmsghdr& message, Device* device, DumpStats* stats) {
  Attrs attrs;
  if (!ParseAttrs(message, &attrs) || attrs[RDMA_NLDEV_ATTR_DEV_INDEX] == nullptr ||
      attrs[RDMA_NLDEV_ATTR_DEV_NAME] == nullptr) {
    ++stats->malformed_messages;
    return false;
  }
  ++stats->messages;
  device->index = nla_get_u32(attrs[RDMA_NLDEV_ATTR_DEV_INDEX]);
  device->name = String(attrs[RDMA_NLDEV_ATTR_DEV_NAME]);
  device->ports = attrs[RDMA_NLDEV_ATTR_PORT_INDEX] != nullptr
                      ? nla_get_u32(attrs[RDMA_NLDEV_ATTR_PORT_INDEX])
                      : 0;
  return true;
}

void ParseQpMessage(const nlmsghdr& message, std::vector<QpEntry>* qps, DumpStats* stats) {
  Attrs attrs;
  // As iproute2's res_qp_parse_cb: a QP message without its device or its table is unusable.
  if (!ParseAttrs(message, &attrs) || attrs[RDMA_NLDEV_ATTR_DEV_INDEX] == nullptr ||
      attrs[RDMA_NLDEV_ATTR_DEV_NAME] == nullptr || attrs[RDMA_NLDEV_ATTR_RES_QP] == nullptr) {
    ++stats->malformed_messages;
    return;
  }
  ++stats->messages;
  const std::uint32_t device_index = nla_get_u32(attrs[RDMA_NLDEV_ATTR_DEV_INDEX]);
  const std::string device = String(attrs[RDMA_NLDEV_ATTR_DEV_NAME]);
  nlattr* entry = nullptr;
  int remaining = 0;
  nla_for_each_nested(entry, attrs[RDMA_NLDEV_ATTR_RES_QP], remaining) {
    if (nla_type(entry) != RDMA_NLDEV_ATTR_RES_QP_ENTRY) {
      ++stats->malformed_entries;
      continue;
    }
    Attrs line;
    line.fill(nullptr);
    if (nla_parse_nested(line.data(), kMaxType, entry, NldevPolicy().data()) != 0 ||
        line[RDMA_NLDEV_ATTR_RES_LQPN] == nullptr) {
      ++stats->malformed_entries;
      continue;
    }
    if (qps->size() >= kMaxQpEntries) {
      ++stats->over_limit;
      continue;
    }
    QpEntry& qp = qps->emplace_back();
    qp.device = device;
    qp.device_index = device_index;
    qp.lqpn = nla_get_u32(line[RDMA_NLDEV_ATTR_RES_LQPN]);
    if (const nlattr* port = line[RDMA_NLDEV_ATTR_PORT_INDEX]) qp.port = nla_get_u32(port);
    if (const nlattr* pid = line[RDMA_NLDEV_ATTR_RES_PID]) {
      const std::uint32_t value = nla_get_u32(pid);
      qp.pid =
          value <= static_cast<std::uint32_t>(INT32_MAX) ? static_cast<std::int32_t>(value) : 0;
    }
    qp.kernel = line[RDMA_NLDEV_ATTR_RES_KERN_NAME] != nullptr;
    if (const nlattr* type = line[RDMA_NLDEV_ATTR_RES_TYPE]) qp.type = nla_get_u8(type);
    if (const nlattr* state = line[RDMA_NLDEV_ATTR_RES_STATE]) qp.state = nla_get_u8(state);
  }
  if (remaining > 0) ++stats->malformed_entries;  // the table ended inside an entry
}

QpDump ParseRecordedQpDump(const void* data, std::size_t size) {
  QpDump dump;
  DumpReader reader = DumpReader::Recorded(RDMA_NLDEV_CMD_RES_QP_GET);
  reader.Feed(
      data, size, [&](const nlmsghdr& m) { ParseQpMessage(m, &dump.qps, &dump.stats); },
      &dump.stats);
  dump.devices = reader.dumps();
  dump.status = DumpStatus::kOk;
  return dump;
}

}  // namespace ncclscope::rdma::netlink
