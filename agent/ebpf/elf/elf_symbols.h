#pragma once

// A bounded reader of ELF symbol tables, for finding where to place uprobes in libraries that
// other processes map. The files are chosen by those processes (their paths come from
// /proc/<pid>/maps), so everything read is checked against the file size and hard limits, and a
// malformed, truncated or hostile file is rejected with a reason instead of trusted.
//
// What it resolves, and why (see ../shared/reference/ebpf.md §1.3d):
//  - .dynsym first: exported API symbols stay there even in stripped libraries. NCCL exports
//    each API as a WEAK `ncclX` plus a GLOBAL `pncclX` at the same address; either name resolves.
//  - symbol versions (.gnu.version + .gnu.version_d): libibverbs exports `ibv_create_qp` twice,
//    @IBVERBS_1.0 (compat, hidden) and @@IBVERBS_1.1 (default). A bare name picks the default
//    version, as the dynamic linker does for new links; "name@VER" / "name@@VER" pick that one.
//  - .symtab when .dynsym lacks the name: statically linked NCCL (e.g. inside libtorch_cuda.so)
//    keeps its API only there, when the file is not stripped.
// The result is a file offset (what uprobe attach takes), computed through the executable
// PT_LOAD segment that holds the symbol's address.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ncclscope::ebpf::elf {

struct Limits {
  std::uint64_t max_file_size = std::uint64_t{4} << 30;  // libnccl with .symtab is ~220 MB
  std::uint32_t max_sections = 8192;
  std::uint64_t max_symbols = 4'000'000;
  std::uint64_t max_string_table = std::uint64_t{256} << 20;
  std::uint32_t max_version_definitions = 4096;
};

// Where one function lives in the file.
struct FunctionSymbol {
  std::string name;           // the symbol as found, e.g. "ibv_create_qp"
  std::string version;        // its version name ("IBVERBS_1.1"), empty if unversioned
  std::uint64_t address = 0;  // st_value (virtual address in the object)
  std::uint64_t offset = 0;   // file offset of the first instruction: the uprobe offset
  std::uint64_t size = 0;     // st_size
  bool weak = false;          // STB_WEAK
  bool from_symtab = false;   // found in .symtab, not .dynsym
};

struct Resolution {
  std::optional<FunctionSymbol> symbol;
  std::string error;  // why not, when symbol is empty ("not found", "ambiguous: ...")
};

class SymbolFile {
 public:
  // Reads and checks the headers of an ELF object open at `fd` (not taken over; only pread is
  // used, so the caller may share the fd). Returns nullptr with *error set for anything that is
  // not a sane ELF64 object of this machine's architecture with a symbol table.
  static std::unique_ptr<SymbolFile> Open(int fd, std::string* error, Limits limits = {});
  ~SymbolFile();
  SymbolFile(const SymbolFile&) = delete;
  SymbolFile& operator=(const SymbolFile&) = delete;

  // Resolves function names ("name", "name@VER" or "name@@VER") in one pass over .dynsym and,
  // for names still missing, one pass over .symtab. Every name gets an entry.
  std::map<std::string, Resolution, std::less<>> Resolve(const std::vector<std::string>& names);

  bool has_dynsym() const;
  bool has_symtab() const;

 private:
  struct Impl;
  explicit SymbolFile(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ncclscope::ebpf::elf
