#include "rdma/netlink/netlink_qp_source.h"

#include <fcntl.h>
#include <netlink/attr.h>
#include <netlink/errno.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>
#include <rdma/rdma_netlink.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "platform/errno_text.h"
#include "platform/fd_io.h"
#include "rdma/netlink/nldev_parser.h"

namespace ncclscope::rdma::netlink {
namespace {

using SteadyClock = std::chrono::steady_clock;

// More RDMA devices than any node has (a DGX has about a dozen; SR-IOV VFs add some).
constexpr std::size_t kMaxDevices = 1024;
constexpr std::size_t kMaxFileBytes = 64u << 20;

struct SocketDeleter {
  void operator()(nl_sock* sock) const { nl_socket_free(sock); }
};
using Socket = std::unique_ptr<nl_sock, SocketDeleter>;

struct MessageDeleter {
  void operator()(nl_msg* msg) const { nlmsg_free(msg); }
};

struct Exchange {
  bool ok = false;
  bool timed_out = false;
  std::string error;
};

// Sends one dump request and reads its replies until NLMSG_DONE, NLMSG_ERROR or the deadline.
Exchange RunDump(nl_sock* sock, std::uint32_t command, std::optional<std::uint32_t> device,
                 SteadyClock::time_point deadline,
                 const std::function<void(const nlmsghdr&)>& on_message, DumpStats* stats) {
  std::unique_ptr<nl_msg, MessageDeleter> request(
      nlmsg_alloc_simple(NldevType(command), NLM_F_DUMP));
  if (!request) return {false, false, "cannot allocate a netlink message"};
  if (device && nla_put_u32(request.get(), RDMA_NLDEV_ATTR_DEV_INDEX, *device) < 0) {
    return {false, false, "cannot build the request"};
  }
  const int sent = nl_send_auto(sock, request.get());  // sets NLM_F_REQUEST, seq and port
  if (sent < 0) return {false, false, std::string("send: ") + nl_geterror(sent)};
  DumpReader reader(command, nlmsg_hdr(request.get())->nlmsg_seq, nl_socket_get_local_port(sock));
  while (reader.state() == DumpReader::State::kMore) {
    if (SteadyClock::now() > deadline) return {false, true, "timed out"};
    sockaddr_nl from{};
    unsigned char* buffer = nullptr;
    // nl_recv peeks at each datagram's size first (MSG_PEEK | MSG_TRUNC, libnl's default), so a
    // reply is never cut; it returns a malloc'ed copy.
    const int received = nl_recv(sock, &from, &buffer, nullptr);
    std::unique_ptr<unsigned char, decltype(&std::free)> owned(buffer, &std::free);
    if (received == -NLE_AGAIN || received == 0) continue;  // the receive timeout: check deadline
    if (received < 0) return {false, false, std::string("receive: ") + nl_geterror(received)};
    if (from.nl_pid != 0) {  // only the kernel (port 0) answers a dump
      ++stats->foreign_messages;
      continue;
    }
    reader.Feed(owned.get(), static_cast<std::size_t>(received), on_message, stats);
  }
  if (reader.state() == DumpReader::State::kFailed) {
    return {false, false, platform::ErrnoText(reader.error()).c_str()};
  }
  return {true, false, ""};
}

}  // namespace

NetlinkQpSource::NetlinkQpSource(std::chrono::milliseconds timeout) : timeout_(timeout) {}

QpDump NetlinkQpSource::Dump() {
  QpDump dump;
  Socket sock(nl_socket_alloc());
  if (!sock) {
    dump.error = "cannot allocate a netlink socket";
    return dump;
  }
  nl_socket_disable_auto_ack(sock.get());  // dumps end in NLMSG_DONE; no acks wanted
  const int connected = nl_connect(sock.get(), NETLINK_RDMA);
  if (connected < 0) {
    // socket(AF_NETLINK, ..., NETLINK_RDMA) fails with EPROTONOSUPPORT while no RDMA core module
    // (ib_core) is loaded; libnl reports it as NLE_PROTO_MISMATCH.
    if (connected == -NLE_PROTO_MISMATCH || connected == -NLE_AF_NOSUPPORT) {
      dump.status = DumpStatus::kUnsupported;
      dump.error = "the kernel has no rdma netlink (NETLINK_RDMA; ib_core not loaded)";
    } else {
      dump.error = std::string("cannot open a NETLINK_RDMA socket: ") + nl_geterror(connected);
    }
    return dump;
  }
  // Each receive waits at most a second, so the deadline is checked even if the kernel goes quiet.
  timeval wait{};
  wait.tv_sec = 1;
  ::setsockopt(nl_socket_get_fd(sock.get()), SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait));
  const SteadyClock::time_point deadline = SteadyClock::now() + timeout_;

  std::vector<Device> devices;
  const Exchange listed = RunDump(
      sock.get(), RDMA_NLDEV_CMD_GET, std::nullopt, deadline,
      [&](const nlmsghdr& m) {
        Device device;
        if (ParseDeviceMessage(m, &device, &dump.stats) && devices.size() < kMaxDevices) {
          devices.push_back(std::move(device));
        }
      },
      &dump.stats);
  if (!listed.ok) {
    dump.error = "device list: " + listed.error;
    return dump;
  }
  for (const Device& device : devices) {
    const Exchange qps = RunDump(
        sock.get(), RDMA_NLDEV_CMD_RES_QP_GET, device.index, deadline,
        [&](const nlmsghdr& m) { ParseQpMessage(m, &dump.qps, &dump.stats); }, &dump.stats);
    if (qps.timed_out) {
      dump.error = "QPs of " + device.name + ": timed out";
      return dump;
    }
    // E.g. the device went away between the list and its dump: the other devices still count.
    if (!qps.ok) ++dump.stats.device_errors;
  }
  dump.devices = static_cast<std::uint32_t>(devices.size());
  dump.status = DumpStatus::kOk;
  return dump;
}

FileQpSource::FileQpSource(std::string path) : path_(std::move(path)) {}

QpDump FileQpSource::Dump() {
  QpDump dump;
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    dump.error = "cannot open " + path_ + ": " + platform::ErrnoText(errno).c_str();
    return dump;
  }
  // 4-byte aligned storage, as netlink messages are laid out.
  constexpr std::size_t kChunk = 65536;
  std::vector<std::uint32_t> words;
  std::size_t size = 0;
  int read_errno = 0;
  while (size < kMaxFileBytes) {
    words.resize((size + kChunk) / sizeof(std::uint32_t) + 1);
    const ssize_t n =
        platform::ReadRetrying(fd, reinterpret_cast<unsigned char*>(words.data()) + size,
                               std::min(kChunk, kMaxFileBytes - size));
    if (n < 0) read_errno = errno;
    if (n <= 0) break;
    size += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (read_errno != 0) {
    dump.error = "cannot read " + path_ + ": " + platform::ErrnoText(read_errno).c_str();
    return dump;
  }
  return ParseRecordedQpDump(words.data(), size);
}

}  // namespace ncclscope::rdma::netlink
