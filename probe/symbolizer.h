// Native frame symbolization with libdwfl: (module file, file offset) -> function, source
// file and line. One Dwfl per module, opened offline on first use and cached with every
// answer; separate debug info is found the standard way (build-id under
// /usr/lib/debug/.build-id, .gnu_debuglink next to the file or under /usr/lib/debug). A frame
// that cannot be resolved keeps its module and offset; it never disappears.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "hal/demangle.h"  // demangle, system_library

namespace ingero::hal {

struct NativeSymbol {
  std::string function;        // demangled when it was a C++ name; "" when unknown
  std::string raw;             // the symbol as the file spells it (mangled)
  uint64_t symbol_offset = 0;  // of the address inside the symbol: 0 when it is its start
  std::string file;            // source file from DWARF; "" when there is no line info
  int line = 0;
  std::string build_id;  // lowercase hex of the module's build-id, "" if none
};

class Symbolizer {
 public:
  // `debug_path`: where separate debug files are looked for, in libdwfl's syntax
  // (":.debug:/usr/lib/debug" by default: next to the file, its .debug/, and the global
  // directory with its .build-id/ tree). Tests point it at a directory of their own.
  explicit Symbolizer(std::string debug_path = ":.debug:/usr/lib/debug");
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // `key` identifies the file (dev:inode, or the path); `open_path` is where to read it from
  // (through /proc/PID/root for a process in another mount namespace). `offset` is the file
  // offset of the instruction; `return_address` looks up offset - 1, the call instruction.
  // `lines`: also the source file and line, from the module's DWARF (false: the function name
  // only; see system_library).
  NativeSymbol symbolize(const std::string& key, const std::string& open_path, uint64_t offset,
                         bool return_address, bool lines = true);
  size_t modules() const { return modules_.size(); }
  // Opens the module now (kept open: it stays readable after the path stops resolving, e.g.
  // once the process whose /proc/PID/root led to it has exited).
  void preload(const std::string& key, const std::string& open_path) {
    (void)module(key, open_path);
  }
  // Whether `key` is open (a failed attempt does not count).
  bool has(const std::string& key) const;
  // Closes every module and forgets every answer: the memory they hold (libdwfl's tables, the
  // files' mapped pages) goes back. Later lookups open modules again.
  void forget();
  // How many times libdwfl searched a module's symbols: once per stretch of addresses that
  // gives one answer (between consecutive symbol starts and ends), not once per address.
  uint64_t searches() const { return searches_; }

 private:
  struct Module;
  Module* module(const std::string& key, const std::string& open_path);
  struct Callbacks;  // libdwfl keeps a pointer to them: they live as long as the modules
  std::unique_ptr<Callbacks> callbacks_;
  std::unordered_map<std::string, std::unique_ptr<Module>> modules_;
  // Answers by (key, address); emptied when it reaches kMaxCached (on-CPU samples' leaves are
  // new addresses for as long as the trace runs).
  static constexpr size_t kMaxCached = 1 << 16;
  std::map<std::pair<std::string, uint64_t>, NativeSymbol> cache_;
  uint64_t searches_ = 0;
};

}  // namespace ingero::hal
