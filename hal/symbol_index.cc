// SymbolIndex's look-ups (hal/elf_symbols.h): pure, over what probe/elf_symbols.cc read.
#include "hal/elf_symbols.h"

namespace ingero::hal {

const ElfSymbol* SymbolIndex::find_object(std::string_view name) const {
  auto it = objects_.find(std::string(name));
  return it == objects_.end() ? nullptr : &it->second;
}

const ElfSymbol* SymbolIndex::find_function(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  if (it == by_name_.end()) return nullptr;
  const ElfSymbol* best = nullptr;
  auto rank = [](const ElfSymbol& s) {
    return (s.from_dynsym ? 2 : 0) + (s.default_version ? 1 : 0);
  };
  for (const auto& s : it->second)
    if (!best || rank(s) > rank(*best)) best = &s;
  return best;
}

std::optional<uint64_t> SymbolIndex::file_offset(uint64_t vaddr) const {
  for (const auto& seg : loads_) {
    if (vaddr >= seg.vaddr && vaddr < seg.vaddr + seg.filesz) return vaddr - seg.vaddr + seg.offset;
  }
  return std::nullopt;
}

}  // namespace ingero::hal
