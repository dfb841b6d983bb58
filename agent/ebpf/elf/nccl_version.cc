#include "agent/ebpf/elf/nccl_version.h"

#include <elf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "platform/errno_text.h"
#include "platform/fd_io.h"

namespace ncclscope::ebpf::elf {
namespace {

constexpr std::string_view kPrefix = "NCCL version ";
constexpr std::size_t kMaxDigits = 4;
// Bytes a match may span past its first byte: the prefix, three numbers, two dots and the byte
// after the patch that proves it ended. Chunks overlap by this much so no match is cut in two.
constexpr std::size_t kMatchSpan = kPrefix.size() + 3 * kMaxDigits + 2 + 1;
constexpr std::size_t kChunk = std::size_t{1} << 20;

bool Within(std::uint64_t offset, std::uint64_t size, std::uint64_t file_size) {
  return offset <= file_size && size <= file_size - offset;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// 1 to kMaxDigits digits at `at`; advances past them.
std::optional<int> Number(std::string_view text, std::size_t& at) {
  int value = 0;
  std::size_t n = 0;
  while (at < text.size() && IsDigit(text[at])) {
    if (++n > kMaxDigits) return std::nullopt;
    value = value * 10 + (text[at] - '0');
    ++at;
  }
  if (n == 0) return std::nullopt;
  return value;
}

// "X.Y.Z" at the start of `text`, Z not followed by another digit.
std::optional<NcclVersion> ParseVersion(std::string_view text) {
  std::size_t at = 0;
  const auto major = Number(text, at);
  if (!major || at >= text.size() || text[at++] != '.') return std::nullopt;
  const auto minor = Number(text, at);
  if (!minor || at >= text.size() || text[at++] != '.') return std::nullopt;
  const auto patch = Number(text, at);
  if (!patch) return std::nullopt;
  return NcclVersion{*major, *minor, *patch};
}

struct Region {
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
};

// Where to search, or nullopt with *error for a file whose headers cannot be trusted.
std::optional<std::vector<Region>> Regions(int fd, std::uint64_t file_size,
                                           const VersionLimits& limits, std::string* error) {
  Elf64_Ehdr eh{};
  if (file_size < sizeof(eh) || !platform::PreadExactly(fd, &eh, sizeof(eh), 0)) {
    *error = "too short for an ELF header";
    return std::nullopt;
  }
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
    *error = "not an ELF file";
    return std::nullopt;
  }
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB) {
    *error = "not a 64-bit little-endian ELF file";
    return std::nullopt;
  }
  std::vector<Region> regions;
  if (eh.e_shnum != 0) {
    if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum > limits.max_sections ||
        !Within(eh.e_shoff, std::uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr), file_size) ||
        eh.e_shstrndx == SHN_UNDEF || eh.e_shstrndx >= eh.e_shnum) {
      *error = "bad section header table";
      return std::nullopt;
    }
    std::vector<Elf64_Shdr> sections(eh.e_shnum);
    if (!platform::PreadExactly(fd, sections.data(), sections.size() * sizeof(Elf64_Shdr),
                                eh.e_shoff)) {
      *error = "cannot read section headers";
      return std::nullopt;
    }
    const Elf64_Shdr& names_section = sections[eh.e_shstrndx];
    if (names_section.sh_type != SHT_STRTAB || names_section.sh_size > limits.max_section_names ||
        !Within(names_section.sh_offset, names_section.sh_size, file_size)) {
      *error = "bad section name table";
      return std::nullopt;
    }
    std::string names(names_section.sh_size, '\0');
    if (!platform::PreadExactly(fd, names.data(), names.size(), names_section.sh_offset)) {
      *error = "cannot read section names";
      return std::nullopt;
    }
    for (const Elf64_Shdr& s : sections) {
      if (s.sh_type != SHT_PROGBITS || s.sh_name >= names.size()) continue;
      // Compared with its terminating NUL, so ".rodata.cst16" or an unterminated name cannot pass.
      constexpr std::string_view kRodata{".rodata", sizeof(".rodata")};
      if (names.compare(s.sh_name, kRodata.size(), kRodata.data(), kRodata.size()) != 0) continue;
      if (!Within(s.sh_offset, s.sh_size, file_size)) {
        *error = ".rodata extends past the end of the file";
        return std::nullopt;
      }
      regions.push_back({s.sh_offset, s.sh_size});
    }
    if (!regions.empty()) return regions;
  }
  // No section headers, or none named .rodata: the non-writable loaded segments.
  if (eh.e_phnum == 0 || eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == PN_XNUM ||
      !Within(eh.e_phoff, std::uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr), file_size)) {
    *error = "no .rodata and a bad program header table";
    return std::nullopt;
  }
  std::vector<Elf64_Phdr> segments(eh.e_phnum);
  if (!platform::PreadExactly(fd, segments.data(), segments.size() * sizeof(Elf64_Phdr),
                              eh.e_phoff)) {
    *error = "cannot read program headers";
    return std::nullopt;
  }
  for (const Elf64_Phdr& p : segments) {
    if (p.p_type != PT_LOAD || (p.p_flags & PF_W) != 0) continue;
    if (!Within(p.p_offset, p.p_filesz, file_size)) {
      *error = "a loaded segment extends past the end of the file";
      return std::nullopt;
    }
    regions.push_back({p.p_offset, p.p_filesz});
  }
  std::sort(regions.begin(), regions.end(),
            [](const Region& a, const Region& b) { return a.offset < b.offset; });
  return regions;
}

}  // namespace

std::string NcclVersion::Text() const {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

std::optional<NcclVersion> FindNcclVersion(std::string_view bytes) {
  for (std::size_t at = bytes.find(kPrefix); at != std::string_view::npos;
       at = bytes.find(kPrefix, at + 1)) {
    if (auto v = ParseVersion(bytes.substr(at + kPrefix.size()))) return v;
  }
  return std::nullopt;
}

std::optional<NcclVersion> ReadNcclVersion(int fd, std::string* error, VersionLimits limits) {
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    *error = std::string("cannot stat: ") + platform::ErrnoText(errno).c_str();
    return std::nullopt;
  }
  if (!S_ISREG(st.st_mode)) {
    *error = "not a regular file";
    return std::nullopt;
  }
  const auto file_size = static_cast<std::uint64_t>(st.st_size);
  if (file_size > limits.max_file_size) {
    *error = "file larger than the limit";
    return std::nullopt;
  }
  const auto regions = Regions(fd, file_size, limits, error);
  if (!regions) return std::nullopt;

  std::uint64_t budget = limits.max_scan_bytes;
  std::string buffer;
  for (const Region& region : *regions) {
    for (std::uint64_t done = 0; done < region.size; done += kChunk) {
      // A chunk plus the overlap that lets a match starting in it finish; matches are taken only
      // where they start inside the chunk, so none is found twice or cut.
      const std::uint64_t own = std::min<std::uint64_t>(kChunk, region.size - done);
      const std::uint64_t read = std::min<std::uint64_t>(own + kMatchSpan, region.size - done);
      if (own > budget) {
        *error = "scan limit reached";
        return std::nullopt;
      }
      budget -= own;
      buffer.resize(read);
      if (!platform::PreadExactly(fd, buffer.data(), buffer.size(), region.offset + done)) {
        *error = "cannot read the file";
        return std::nullopt;
      }
      const std::string_view view(buffer);
      for (std::size_t at = view.find(kPrefix); at != std::string_view::npos && at < own;
           at = view.find(kPrefix, at + 1)) {
        if (auto v = ParseVersion(view.substr(at + kPrefix.size()))) return v;
      }
    }
  }
  *error = "no NCCL version string";
  return std::nullopt;
}

}  // namespace ncclscope::ebpf::elf
