// The bounded ELF reader on real libraries (NCCL, libibverbs when present), tests' fakes with
// rdma-core's symbol versioning and a static-NCCL stand-in, and on hostile input: truncations and
// corruptions of a real library must give an error or a result, never a crash or a hang.

#include "agent/ebpf/elf/elf_symbols.h"

#include <elf.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <random>

#include "agent/ebpf/proc/unique_fd.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace ncclscope::ebpf::elf {
namespace {

using testing::ReadFile;
using testing::TempDir;

constexpr const char* kRealNccl = "/usr/local/cuda/lib/libnccl.so.2";
constexpr const char* kRealVerbs = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1";

std::map<std::string, Resolution, std::less<>> ResolveIn(const std::string& path,
                                                         const std::vector<std::string>& names,
                                                         std::string* error) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    *error = "cannot open " + path;
    return {};
  }
  auto file = SymbolFile::Open(fd.get(), error);
  if (!file) return {};
  return file->Resolve(names);
}

TEST(ElfSymbolsTest, RealNcclWeakAndGlobalAliasesShareOneOffset) {
  if (access(kRealNccl, R_OK) != 0) GTEST_SKIP() << kRealNccl << " not installed";
  std::string error;
  auto r = ResolveIn(kRealNccl, {"ncclAllReduce", "pncclAllReduce", "ncclBcast", "ncclNoSuchApi"},
                     &error);
  ASSERT_TRUE(error.empty()) << error;
  ASSERT_TRUE(r["ncclAllReduce"].symbol) << r["ncclAllReduce"].error;
  ASSERT_TRUE(r["pncclAllReduce"].symbol);
  EXPECT_TRUE(r["ncclAllReduce"].symbol->weak);
  EXPECT_FALSE(r["pncclAllReduce"].symbol->weak);
  EXPECT_EQ(r["ncclAllReduce"].symbol->offset, r["pncclAllReduce"].symbol->offset);
  EXPECT_FALSE(r["ncclAllReduce"].symbol->from_symtab);
  // NCCL 2.28.9: ncclAllReduce at 0x64a30 in a segment mapped at offset == vaddr.
  EXPECT_EQ(r["ncclAllReduce"].symbol->address, 0x64a30u);
  EXPECT_EQ(r["ncclAllReduce"].symbol->offset, 0x64a30u);
  EXPECT_FALSE(r["ncclNoSuchApi"].symbol);
  EXPECT_EQ(r["ncclNoSuchApi"].error, "not found");
}

TEST(ElfSymbolsTest, FakeVerbsPicksTheDefaultVersion) {
  const std::string path = std::string(NCCLSCOPE_FAKE_VERBS);
  std::string error;
  auto r = ResolveIn(path,
                     {"ibv_create_qp", "ibv_create_qp@@IBVERBS_1.1", "ibv_create_qp@IBVERBS_1.0",
                      "ibv_reg_mr_iova2", "ibv_reg_dmabuf_mr", "ibv_create_qp@IBVERBS_9.9"},
                     &error);
  ASSERT_TRUE(error.empty()) << error;
  ASSERT_TRUE(r["ibv_create_qp"].symbol) << r["ibv_create_qp"].error;
  ASSERT_TRUE(r["ibv_create_qp@IBVERBS_1.0"].symbol) << r["ibv_create_qp@IBVERBS_1.0"].error;
  EXPECT_EQ(r["ibv_create_qp"].symbol->version, "IBVERBS_1.1");
  EXPECT_EQ(r["ibv_create_qp"].symbol->offset, r["ibv_create_qp@@IBVERBS_1.1"].symbol->offset);
  EXPECT_NE(r["ibv_create_qp"].symbol->offset, r["ibv_create_qp@IBVERBS_1.0"].symbol->offset);
  EXPECT_EQ(r["ibv_reg_mr_iova2"].symbol->version, "IBVERBS_1.8");
  EXPECT_EQ(r["ibv_reg_dmabuf_mr"].symbol->version, "IBVERBS_1.12");
  EXPECT_FALSE(r["ibv_create_qp@IBVERBS_9.9"].symbol);
}

TEST(ElfSymbolsTest, RealLibibverbsDefaultVersionMatchesReadelf) {
  if (access(kRealVerbs, R_OK) != 0) GTEST_SKIP() << kRealVerbs << " not installed";
  std::string error;
  auto r = ResolveIn(kRealVerbs,
                     {"ibv_create_qp", "ibv_modify_qp", "ibv_reg_mr", "ibv_reg_mr_iova2"}, &error);
  ASSERT_TRUE(error.empty()) << error;
  for (const char* name : {"ibv_create_qp", "ibv_modify_qp", "ibv_reg_mr"}) {
    ASSERT_TRUE(r[name].symbol) << name << ": " << r[name].error;
    EXPECT_EQ(r[name].symbol->version, "IBVERBS_1.1") << name;
    // Cross-check with binutils: the "@@IBVERBS_1.1" line's value.
    const auto dump =
        testing::RunCommand({"/bin/sh", "-c",
                             std::string("readelf -W --dyn-syms ") + kRealVerbs + " | awk '$8==\"" +
                                 name + "@@IBVERBS_1.1\"{print $2}'"});
    EXPECT_EQ(std::stoull(dump.output, nullptr, 16), r[name].symbol->address) << name;
  }
  ASSERT_TRUE(r["ibv_reg_mr_iova2"].symbol);
}

TEST(ElfSymbolsTest, SymtabFallbackFindsStaticallyLinkedNccl) {
  std::string error;
  auto r = ResolveIn(NCCLSCOPE_STATIC_NCCL, {"ncclAllReduce", "ncclSend", "torch_entry"}, &error);
  ASSERT_TRUE(error.empty()) << error;
  ASSERT_TRUE(r["ncclAllReduce"].symbol) << r["ncclAllReduce"].error;
  EXPECT_TRUE(r["ncclAllReduce"].symbol->from_symtab);
  EXPECT_FALSE(r["torch_entry"].symbol->from_symtab);

  // Stripped of .symtab, the hidden API is gone but the file is still read cleanly.
  TempDir dir;
  const std::string stripped = dir.path() + "/stripped.so";
  ASSERT_EQ(
      testing::RunCommand({"/usr/bin/strip", "--strip-all", "-o", stripped, NCCLSCOPE_STATIC_NCCL})
          .exit_code,
      0);
  r = ResolveIn(stripped, {"ncclAllReduce", "torch_entry"}, &error);
  ASSERT_TRUE(error.empty()) << error;
  EXPECT_FALSE(r["ncclAllReduce"].symbol);
  EXPECT_TRUE(r["torch_entry"].symbol);
}

TEST(ElfSymbolsTest, RejectsNonElfNonRegularAndForeignFiles) {
  TempDir dir;
  std::string error;
  ResolveIn(dir.WriteFile("text", std::string(200, 'x')), {"x"}, &error);
  EXPECT_EQ(error, "not an ELF file");
  ResolveIn(dir.WriteFile("short",
                          "\x7f"
                          "ELF"),
            {"x"}, &error);
  EXPECT_EQ(error, "too short for an ELF header");
  UniqueFd d(open(dir.path().c_str(), O_RDONLY | O_DIRECTORY));
  EXPECT_EQ(SymbolFile::Open(d.get(), &error), nullptr);
  EXPECT_EQ(error, "not a regular file");

  // Same library, other machine.
  std::string bytes = ReadFile(NCCLSCOPE_FAKE_VERBS);
  auto* header = reinterpret_cast<Elf64_Ehdr*>(bytes.data());
  header->e_machine = EM_AARCH64 + EM_X86_64 - header->e_machine;
  ResolveIn(dir.WriteFile("foreign.so", bytes), {"ibv_create_qp"}, &error);
  EXPECT_EQ(error, "ELF file for another architecture");

  // No section headers at all (sstrip-style): rejected, not guessed.
  bytes = ReadFile(NCCLSCOPE_FAKE_VERBS);
  header = reinterpret_cast<Elf64_Ehdr*>(bytes.data());
  header->e_shnum = 0;
  header->e_shoff = 0;
  ResolveIn(dir.WriteFile("nosections.so", bytes), {"ibv_create_qp"}, &error);
  EXPECT_NE(error.find("section header"), std::string::npos) << error;

  // A symbol table claiming to extend past the end of the file.
  bytes = ReadFile(NCCLSCOPE_FAKE_VERBS);
  header = reinterpret_cast<Elf64_Ehdr*>(bytes.data());
  auto* sections = reinterpret_cast<Elf64_Shdr*>(bytes.data() + header->e_shoff);
  for (int i = 0; i < header->e_shnum; ++i) {
    if (sections[i].sh_type == SHT_DYNSYM) sections[i].sh_size = 1ULL << 40;
  }
  ResolveIn(dir.WriteFile("huge.so", bytes), {"ibv_create_qp"}, &error);
  EXPECT_NE(error.find("past the end"), std::string::npos) << error;
}

// Fuzz-ish: every truncation point in the headers and random byte flips anywhere. Each attempt
// must end in an error or a resolution with an offset inside the file.
TEST(ElfSymbolsTest, SurvivesTruncationAndCorruption) {
  const std::string original = ReadFile(NCCLSCOPE_FAKE_VERBS);
  ASSERT_GT(original.size(), 4096u);
  TempDir dir;
  const std::vector<std::string> names = {"ibv_create_qp", "ibv_reg_mr", "ibv_reg_mr_iova2",
                                          "ibv_modify_qp@IBVERBS_1.0"};
  auto attempt = [&](const std::string& bytes) {
    const std::string path = dir.WriteFile("case.so", bytes);
    UniqueFd fd(open(path.c_str(), O_RDONLY));
    std::string error;
    auto file = SymbolFile::Open(fd.get(), &error);
    if (!file) {
      EXPECT_FALSE(error.empty());
      return;
    }
    for (const auto& [name, r] : file->Resolve(names)) {
      if (r.symbol) {
        EXPECT_LT(r.symbol->offset, bytes.size()) << name;
      }
    }
  };
  for (std::size_t cut = 0; cut < original.size(); cut += cut < 256 ? 1 : 97) {
    attempt(original.substr(0, cut));
  }
  std::mt19937 random(12345);
  for (int round = 0; round < 400; ++round) {
    std::string bytes = original;
    const int flips = 1 + static_cast<int>(random() % 16);
    for (int i = 0; i < flips; ++i) {
      // Half of the flips hit the ELF and section headers, where damage matters most.
      const std::size_t at = (round % 2 == 0) ? random() % 64 : random() % bytes.size();
      bytes[at] = static_cast<char>(random());
    }
    attempt(bytes);
  }
}

}  // namespace
}  // namespace ncclscope::ebpf::elf
