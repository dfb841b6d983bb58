#include "tests/support/tiny_elf.h"

#include <elf.h>

#include <cstring>
#include <vector>

namespace ncclscope::testing {
namespace {

template <typename T>
void Put(std::string& bytes, std::size_t offset, const T& value) {
  if (bytes.size() < offset + sizeof(T)) bytes.resize(offset + sizeof(T));
  std::memcpy(bytes.data() + offset, &value, sizeof(T));
}

}  // namespace

TinyElf MakeTinyElf(const TinyElfOptions& options) {
  TinyElf out;
  out.data_offset = 0x100;
  const std::string names = std::string("\0.shstrtab\0", 11) + options.section_name + '\0';
  const std::size_t names_offset = out.data_offset + options.data.size();
  const std::size_t headers_offset = (names_offset + names.size() + 7) & ~std::size_t{7};

  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_type = ET_DYN;
#if defined(__x86_64__)
  eh.e_machine = EM_X86_64;
#elif defined(__aarch64__)
  eh.e_machine = EM_AARCH64;
#endif
  eh.e_version = EV_CURRENT;
  eh.e_ehsize = sizeof(Elf64_Ehdr);
  eh.e_phoff = sizeof(Elf64_Ehdr);
  eh.e_phentsize = sizeof(Elf64_Phdr);
  eh.e_phnum = 1;
  eh.e_shentsize = sizeof(Elf64_Shdr);
  if (options.section_headers) {
    eh.e_shoff = headers_offset;
    eh.e_shnum = 3;
    eh.e_shstrndx = 1;
  }
  Put(out.bytes, 0, eh);

  Elf64_Phdr ph{};
  ph.p_type = PT_LOAD;
  ph.p_flags = options.segment_flags;
  ph.p_offset = out.data_offset;
  ph.p_vaddr = out.data_offset;
  ph.p_paddr = out.data_offset;
  ph.p_filesz = options.data.size();
  ph.p_memsz = options.data.size();
  ph.p_align = 0x1000;
  Put(out.bytes, sizeof(Elf64_Ehdr), ph);

  out.bytes.resize(out.data_offset);
  out.bytes += options.data;
  out.bytes += names;
  if (!options.section_headers) return out;

  std::vector<Elf64_Shdr> sections(3);
  sections[1].sh_name = 1;
  sections[1].sh_type = SHT_STRTAB;
  sections[1].sh_offset = names_offset;
  sections[1].sh_size = names.size();
  sections[2].sh_name = 11;
  sections[2].sh_type = SHT_PROGBITS;
  sections[2].sh_flags = SHF_ALLOC;
  sections[2].sh_addr = out.data_offset;
  sections[2].sh_offset = out.data_offset;
  sections[2].sh_size = options.data.size();
  for (std::size_t i = 0; i < sections.size(); ++i) {
    Put(out.bytes, headers_offset + i * sizeof(Elf64_Shdr), sections[i]);
  }
  out.data_section_header = headers_offset + 2 * sizeof(Elf64_Shdr);
  return out;
}

}  // namespace ncclscope::testing
