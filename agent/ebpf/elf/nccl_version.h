#pragma once

// The NCCL version a library file carries, read from the file itself: a pod can claim any version
// (an image label, an environment variable), but what its process runs is the code it maps.
// NCCL builds "NCCL version X.Y.Z<suffix>+cudaA.B" into .rodata (VERSION_STRING,
// src/init.cc:527 at v2.23.4-1; the same at src/init.cu:198 at v2.3.5-5 and src/init.cc:694 at
// v2.30.7-1), which init prints with NCCL_DEBUG=VERSION.
//
// The file is chosen by a pod (its path comes from /proc/<pid>/maps), so this reader is as bounded
// as elf_symbols.h: every header is checked against the file size, the bytes searched are capped,
// and a malformed file yields no version with a reason instead of a guess.
//
// Where it searches: the .rodata section; when the file has no section headers (stripped of them,
// which the dynamic loader allows), the non-writable PT_LOAD segments in file order (linkers that
// put .rodata in the text segment, as libnccl.so.2 2.28.9 is laid out, make that the R+X one).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ncclscope::ebpf::elf {

struct NcclVersion {
  int major = 0;
  int minor = 0;
  int patch = 0;
  // "2.28.9": the release, without NCCL's suffix or the CUDA version it was built with.
  std::string Text() const;
  // NOLINTNEXTLINE(modernize-use-nullptr): clang-tidy 14 misreads defaulted <=>
  friend auto operator<=>(const NcclVersion&, const NcclVersion&) = default;
};

struct VersionLimits {
  std::uint64_t max_file_size = std::uint64_t{4} << 30;
  std::uint32_t max_sections = 8192;
  std::uint64_t max_section_names = std::uint64_t{1} << 20;  // .shstrtab bytes
  // Bytes searched in all: libnccl.so.2's .rodata is 212 KiB (2.28.9); a statically linked NCCL
  // inside a framework library shares a much larger one, and the fallback scans whole segments.
  std::uint64_t max_scan_bytes = std::uint64_t{256} << 20;
};

// The first "NCCL version " followed by digits.digits.digits (1 to 4 digits each, the patch not
// followed by another digit) in `bytes`, or nullopt.
std::optional<NcclVersion> FindNcclVersion(std::string_view bytes);

// The NCCL version in the ELF file open at `fd` (not taken over; only pread is used), or nullopt
// with *error saying why (not an ELF file, a header outside the file, no version string, the scan
// limit reached).
std::optional<NcclVersion> ReadNcclVersion(int fd, std::string* error, VersionLimits limits = {});

}  // namespace ncclscope::ebpf::elf
