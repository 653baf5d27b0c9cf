#include "probe/record_decoder.h"

#include <algorithm>
#include <cstring>

#include "probe/record_layout.h"

namespace ingero::hal {

uint32_t ProbeTable::add(AttachedProbe p) {
  probes_.push_back(std::move(p));
  index_.push_back(&probes_.back());
  return uint32_t(probes_.size() - 1);
}

namespace {

// A kernel-name look-up ships each answer once a while (records_call.h, INGERO_NAME_ONCE): its
// answer is its output word (return_buf(0), read at return) or its return value, its question
// the first register argument the capture names by. A registration has no answer: each is
// shipped.
void set_name_once(const ProbeSpec& spec, ingero_recipe& r) {
  const NameRecipe& n = spec.name;
  const ArgRef* refs[] = {&n.func, &n.alias_of, &n.name};
  uint8_t answer = 0;
  const ArgRef* question = nullptr;
  for (const ArgRef* a : refs) {
    if (a->src == ArgRef::Src::kReturnBuf && a->offset == 0 && a->width == 8 &&
        spec.args.return_read.src != PtrRead::Src::kNone && spec.args.return_read.len >= 8)
      answer = INGERO_NAME_ONCE;
    else if (a->src == ArgRef::Src::kRet)
      answer = INGERO_NAME_ONCE | INGERO_NAME_ANSWER_RET;
    else if (a->src == ArgRef::Src::kReg && a->index < INGERO_REG_WORDS && !question)
      question = a;
  }
  if (!answer || !question) return;
  r.name_once = answer;
  if (n.needs_success) r.name_once |= INGERO_NAME_NEEDS_ZERO;
  if (n.answer_fixed) r.name_once |= INGERO_NAME_FIXED;
  r.name_question = question->index;
}

}  // namespace

ingero_recipe make_recipe(const ProbeSpec& spec, int layer) {
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
  // A runtime's launch, whose driver launch is the same launch: counted once among the thread's
  // launches for --launch-timing.
  if (spec.kind == EventKind::kLaunch && layer > 0) r.flags |= INGERO_RECIPE_UPPER_LAYER;
  // Its kernel keys its call site with the return address (INGERO_RECIPE_SITE_ARG).
  if (spec.kind == EventKind::kLaunch)
    for (const FieldRef& f : spec.fields) {
      if (f.field == Field::kCount_) break;
      // The first or second argument: the BPF reads no other (bpf/call_capture.h, site_arg).
      if (f.field == Field::kFunc && f.from.src == ArgRef::Src::kReg && f.from.index < 2) {
        r.flags |= INGERO_RECIPE_SITE_ARG;
        r.name_question = f.from.index;
      }
    }
  // Kernel names are read once per kernel and stored without a stack: none is walked.
  if (spec.kind == EventKind::kKernelName) {
    r.flags |= INGERO_RECIPE_NO_STACK;
    set_name_once(spec, r);
  }
  return r;
}

bool CallDecoder::decode(const CallRecord& rec, Event& ev) const {
  const ingero_call_rec& h = rec.hdr;
  const AttachedProbe* p = table_.find(h.probe_id);
  if (!p || !p->spec) return false;
  const ProbeSpec& spec = *p->spec;
  ev.reset();
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
    // An output the callee writes at return (a device pointer, a graph, a communicator) is
    // the caller's stale variable when the call failed: stored as "the pointer returned", it
    // joined failed collectives to a communicator that was never made. The vendor APIs with
    // outputs return 0 on success.
    if (f.from.src == ArgRef::Src::kReturnBuf && ev.has_ret && ev.ret != 0) continue;
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
  // Shipped at entry, its probe detached before it returned (a look-up put to rest,
  // probe/probe_manager.h): its answer was never read.
  if (rec.entry_only()) return std::nullopt;
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

}  // namespace ingero::hal
