#include "agent/ebpf/elf/elf_symbols.h"

#include <elf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "platform/errno_text.h"
#include "platform/fd_io.h"

namespace ncclscope::ebpf::elf {
namespace {

#if defined(__x86_64__)
constexpr std::uint16_t kMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr std::uint16_t kMachine = EM_AARCH64;
#else
#error "unsupported architecture"
#endif

// offset + size lies within a file of `file_size` bytes, without overflow.
bool Within(std::uint64_t offset, std::uint64_t size, std::uint64_t file_size) {
  return offset <= file_size && size <= file_size - offset;
}

struct Table {
  bool present = false;
  std::uint64_t offset = 0;
  std::uint64_t count = 0;  // entries
  std::uint32_t link = 0;   // string table section index
  std::uint32_t index = 0;  // own section index
};

struct RawSymbol {
  std::string name;
  std::string version;
  bool hidden_version = false;  // "@VER" (not the default) in .dynsym
  const Elf64_Sym* sym = nullptr;
};

// A name Resolve() was asked for, and what the tables hold for it.
struct Want {
  std::string base;
  std::string version;  // empty: the default (or the only, unversioned) one
  std::vector<FunctionSymbol> found;
  std::vector<FunctionSymbol> hidden;  // non-default versions, when no version was asked for
};

struct Wants {
  std::map<std::string, Want, std::less<>> by_name;
  std::map<std::string, std::vector<std::string>, std::less<>> by_base;  // base -> asked names
};

// Splits each wanted name into base name and requested version.
Wants ParseWants(const std::vector<std::string>& names) {
  Wants wants;
  for (const std::string& name : names) {
    Want want;
    const auto at = name.find('@');
    want.base = name.substr(0, at);
    if (at != std::string::npos) {
      want.version = name.substr(name.find_first_not_of('@', at));
    }
    wants.by_base[want.base].push_back(name);
    wants.by_name.emplace(name, std::move(want));
  }
  return wants;
}

FunctionSymbol MakeSymbol(std::string_view name, const Elf64_Sym& sym, bool from_symtab,
                          std::string version) {
  FunctionSymbol f;
  f.name = std::string(name);
  f.version = std::move(version);
  f.address = sym.st_value;
  f.size = sym.st_size;
  f.weak = ELF64_ST_BIND(sym.st_info) == STB_WEAK;
  f.from_symtab = from_symtab;
  return f;
}

}  // namespace

struct SymbolFile::Impl {
  int fd = -1;
  Limits limits;
  std::uint64_t file_size = 0;
  std::vector<Elf64_Shdr> sections;
  std::vector<Elf64_Phdr> segments;
  Table dynsym;
  Table symtab;
  std::optional<std::uint32_t> versym_section;
  std::optional<std::uint32_t> verdef_section;

  // Open()'s steps after the ELF header: each checks against the file size and the limits and
  // says why not in *error.
  bool ReadProgramHeaders(const Elf64_Ehdr& eh, std::string* error);
  bool ReadSectionHeaders(const Elf64_Ehdr& eh, std::string* error);
  // Finds .dynsym, .symtab and the version sections; a section a symbol lookup reads must lie
  // within the file.
  bool FindTables(std::string* error);

  // Resolve()'s steps: gather candidates from .dynsym (with their versions) and from .symtab,
  // then pick one per name or say why not.
  std::vector<std::uint16_t> ReadVersym() const;
  void FindInDynsym(Wants& wants, std::string* error) const;
  void FindInSymtab(Wants& wants, std::string* error) const;
  Resolution Choose(const Want& want, const std::string& error) const;

  bool LoadStrings(std::uint32_t section, std::string* out, std::string* error) const {
    if (section == 0 || section >= sections.size()) {
      *error = "symbol table links to no string table";
      return false;
    }
    const Elf64_Shdr& s = sections[section];
    if (s.sh_type != SHT_STRTAB) {
      *error = "symbol table's string table has the wrong type";
      return false;
    }
    if (s.sh_size > limits.max_string_table) {
      *error = "string table larger than the limit";
      return false;
    }
    out->resize(s.sh_size);
    if (!platform::PreadExactly(fd, out->data(), out->size(), s.sh_offset)) {
      *error = "cannot read string table";
      return false;
    }
    return true;
  }

  // NUL-terminated string at `offset` of `strings`, or nullopt when out of bounds/unterminated.
  static std::optional<std::string_view> StringAt(const std::string& strings,
                                                  std::uint64_t offset) {
    if (offset >= strings.size()) return std::nullopt;
    const auto begin = strings.begin() + static_cast<std::ptrdiff_t>(offset);
    const auto end = std::find(begin, strings.end(), '\0');
    if (end == strings.end()) return std::nullopt;
    return std::string_view(&*begin, static_cast<std::size_t>(end - begin));
  }

  // Version index -> name, from .gnu.version_d (bounded walk of the linked list).
  std::map<std::uint16_t, std::string> VersionNames(const std::string& dynstr) const {
    std::map<std::uint16_t, std::string> names;
    if (!verdef_section) return names;
    const Elf64_Shdr& s = sections[*verdef_section];
    std::uint64_t at = s.sh_offset;
    const std::uint64_t end = s.sh_offset + s.sh_size;
    for (std::uint32_t n = 0; n < limits.max_version_definitions; ++n) {
      Elf64_Verdef def{};
      if (!Within(at, sizeof(def), end) || !platform::PreadExactly(fd, &def, sizeof(def), at))
        break;
      Elf64_Verdaux aux{};
      if (def.vd_cnt > 0 && Within(at + def.vd_aux, sizeof(aux), end) &&
          platform::PreadExactly(fd, &aux, sizeof(aux), at + def.vd_aux)) {
        if (auto name = StringAt(dynstr, aux.vda_name)) {
          names[static_cast<std::uint16_t>(def.vd_ndx & 0x7fff)] = std::string(*name);
        }
      }
      if (def.vd_next == 0) break;
      at += def.vd_next;
    }
    return names;
  }

  std::optional<std::uint64_t> FileOffset(std::uint64_t address) const {
    for (const Elf64_Phdr& p : segments) {
      if (p.p_type != PT_LOAD || (p.p_flags & PF_X) == 0) continue;
      if (address >= p.p_vaddr && address - p.p_vaddr < p.p_filesz) {
        const std::uint64_t offset = address - p.p_vaddr + p.p_offset;
        if (offset < file_size) return offset;
      }
    }
    return std::nullopt;
  }

  // Walks one symbol table in chunks, calling visit(name, sym, index) for each defined function.
  template <typename Visit>
  bool Walk(const Table& table, const std::string& strings, std::string* error, Visit visit) const {
    constexpr std::uint64_t kChunk = 8192;
    std::vector<Elf64_Sym> chunk;
    for (std::uint64_t first = 0; first < table.count; first += kChunk) {
      const std::uint64_t n = std::min(kChunk, table.count - first);
      chunk.resize(n);
      if (!platform::PreadExactly(fd, chunk.data(), n * sizeof(Elf64_Sym),
                                  table.offset + first * sizeof(Elf64_Sym))) {
        *error = "cannot read symbol table";
        return false;
      }
      for (std::uint64_t i = 0; i < n; ++i) {
        const Elf64_Sym& sym = chunk[i];
        const unsigned type = ELF64_ST_TYPE(sym.st_info);
        const unsigned bind = ELF64_ST_BIND(sym.st_info);
        if (type != STT_FUNC && type != STT_GNU_IFUNC) continue;
        if (bind != STB_GLOBAL && bind != STB_WEAK && bind != STB_LOCAL) continue;
        if (sym.st_shndx == SHN_UNDEF || sym.st_value == 0) continue;
        const auto name = StringAt(strings, sym.st_name);
        if (!name || name->empty()) continue;
        visit(*name, sym, first + i);
      }
    }
    return true;
  }
};

namespace {

// Why the ELF header is not one this reader handles; nullptr when it is.
const char* ElfHeaderRejection(const Elf64_Ehdr& eh) {
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) return "not an ELF file";
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB) {
    return "not a 64-bit little-endian ELF file";
  }
  if (eh.e_machine != kMachine) return "ELF file for another architecture";
  if (eh.e_type != ET_DYN && eh.e_type != ET_EXEC) {
    return "ELF file is not an executable or shared object";
  }
  return nullptr;
}

bool IsSymbolSection(std::uint32_t type) {
  return type == SHT_DYNSYM || type == SHT_SYMTAB || type == SHT_STRTAB || type == SHT_GNU_versym ||
         type == SHT_GNU_verdef;
}

}  // namespace

bool SymbolFile::Impl::ReadProgramHeaders(const Elf64_Ehdr& eh, std::string* error) {
  if (eh.e_phnum == 0 || eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == PN_XNUM ||
      !Within(eh.e_phoff, std::uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr), file_size)) {
    *error = "bad program header table";
    return false;
  }
  segments.resize(eh.e_phnum);
  if (!platform::PreadExactly(fd, segments.data(), eh.e_phnum * sizeof(Elf64_Phdr), eh.e_phoff)) {
    *error = "cannot read program headers";
    return false;
  }
  return true;
}

bool SymbolFile::Impl::ReadSectionHeaders(const Elf64_Ehdr& eh, std::string* error) {
  // Extended numbering (e_shnum == 0 with a non-zero e_shoff) is not used by shared libraries;
  // reject it rather than guess.
  if (eh.e_shnum == 0 || eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum > limits.max_sections ||
      !Within(eh.e_shoff, std::uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr), file_size)) {
    *error = "bad or missing section header table (stripped of sections?)";
    return false;
  }
  sections.resize(eh.e_shnum);
  if (!platform::PreadExactly(fd, sections.data(), eh.e_shnum * sizeof(Elf64_Shdr), eh.e_shoff)) {
    *error = "cannot read section headers";
    return false;
  }
  return true;
}

bool SymbolFile::Impl::FindTables(std::string* error) {
  for (std::uint32_t i = 0; i < sections.size(); ++i) {
    const Elf64_Shdr& s = sections[i];
    if (s.sh_type == SHT_NOBITS || s.sh_type == SHT_NULL) continue;
    if (!Within(s.sh_offset, s.sh_size, file_size)) {
      if (IsSymbolSection(s.sh_type)) {
        *error = "section " + std::to_string(i) + " extends past the end of the file";
        return false;
      }
      continue;
    }
    Table* table = s.sh_type == SHT_DYNSYM ? &dynsym : s.sh_type == SHT_SYMTAB ? &symtab : nullptr;
    if (table != nullptr && !table->present) {
      if (s.sh_entsize != sizeof(Elf64_Sym) || s.sh_size % sizeof(Elf64_Sym) != 0) {
        *error = "symbol table with a bad entry size";
        return false;
      }
      if (s.sh_size / sizeof(Elf64_Sym) > limits.max_symbols) {
        *error = "symbol table larger than the limit";
        return false;
      }
      *table = {true, s.sh_offset, s.sh_size / sizeof(Elf64_Sym), s.sh_link, i};
    } else if (s.sh_type == SHT_GNU_versym) {
      versym_section = i;
    } else if (s.sh_type == SHT_GNU_verdef) {
      verdef_section = i;
    }
  }
  if (!dynsym.present && !symtab.present) {
    *error = "no symbol table (stripped)";
    return false;
  }
  return true;
}

std::unique_ptr<SymbolFile> SymbolFile::Open(int fd, std::string* error, Limits limits) {
  auto impl = std::make_unique<Impl>();
  impl->fd = fd;
  impl->limits = limits;
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    *error = std::string("cannot stat: ") + platform::ErrnoText(errno).c_str();
    return nullptr;
  }
  if (!S_ISREG(st.st_mode)) {
    *error = "not a regular file";
    return nullptr;
  }
  impl->file_size = static_cast<std::uint64_t>(st.st_size);
  if (impl->file_size > limits.max_file_size) {
    *error = "file larger than the limit";
    return nullptr;
  }
  Elf64_Ehdr eh{};
  if (impl->file_size < sizeof(eh) || !platform::PreadExactly(fd, &eh, sizeof(eh), 0)) {
    *error = "too short for an ELF header";
    return nullptr;
  }
  if (const char* rejection = ElfHeaderRejection(eh)) {
    *error = rejection;
    return nullptr;
  }
  // Program headers turn addresses into file offsets; section headers say where the symbol
  // tables are.
  if (!impl->ReadProgramHeaders(eh, error) || !impl->ReadSectionHeaders(eh, error) ||
      !impl->FindTables(error)) {
    return nullptr;
  }
  return std::unique_ptr<SymbolFile>(new SymbolFile(std::move(impl)));
}

SymbolFile::SymbolFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SymbolFile::~SymbolFile() = default;

bool SymbolFile::has_dynsym() const { return impl_->dynsym.present; }
bool SymbolFile::has_symtab() const { return impl_->symtab.present; }

std::vector<std::uint16_t> SymbolFile::Impl::ReadVersym() const {
  std::vector<std::uint16_t> versym;
  if (!versym_section) return versym;
  const Elf64_Shdr& s = sections[*versym_section];
  if (s.sh_size == dynsym.count * sizeof(std::uint16_t)) {
    versym.resize(dynsym.count);
    if (!platform::PreadExactly(fd, versym.data(), s.sh_size, s.sh_offset)) versym.clear();
  }
  return versym;
}

void SymbolFile::Impl::FindInDynsym(Wants& wants, std::string* error) const {
  std::string dynstr;
  if (!LoadStrings(dynsym.link, &dynstr, error)) return;
  const std::vector<std::uint16_t> versym = ReadVersym();
  const auto version_names = VersionNames(dynstr);
  Walk(dynsym, dynstr, error,
       [&](std::string_view name, const Elf64_Sym& sym, std::uint64_t index) {
         if (ELF64_ST_BIND(sym.st_info) == STB_LOCAL) return;
         auto base = wants.by_base.find(name);
         if (base == wants.by_base.end()) return;
         std::string version;
         bool hidden = false;
         if (index < versym.size()) {
           hidden = (versym[index] & 0x8000) != 0;
           const auto v = version_names.find(versym[index] & 0x7fff);
           // Index 1 is the file's own base definition: treat as unversioned.
           if (v != version_names.end() && (versym[index] & 0x7fff) > 1) {
             version = v->second;
           }
         }
         for (const std::string& wanted : base->second) {
           Want& want = wants.by_name.at(wanted);
           FunctionSymbol f = MakeSymbol(name, sym, false, version);
           if (!want.version.empty()) {
             if (want.version == version) want.found.push_back(std::move(f));
           } else if (hidden) {
             want.hidden.push_back(std::move(f));
           } else {
             want.found.push_back(std::move(f));
           }
         }
       });
}

void SymbolFile::Impl::FindInSymtab(Wants& wants, std::string* error) const {
  std::string strtab;
  if (!LoadStrings(symtab.link, &strtab, error)) return;
  Walk(symtab, strtab, error, [&](std::string_view name, const Elf64_Sym& sym, std::uint64_t) {
    auto base = wants.by_base.find(name);
    if (base == wants.by_base.end()) return;
    for (const std::string& wanted : base->second) {
      Want& want = wants.by_name.at(wanted);
      if (!want.version.empty() || !want.hidden.empty()) continue;
      if (want.found.empty() || want.found.front().from_symtab) {
        want.found.push_back(MakeSymbol(name, sym, true, ""));
      }
    }
  });
}

Resolution SymbolFile::Impl::Choose(const Want& want, const std::string& error) const {
  Resolution r;
  const std::vector<FunctionSymbol>& found = want.found;
  if (found.empty()) {
    r.error = !want.hidden.empty() ? "only non-default versions (e.g. " + want.base + "@" +
                                         want.hidden.front().version + ")"
              : !error.empty() ? error
                               : "not found";
    return r;
  }
  // Several definitions: fine when they share one address (aliases); otherwise prefer
  // non-weak, and refuse to guess between two different strong definitions.
  std::set<std::uint64_t> addresses;
  for (const auto& f : found) addresses.insert(f.address);
  const FunctionSymbol* pick = &found.front();
  if (addresses.size() > 1) {
    std::vector<const FunctionSymbol*> strong;
    for (const auto& f : found) {
      if (!f.weak) strong.push_back(&f);
    }
    std::set<std::uint64_t> strong_addresses;
    for (const auto* f : strong) strong_addresses.insert(f->address);
    if (strong_addresses.size() != 1) {
      r.error = "ambiguous: " + std::to_string(addresses.size()) + " definitions";
      return r;
    }
    pick = strong.front();
  }
  const auto offset = FileOffset(pick->address);
  if (!offset) {
    r.error = "address is outside every executable segment";
    return r;
  }
  r.symbol = *pick;
  r.symbol->offset = *offset;
  return r;
}

std::map<std::string, Resolution, std::less<>> SymbolFile::Resolve(
    const std::vector<std::string>& names) {
  Wants wants = ParseWants(names);
  std::string error;
  if (impl_->dynsym.present) impl_->FindInDynsym(wants, &error);
  // .symtab for names .dynsym did not have (static NCCL inside another library).
  bool need_symtab = false;
  for (const auto& [name, want] : wants.by_name) {
    need_symtab |= want.found.empty() && want.hidden.empty();
  }
  if (need_symtab && impl_->symtab.present) {
    std::string symtab_error;
    impl_->FindInSymtab(wants, &symtab_error);
    if (error.empty()) error = symtab_error;
  }
  std::map<std::string, Resolution, std::less<>> out;
  for (const auto& [name, want] : wants.by_name) out.emplace(name, impl_->Choose(want, error));
  return out;
}

}  // namespace ncclscope::ebpf::elf
