#pragma once

// rdma netlink (RDMA_NL_NLDEV) messages as the kernel builds them, for tests of the QP table
// parser and of the channel -> NIC join. Assembled byte by byte from the uapi layout
// (<linux/netlink.h> nlmsghdr/nlattr and their 4-byte alignment, <rdma/rdma_netlink.h> command
// and attribute numbers), independently of libnl, which the parser uses. What goes into a reply
// follows drivers/infiniband/core/nldev.c:
//   QP dump (res_get_common_dumpit): NLM_F_MULTI messages of type RDMA_NL_GET_TYPE(RDMA_NL_NLDEV,
//     RDMA_NLDEV_CMD_RES_QP_GET) with the request's seq and port; each holds DEV_INDEX (u32),
//     DEV_NAME (string with its NUL) and a RES_QP nest (no NLA_F_NESTED: nla_nest_start_noflag)
//     of RES_QP_ENTRY nests; a full skb continues in the next message; NLMSG_DONE ends the dump
//     with the dump's return value (int) as payload.
//   QP entry (fill_res_qp_entry, fill_res_name_pid, fill_res_qp_entry_query): PORT_INDEX when the
//     QP has a port, LQPN, PDN for user QPs, PID for user QPs whose task lives (else nothing) or
//     KERN_NAME for kernel QPs, RQPN and RQ_PSN for RC/UC, SQ_PSN, PATH_MIG_STATE for RC/UC/XRC,
//     TYPE, STATE, then the driver's own RDMA_NLDEV_ATTR_DRIVER table.

#include <linux/netlink.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ncclscope::testing::nldev {

using Bytes = std::vector<unsigned char>;

// One netlink message, attributes appended in order (nests closed with End()).
class Message {
 public:
  Message(std::uint16_t type, std::uint16_t flags, std::uint32_t seq, std::uint32_t port);

  Message& U8(std::uint16_t type, std::uint8_t value);
  Message& U32(std::uint16_t type, std::uint32_t value);
  Message& U64(std::uint16_t type, std::uint64_t value);
  // As nla_put_string: the text and its NUL.
  Message& String(std::uint16_t type, std::string_view text);
  // Any payload, for malformed attributes.
  Message& Raw(std::uint16_t type, const void* data, std::size_t size);
  Message& Nest(std::uint16_t type);
  Message& End();

  // The message with nlmsg_len set (nests must be closed).
  Bytes Build() const;

 private:
  void Put(std::uint16_t type, const void* data, std::size_t size);
  Bytes bytes_;
  std::vector<std::size_t> open_;  // offsets of the open nests' headers
};

// ib_qp_type / ib_qp_state values (include/rdma/ib_verbs.h).
inline constexpr std::uint8_t kQptRc = 2;
inline constexpr std::uint8_t kQptUd = 4;
inline constexpr std::uint8_t kQpsReset = 0;
inline constexpr std::uint8_t kQpsRts = 3;

struct Qp {
  std::uint32_t lqpn = 0;
  std::uint32_t port = 1;   // 0: none yet (a QP in RESET)
  std::int32_t pid = 0;     // the creating task; 0: exited (no PID), see `kernel_name`
  std::string kernel_name;  // non-empty: a kernel QP (KERN_NAME instead of PID)
  std::uint8_t type = kQptRc;
  std::uint8_t state = kQpsRts;
  std::uint32_t rqpn = 0;
  std::uint32_t pdn = 1;
};

// One QP entry's attributes, as fill_res_qp_entry writes them, into an open RES_QP nest.
void AppendQpEntry(Message& message, const Qp& qp);

// The kernel's reply to one device's QP dump: messages of at most `per_message` entries each,
// then NLMSG_DONE carrying `done_error` (0, or a negative errno).
Bytes QpDumpReply(std::uint32_t device_index, const std::string& device, const std::vector<Qp>& qps,
                  std::uint32_t seq, std::uint32_t port, std::size_t per_message = 16,
                  int done_error = 0);

// The reply to the device list (RDMA_NLDEV_CMD_GET dump): one message per device, then
// NLMSG_DONE.
struct Device {
  std::uint32_t index = 0;
  std::string name;
  std::uint32_t ports = 1;
};
Bytes DeviceListReply(const std::vector<Device>& devices, std::uint32_t seq, std::uint32_t port);

Bytes Done(std::uint32_t seq, std::uint32_t port, int error = 0);
// NLMSG_ERROR for `request_type` with `error` (a negative errno; 0 is an acknowledgement).
Bytes Error(std::uint32_t seq, std::uint32_t port, int error, std::uint16_t request_type);

Bytes Concat(const std::vector<Bytes>& parts);

// Writes `bytes` to `path` (a recorded dump for FileQpSource / plugin.qp_table).
void WriteFile(const std::string& path, const Bytes& bytes);

}  // namespace ncclscope::testing::nldev
