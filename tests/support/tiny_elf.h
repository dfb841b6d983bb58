#pragma once

// The smallest ELF64 shared object the eBPF source's file readers accept, built in memory by
// tests that need a library with known contents (elf/nccl_version.h): one PT_LOAD segment over
// `data` and, unless left out, section headers naming that data `.rodata`. The offsets are
// returned so a test can corrupt one field and see the reader refuse it.

#include <cstdint>
#include <string>

namespace ncclscope::testing {

struct TinyElfOptions {
  std::string data;             // the segment's bytes (and .rodata's)
  bool section_headers = true;  // false: e_shnum = 0, only the program header
  std::string section_name = ".rodata";
  std::uint32_t segment_flags = 0x4;  // PF_R
};

struct TinyElf {
  std::string bytes;
  std::size_t data_offset = 0;          // where `data` starts in the file
  std::size_t data_section_header = 0;  // offset of the data's Elf64_Shdr (0: none)
};

TinyElf MakeTinyElf(const TinyElfOptions& options);

}  // namespace ncclscope::testing
