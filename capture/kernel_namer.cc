#include "capture/kernel_namer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include "capture/host_info.h"

namespace ingero::capture {
namespace {

bool file_backed(const hal::MapEntry& m) {
  return m.inode && !m.path.empty() && m.path[0] == '/' && !m.deleted;
}

ingero::Result<std::string> pread_at(const std::string& path, uint64_t offset, size_t len) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ingero::make_error(path + ": " + std::strerror(errno));
  std::string buf(len, '\0');
  ssize_t n = ::pread(fd, buf.data(), len, off_t(offset));
  int err = errno;
  ::close(fd);
  if (n < 0) return ingero::make_error(path + ": " + std::strerror(err));
  buf.resize(size_t(n));
  return buf;
}

// A name as a toolchain writes it: a symbol, mangled (_Z...) or not, of letters, digits and
// _ $ . @, not starting with a digit. A pointer that led elsewhere reads as bytes of something
// else, and is refused rather than stored: maps kept from before a dlopen once turned a kernel's
// name into "lib/x86_64-linux-gnu/libk5crypto.so.3", a path from the loader's cache.
bool plausible_name(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (unsigned char c : s)
    if (!std::isalnum(c) && c != '_' && c != '$' && c != '.' && c != '@') return false;
  return true;
}

}  // namespace

std::string LocalProcessImage::maps(uint32_t pid) {
  return read_small_file(proc_ + "/" + std::to_string(pid) + "/maps");
}

ingero::Result<std::string> LocalProcessImage::read_file(uint32_t pid, const hal::MapEntry& m,
                                                         uint64_t offset, size_t len) {
  // Through the process's root while it lives (a container's files), else by the path.
  auto r = pread_at(proc_ + "/" + std::to_string(pid) + "/root" + m.path, offset, len);
  if (r) return r;
  return pread_at(m.path, offset, len);
}

ingero::Result<std::string> LocalProcessImage::read_memory(uint32_t pid, uint64_t addr,
                                                           size_t len) {
  return pread_at(proc_ + "/" + std::to_string(pid) + "/mem", addr, len);
}

hal::NativeSymbol LocalProcessImage::symbol_at(uint32_t pid, const hal::MapEntry& m,
                                               uint64_t offset) {
  std::string key = std::to_string(m.dev_major) + ":" + std::to_string(m.dev_minor) + ":" +
                    std::to_string(m.inode);
  std::string live = proc_ + "/" + std::to_string(pid) + "/root" + m.path;
  std::string open_path = access(live.c_str(), R_OK) == 0 ? live : m.path;
  return symbolizer_.symbolize(key, open_path, offset, false, /*lines=*/false);
}

KernelNamer::KernelNamer(hal::EventSink& out, std::unique_ptr<ProcessImage> image)
    : out_(out), image_(std::move(image)) {}

KernelNamer::Proc& KernelNamer::proc(uint32_t pid) {
  Proc& p = procs_[pid];
  last_pid_ = pid;
  last_ = &p;
  return p;
}

bool KernelNamer::snapshot(uint32_t pid, Proc& p) {
  std::string text = image_->maps(pid);
  std::vector<hal::MapEntry> maps;
  if (!text.empty()) {
    maps = hal::parse_proc_maps(text);
  } else if (!p.maps_read && maps_fallback) {
    maps = maps_fallback(pid);  // gone before its records were read: what was kept of it
    if (maps.empty()) return false;
  } else {
    return false;  // gone: what was read before stands
  }
  std::sort(maps.begin(), maps.end(),
            [](const auto& a, const auto& b) { return a.start < b.start; });
  p.maps = std::move(maps);
  p.maps_read = true;
  p.stale = false;
  return true;
}

const hal::MapEntry* KernelNamer::mapping(uint32_t pid, Proc& p, uint64_t addr) {
  bool fresh = false;
  if (!p.maps_read || p.stale) fresh = snapshot(pid, p);
  auto find = [&]() -> const hal::MapEntry* {
    auto it = std::upper_bound(p.maps.begin(), p.maps.end(), addr,
                               [](uint64_t a, const hal::MapEntry& m) { return a < m.start; });
    if (it == p.maps.begin()) return nullptr;
    --it;
    return addr < it->end ? &*it : nullptr;
  };
  const hal::MapEntry* m = find();
  if (!m && !fresh && snapshot(pid, p)) m = find();  // mapped since the last read
  return m;
}

std::optional<std::string> KernelNamer::read_name(uint32_t pid, Proc& p, uint64_t addr) {
  const hal::MapEntry* m = mapping(pid, p, addr);
  // Reads chunks from `read(at, len)` until a NUL, within kMaxName.
  auto take = [](const auto& read) -> std::optional<std::string> {
    std::string out;
    size_t chunk = 256;
    while (out.size() < kMaxName) {
      auto r = read(uint64_t(out.size()), chunk);
      if (!r || r->empty()) return std::nullopt;
      size_t nul = r->find('\0');
      if (nul != std::string::npos) {
        out.append(r->data(), nul);
        return out;
      }
      out += *r;
      chunk = std::min<size_t>(chunk * 4, 16384);
    }
    return std::nullopt;
  };
  auto from_file = [&]() -> std::optional<std::string> {
    if (!m || !file_backed(*m)) return std::nullopt;
    hal::MapEntry entry = *m;  // `m` may move if a read refreshes the maps
    uint64_t base = entry.offset + (addr - entry.start);
    return take(
        [&](uint64_t at, size_t len) { return image_->read_file(pid, entry, base + at, len); });
  };
  auto from_memory = [&]() -> std::optional<std::string> {
    return take([&](uint64_t at, size_t len) { return image_->read_memory(pid, addr + at, len); });
  };
  // Read-only file pages hold what the file holds; a writable mapping may have changed them.
  bool writable = m && m->perms[1] == 'w';
  std::optional<std::string> s = writable ? from_memory() : from_file();
  if (!s || !plausible_name(*s)) s = writable ? from_file() : from_memory();
  if (!s || !plausible_name(*s)) return std::nullopt;
  return s;
}

bool KernelNamer::elf_name(uint32_t pid, Proc& p, uint64_t addr, std::string& raw) {
  const hal::MapEntry* m = mapping(pid, p, addr);
  if (!m || !m->executable() || !file_backed(*m)) return false;
  hal::NativeSymbol s = image_->symbol_at(pid, *m, m->offset + (addr - m->start));
  // Only a symbol that starts at the address names it: an address inside a function (or a
  // stripped file's nearest exported symbol) is not that function's name.
  if (s.raw.empty() || s.symbol_offset != 0 || !plausible_name(s.raw)) return false;
  raw = s.raw;
  return true;
}

const std::string* KernelNamer::intern(const std::string& raw) {
  auto it = kept_.find(raw);
  if (it != kept_.end()) return &*it;
  if (kept_bytes_ + raw.size() > kMaxKeptBytes) return nullptr;
  kept_bytes_ += raw.size();
  return &*kept_.insert(raw).first;
}

KernelNamer::Func* KernelNamer::entry(Proc& p, uint64_t func, uint64_t ts_ns) {
  auto it = p.funcs.find(func);
  if (it != p.funcs.end()) return &it->second;
  if (entries_ >= kMaxEntries) {
    ++counters_.dropped;
    return nullptr;
  }
  ++entries_;
  Func& f = p.funcs[func];
  f.since_ns = ts_ns;
  return &f;
}

void KernelNamer::name(uint32_t pid, Proc& p, uint64_t func, const std::string& raw,
                       hal::KernelNameSource source, uint64_t ts_ns, int depth) {
  Func* f = entry(p, func, ts_ns);
  if (!f || f->named) return;  // the first name stands
  f->named = true;
  f->raw = intern(raw);
  f->source = source;
  ++counters_.names;
  ++counters_.by_source[size_t(source) & 3];
  // Launches read while it had no name get it now: calls.kernel joins the name by function.
  if (f->unnamed) {
    counters_.unnamed_launches -= f->unnamed;
    counters_.named_launches += f->unnamed;
    --counters_.unnamed_functions;
    f->unnamed = 0;
  }
  if (f->at_rest) {
    --counters_.unnamed_at_rest;
    f->at_rest = false;
  }
  (void)out_.on_kernel_name({pid, func, hal::demangle(raw), raw, source, ts_ns});
  std::vector<uint64_t> waiting = std::move(f->waiting);
  f->waiting.clear();
  if (depth < 8)
    for (uint64_t w : waiting) name(pid, p, w, raw, source, ts_ns, depth + 1);
}

bool KernelNamer::on_capture(const hal::NameCapture& c) {
  Proc& p = proc(c.pid);
  // The first name stands: a function already named reads nothing (a library that looks its
  // kernels up before every launch, as cuDNN does, sends a repeat once a second; BPF holds the
  // rest back).
  if (auto it = p.funcs.find(c.func); it != p.funcs.end() && it->second.named) {
    ++counters_.repeats;
    return false;
  }
  if (c.name_addr) {
    if (auto text = read_name(c.pid, p, *c.name_addr)) {
      ++counters_.captures;
      name(c.pid, p, c.func, *text, c.source, c.ts_ns);
      return true;
    }
    ++counters_.unreadable;
    if (!c.alias_of) return false;
  }
  if (!c.alias_of) return false;
  ++counters_.captures;
  // A handle of another key (a stub's cudaKernel_t): that key's name, from its own source or,
  // for a stub registered before the trace began, its ELF symbol.
  Func* t = entry(p, *c.alias_of, c.ts_ns);
  if (!t) return false;
  if (!t->named && !t->elf_tried) {
    t->elf_tried = true;
    std::string raw;
    if (elf_name(c.pid, p, *c.alias_of, raw))
      name(c.pid, p, *c.alias_of, raw, hal::KernelNameSource::kElfSymbol, c.ts_ns);
  }
  if (t->named && t->raw) {
    name(c.pid, p, c.func, *t->raw, t->source, c.ts_ns);
  } else if (t->named) {
    ++counters_.unkept;  // its name was not kept (kMaxKeptBytes): the handle stays unnamed
  } else if (t->waiting.size() < 64) {
    t->waiting.push_back(c.func);
  }
  return true;
}

void KernelNamer::launch_slow(Proc& p, uint32_t pid, uint64_t func, uint64_t ts_ns, bool known) {
  Func* f = known ? &p.funcs.find(func)->second : entry(p, func, ts_ns);
  if (!f) {  // over the cap: unnamed, and not remembered
    ++counters_.unnamed_launches;
    return;
  }
  if (!f->elf_tried) {
    f->elf_tried = true;
    // The first launch of a function no source named: a forked child's parent may have named
    // it (its image is the child's), else a stub registered before the trace began still has
    // its own symbol, where the file has symbols.
    if (const Func* from = inherited(pid, func)) {
      name(pid, p, func, *from->raw, from->source, ts_ns);
      ++counters_.named_launches;
      return;
    }
    std::string raw;
    if (elf_name(pid, p, func, raw)) {
      name(pid, p, func, raw, hal::KernelNameSource::kElfSymbol, ts_ns);
      ++counters_.named_launches;
      return;
    }
  }
  ++counters_.unnamed_launches;
  if (f->unnamed++ == 0) {
    ++counters_.unnamed_functions;
    ++counters_.launched_unnamed;
    if (lookups_resting_) {
      f->at_rest = true;
      ++counters_.unnamed_at_rest;
    }
  }
}

const KernelNamer::Func* KernelNamer::inherited(uint32_t pid, uint64_t func) const {
  for (int depth = 0; depth < 8; ++depth) {
    auto up = parent_of_.find(pid);
    if (up == parent_of_.end()) return nullptr;
    pid = up->second;
    auto p = procs_.find(pid);
    if (p == procs_.end()) continue;
    auto f = p->second.funcs.find(func);
    if (f != p->second.funcs.end() && f->second.named && f->second.raw) return &f->second;
  }
  return nullptr;
}

void KernelNamer::process_fork(uint32_t parent, uint32_t child, uint64_t) {
  if (parent == child) return;
  // Bounded: a host-wide trace sees every fork of the host.
  if (parent_of_.size() >= kMaxEntries) parent_of_.clear();
  parent_of_[child] = parent;
}

void KernelNamer::process_exec(uint32_t pid, uint64_t ts_ns) {
  parent_of_.erase(pid);  // a new image: its parent's names are not its
  // Nothing is read here: every exec of the host would cost a read of its maps. The new image's
  // maps are read when its first name or launch needs them (or, once it has exited, taken from
  // maps_fallback).
  auto found = procs_.find(pid);
  if (found == procs_.end()) return;
  Proc& p = found->second;
  for (auto it = p.funcs.begin(); it != p.funcs.end();) {
    if (it->second.since_ns < ts_ns) {
      it = p.funcs.erase(it);
      --entries_;
    } else {
      ++it;
    }
  }
  p.maps.clear();
  p.maps_read = false;
}

void KernelNamer::process_mapped(uint32_t pid) {
  if (auto it = procs_.find(pid); it != procs_.end()) it->second.stale = true;
}

void KernelNamer::process_exited(uint32_t pid) {
  parent_of_.erase(pid);
  auto it = procs_.find(pid);
  if (it == procs_.end()) return;
  entries_ -= it->second.funcs.size();
  procs_.erase(it);
  if (last_pid_ == pid) last_ = nullptr;
}

}  // namespace ingero::capture
