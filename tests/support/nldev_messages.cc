#include "tests/support/nldev_messages.h"

#include <rdma/rdma_netlink.h>

#include <cstring>
#include <fstream>
#include <stdexcept>

namespace ncclscope::testing::nldev {
namespace {

constexpr std::size_t kAlign = 4;  // NLMSG_ALIGNTO and NLA_ALIGNTO

std::size_t Aligned(std::size_t n) { return (n + kAlign - 1) & ~(kAlign - 1); }

std::uint16_t NldevType(std::uint32_t command) {
  return static_cast<std::uint16_t>((RDMA_NL_NLDEV << 10) + command);  // RDMA_NL_GET_TYPE
}

}  // namespace

Message::Message(std::uint16_t type, std::uint16_t flags, std::uint32_t seq, std::uint32_t port) {
  nlmsghdr header{};
  header.nlmsg_type = type;
  header.nlmsg_flags = flags;
  header.nlmsg_seq = seq;
  header.nlmsg_pid = port;
  bytes_.resize(Aligned(sizeof(header)));
  std::memcpy(bytes_.data(), &header, sizeof(header));
}

void Message::Put(std::uint16_t type, const void* data, std::size_t size) {
  nlattr attr{};
  attr.nla_type = type;
  attr.nla_len = static_cast<std::uint16_t>(Aligned(sizeof(nlattr)) + size);  // unpadded length
  const std::size_t at = bytes_.size();
  bytes_.resize(at + Aligned(attr.nla_len), 0);  // padding bytes are zero
  std::memcpy(bytes_.data() + at, &attr, sizeof(attr));
  if (size != 0) std::memcpy(bytes_.data() + at + Aligned(sizeof(nlattr)), data, size);
}

Message& Message::U8(std::uint16_t type, std::uint8_t value) {
  Put(type, &value, sizeof(value));
  return *this;
}

Message& Message::U32(std::uint16_t type, std::uint32_t value) {
  Put(type, &value, sizeof(value));
  return *this;
}

Message& Message::U64(std::uint16_t type, std::uint64_t value) {
  Put(type, &value, sizeof(value));
  return *this;
}

Message& Message::String(std::uint16_t type, std::string_view text) {
  std::string with_nul(text);
  Put(type, with_nul.c_str(), with_nul.size() + 1);
  return *this;
}

Message& Message::Raw(std::uint16_t type, const void* data, std::size_t size) {
  Put(type, data, size);
  return *this;
}

Message& Message::Nest(std::uint16_t type) {
  open_.push_back(bytes_.size());
  Put(type, nullptr, 0);
  return *this;
}

Message& Message::End() {
  if (open_.empty()) throw std::logic_error("End() without Nest()");
  const std::size_t at = open_.back();
  open_.pop_back();
  nlattr attr{};
  std::memcpy(&attr, bytes_.data() + at, sizeof(attr));
  attr.nla_len = static_cast<std::uint16_t>(bytes_.size() - at);  // as nla_nest_end
  std::memcpy(bytes_.data() + at, &attr, sizeof(attr));
  return *this;
}

Bytes Message::Build() const {
  if (!open_.empty()) throw std::logic_error("unclosed nest");
  Bytes out = bytes_;
  nlmsghdr header{};
  std::memcpy(&header, out.data(), sizeof(header));
  header.nlmsg_len = static_cast<std::uint32_t>(out.size());  // as nlmsg_end
  std::memcpy(out.data(), &header, sizeof(header));
  return out;
}

void AppendQpEntry(Message& m, const Qp& qp) {
  m.Nest(RDMA_NLDEV_ATTR_RES_QP_ENTRY);
  if (qp.port != 0) m.U32(RDMA_NLDEV_ATTR_PORT_INDEX, qp.port);
  m.U32(RDMA_NLDEV_ATTR_RES_LQPN, qp.lqpn);
  const bool kernel = !qp.kernel_name.empty();
  if (!kernel) m.U32(RDMA_NLDEV_ATTR_RES_PDN, qp.pdn);
  if (kernel) {
    m.String(RDMA_NLDEV_ATTR_RES_KERN_NAME, qp.kernel_name);
  } else if (qp.pid != 0) {
    m.U32(RDMA_NLDEV_ATTR_RES_PID, static_cast<std::uint32_t>(qp.pid));
  }
  if (qp.type == kQptRc) {
    m.U32(RDMA_NLDEV_ATTR_RES_RQPN, qp.rqpn);
    m.U32(RDMA_NLDEV_ATTR_RES_RQ_PSN, 0x1000 + qp.lqpn);
  }
  m.U32(RDMA_NLDEV_ATTR_RES_SQ_PSN, 0x2000 + qp.lqpn);
  if (qp.type == kQptRc) m.U8(RDMA_NLDEV_ATTR_RES_PATH_MIG_STATE, 0);
  m.U8(RDMA_NLDEV_ATTR_RES_TYPE, qp.type);
  m.U8(RDMA_NLDEV_ATTR_RES_STATE, qp.state);
  // A driver table (what mlx5 adds through dev->ops.fill_res_qp_entry): readers skip it.
  m.Nest(RDMA_NLDEV_ATTR_DRIVER);
  m.String(RDMA_NLDEV_ATTR_DRIVER_STRING, "sq_wqe_cnt");
  m.U32(RDMA_NLDEV_ATTR_DRIVER_U32, 256);
  m.End();
  m.End();
}

Bytes QpDumpReply(std::uint32_t device_index, const std::string& device, const std::vector<Qp>& qps,
                  std::uint32_t seq, std::uint32_t port, std::size_t per_message, int done_error) {
  std::vector<Bytes> parts;
  for (std::size_t first = 0; first < qps.size(); first += per_message) {
    Message m(NldevType(RDMA_NLDEV_CMD_RES_QP_GET), NLM_F_MULTI, seq, port);
    m.U32(RDMA_NLDEV_ATTR_DEV_INDEX, device_index).String(RDMA_NLDEV_ATTR_DEV_NAME, device);
    m.Nest(RDMA_NLDEV_ATTR_RES_QP);
    for (std::size_t i = first; i < qps.size() && i < first + per_message; ++i) {
      AppendQpEntry(m, qps[i]);
    }
    m.End();
    parts.push_back(m.Build());
  }
  parts.push_back(Done(seq, port, done_error));
  return Concat(parts);
}

Bytes DeviceListReply(const std::vector<Device>& devices, std::uint32_t seq, std::uint32_t port) {
  std::vector<Bytes> parts;
  for (const Device& d : devices) {
    // fill_dev_info: handle, last port, capabilities, firmware, GUIDs, node type.
    Message m(NldevType(RDMA_NLDEV_CMD_GET), NLM_F_MULTI, seq, port);
    m.U32(RDMA_NLDEV_ATTR_DEV_INDEX, d.index).String(RDMA_NLDEV_ATTR_DEV_NAME, d.name);
    m.U32(RDMA_NLDEV_ATTR_PORT_INDEX, d.ports);
    m.U64(RDMA_NLDEV_ATTR_CAP_FLAGS, 0x1234);
    m.String(RDMA_NLDEV_ATTR_FW_VERSION, "28.39.1002");
    m.U64(RDMA_NLDEV_ATTR_NODE_GUID, 0xb83fd20300a1b2c3ull);
    m.U64(RDMA_NLDEV_ATTR_SYS_IMAGE_GUID, 0xb83fd20300a1b2c3ull);
    m.U8(RDMA_NLDEV_ATTR_DEV_NODE_TYPE, 1);
    parts.push_back(m.Build());
  }
  parts.push_back(Done(seq, port));
  return Concat(parts);
}

namespace {

// A control message (NLMSG_DONE, NLMSG_ERROR) of `body_size` bytes after its header, the header
// written and the body zeroed.
Bytes ControlMessage(std::uint16_t type, std::uint16_t flags, std::uint32_t seq, std::uint32_t port,
                     std::size_t body_size) {
  Bytes out(Aligned(sizeof(nlmsghdr)) + body_size, 0);
  nlmsghdr header{};
  header.nlmsg_len = static_cast<std::uint32_t>(out.size());
  header.nlmsg_type = type;
  header.nlmsg_flags = flags;
  header.nlmsg_seq = seq;
  header.nlmsg_pid = port;
  std::memcpy(out.data(), &header, sizeof(header));
  return out;
}

}  // namespace

Bytes Done(std::uint32_t seq, std::uint32_t port, int error) {
  Bytes out = ControlMessage(NLMSG_DONE, NLM_F_MULTI, seq, port, sizeof(int));
  std::memcpy(out.data() + Aligned(sizeof(nlmsghdr)), &error, sizeof(error));
  return out;
}

Bytes Error(std::uint32_t seq, std::uint32_t port, int error, std::uint16_t request_type) {
  // struct nlmsgerr: the error, then the request's header (netlink_ack without NLM_F_CAPPED).
  Bytes out = ControlMessage(NLMSG_ERROR, 0, seq, port, sizeof(nlmsgerr));
  nlmsgerr body{};
  body.error = error;
  body.msg.nlmsg_len = static_cast<std::uint32_t>(Aligned(sizeof(nlmsghdr)));
  body.msg.nlmsg_type = request_type;
  body.msg.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  body.msg.nlmsg_seq = seq;
  body.msg.nlmsg_pid = port;
  std::memcpy(out.data() + Aligned(sizeof(nlmsghdr)), &body, sizeof(body));
  return out;
}

Bytes Concat(const std::vector<Bytes>& parts) {
  Bytes out;
  for (const Bytes& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

void WriteFile(const std::string& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

}  // namespace ncclscope::testing::nldev
