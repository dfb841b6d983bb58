#include "agent/analytics/detection/baseline_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <string_view>
#include <vector>

#include "agent/analytics/size_bucket.h"
#include "platform/errno_text.h"
#include "platform/fd_io.h"
#include "plugin/ring/ncclscope_ring.h"

namespace ncclscope::analytics::detection {
namespace {

constexpr std::string_view kHeader = "# ncclscope latency baselines v1";
constexpr std::string_view kEnd = "# end ";

bool Plain(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == ':' || c == '/' || c == '+';
}

template <typename T>
bool ParseInt(std::string_view text, T min, T max, T* out) {
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < min || value > max) {
    return false;
  }
  *out = value;
  return true;
}

bool ParseDouble(std::string_view text, double* out) {
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) return false;
  *out = value;
  return true;
}

// The enum value whose name is `text`, scanning 0 .. count-1.
template <typename Name>
bool ParseName(std::string_view text, unsigned count, Name name, std::uint8_t* out) {
  for (unsigned i = 0; i < count; ++i) {
    if (text == name(i)) {
      *out = static_cast<std::uint8_t>(i);
      return true;
    }
  }
  return false;
}

std::vector<std::string_view> Split(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t start = 0;
  for (;;) {
    const std::size_t space = line.find(' ', start);
    fields.push_back(line.substr(start, space - start));
    if (space == std::string_view::npos) break;
    start = space + 1;
  }
  return fields;
}

// Reads at most `limit` + 1 bytes (so that a longer file is seen as one).
bool ReadBounded(const std::string& path, std::size_t limit, std::string* text, int* error) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    *error = errno;
    return false;
  }
  text->clear();
  char buffer[65536];
  for (;;) {
    const ssize_t n = platform::ReadRetrying(fd, buffer, sizeof(buffer));
    if (n < 0) {
      *error = errno;
      ::close(fd);
      return false;
    }
    if (n == 0) break;
    text->append(buffer, static_cast<std::size_t>(n));
    if (text->size() > limit) break;
  }
  ::close(fd);
  return true;
}

}  // namespace

void BaselineStore::SetMaxKeys(std::size_t max_keys) {
  max_keys_ = max_keys;
  while (index_.size() > max_keys_ && !lru_.empty()) {
    index_.erase(lru_.back().key);
    lru_.pop_back();
    ++evictions_;
  }
}

std::string BaselineStore::EncodeName(const std::string& name) {
  if (name.empty()) return "-";
  std::string out;
  static const char kHex[] = "0123456789ABCDEF";
  for (const char c : name) {
    if (Plain(c)) {
      out += c;
    } else {
      const auto b = static_cast<unsigned char>(c);
      out += '%';
      out += kHex[b >> 4];
      out += kHex[b & 15];
    }
  }
  return out;
}

bool BaselineStore::DecodeName(const std::string& text, std::string* name) {
  name->clear();
  if (text == "-") return true;
  if (text.empty()) return false;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%') {
      if (i + 2 >= text.size()) return false;
      const int hi = hex(text[i + 1]);
      const int lo = hex(text[i + 2]);
      if (hi < 0 || lo < 0) return false;
      const char c = static_cast<char>(hi * 16 + lo);
      if (Plain(c) || c == '\0') return false;  // one spelling per name
      *name += c;
      i += 2;
    } else if (Plain(text[i])) {
      *name += text[i];
    } else {
      return false;
    }
  }
  return name->size() <= kMaxCommNameBytes;
}

// One entry line's twelve fields into `n`; the reason when the line is not one.
std::string BaselineStore::ParseEntry(std::string_view line, Node* n) {
  const std::vector<std::string_view> f = Split(line);
  if (f.size() != 12) return "expected 12 fields, found " + std::to_string(f.size());
  if (!DecodeName(std::string(f[0]), &n->key.comm_name)) return "bad communicator name";
  if (!ParseInt<std::int32_t>(f[1], 1, 1 << 24, &n->key.nranks) ||
      !ParseInt<std::int32_t>(f[2], 1, 1 << 24, &n->key.nnodes) ||
      !ParseInt<std::int32_t>(f[3], 0, n->key.nranks - 1, &n->key.rank)) {
    return "bad nranks, nnodes or rank";
  }
  if (!ParseName(f[4], NCCLSCOPE_FUNC_COUNT, ncclscope_func_name, &n->key.func) ||
      !ParseName(f[5], NCCLSCOPE_ALGO_COUNT, ncclscope_algo_name, &n->key.algo) ||
      !ParseName(f[6], NCCLSCOPE_PROTO_COUNT, ncclscope_proto_name, &n->key.proto) ||
      !ParseName(
          f[7], kSizeBuckets,
          [](unsigned i) { return SizeBucketLabel(static_cast<std::uint8_t>(i)); }, &n->key.size)) {
    return "unknown function, algorithm, protocol or size";
  }
  if (!ParseDouble(f[8], &n->entry.p99_s) || n->entry.p99_s <= 0 || n->entry.p99_s > 3600) {
    return "bad p99 (seconds, > 0, < 3600)";
  }
  if (!ParseInt<std::uint32_t>(f[9], 1, UINT32_MAX, &n->entry.windows) ||
      !ParseInt<std::uint32_t>(f[10], 0, UINT32_MAX, &n->entry.anomalous) ||
      !ParseInt<std::int64_t>(f[11], 0, INT64_MAX, &n->entry.last_seen_s)) {
    return "bad windows, anomalous or last-seen field";
  }
  return {};
}

// Most recently seen first, as the file was written; forgotten and surplus entries dropped. The
// reason when two entries share a key.
std::string BaselineStore::Adopt(std::vector<Node>& nodes, std::int64_t now_s) {
  for (Node& n : nodes) {
    if (now_s - n.entry.last_seen_s > kForgetAfterS) continue;
    if (index_.size() >= max_keys_) break;
    if (index_.contains(n.key)) return "duplicate key " + EncodeName(n.key.comm_name);
    lru_.push_back(std::move(n));
    index_.emplace(lru_.back().key, std::prev(lru_.end()));
  }
  return {};
}

BaselineStore::LoadStatus BaselineStore::Load(const std::string& path, std::int64_t now_s,
                                              std::string* error) {
  lru_.clear();
  index_.clear();
  std::string text;
  int err = 0;
  const std::size_t limit = max_keys_ * kMaxLineBytes + 4096;
  if (!ReadBounded(path, limit, &text, &err)) {
    if (err == ENOENT) return LoadStatus::kMissing;
    *error = path + ": " + platform::ErrnoText(err).c_str();
    return LoadStatus::kUnreadable;
  }
  if (text.size() > limit) {
    *error = path + ": larger than " + std::to_string(limit) +
             " bytes (detection.baseline_max_keys entries)";
    return LoadStatus::kTooLarge;
  }
  std::vector<Node> nodes;
  std::size_t line_no = 0;
  bool ended = false;
  std::string_view rest = text;
  auto fail = [&](const std::string& why) {
    *error = path + ":" + std::to_string(std::max<std::size_t>(line_no, 1)) + ": " + why;
    lru_.clear();
    index_.clear();
    return LoadStatus::kCorrupt;
  };
  while (!rest.empty()) {
    const std::size_t nl = rest.find('\n');
    if (nl == std::string_view::npos) {
      ++line_no;
      return fail("last line has no newline (a write cut short)");
    }
    const std::string_view line = rest.substr(0, nl);
    rest.remove_prefix(nl + 1);
    ++line_no;
    if (ended) return fail("text after the end line");
    if (line.size() > kMaxLineBytes) return fail("line longer than 1024 bytes");
    if (line_no == 1) {
      if (line != kHeader) return fail("not a ncclscope baselines v1 file");
      continue;
    }
    if (line.substr(0, kEnd.size()) == kEnd) {
      std::size_t count = 0;
      if (!ParseInt<std::size_t>(line.substr(kEnd.size()), 0, SIZE_MAX, &count) ||
          count != nodes.size()) {
        return fail("end line does not match the " + std::to_string(nodes.size()) + " entries");
      }
      ended = true;
      continue;
    }
    Node n;
    if (std::string why = ParseEntry(line, &n); !why.empty()) return fail(why);
    nodes.push_back(std::move(n));
  }
  if (line_no == 0) return fail("empty file");
  if (!ended) return fail("no end line (a write cut short)");
  if (std::string why = Adopt(nodes, now_s); !why.empty()) return fail(why);
  return LoadStatus::kLoaded;
}

bool BaselineStore::Save(const std::string& path, std::string* error) const {
  std::string text(kHeader);
  text += '\n';
  char number[64];
  for (const Node& n : lru_) {
    text += EncodeName(n.key.comm_name);
    for (const std::int64_t v :
         {static_cast<std::int64_t>(n.key.nranks), static_cast<std::int64_t>(n.key.nnodes),
          static_cast<std::int64_t>(n.key.rank)}) {
      text += ' ';
      text += std::to_string(v);
    }
    text += ' ';
    text += ncclscope_func_name(n.key.func);
    text += ' ';
    text += ncclscope_algo_name(n.key.algo);
    text += ' ';
    text += ncclscope_proto_name(n.key.proto);
    text += ' ';
    text += SizeBucketLabel(n.key.size);
    const auto [end, ec] = std::to_chars(number, number + sizeof(number), n.entry.p99_s);
    text += ' ';
    text.append(number, ec == std::errc() ? end : number);
    text += ' ' + std::to_string(n.entry.windows) + ' ' + std::to_string(n.entry.anomalous) + ' ' +
            std::to_string(n.entry.last_seen_s) + '\n';
  }
  text += std::string(kEnd) + std::to_string(lru_.size()) + '\n';
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    *error = tmp + ": " + platform::ErrnoText(errno).c_str();
    return false;
  }
  if (!platform::WriteAll(fd, text.data(), text.size())) {
    *error = tmp + ": " + platform::ErrnoText(errno).c_str();
    ::close(fd);
    ::unlink(tmp.c_str());
    return false;
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    *error = tmp + ": " + platform::ErrnoText(errno).c_str();
    ::unlink(tmp.c_str());
    return false;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    *error = path + ": " + platform::ErrnoText(errno).c_str();
    ::unlink(tmp.c_str());
    return false;
  }
  return true;
}

void BaselineStore::Touch(std::list<Node>::iterator it) {
  if (it != lru_.begin()) lru_.splice(lru_.begin(), lru_, it);
}

BaselineEntry* BaselineStore::Find(const BaselineKey& key) {
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  Touch(it->second);
  return &it->second->entry;
}

BaselineEntry& BaselineStore::Get(const BaselineKey& key) {
  if (BaselineEntry* found = Find(key)) return *found;
  if (max_keys_ > 0 && index_.size() >= max_keys_) {
    index_.erase(lru_.back().key);
    lru_.pop_back();
    ++evictions_;
  }
  lru_.push_front(Node{key, {}});
  index_.emplace(key, lru_.begin());
  return lru_.front().entry;
}

}  // namespace ncclscope::analytics::detection
