#include "probe/symbolizer.h"

#include <elfutils/libdwfl.h>
#include <gelf.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <unordered_map>
#include <vector>

namespace ingero::hal {

struct Symbolizer::Callbacks {
  std::string path;
  char* path_ptr = nullptr;
  Dwfl_Callbacks cb{};
};

struct Symbolizer::Module {
  Dwfl* dwfl = nullptr;
  Dwfl_Module* mod = nullptr;
  GElf_Addr bias = 0;
  struct Load {
    uint64_t vaddr, offset, filesz;
  };
  std::vector<Load> loads;
  std::string build_id;
  std::string tried;  // the path that failed to open (mod == nullptr)
  // libdwfl's symbol lookup compares every symbol of the module (~0.4 ms in a libpython of
  // 14,685 symbols, ~1.8 ms in a libLLVM of 45,000, ~5 ms in a libtorch of 200,000; a
  // sample's leaf is a new address nearly every time). Which symbols start at or before an
  // address, which hold it and which section holds it change only at a symbol's start or end
  // or a section's bounds, and the pick depends on nothing else: so one pick per stretch (a
  // bound, or the addresses between two), kept by stretch.
  std::vector<GElf_Addr> bounds;  // sorted, unique; built at the first lookup
  bool bounded = false;
  // The same symbols sorted by address, to pick without libdwfl where the pick is plain (one
  // sized symbol, or several at one address and of one size, holds the address and nothing
  // else could be named there): libdwfl is asked only near sizeless symbols and where symbols
  // overlap. Its answer and this one were compared at every stretch of libcudart, libc,
  // libstdc++, libsqlite3, libLLVM and python3 (SymbolizerMemo.EveryAddressTriedGets... checks
  // libc, libstdc++ and libcudart).
  struct Sym {
    GElf_Addr start, end;
    const char* name;
    int rank;  // global 2, weak 1, local 0: libdwfl names the strongest of equals
  };
  std::vector<Sym> sized;                // by start
  std::vector<GElf_Addr> sized_max_end;  // the furthest end of sized[0..i]
  std::vector<GElf_Addr> sizeless;       // starts, sorted
  // The pick for `addr` from the tables: true when plain (`*pick` null: no symbol holds it).
  bool plain_pick(GElf_Addr addr, const Sym** pick) const;
  struct Pick {
    const char* name;  // libdwfl's, valid while the module is open; null: no symbol
    GElf_Addr start;   // the symbol's address
  };
  std::unordered_map<size_t, Pick> picks;  // by stretch (symbol() numbers them)
  ~Module() {
    if (dwfl) dwfl_end(dwfl);
  }
  // File offset -> the address libdwfl uses for this module.
  bool address(uint64_t offset, GElf_Addr* out) const {
    for (const auto& l : loads)
      if (offset >= l.offset && offset < l.offset + l.filesz) {
        *out = l.vaddr + (offset - l.offset) + bias;
        return true;
      }
    return false;
  }
  // The symbol libdwfl names for `addr` (null: none) and addr's offset into it, searching once
  // per stretch (counted in `searches`).
  const char* symbol(GElf_Addr addr, GElf_Off* off, uint64_t* searches);

 private:
  void bound();
};

void Symbolizer::Module::bound() {
  bounded = true;
  // Every section of every file the symbols come from (the module's, a debug file's): libdwfl
  // asks which of them holds the address, in the symbol's own file.
  std::vector<std::pair<Elf*, GElf_Addr>> files;
  int n = dwfl_module_getsymtab(mod);
  for (int i = 1; i < n; ++i) {
    GElf_Sym sym;
    GElf_Addr addr = 0;
    Elf* elf = nullptr;
    Dwarf_Addr elf_bias = 0;
    const char* name = dwfl_module_getsym_info(mod, i, &sym, &addr, nullptr, &elf, &elf_bias);
    if (!name) continue;
    bounds.push_back(addr);
    bounds.push_back(addr + sym.st_size);
    if (elf && std::find(files.begin(), files.end(), std::make_pair(elf, elf_bias)) == files.end())
      files.emplace_back(elf, elf_bias);
    int type = GELF_ST_TYPE(sym.st_info), bind = GELF_ST_BIND(sym.st_info);
    if (sym.st_shndx == SHN_UNDEF || type == STT_SECTION || type == STT_FILE || type == STT_TLS)
      continue;
    if (sym.st_size == 0) {
      sizeless.push_back(addr);
      continue;
    }
    sized.push_back({addr, addr + sym.st_size, name,
                     bind == STB_GLOBAL ? 2
                     : bind == STB_WEAK ? 1
                                        : 0});
  }
  std::stable_sort(sized.begin(), sized.end(),
                   [](const Sym& a, const Sym& b) { return a.start < b.start; });
  std::sort(sizeless.begin(), sizeless.end());
  sized_max_end.resize(sized.size());
  for (size_t i = 0; i < sized.size(); ++i)
    sized_max_end[i] = std::max(sized[i].end, i ? sized_max_end[i - 1] : 0);
  for (auto [elf, elf_bias] : files)
    for (Elf_Scn* scn = nullptr; (scn = elf_nextscn(elf, scn));) {
      GElf_Shdr sh;
      if (!gelf_getshdr(scn, &sh)) continue;
      bounds.push_back(sh.sh_addr + elf_bias);
      bounds.push_back(sh.sh_addr + elf_bias + sh.sh_size);
    }
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
}

bool Symbolizer::Module::plain_pick(GElf_Addr addr, const Sym** pick) const {
  *pick = nullptr;
  // Sized symbols starting at or before addr: [0, n).
  size_t n = size_t(std::upper_bound(sized.begin(), sized.end(), addr,
                                     [](GElf_Addr a, const Sym& s) { return a < s.start; }) -
                    sized.begin());
  // The last sizeless symbol at or before addr: libdwfl may name it.
  auto sl = std::upper_bound(sizeless.begin(), sizeless.end(), addr);
  GElf_Addr last_sizeless = sl == sizeless.begin() ? 0 : *(sl - 1);
  bool any_sizeless = sl != sizeless.begin();
  if (n == 0 || sized_max_end[n - 1] <= addr) {  // no sized symbol holds addr
    return !any_sizeless || (n > 0 && last_sizeless < sized[n - 1].start);
  }
  size_t first = n - 1;  // the symbols at the closest start
  while (first > 0 && sized[first - 1].start == sized[n - 1].start) --first;
  if (first > 0 && sized_max_end[first - 1] > addr) return false;  // an earlier one holds it too
  if (any_sizeless && last_sizeless >= sized[first].start) return false;
  for (size_t i = first; i < n; ++i) {
    if (addr >= sized[i].end) continue;
    if (*pick && (*pick)->end != sized[i].end) return false;
    if (!*pick || sized[i].rank > (*pick)->rank) *pick = &sized[i];
  }
  return *pick != nullptr;
}

const char* Symbolizer::Module::symbol(GElf_Addr addr, GElf_Off* off, uint64_t* searches) {
  if (!bounded) bound();
  // The stretch: a bound itself (libdwfl names a sizeless symbol at its own address only), or
  // what lies after it up to the next (2i + 1, for i the number of bounds at or before addr).
  size_t i = size_t(std::upper_bound(bounds.begin(), bounds.end(), addr) - bounds.begin());
  size_t stretch = 2 * i + (i > 0 && bounds[i - 1] == addr ? 0 : 1);
  auto it = picks.find(stretch);
  if (it == picks.end()) {
    const Sym* plain = nullptr;
    if (plain_pick(addr, &plain)) {
      it = picks.emplace(stretch, plain ? Pick{plain->name, plain->start} : Pick{nullptr, addr})
               .first;
    } else {
      ++*searches;
      GElf_Off o = 0;
      GElf_Sym sym;
      const char* name = dwfl_module_addrinfo(mod, addr, &o, &sym, nullptr, nullptr, nullptr);
      it = picks.emplace(stretch, Pick{name, addr - o}).first;
    }
  }
  *off = addr - it->second.start;
  return it->second.name;
}

Symbolizer::Symbolizer(std::string debug_path) : callbacks_(std::make_unique<Callbacks>()) {
  callbacks_->path = std::move(debug_path);
  callbacks_->path_ptr = callbacks_->path.data();
  callbacks_->cb.find_elf = dwfl_build_id_find_elf;
  callbacks_->cb.find_debuginfo = dwfl_standard_find_debuginfo;
  callbacks_->cb.section_address = dwfl_offline_section_address;
  callbacks_->cb.debuginfo_path = &callbacks_->path_ptr;
}
Symbolizer::~Symbolizer() = default;

void Symbolizer::forget() {
  std::unordered_map<std::string, std::unique_ptr<Module>>().swap(modules_);
  cache_.clear();
}

bool Symbolizer::has(const std::string& key) const {
  auto it = modules_.find(key);
  return it != modules_.end() && it->second->mod;
}

Symbolizer::Module* Symbolizer::module(const std::string& key, const std::string& open_path) {
  // A module that opened is kept for good. One that did not is tried again from another
  // path (the same file reached through a live process's root).
  auto it = modules_.find(key);
  if (it != modules_.end() &&
      (it->second->mod || open_path.empty() || it->second->tried == open_path))
    return it->second.get();
  auto m = std::make_unique<Module>();
  m->tried = open_path;
  m->dwfl = dwfl_begin(&callbacks_->cb);
  if (m->dwfl && !open_path.empty()) {
    m->mod = dwfl_report_offline(m->dwfl, open_path.c_str(), open_path.c_str(), -1);
    dwfl_report_end(m->dwfl, nullptr, nullptr);
  }
  if (m->mod) {
    Elf* elf = dwfl_module_getelf(m->mod, &m->bias);
    size_t n = 0;
    if (elf && elf_getphdrnum(elf, &n) == 0) {
      for (size_t i = 0; i < n; ++i) {
        GElf_Phdr ph;
        if (gelf_getphdr(elf, int(i), &ph) && ph.p_type == PT_LOAD)
          m->loads.push_back({ph.p_vaddr, ph.p_offset, ph.p_filesz});
      }
    }
    const unsigned char* bits = nullptr;
    GElf_Addr vaddr = 0;
    int len = dwfl_module_build_id(m->mod, &bits, &vaddr);
    static const char* hex = "0123456789abcdef";
    for (int i = 0; i < len; ++i) {
      m->build_id += hex[bits[i] >> 4];
      m->build_id += hex[bits[i] & 15];
    }
  }
  auto& slot = modules_[key];
  slot = std::move(m);
  return slot.get();
}

NativeSymbol Symbolizer::symbolize(const std::string& key, const std::string& open_path,
                                   uint64_t offset, bool return_address, bool lines) {
  auto ck = std::make_pair(key, offset * 2 + (return_address ? 1 : 0));
  if (auto it = cache_.find(ck); it != cache_.end()) return it->second;
  NativeSymbol s;
  Module* m = module(key, open_path);
  GElf_Addr addr = 0;
  if (m->mod && m->address(return_address && offset > 0 ? offset - 1 : offset, &addr)) {
    s.build_id = m->build_id;
    GElf_Off off = 0;
    const char* name = m->symbol(addr, &off, &searches_);
    if (name) {
      s.function = demangle(name);
      s.raw = name;
      s.symbol_offset = off;
    }
    if (Dwfl_Line* line = lines ? dwfl_module_getsrc(m->mod, addr) : nullptr) {
      int lineno = 0;
      const char* src = dwfl_lineinfo(line, nullptr, &lineno, nullptr, nullptr, nullptr);
      if (src && lineno > 0) {
        // A file compiled by a relative path (ccache's base_dir, out-of-tree builds) is
        // named relative to its unit's compilation directory.
        const char* dir = src[0] == '/' ? nullptr : dwfl_line_comp_dir(line);
        s.file =
            dir ? std::filesystem::path(std::string(dir) + "/" + src).lexically_normal().string()
                : std::string(src);
        s.line = lineno;
      }
    }
  } else if (m->mod) {
    s.build_id = m->build_id;
  }
  if (cache_.size() >= kMaxCached) cache_.clear();  // an agent left on for days stays bounded
  if (m->mod) cache_.emplace(ck, s);  // a file not opened yet may open from another path
  return s;
}

}  // namespace ingero::hal
