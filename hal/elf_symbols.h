// ELF symbols as data: the facts a backend's match() and the probe manager need to attach
// uprobes to a file. Reading them (libelf) is probe/elf_symbols.h's SymbolIndex::load().
//
// SymbolIndex::load() reads .dynsym (with GNU symbol versions) and .symtab of one file.
// A file that is not ELF, is truncated, or is for another machine yields an Error with a
// message naming the file and the reason; it never crashes. A stripped file is not an error:
// it simply has no .symtab, and has_symtab() says so.
//
// Lookup rules (find_function):
//   * only defined FUNC/IFUNC symbols count;
//   * .dynsym wins over .symtab for the same name;
//   * among versions of one name, the default one (readelf's `sym@@VER`) wins; a hidden
//     version (`sym@VER`) is used only when no default exists.
// Weak aliases are ordinary entries: `ncclAllReduce` (WEAK) and `pncclAllReduce` (GLOBAL)
// both resolve, to the same address.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "hal/result.h"

namespace ingero::hal {

struct ElfSymbol {
  uint64_t value = 0;  // st_value: virtual address
  uint64_t size = 0;
  uint8_t bind = 0;  // STB_*
  uint8_t type = 0;  // STT_*
  bool from_dynsym = false;
  bool default_version = true;  // false for a hidden `sym@VER`
  std::string version;          // "" when unversioned
};

struct ElfSegment {
  uint64_t vaddr = 0, offset = 0, filesz = 0, memsz = 0;
  uint32_t flags = 0;  // PF_*
};

// Which names to keep from .symtab (which can hold hundreds of thousands of names in big
// libraries). .dynsym is always kept whole. Null keeps everything.
using SymbolFilter = std::function<bool(std::string_view)>;

class SymbolIndex {
 public:
  // Reads the file with libelf: defined in probe/elf_symbols.cc, so a caller links
  // ingero_probe (hal/ itself never reads a file).
  static Result<std::shared_ptr<const SymbolIndex>> load(const std::string& path,
                                                         const SymbolFilter& symtab_filter = {});

  const ElfSymbol* find_function(std::string_view name) const;
  // Defined data objects (STT_OBJECT) of .dynsym: _PyRuntime, PyCode_Type, ...
  const ElfSymbol* find_object(std::string_view name) const;
  // Translates a symbol's virtual address to the file offset uprobes need, via PT_LOAD.
  std::optional<uint64_t> file_offset(uint64_t vaddr) const;

  const std::string& soname() const { return soname_; }
  const std::string& build_id() const { return build_id_; }  // lowercase hex, "" if none
  bool has_symtab() const { return has_symtab_; }
  const std::vector<ElfSegment>& loads() const { return loads_; }
  // Names defined in the file's version definitions (.gnu.version_d), e.g. "hip_4.2".
  const std::vector<std::string>& version_definitions() const { return verdefs_; }

 private:
  friend struct SymbolLoader;  // load()'s steps (probe/elf_symbols.cc)
  std::unordered_map<std::string, std::vector<ElfSymbol>> by_name_;
  std::unordered_map<std::string, ElfSymbol> objects_;
  std::vector<ElfSegment> loads_;
  std::vector<std::string> verdefs_;
  std::string soname_, build_id_;
  bool has_symtab_ = false;
};

// Identity used to cache per-file work: (device, inode, mtime, size).
struct FileIdentity {
  dev_t dev = 0;
  ino_t ino = 0;
  int64_t mtime_ns = 0;
  int64_t size = 0;
  bool operator==(const FileIdentity&) const = default;
};
struct FileIdentityHash {
  size_t operator()(const FileIdentity& f) const {
    return std::hash<uint64_t>()(f.dev * 1000003u ^ f.ino ^ uint64_t(f.mtime_ns) * 31u);
  }
};

}  // namespace ingero::hal
