// The NCCL version reader (agent/ebpf/elf/nccl_version.h) on the real libnccl.so.2 and on files a
// pod could plant: truncated, with sections larger than the file, without the string, with the
// string but no number, and with the string where only the segment fallback finds it.

#include "agent/ebpf/elf/nccl_version.h"

#include <elf.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

#include "agent/ebpf/proc/unique_fd.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_elf.h"

namespace ncclscope::ebpf::elf {
namespace {

using testing::MakeTinyElf;
using testing::TempDir;
using testing::TinyElf;
using testing::TinyElfOptions;

constexpr const char* kRealNccl = "/usr/local/cuda/lib64/libnccl.so.2";
constexpr const char* kRealNcclHeader = "/usr/local/cuda/include/nccl.h";

std::optional<NcclVersion> ReadFrom(const std::string& path, std::string* error,
                                    VersionLimits limits = {}) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    *error = "cannot open " + path;
    return std::nullopt;
  }
  return ReadNcclVersion(fd.get(), error, limits);
}

std::optional<NcclVersion> ReadBytes(const TempDir& dir, const std::string& bytes,
                                     std::string* error, VersionLimits limits = {}) {
  return ReadFrom(dir.WriteFile("lib.so", bytes), error, limits);
}

template <typename T>
void Patch(std::string& bytes, std::size_t offset, const T& value) {
  std::memcpy(bytes.data() + offset, &value, sizeof(T));
}

TEST(NcclVersionTest, FindsTheFirstWellFormedVersion) {
  EXPECT_EQ(FindNcclVersion("NCCL version 2.28.9+cuda13.0")->Text(), "2.28.9");
  EXPECT_EQ(FindNcclVersion(std::string("x\0NCCL version 2.18.3-1+cuda12.2\0", 33))->Text(),
            "2.18.3");
  // NCCL's other strings with the words: a format, a mismatch message, a version without patch.
  EXPECT_EQ(FindNcclVersion("Mismatched NCCL version detected NCCL version %s NCCL version 2.23 "
                            "NCCL version 2.23.4")
                ->Text(),
            "2.23.4");
  // Leading zeros are read as numbers, so the label is canonical.
  EXPECT_EQ(FindNcclVersion("NCCL version 02.028.09")->Text(), "2.28.9");
  EXPECT_FALSE(FindNcclVersion("NCCL version abc"));
  EXPECT_FALSE(FindNcclVersion("NCCL version 2.28."));
  EXPECT_FALSE(FindNcclVersion("NCCL version .2.28"));
  // More than four digits in a component: not NCCL's, and not a label we want.
  EXPECT_FALSE(FindNcclVersion("NCCL version 2.28.99999"));
  EXPECT_FALSE(FindNcclVersion("NCCL version 123456789.1.1"));
  EXPECT_FALSE(FindNcclVersion("NCCL  version 2.28.9"));
  EXPECT_FALSE(FindNcclVersion(""));
  EXPECT_LT((NcclVersion{2, 22, 3}), (NcclVersion{2, 23, 0}));
  EXPECT_LT((NcclVersion{1, 99, 9}), (NcclVersion{2, 0, 0}));
}

TEST(NcclVersionTest, RealLibncclMatchesItsHeader) {
  if (access(kRealNccl, R_OK) != 0) GTEST_SKIP() << kRealNccl << " not installed";
  std::string error;
  const auto version = ReadFrom(kRealNccl, &error);
  ASSERT_TRUE(version) << error;
  EXPECT_EQ(version->major, 2);
  if (access(kRealNcclHeader, R_OK) != 0) GTEST_SKIP() << kRealNcclHeader << " not installed";
  std::stringstream header;
  header << std::ifstream(kRealNcclHeader).rdbuf();
  const std::string text = header.str();
  std::smatch m;
  const std::regex define(
      R"(#define NCCL_MAJOR (\d+)\s+#define NCCL_MINOR (\d+)\s+#define NCCL_PATCH (\d+))");
  ASSERT_TRUE(std::regex_search(text, m, define));
  EXPECT_EQ(version->Text(), m[1].str() + "." + m[2].str() + "." + m[3].str());
}

TEST(NcclVersionTest, ReadsRodata) {
  TempDir dir;
  std::string error;
  const TinyElf elf =
      MakeTinyElf({.data = std::string("\0junk\0NCCL version 2.21.5+cuda12.4\0", 35)});
  const auto version = ReadBytes(dir, elf.bytes, &error);
  ASSERT_TRUE(version) << error;
  EXPECT_EQ(version->Text(), "2.21.5");
}

TEST(NcclVersionTest, SectionsWithoutRodataFallBackToSegments) {
  // Section headers that name no .rodata (".rodata.cst16" is not it): the loaded segments are
  // searched.
  TempDir dir;
  std::string error;
  TinyElfOptions options{.data = "NCCL version 2.19.3", .section_name = ".rodata.cst16"};
  EXPECT_EQ(ReadBytes(dir, MakeTinyElf(options).bytes, &error)->Text(), "2.19.3");
}

TEST(NcclVersionTest, SegmentsWhenTheFileHasNoSectionHeaders) {
  TempDir dir;
  std::string error;
  TinyElfOptions options{.data = "..NCCL version 2.20.5+cuda12.2", .section_headers = false};
  auto version = ReadBytes(dir, MakeTinyElf(options).bytes, &error);
  ASSERT_TRUE(version) << error;
  EXPECT_EQ(version->Text(), "2.20.5");
  // Read-only code and data: the R+X segment counts (libnccl's .rodata lives in it).
  options.segment_flags = PF_R | PF_X;
  EXPECT_EQ(ReadBytes(dir, MakeTinyElf(options).bytes, &error)->Text(), "2.20.5");
  // A writable segment is not NCCL's constant string.
  options.segment_flags = PF_R | PF_W;
  EXPECT_FALSE(ReadBytes(dir, MakeTinyElf(options).bytes, &error));
  EXPECT_EQ(error, "no NCCL version string");
}

TEST(NcclVersionTest, AStringAcrossAChunkBoundaryIsFound) {
  // The reader searches 1 MiB at a time: a string that starts 5 bytes before the end of the first
  // chunk must still be found, once.
  TempDir dir;
  std::string error;
  std::string data((1u << 20) - 5, 'x');
  data += "NCCL version 2.27.7+cuda12.9";
  data += std::string(100, 'y');
  const auto version = ReadBytes(dir, MakeTinyElf({.data = data}).bytes, &error);
  ASSERT_TRUE(version) << error;
  EXPECT_EQ(version->Text(), "2.27.7");
}

TEST(NcclVersionTest, NoStringOrNoNumberIsNoVersion) {
  TempDir dir;
  std::string error;
  EXPECT_FALSE(ReadBytes(dir, MakeTinyElf({.data = "nothing to see"}).bytes, &error));
  EXPECT_EQ(error, "no NCCL version string");
  EXPECT_FALSE(ReadBytes(dir, MakeTinyElf({.data = "NCCL version unknown"}).bytes, &error));
  EXPECT_EQ(error, "no NCCL version string");
  EXPECT_FALSE(ReadBytes(dir, MakeTinyElf({.data = ""}).bytes, &error));
}

TEST(NcclVersionTest, HostileHeadersAreRefused) {
  TempDir dir;
  std::string error;
  const TinyElf elf = MakeTinyElf({.data = "NCCL version 2.21.5"});

  // .rodata far larger than the file, or starting past its end.
  std::string bytes = elf.bytes;
  Patch(bytes, elf.data_section_header + offsetof(Elf64_Shdr, sh_size), ~std::uint64_t{0} - 4);
  EXPECT_FALSE(ReadBytes(dir, bytes, &error));
  EXPECT_EQ(error, ".rodata extends past the end of the file");
  bytes = elf.bytes;
  Patch(bytes, elf.data_section_header + offsetof(Elf64_Shdr, sh_offset), ~std::uint64_t{0});
  EXPECT_FALSE(ReadBytes(dir, bytes, &error));

  // A section count beyond the limit, a name table index out of range, a name offset out of range.
  bytes = elf.bytes;
  Patch(bytes, offsetof(Elf64_Ehdr, e_shnum), std::uint16_t{0xffff});
  EXPECT_FALSE(ReadBytes(dir, bytes, &error));
  EXPECT_EQ(error, "bad section header table");
  bytes = elf.bytes;
  Patch(bytes, offsetof(Elf64_Ehdr, e_shstrndx), std::uint16_t{7});
  EXPECT_FALSE(ReadBytes(dir, bytes, &error));
  bytes = elf.bytes;
  Patch(bytes, elf.data_section_header + offsetof(Elf64_Shdr, sh_name), std::uint32_t{1u << 30});
  // A name out of range names no .rodata: the segment is searched instead.
  EXPECT_EQ(ReadBytes(dir, bytes, &error)->Text(), "2.21.5");
}

TEST(NcclVersionTest, TruncatedFilesAndOtherFilesAreRefused) {
  TempDir dir;
  std::string error;
  const TinyElf elf = MakeTinyElf({.data = "NCCL version 2.21.5"});
  // Every truncation: an error or the version (the string is before the section headers), never
  // a read past the end.
  for (std::size_t size = 0; size < elf.bytes.size(); ++size) {
    error.clear();
    const auto version = ReadBytes(dir, elf.bytes.substr(0, size), &error);
    EXPECT_TRUE(version ? version->Text() == "2.21.5" : !error.empty()) << size;
  }
  EXPECT_FALSE(
      ReadBytes(dir, "#!/bin/sh\necho NCCL version 2.21.5\n" + std::string(64, ' '), &error));
  EXPECT_EQ(error, "not an ELF file");
  EXPECT_FALSE(ReadFrom(dir.path(), &error));  // a directory
}

TEST(NcclVersionTest, LimitsBoundTheWork) {
  TempDir dir;
  std::string error;
  std::string data(4096, 'x');
  data += "NCCL version 2.21.5";
  const std::string bytes = MakeTinyElf({.data = data}).bytes;
  VersionLimits limits;
  limits.max_scan_bytes = 1024;
  EXPECT_FALSE(ReadBytes(dir, bytes, &error, limits));
  EXPECT_EQ(error, "scan limit reached");
  limits = {};
  limits.max_file_size = 1024;
  EXPECT_FALSE(ReadBytes(dir, bytes, &error, limits));
  EXPECT_EQ(error, "file larger than the limit");
}

}  // namespace
}  // namespace ncclscope::ebpf::elf
