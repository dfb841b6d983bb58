#pragma once

// Parsing of rdma netlink (RDMA_NL_NLDEV) dump replies. Everything here comes from the kernel but
// is treated as untrusted input: every message and attribute is bounds-checked by libnl-3
// (nlmsg_ok/nla_ok, the same library rdma-core's util/rdma_nl.c uses for NETLINK_RDMA) against a
// policy that mirrors the kernel's nldev_policy (drivers/infiniband/core/nldev.c): wrong types or
// lengths, strings without their NUL, truncated attributes. A malformed message or QP entry is
// skipped and counted in DumpStats, never fatal; the rest of the dump is kept.
//
// Shape of the replies (nldev.c): a dump is a series of NLM_F_MULTI messages whose nlmsg_type is
// RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, command) and whose seq and port are the request's, ended by
// NLMSG_DONE whose payload is the dump's return value (0, or a negative errno such as -EINVAL for
// a device that vanished); a request the kernel rejects outright gets NLMSG_ERROR instead. Device
// list (RDMA_NLDEV_CMD_GET, fill_dev_info): one message per device with DEV_INDEX, DEV_NAME and
// PORT_INDEX = the last port. QP dump (RDMA_NLDEV_CMD_RES_QP_GET, res_get_common_dumpit; needs
// DEV_INDEX in the request): per message DEV_INDEX, DEV_NAME and a nested RES_QP table of nested
// RES_QP_ENTRY lines; a device with many QPs spans several messages.

#include <linux/netlink.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "rdma/netlink/qp_table.h"

namespace ncclscope::rdma::netlink {

// nlmsg_type of an RDMA_NL_NLDEV command (RDMA_NL_GET_TYPE in <rdma/rdma_netlink.h>).
std::uint16_t NldevType(std::uint32_t command);

struct Device {
  std::uint32_t index = 0;  // RDMA_NLDEV_ATTR_DEV_INDEX
  std::string name;         // RDMA_NLDEV_ATTR_DEV_NAME
  std::uint32_t ports = 0;  // RDMA_NLDEV_ATTR_PORT_INDEX of the device list: the last port
};

// Walks the messages of one dump, a receive buffer at a time.
class DumpReader {
 public:
  enum class State { kMore, kDone, kFailed };

  // A live dump: only messages with this type, sequence number and port (the request's) count;
  // the dump ends at its NLMSG_DONE or NLMSG_ERROR.
  DumpReader(std::uint32_t command, std::uint32_t seq, std::uint32_t port);
  // A recorded stream (a replay file): any sequence number and port, several dumps in a row; each
  // NLMSG_DONE ends one dump (counted in dumps()), an error ends only its dump (device_errors).
  static DumpReader Recorded(std::uint32_t command);

  // Hands each data message of [data, data + size) to `on_message` until the dump ends; what
  // follows the end is ignored. `data` needs no particular alignment.
  State Feed(const void* data, std::size_t size,
             const std::function<void(const nlmsghdr&)>& on_message, DumpStats* stats);

  State state() const { return state_; }
  // The errno (positive) that ended a failed live dump.
  int error() const { return error_; }
  std::uint32_t dumps() const { return dumps_; }

 private:
  DumpReader(std::uint32_t command, std::uint32_t seq, std::uint32_t port, bool recorded);
  // The end of one dump with `error` (0: success).
  void End(int error, DumpStats* stats);

  std::uint16_t type_;
  std::uint32_t seq_;
  std::uint32_t port_;
  bool recorded_;
  State state_ = State::kMore;
  int error_ = 0;
  std::uint32_t dumps_ = 0;
  std::vector<std::uint32_t> aligned_;  // scratch for buffers not 4-byte aligned
};

// One device-list message. False (and counted) when malformed.
bool ParseDeviceMessage(const nlmsghdr& message, Device* device, DumpStats* stats);

// Appends the QP entries of one RES_QP_GET message to `qps` (at most kMaxQpEntries in all).
void ParseQpMessage(const nlmsghdr& message, std::vector<QpEntry>* qps, DumpStats* stats);

// A recorded stream of QP-dump replies (one or more devices, each ended by NLMSG_DONE), as a
// replay file or a test holds it.
QpDump ParseRecordedQpDump(const void* data, std::size_t size);

}  // namespace ncclscope::rdma::netlink
