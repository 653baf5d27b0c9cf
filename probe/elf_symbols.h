// Reading ELF symbols from files with libelf: SymbolIndex::load (declared with the index,
// hal/elf_symbols.h), a file's identity, and the per-file cache the library discovery keeps.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>

#include "hal/elf_symbols.h"
#include "hal/result.h"

namespace ingero::hal {

// Identity used to cache per-file work (stat): (device, inode, mtime, size).
Result<FileIdentity> identify_file(const std::string& path);

// Caches SymbolIndex per file identity, so a library mapped by a thousand processes, or
// re-seen on every re-scan, is parsed once. Not thread-safe; owned by one discovery loop.
class SymbolCache {
 public:
  explicit SymbolCache(SymbolFilter filter = {}) : filter_(std::move(filter)) {}
  Result<std::shared_ptr<const SymbolIndex>> get(const std::string& path);
  size_t size() const { return cache_.size(); }
  size_t loads() const { return loads_; }

 private:
  SymbolFilter filter_;
  std::unordered_map<FileIdentity, std::shared_ptr<const SymbolIndex>, FileIdentityHash> cache_;
  size_t loads_ = 0;
};

}  // namespace ingero::hal
