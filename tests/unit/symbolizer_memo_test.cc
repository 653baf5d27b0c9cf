// The symbolizer's symbol picks (probe/symbolizer.cc): its own sorted tables where the pick is
// plain, libdwfl's search (which compares every symbol of the module) only near sizeless or
// overlapping symbols, once per stretch of addresses between symbol bounds; and answers equal to
// libdwfl's own at every address tried, in large libraries with aliases, sizeless and local
// symbols (libc, libstdc++, the real libcudart).
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hal/elf_symbols.h"
#include "probe/symbolizer.h"
#include "test_paths.h"

namespace ingero::hal {
namespace {

constexpr const char* kLibc = "/lib/x86_64-linux-gnu/libc.so.6";

// libdwfl asked directly, every time: what the memo must agree with.
class DirectDwfl {
 public:
  explicit DirectDwfl(const std::string& path) {
    cb_.find_elf = dwfl_build_id_find_elf;
    cb_.find_debuginfo = dwfl_standard_find_debuginfo;
    cb_.section_address = dwfl_offline_section_address;
    cb_.debuginfo_path = &debug_path_;
    dwfl_ = dwfl_begin(&cb_);
    mod_ = dwfl_report_offline(dwfl_, path.c_str(), path.c_str(), -1);
    dwfl_report_end(dwfl_, nullptr, nullptr);
    Elf* elf = mod_ ? dwfl_module_getelf(mod_, &bias_) : nullptr;
    size_t n = 0;
    if (elf && elf_getphdrnum(elf, &n) == 0)
      for (size_t i = 0; i < n; ++i) {
        GElf_Phdr ph;
        if (gelf_getphdr(elf, int(i), &ph) && ph.p_type == PT_LOAD) loads_.push_back(ph);
      }
  }
  ~DirectDwfl() { dwfl_end(dwfl_); }
  bool ok() const { return mod_ != nullptr; }
  // Every symbol's file offset and size (those inside a loaded segment).
  std::vector<std::pair<uint64_t, uint64_t>> symbols() const {
    std::vector<std::pair<uint64_t, uint64_t>> out;
    int n = dwfl_module_getsymtab(mod_);
    for (int i = 1; i < n; ++i) {
      GElf_Sym sym;
      GElf_Addr addr = 0;
      if (!dwfl_module_getsym_info(mod_, i, &sym, &addr, nullptr, nullptr, nullptr)) continue;
      for (const GElf_Phdr& l : loads_)
        if (addr - bias_ >= l.p_vaddr && addr - bias_ < l.p_vaddr + l.p_filesz)
          out.emplace_back(addr - bias_ - l.p_vaddr + l.p_offset, sym.st_size);
    }
    return out;
  }
  // (function as libdwfl names it, offset into it) for the instruction at file offset `off`.
  std::pair<std::string, uint64_t> at(uint64_t off) const {
    for (const GElf_Phdr& l : loads_)
      if (off >= l.p_offset && off < l.p_offset + l.p_filesz) {
        GElf_Off o = 0;
        GElf_Sym sym;
        const char* name = dwfl_module_addrinfo(mod_, l.p_vaddr + (off - l.p_offset) + bias_, &o,
                                                &sym, nullptr, nullptr, nullptr);
        return {name ? demangle(name) : "", name ? o : 0};
      }
    return {"", 0};
  }

 private:
  char* debug_path_ = nullptr;
  Dwfl_Callbacks cb_{};
  Dwfl* dwfl_ = nullptr;
  Dwfl_Module* mod_ = nullptr;
  GElf_Addr bias_ = 0;
  std::vector<GElf_Phdr> loads_;
};

TEST(SymbolizerMemo, TwoAddressesOfOneFunctionSearchOnceAndKeepTheirOffsets) {
  auto idx = SymbolIndex::load(kLibc);
  ASSERT_TRUE(idx) << idx.error().message;
  const ElfSymbol* s = (*idx)->find_function("qsort_r");
  ASSERT_NE(s, nullptr);
  ASSERT_GT(s->size, 64u);
  auto start = (*idx)->file_offset(s->value);
  ASSERT_TRUE(start);
  Symbolizer sym;
  NativeSymbol a = sym.symbolize("libc", kLibc, *start + 5, false, false);
  NativeSymbol b = sym.symbolize("libc", kLibc, *start + 40, false, false);
  EXPECT_EQ(a.function, "qsort_r");
  EXPECT_EQ(a.symbol_offset, 5u);
  EXPECT_EQ(b.function, "qsort_r");
  EXPECT_EQ(b.symbol_offset, 40u);
  // A return address looks up the call before it: offset 40 - 1, the same stretch.
  EXPECT_EQ(sym.symbolize("libc", kLibc, *start + 40, true, false).symbol_offset, 39u);
  EXPECT_EQ(sym.searches(), 0u);  // one sized symbol holds them: no search of libdwfl's
}

// What every address of `path` tried gets, against libdwfl asked directly.
void every_address_gets_libdwfls_answer(const std::string& path, size_t min_symbols) {
  SCOPED_TRACE(path);
  DirectDwfl direct(path);
  ASSERT_TRUE(direct.ok());
  // Around every symbol's bounds (the stretches' edges, where a wrong stretch would show) and
  // through its body, in the order a trace meets them: nothing sorted.
  std::vector<uint64_t> offsets;
  auto symbols = direct.symbols();
  ASSERT_GT(symbols.size(), min_symbols);
  for (size_t i = 0; i < symbols.size(); i += 7) {  // every 7th: libdwfl's own search is slow
    auto [start, size] = symbols[i];
    if (start < 2) continue;
    for (uint64_t d : {uint64_t(0), uint64_t(1), size / 2, size, size + 1})
      offsets.push_back(start + d);
    offsets.push_back(start - 1);
  }
  ASSERT_GT(offsets.size(), min_symbols / 2);
  Symbolizer sym;
  size_t named = 0;
  for (uint64_t off : offsets) {
    NativeSymbol got = sym.symbolize(path, path, off, false, false);
    auto want = direct.at(off);
    ASSERT_EQ(got.function, want.first) << "file offset 0x" << std::hex << off;
    if (!want.first.empty()) {
      ASSERT_EQ(got.symbol_offset, want.second) << "file offset 0x" << std::hex << off;
      ++named;
    }
  }
  EXPECT_GT(named, offsets.size() / 2);
  // libdwfl searched for under 2% of the addresses (each search ~5 ms in a libtorch of 200,000
  // symbols, ~1.8 ms in a libLLVM of 45,000): the build before searched once a stretch, for
  // ~5 addresses in 6 here, and its tracer spent 6-7 s of CPU symbolizing a 25 s ResNet-18
  // trace on an H200.
  EXPECT_LT(sym.searches(), offsets.size() / 50) << offsets.size() << " addresses";
}

TEST(SymbolizerMemo, EveryAddressTriedGetsLibdwflsOwnAnswer) {
  every_address_gets_libdwfls_answer(kLibc, 2000);
  every_address_gets_libdwfls_answer("/usr/lib/x86_64-linux-gnu/libstdc++.so.6", 2000);
  every_address_gets_libdwfls_answer(INGERO_CUDA_ROOT "/lib64/libcudart.so.13", 300);
}

}  // namespace
}  // namespace ingero::hal
