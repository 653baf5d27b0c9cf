#include "hal/record_decoder.h"

#include <algorithm>
#include <cstring>

#include "hal/record_layout.h"

namespace ingero::hal {

uint32_t ProbeTable::add(AttachedProbe p) {
  probes_.push_back(std::move(p));
  return uint32_t(probes_.size() - 1);
}

ingero_recipe make_recipe(const ProbeSpec& spec) {
  ingero_recipe r{};
  r.valid = INGERO_RECIPE_LIVE;
  r.stack_words = spec.args.stack_words;
  // User space decodes register arguments only through the spec's FieldRefs (backends'
  // decode() reads Event fields), so only those are shipped.
  uint8_t nregs = 0;
  auto uses = [&nregs](const ArgRef& a) {
    if (a.src == ArgRef::Src::kReg && a.index < INGERO_REG_WORDS)
      nregs = std::max<uint8_t>(nregs, uint8_t(a.index + 1));
  };
  for (const FieldRef& f : spec.fields) {
    if (f.field == Field::kCount_) break;
    uses(f.from);
  }
  // A name source's references (NameRecipe) are read in user space too.
  uses(spec.name.func);
  uses(spec.name.name);
  uses(spec.name.alias_of);
  r.nregs = nregs;
  auto conv = [](const PtrRead& p) {
    ingero_ptr_read o{};
    o.src = uint8_t(p.src);
    o.index = p.index;
    o.len = p.len;
    o.offset = p.offset;
    return o;
  };
  r.entry_read = conv(spec.args.entry_read);
  r.return_read = conv(spec.args.return_read);
  // Launches: one trap each (docs/architecture.md, "Launches cost one trap"): emitted at entry
  // (one in launch_timing_every per thread timed), with the caller's address, by which user
  // space folds a driver launch made inside a runtime launch and names launches of a runtime
  // whose own probe was detached (capture/launch_nesting.h).
  if (spec.kind == EventKind::kLaunch) r.flags = INGERO_RECIPE_ENTRY_ONLY | INGERO_RECIPE_CALLER;
  return r;
}

namespace {

uint64_t extract(uint64_t raw, const ArgRef& ref) {
  raw >>= ref.shift;
  if (ref.width < 8) raw &= (uint64_t{1} << (ref.width * 8)) - 1;
  return raw;
}

uint64_t read_le(const uint8_t* p, uint8_t width) {
  uint64_t v = 0;
  std::memcpy(&v, p, width > 8 ? 8 : width);
  return v;
}

}  // namespace

std::optional<uint64_t> RawCall::value(const ArgRef& ref) const {
  switch (ref.src) {
    case ArgRef::Src::kNone:
      return std::nullopt;
    case ArgRef::Src::kConst:
      return ref.value;
    case ArgRef::Src::kReg:
      if (ref.index >= rec_.hdr.nregs) return std::nullopt;
      return extract(rec_.regs[ref.index], ref);
    case ArgRef::Src::kStack:
      if (ref.index >= rec_.hdr.nstack || (rec_.hdr.flags & INGERO_CALL_STACK_READ_FAULT))
        return std::nullopt;
      return extract(rec_.stack[ref.index], ref);
    case ArgRef::Src::kRet:
      if (rec_.hdr.flags & INGERO_CALL_UNFINISHED) return std::nullopt;
      return extract(rec_.hdr.ret, ref);
    case ArgRef::Src::kEntryBuf:
      if (size_t(ref.offset) + ref.width > rec_.hdr.entry_len) return std::nullopt;
      return read_le(rec_.entry_buf + ref.offset, ref.width);
    case ArgRef::Src::kReturnBuf:
      if (size_t(ref.offset) + ref.width > rec_.hdr.return_len) return std::nullopt;
      return read_le(rec_.return_buf + ref.offset, ref.width);
  }
  return std::nullopt;
}

std::span<const uint8_t> RawCall::entry_bytes() const {
  return {rec_.entry_buf, std::min<size_t>(rec_.hdr.entry_len, INGERO_ENTRY_READ_MAX)};
}
std::span<const uint8_t> RawCall::return_bytes() const {
  return {rec_.return_buf, std::min<size_t>(rec_.hdr.return_len, INGERO_RETURN_READ_MAX)};
}
uint64_t RawCall::reg(int i) const { return i >= 0 && i < rec_.hdr.nregs ? rec_.regs[i] : 0; }
uint64_t RawCall::ret() const { return rec_.hdr.ret; }

bool CallDecoder::decode(const CallRecord& rec, Event& ev) const {
  const ingero_call_rec& h = rec.hdr;
  const AttachedProbe* p = table_.find(h.probe_id);
  if (!p || !p->spec) return false;
  const ProbeSpec& spec = *p->spec;
  ev = Event{};
  ev.ts_ns = h.start_ns;
  ev.dur_ns = !rec.entry_only() && h.end_ns > h.start_ns ? h.end_ns - h.start_ns : 0;
  ev.pid = h.pid;
  ev.tid = h.tid;
  if (rec.has_ident()) {
    ev.cgroup_id = rec.ident.cgroup_id;
    std::memcpy(ev.comm.data(), rec.ident.comm, sizeof(rec.ident.comm));
    ev.comm.back() = 0;
  }
  ev.vendor = p->match.vendor;
  ev.api = p->match.api;
  ev.kind = spec.kind;
  ev.op = spec.symbol;
  ev.library = p->library;
  ev.unfinished = h.flags & INGERO_CALL_UNFINISHED;
  ev.timed = !rec.entry_only();  // emitted at entry: no duration, no return
  ev.has_ret = !ev.unfinished && ev.timed;
  ev.caller = rec.caller;
  // Vendor APIs return 32-bit status enums; the upper half of rax is not defined.
  ev.ret = ev.has_ret ? int64_t(int32_t(uint32_t(h.ret))) : 0;
  ev.off_cpu_ns = rec.offcpu.off_cpu_ns;
  ev.preempts = rec.offcpu.preempts;
  ev.switches = rec.offcpu.switches;
  if (rec.offcpu.preemptor_pid) {
    ev.set(Field::kPeerPid, rec.offcpu.preemptor_pid);
    ev.set(Field::kPeerTid, rec.offcpu.preemptor_tid);
    std::memcpy(ev.peer_comm.data(), rec.offcpu.preemptor_comm, sizeof(rec.offcpu.preemptor_comm));
    ev.peer_comm.back() = 0;
  }
  ev.nested = h.nested;
  if (h.nested) {
    const AttachedProbe* n = table_.find(h.nested_probe);
    if (n && n->spec) {
      ev.nested_api = n->match.api;
      ev.nested_op = n->spec->symbol;
      ev.nested_kind = n->spec->kind;
    }
  }
  ev.stack_of_site = h.flags & INGERO_CALL_STACK_OF_SITE;
  RawCall raw(rec);
  for (const FieldRef& f : spec.fields) {
    if (f.field == Field::kCount_) break;
    if (auto v = raw.value(f.from)) ev.set(f.field, *v);
  }
  p->backend->decode(raw, spec, ev);
  return true;
}

std::optional<NameCapture> CallDecoder::name_capture(const CallRecord& rec) const {
  const AttachedProbe* p = table_.find(rec.hdr.probe_id);
  if (!p || !p->spec || p->spec->kind != EventKind::kKernelName) return std::nullopt;
  const NameRecipe& r = p->spec->name;
  if (rec.hdr.flags & INGERO_CALL_UNFINISHED) return std::nullopt;  // nothing was written
  if (r.needs_success && int32_t(uint32_t(rec.hdr.ret)) != 0) return std::nullopt;
  RawCall raw(rec);
  auto func = raw.value(r.func);
  if (!func || !*func) return std::nullopt;
  NameCapture c;
  c.pid = rec.hdr.pid;
  c.ts_ns = rec.hdr.start_ns;
  c.func = *func;
  c.source = r.source;
  if (auto v = raw.value(r.name); v && *v) c.name_addr = *v;
  if (auto v = raw.value(r.alias_of); v && *v && *v != *func) c.alias_of = *v;
  if (!c.name_addr && !c.alias_of) return std::nullopt;
  return c;
}

bool basename_matches(std::string_view basename, std::string_view prefix) {
  if (basename.substr(0, prefix.size()) != prefix) return false;
  std::string_view rest = basename.substr(prefix.size());
  return rest.empty() || rest[0] == '.' || rest[0] == '-' || rest[0] == '_';
}

bool defines_all(const SymbolIndex& symbols, std::initializer_list<std::string_view> names) {
  for (auto n : names)
    if (!symbols.find_function(n)) return false;
  return true;
}

void BackendRegistry::add(std::unique_ptr<VendorBackend> backend) {
  backends_.push_back(std::move(backend));
}

const VendorBackend* BackendRegistry::find(std::string_view name) const {
  for (const auto& b : backends_)
    if (b->name() == name) return b.get();
  return nullptr;
}

std::vector<const VendorBackend*> BackendRegistry::all() const {
  std::vector<const VendorBackend*> out;
  for (const auto& b : backends_) out.push_back(b.get());
  return out;
}

Result<std::vector<const VendorBackend*>> BackendRegistry::select(std::string_view names) const {
  if (names.empty()) return all();
  std::vector<const VendorBackend*> out;
  while (!names.empty()) {
    size_t comma = names.find(',');
    std::string_view n = names.substr(0, comma);
    names = comma == std::string_view::npos ? std::string_view() : names.substr(comma + 1);
    if (n.empty()) continue;
    const VendorBackend* b = find(n);
    if (!b) {
      std::string known;
      for (const auto& x : backends_) known += (known.empty() ? "" : ", ") + std::string(x->name());
      return make_error("unknown backend '" + std::string(n) + "' (known: " + known + ")");
    }
    out.push_back(b);
  }
  return out;
}

std::vector<SqlView> BackendRegistry::views() const {
  std::vector<SqlView> out;
  for (const auto& b : backends_)
    for (const auto& v : b->views()) out.push_back(v);
  return out;
}

std::string_view BackendRegistry::device_event_name(std::string_view api, uint64_t type) const {
  for (const auto& b : backends_)
    if (auto n = b->device_event_name(api, type); !n.empty()) return n;
  return {};
}

}  // namespace ingero::hal
