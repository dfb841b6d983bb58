// What NCCL's dlopen of the plugin needs from the process: nothing that can run out. A library
// that uses static TLS (initial-exec thread-locals, DF_STATIC_TLS) loads only while glibc's small
// static TLS surplus lasts, and in crowded processes (PyTorch with its dozens of libraries) it
// does not: "cannot allocate memory in static TLS block". The plugin's thread-locals use TLS
// descriptors instead (plugin/src/pools.cc).

#include <elf.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace ncclscope::testing {
namespace {

// DT_FLAGS of a 64-bit little-endian shared object (0 when absent); -1 when it cannot be read.
long long DynamicFlags(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> file((std::istreambuf_iterator<char>(in)), {});
  if (file.size() < sizeof(Elf64_Ehdr)) return -1;
  Elf64_Ehdr eh;
  std::memcpy(&eh, file.data(), sizeof(eh));
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64)
    return -1;
  for (std::size_t i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    const std::size_t at = eh.e_phoff + i * sizeof(ph);
    if (at + sizeof(ph) > file.size()) return -1;
    std::memcpy(&ph, file.data() + at, sizeof(ph));
    if (ph.p_type != PT_DYNAMIC) continue;
    for (std::size_t off = ph.p_offset; off + sizeof(Elf64_Dyn) <= ph.p_offset + ph.p_filesz &&
                                        off + sizeof(Elf64_Dyn) <= file.size();
         off += sizeof(Elf64_Dyn)) {
      Elf64_Dyn dyn;
      std::memcpy(&dyn, file.data() + off, sizeof(dyn));
      if (dyn.d_tag == DT_NULL) break;
      if (dyn.d_tag == DT_FLAGS) return static_cast<long long>(dyn.d_un.d_val);
    }
    return 0;
  }
  return -1;
}

TEST(PluginLoadTest, NeedsNoStaticTls) {
  const long long flags = DynamicFlags(NCCLSCOPE_PLUGIN_PATH);
  ASSERT_GE(flags, 0) << "cannot read the dynamic section of " << NCCLSCOPE_PLUGIN_PATH;
  EXPECT_EQ(flags & DF_STATIC_TLS, 0) << "the plugin needs static TLS";
}

TEST(PluginLoadTest, LoadsAndRecordsWithNoStaticTlsSurplusLeft) {
  // No optional static TLS surplus: what a dlopen()ed library with initial-exec TLS would need.
  TempDir dir;
  Subprocess job(
      {NCCLSCOPE_REPLAY_PATH, "--plugin", NCCLSCOPE_PLUGIN_PATH, "--comms", "1", "--colls", "4",
       "--p2p", "0", "--alltoall", "0"},
      dir.path(),
      {"GLIBC_TUNABLES=glibc.rtld.optional_static_tls=0", "NCCLSCOPE_RING_DIR=" + dir.path()});
  ASSERT_EQ(job.Wait(std::chrono::seconds(60)), 0) << job.Stderr();
  EXPECT_NE(job.Stdout().find("expect "), std::string::npos) << job.Stdout();
}

}  // namespace
}  // namespace ncclscope::testing
