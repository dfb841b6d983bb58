#include "rdma/sysfs/port_reader.h"

#include <cerrno>

#include "platform/errno_text.h"

namespace ncclscope::rdma::sysfs {
namespace {

constexpr int kRestrictedAfterEinvals = 2;

}  // namespace

bool IsLastingError(int error) {
  switch (error) {
    case ENOENT:
    case EPERM:
    case EACCES:
    case EOPNOTSUPP:
    case EINVAL:
    case EISDIR:
    case ENOTDIR:
      return true;
    default:
      return false;
  }
}

PortReader::FileResult PortReader::ReadOne(FileReader& reader, const PortLayout& layout,
                                           const std::string& key, const std::string& path,
                                           std::string* text, PortReading* out,
                                           ReadProblems* problems, int* error) {
  *error = 0;
  if (!remembered_.empty()) {
    if (auto it = remembered_.find(key); it != remembered_.end()) {
      ++out->unreadable[platform::ErrnoName(it->second)];
      return FileResult::kAbsent;
    }
  }
  ++problems->files_read;
  const int result = reader.Read(path, text);
  if (result == 0) return FileResult::kValue;
  *error = result;
  if ((result == ENOENT || result == ENODEV) && !reader.Exists(layout.path)) {
    return FileResult::kVanished;
  }
  ++out->unreadable[platform::ErrnoName(result)];
  if (IsLastingError(result)) {
    remembered_.emplace(key, result);
  } else {
    ++problems->read_errors;
  }
  return FileResult::kAbsent;
}

PortReader::Outcome PortReader::Read(FileReader& reader, const PortLayout& layout, PortReading* out,
                                     ReadProblems* problems) {
  *out = PortReading{};
  out->values.assign(layout.files.size(), std::nullopt);
  std::string text;
  int error = 0;

  // Port attributes. Each read calls ib_query_port() in the kernel.
  const struct {
    const char* name;
    int kind;  // 0 state, 1 phys_state, 2 rate
  } attributes[] = {{"state", 0}, {"phys_state", 1}, {"rate", 2}};
  for (const auto& attribute : attributes) {
    const FileResult result =
        ReadOne(reader, layout, attribute.name, layout.path + "/" + attribute.name, &text, out,
                problems, &error);
    if (result == FileResult::kVanished) return Outcome::kVanished;
    if (result != FileResult::kValue) continue;
    if (attribute.kind == 2) {
      out->rate = ParseRate(text);
      if (!out->rate) ++problems->parse_errors;
    } else {
      std::optional<IdName> parsed = ParseIdName(text);
      if (!parsed) ++problems->parse_errors;
      (attribute.kind == 0 ? out->state : out->phys_state) = std::move(parsed);
    }
  }

  consecutive_einval_ = 0;
  for (std::size_t i = 0; i < layout.files.size(); ++i) {
    const CounterFile& file = layout.files[i];
    const bool pma = file.group == CounterGroup::kCounters;
    if (pma && restricted_) {
      ++out->unreadable["restricted"];
      continue;
    }
    const FileResult result =
        ReadOne(reader, layout, file.key, file.path, &text, out, problems, &error);
    if (result == FileResult::kVanished) return Outcome::kVanished;
    if (result == FileResult::kAbsent) {
      if (pma && error == EINVAL && !counters_ok_ &&
          ++consecutive_einval_ >= kRestrictedAfterEinvals) {
        restricted_ = true;
      }
      continue;
    }
    const CounterText parsed = ParseCounter(text);
    switch (parsed.kind) {
      case CounterText::Kind::kValue:
        out->values[i] = parsed.value;
        if (pma) {
          counters_ok_ = true;
          consecutive_einval_ = 0;
        }
        break;
      case CounterText::Kind::kNoPma:
        ++out->unreadable["no_pma"];
        break;
      case CounterText::Kind::kMalformed:
        ++problems->parse_errors;
        ++out->unreadable["malformed"];
        break;
    }
  }
  out->restricted = restricted_;
  return Outcome::kRead;
}

}  // namespace ncclscope::rdma::sysfs
