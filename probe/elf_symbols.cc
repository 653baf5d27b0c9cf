#include "probe/elf_symbols.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <map>

namespace ingero::hal {
namespace {

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};
struct ElfHandle {
  Elf* e = nullptr;
  ~ElfHandle() {
    if (e) elf_end(e);
  }
};

Error elf_error(const std::string& path, const std::string& what) {
  return make_error(path + ": " + what + ": " + elf_errmsg(-1));
}

std::string hex(const uint8_t* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  s.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    s.push_back(d[p[i] >> 4]);
    s.push_back(d[p[i] & 15]);
  }
  return s;
}

}  // namespace

Result<FileIdentity> identify_file(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return Error::sys("stat " + path, errno);
  return FileIdentity{st.st_dev, st.st_ino,
                      int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
                      int64_t(st.st_size)};
}

// SymbolIndex::load's steps, over one open ELF file (a friend of SymbolIndex: it fills it).
struct SymbolLoader {
  const std::string& path;
  Elf* e;
  uint64_t file_size;
  SymbolIndex& idx;
  // The sections load() reads.
  struct Sections {
    Elf_Scn *dynsym = nullptr, *symtab = nullptr, *versym = nullptr, *verdef = nullptr,
            *dynamic = nullptr;
  };

  bool past_end(uint64_t off, uint64_t len) const {
    return off > file_size || len > file_size - off;
  }

  // The loadable segments (PT_LOAD): where file offsets map in memory.
  Status segments() {
    size_t nph = 0;
    if (elf_getphdrnum(e, &nph) != 0) return elf_error(path, "bad program headers");
    for (size_t i = 0; i < nph; ++i) {
      GElf_Phdr ph;
      if (!gelf_getphdr(e, int(i), &ph)) return elf_error(path, "bad program header");
      if (ph.p_type == PT_LOAD)
        idx.loads_.push_back({ph.p_vaddr, ph.p_offset, ph.p_filesz, ph.p_memsz, ph.p_flags});
    }
    return {};
  }

  // The symbol, version and dynamic sections, and the GNU build id; a section past the end of
  // the file is an error (libelf trusts the headers).
  Result<Sections> sections() {
    Sections out;
    for (Elf_Scn* scn = elf_nextscn(e, nullptr); scn; scn = elf_nextscn(e, scn)) {
      GElf_Shdr sh;
      if (!gelf_getshdr(scn, &sh)) return elf_error(path, "bad section header");
      if (sh.sh_type != SHT_NOBITS && past_end(sh.sh_offset, sh.sh_size))
        return make_error(path + ": truncated or corrupt (section " +
                          std::to_string(elf_ndxscn(scn)) + " extends past end of file)");
      switch (sh.sh_type) {
        case SHT_DYNSYM:
          out.dynsym = scn;
          break;
        case SHT_SYMTAB:
          out.symtab = scn;
          break;
        case SHT_GNU_versym:
          out.versym = scn;
          break;
        case SHT_GNU_verdef:
          out.verdef = scn;
          break;
        case SHT_DYNAMIC:
          out.dynamic = scn;
          break;
        case SHT_NOTE: {
          if (!idx.build_id_.empty()) break;
          Elf_Data* data = elf_getdata(scn, nullptr);
          if (!data) break;
          size_t off = 0, name_off = 0, desc_off = 0;
          GElf_Nhdr nh;
          while ((off = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
            if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
                desc_off + nh.n_descsz <= data->d_size &&
                std::memcmp(static_cast<char*>(data->d_buf) + name_off, "GNU", 4) == 0) {
              idx.build_id_ = hex(static_cast<uint8_t*>(data->d_buf) + desc_off, nh.n_descsz);
              break;
            }
          }
          break;
        }
        default:
          break;
      }
    }
    return out;
  }

  // Version definitions: index -> name (and the file's own, in idx.verdefs_).
  std::map<unsigned, std::string> versions(Elf_Scn* verdef) {
    std::map<unsigned, std::string> ver_names;
    if (!verdef) return ver_names;
    GElf_Shdr sh;
    gelf_getshdr(verdef, &sh);
    Elf_Data* data = elf_getdata(verdef, nullptr);
    size_t off = 0;
    for (size_t n = 0; data && n < sh.sh_info && n < 65536; ++n) {
      GElf_Verdef vd;
      if (!gelf_getverdef(data, int(off), &vd)) break;
      GElf_Verdaux va;
      if (vd.vd_cnt > 0 && gelf_getverdaux(data, int(off + vd.vd_aux), &va)) {
        const char* nm = elf_strptr(e, sh.sh_link, va.vda_name);
        if (nm) {
          ver_names[vd.vd_ndx] = nm;
          if (!(vd.vd_flags & VER_FLG_BASE)) idx.verdefs_.push_back(nm);
        }
      }
      if (vd.vd_next == 0) break;
      off += vd.vd_next;
    }
    return ver_names;
  }

  // DT_SONAME.
  void soname(Elf_Scn* dynamic) {
    if (!dynamic) return;
    GElf_Shdr sh;
    gelf_getshdr(dynamic, &sh);
    Elf_Data* data = elf_getdata(dynamic, nullptr);
    size_t n = data && sh.sh_entsize ? data->d_size / sh.sh_entsize : 0;
    for (size_t i = 0; i < n; ++i) {
      GElf_Dyn dyn;
      if (!gelf_getdyn(data, int(i), &dyn)) break;
      if (dyn.d_tag == DT_SONAME) {
        const char* nm = elf_strptr(e, sh.sh_link, dyn.d_un.d_val);
        if (nm) idx.soname_ = nm;
      }
      if (dyn.d_tag == DT_NULL) break;
    }
  }

  // Functions (by name, versions apart) and, from .dynsym, data objects.
  Status symbols(Elf_Scn* scn, bool is_dyn, Elf_Scn* versym,
                 const std::map<unsigned, std::string>& ver_names,
                 const SymbolFilter& symtab_filter) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh)) return elf_error(path, "bad symbol table header");
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (!data) return elf_error(path, "cannot read symbol table");
    if (sh.sh_entsize == 0) return make_error(path + ": symbol table with zero entry size");
    size_t n = data->d_size / sh.sh_entsize;
    Elf_Data* vdata = (is_dyn && versym) ? elf_getdata(versym, nullptr) : nullptr;
    auto symbol_of = [](const GElf_Sym& sym, bool dyn) {
      ElfSymbol out;
      out.value = sym.st_value;
      out.size = sym.st_size;
      out.bind = GELF_ST_BIND(sym.st_info);
      out.type = uint8_t(GELF_ST_TYPE(sym.st_info));
      out.from_dynsym = dyn;
      return out;
    };
    for (size_t i = 1; i < n; ++i) {
      GElf_Sym sym;
      if (!gelf_getsym(data, int(i), &sym)) return elf_error(path, "bad symbol entry");
      int type = GELF_ST_TYPE(sym.st_info);
      if (is_dyn && type == STT_OBJECT && sym.st_shndx != SHN_UNDEF && sym.st_value != 0) {
        const char* on = elf_strptr(e, sh.sh_link, sym.st_name);
        if (on && *on)
          idx.objects_.emplace(std::string(on).substr(0, std::string_view(on).find('@')),
                               symbol_of(sym, true));
        continue;
      }
      if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF ||
          sym.st_value == 0)
        continue;
      const char* nm = elf_strptr(e, sh.sh_link, sym.st_name);
      if (!nm || !*nm) continue;
      std::string_view name(nm);
      // .symtab spells versions inline ("sym@@VER"); keep the bare name.
      std::string version;
      bool is_default = true;
      if (auto at = name.find('@'); at != std::string_view::npos) {
        is_default = name.substr(at, 2) == "@@";
        version = std::string(name.substr(at + (is_default ? 2 : 1)));
        name = name.substr(0, at);
      }
      if (!is_dyn && symtab_filter && !symtab_filter(name)) continue;
      if (vdata) {
        GElf_Versym vs;
        if (gelf_getversym(vdata, int(i), &vs)) {
          is_default = !(vs & 0x8000);
          auto it = ver_names.find(vs & 0x7fff);
          if (it != ver_names.end() && (vs & 0x7fff) > 1) version = it->second;
        }
      }
      ElfSymbol s = symbol_of(sym, is_dyn);
      s.default_version = is_default;
      s.version = std::move(version);
      idx.by_name_[std::string(name)].push_back(std::move(s));
    }
    return {};
  }
};

Result<std::shared_ptr<const SymbolIndex>> SymbolIndex::load(const std::string& path,
                                                             const SymbolFilter& symtab_filter) {
  if (elf_version(EV_CURRENT) == EV_NONE) return make_error("libelf: version mismatch");
  // O_NONBLOCK: a FIFO put where a library is looked for would block the open for ever (the
  // check below refuses it); on a regular file the flag changes nothing.
  Fd fd{open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (fd.fd < 0) return Error::sys("open " + path, errno);
  struct stat st {};
  if (fstat(fd.fd, &st) != 0) return Error::sys("stat " + path, errno);
  if (!S_ISREG(st.st_mode)) return make_error(path + ": not a regular file");
  if (st.st_size == 0) return make_error(path + ": empty file, not an ELF object");
  ElfHandle h{elf_begin(fd.fd, ELF_C_READ, nullptr)};
  if (!h.e) return elf_error(path, "cannot read as ELF");
  if (elf_kind(h.e) != ELF_K_ELF) return make_error(path + ": not an ELF file");
  GElf_Ehdr eh;
  if (!gelf_getehdr(h.e, &eh)) return elf_error(path, "bad ELF header");
  if (gelf_getclass(h.e) != ELFCLASS64) return make_error(path + ": not a 64-bit ELF file");
#if defined(__x86_64__)
  constexpr int kMachine = EM_X86_64;
#elif defined(__aarch64__)
  constexpr int kMachine = EM_AARCH64;
#endif
  if (eh.e_machine != kMachine)
    return make_error(path + ": ELF for another machine (e_machine " +
                      std::to_string(eh.e_machine) + ")");

  // libelf trusts the headers; a truncated or corrupted file must not read as "no symbols".
  const uint64_t file_size = uint64_t(st.st_size);
  auto past_end = [&](uint64_t off, uint64_t len) {
    return off > file_size || len > file_size - off;
  };
  if (past_end(eh.e_phoff, uint64_t(eh.e_phnum) * eh.e_phentsize))
    return make_error(path + ": truncated or corrupt (program headers past end of file)");
  if (past_end(eh.e_shoff, uint64_t(eh.e_shnum) * eh.e_shentsize))
    return make_error(path + ": truncated or corrupt (section headers past end of file)");

  auto idx = std::make_shared<SymbolIndex>();
  SymbolLoader l{path, h.e, file_size, *idx};
  if (auto st = l.segments(); !st) return st.error();
  size_t shstrndx = 0;
  if (elf_getshdrstrndx(h.e, &shstrndx) != 0) return elf_error(path, "bad section names");
  auto sec = l.sections();
  if (!sec) return sec.error();
  idx->has_symtab_ = sec->symtab != nullptr;
  auto ver_names = l.versions(sec->verdef);
  l.soname(sec->dynamic);
  if (sec->dynsym)
    if (auto st = l.symbols(sec->dynsym, true, sec->versym, ver_names, symtab_filter); !st)
      return st.error();
  if (sec->symtab)
    if (auto st = l.symbols(sec->symtab, false, sec->versym, ver_names, symtab_filter); !st)
      return st.error();
  return std::shared_ptr<const SymbolIndex>(std::move(idx));
}

Result<std::shared_ptr<const SymbolIndex>> SymbolCache::get(const std::string& path) {
  auto id = identify_file(path);
  if (!id) return id.error();
  if (auto it = cache_.find(*id); it != cache_.end()) return it->second;
  auto idx = SymbolIndex::load(path, filter_);
  ++loads_;
  if (!idx) return idx.error();
  cache_.emplace(*id, *idx);
  return idx;
}

}  // namespace ingero::hal
