#include "capture/launch_nesting.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>

#include <algorithm>

namespace ingero::capture {
namespace {

int64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// A process's maps are read again on a miss at most this often (a library loaded since).
constexpr int64_t kMapsRereadNs = 100'000'000;

}  // namespace

const LaunchNesting::Mapping* LaunchNesting::mapping(uint32_t pid, uint64_t addr) {
  // Most launches come from where the one before them did.
  if (last_ && last_pid_ == pid && addr >= last_->start && addr < last_->end) return last_;
  auto find = [&](const Maps& m) -> const Mapping* {
    auto it = std::upper_bound(m.exec.begin(), m.exec.end(), addr,
                               [](uint64_t a, const Mapping& x) { return a < x.start; });
    if (it == m.exec.begin()) return nullptr;
    --it;
    if (addr >= it->end) return nullptr;
    last_pid_ = pid;
    last_ = &*it;
    return last_;
  };
  if (maps_.size() >= kMaxProcesses && !maps_.count(pid)) {
    last_ = nullptr;  // it may point into the maps dropped
    maps_.erase(maps_.begin());
  }
  auto [it, fresh] = maps_.try_emplace(pid);
  if (!fresh) {
    if (const Mapping* m = find(it->second)) return m;
    if (mono_ns() - it->second.read_at_ns < kMapsRereadNs) return nullptr;
  }
  Maps& m = it->second;
  if (last_pid_ == pid) last_ = nullptr;  // it points into the maps read again
  m.exec.clear();
  m.read_at_ns = mono_ns();
  auto text = host_.read_text(host_.proc_root() + "/" + std::to_string(pid) + "/maps");
  if (!text) return nullptr;
  for (const hal::MapEntry& e : hal::parse_proc_maps(*text)) {
    if (!e.executable() || e.path.empty() || e.path[0] != '/') continue;
    m.exec.push_back(
        {e.start, e.end, e.offset, uint64_t(makedev(e.dev_major, e.dev_minor)), e.inode, e.path});
  }
  std::sort(m.exec.begin(), m.exec.end(),
            [](const Mapping& a, const Mapping& b) { return a.start < b.start; });
  return find(m);
}

LaunchNesting::Runtime* LaunchNesting::runtime_of(const Mapping& m) {
  if (m.runtime_gen == runtimes_gen_) return m.runtime;
  m.runtime = nullptr;
  for (auto& [path, r] : runtimes_)
    if ((r.inode && r.inode == m.inode && r.dev == m.dev) || path == m.path) {
      m.runtime = &r;
      break;
    }
  m.runtime_gen = runtimes_gen_;
  return m.runtime;
}

LaunchNesting::Runtime& LaunchNesting::runtime_of_probe(uint32_t probe_id,
                                                        const hal::AttachedProbe& p) {
  if (probe_id < probe_runtimes_.size() && probe_runtimes_[probe_id])
    return *probe_runtimes_[probe_id];
  auto [it, fresh] = runtimes_.try_emplace(p.library);
  Runtime& r = it->second;
  if (fresh) {
    ++runtimes_gen_;  // a mapping's answer may be this one now
    struct stat st {};
    if (::stat(p.library.c_str(), &st) == 0) {
      r.dev = uint64_t(st.st_dev);
      r.inode = uint64_t(st.st_ino);
    }
    r.any_probe = probe_id;
  }
  if (probe_id >= probe_runtimes_.size()) probe_runtimes_.resize(size_t(probe_id) + 1, nullptr);
  probe_runtimes_[probe_id] = &r;  // map nodes stay where they are
  return r;
}

LaunchNesting::Held* LaunchNesting::held_of(uint32_t tid) {
  if (last_held_ && last_held_tid_ == tid) return last_held_;
  auto it = held_.find(tid);
  if (it == held_.end()) return nullptr;
  last_held_tid_ = tid;
  last_held_ = &it->second;  // a map's nodes stay where they are
  return last_held_;
}

void LaunchNesting::settle(uint32_t tid, std::vector<hal::Event>& out, bool known) {
  Held* slot = held_of(tid);
  if (!slot || !slot->active) return;
  Held& h = *slot;
  if (h.runtime && (known || h.nested)) {
    Runtime& r = *h.runtime;
    r.in_a_row = h.nested ? r.in_a_row + 1 : 0;
    // Proven only where its probes go: while they stay, a driver launch with no runtime launch
    // held for it is one the runtime launch already made (counted there), never renamed.
    if (detach && !r.proven && r.in_a_row >= kProofLaunches && !r.sites.empty()) {
      r.proven = true;
      ++counters_.proven;
      if (const hal::AttachedProbe* p = table_.find(h.probe); p && on_proven) on_proven(p->library);
    }
  }
  out.push_back(std::move(h.ev));
  h.active = false;
  --holding_;
  if (!known && !h.nested) {  // its driver launch may still be the thread's next record
    h.awaiting = true;
    ++awaiting_;
  }
}

const hal::AttachedProbe* LaunchNesting::take_awaiting(uint32_t tid) {
  if (!awaiting_) return nullptr;
  Held* h = held_of(tid);
  if (!h || !h->awaiting) return nullptr;
  h->awaiting = false;
  --awaiting_;
  return table_.find(h->probe);
}

bool LaunchNesting::fold_into_held(const hal::Event& ev, const hal::AttachedProbe& p,
                                   Runtime* outer, uint64_t site) {
  Held* h = held_of(ev.tid);
  if (!h || !h->active || h->nested) return false;
  // A launch of the same layer held (the program's own driver launch, cuDNN's, still held when
  // the runtime's launch after it is read: a driver launch from the runtime's text once its
  // probes went) made none: this launch is its own. Folding it lost the first runtime launch
  // after each step's direct launches (bench/lookup_loop.c's mix).
  const hal::AttachedProbe* hp = table_.find(h->probe);
  if (!hp || hp->match.layer <= p.match.layer) return false;
  // The driver launch of the runtime launch held for it (records of a thread come in order):
  // counted in it, and its call site learnt.
  Held& held = *h;
  held.nested = true;
  if (!held.ev.nested) {
    held.ev.nested_api = ev.api;
    held.ev.nested_op = ev.op;
    held.ev.nested_kind = ev.kind;
  }
  held.ev.nested += 1 + ev.nested;
  // A runtime launch sent untimed whose driver launch was timed (without uprobe sessions, in a
  // timing window, the thread's gap since its last timed launch ran out between the two
  // entries): the launch is timed to its driver call's return, all but the runtime's few
  // instructions after it. A failed driver call's code is not the runtime's: left untimed.
  if (ev.timed && !held.ev.timed && ev.has_ret && ev.ret == 0 && !ev.unfinished &&
      ev.ts_ns >= held.ev.ts_ns) {
    held.ev.timed = true;
    held.ev.has_ret = true;
    held.ev.ret = 0;
    held.ev.dur_ns = ev.ts_ns + ev.dur_ns - held.ev.ts_ns;
    held.ev.off_cpu_ns = ev.off_cpu_ns;
    held.ev.preempts = ev.preempts;
    held.ev.switches = ev.switches;
    held.ev.peer_comm = ev.peer_comm;
    ++counters_.timed_by_driver;
  }
  if (outer) {
    outer->sites.try_emplace(site, held.probe);
    outer->nests = true;
  }
  ++counters_.folded;
  return true;
}

void LaunchNesting::flush(std::vector<hal::Event>& out, bool all) {
  if (holding_)
    for (auto& [tid, h] : held_)
      if (h.active && (all || h.cycle != cycle_)) settle(tid, out, false);
  ++cycle_;
  if (!holding_ && held_.size() > kMaxHeldSlots) {  // every slot is inactive
    held_.clear();
    last_held_ = nullptr;
    awaiting_ = 0;
  }
}

LaunchNesting::Fate LaunchNesting::on_launch(uint32_t probe_id, hal::Event& ev,
                                             std::vector<hal::Event>& out) {
  const hal::AttachedProbe* p = table_.find(probe_id);
  if (!p) return Fate::kEmit;
  Runtime& self = runtime_of_probe(probe_id, *p);
  // The thread's last record was a launch released at the end of a read cycle unnested: this
  // launch may be the one it made, if it was of a higher layer (a runtime's). A driver launch
  // released so (cuDNN's private runtime, cublasLt) made none: the launch after it is its own
  // (counting it in that one lost every runtime launch that followed a direct driver launch
  // across a read cycle's end, 40 of ResNet-18's 264 a step on an H200).
  const hal::AttachedProbe* before = take_awaiting(ev.tid);
  bool awaited = before && before->match.layer > p->match.layer;
  // Made from inside a library with launch probes: a driver launch of a runtime launch.
  const Mapping* m = ev.caller ? mapping(ev.pid, ev.caller) : nullptr;
  Runtime* outer = m ? runtime_of(*m) : nullptr;
  if (!outer && ev.caller && !m) {
    // Where it was made from is unknown: the process exited before its records were read (a
    // short program: its maps are gone), or the code is newer than the maps last read (read
    // again at most every 100 ms). A launch of a lower layer's library (a driver's) right after
    // a launch of a higher layer (a runtime's) on its thread, with no record between, is the
    // launch that one made (a runtime launch the runtime refuses makes none, and the program's
    // next driver launch would be taken for it: rare). Never the other way: a runtime launch
    // after a driver launch is a launch of its own, whatever their libraries.
    if (fold_into_held(ev, *p, nullptr, 0)) {
      ++counters_.folded_by_order;
      return Fate::kFolded;
    }
  }
  if (outer) {
    uint64_t site = ev.caller - m->start + m->offset;
    if (fold_into_held(ev, *p, outer, site)) return Fate::kFolded;
    // The runtime's own probe is gone: this launch is the runtime's. Unless the thread's last
    // record was a runtime launch released at the end of a read cycle: one entered before its
    // probe went, whose driver launch this is (counted there, below).
    if (outer->proven && !awaited) {
      uint32_t as = outer->any_probe;
      if (auto s = outer->sites.find(site); s != outer->sites.end()) as = s->second;
      if (const hal::AttachedProbe* rp = table_.find(as); rp && rp->spec) {
        ev.nested_api = ev.api;
        ev.nested_op = ev.op;
        ev.nested_kind = ev.kind;
        ev.nested += 1;
        ev.vendor = rp->match.vendor;
        ev.api = rp->match.api;
        ev.op = rp->spec->symbol;
        ev.library = rp->library;
        ++counters_.renamed;
      }
      settle(ev.tid, out);
      return Fate::kEmit;
    }
    // The runtime launch it was made in went out already: the first of its library or a timed
    // one, counted there (in BPF); or one released at the end of a read cycle after the one it
    // was read in, its thread stalled between the two probes for a whole cycle: its nested
    // call goes uncounted, the launch is not counted twice.
    outer->nests = true;
    ++counters_.folded;
    return Fate::kFolded;
  }
  settle(ev.tid, out);
  // Held until the thread's next record (or the end of the read cycle): the driver launch it
  // makes, if it makes one, is counted in it. Held from the first launch of a library on, not
  // only once it is seen to nest, so that no driver launch goes uncounted.
  if (!ev.timed) {
    Held& h = held_[ev.tid];  // released by the settle above, if it was held
    last_held_tid_ = ev.tid;
    last_held_ = &h;
    h.ev = std::move(ev);
    h.probe = probe_id;
    h.runtime = &self;
    h.nested = false;
    h.active = true;
    h.cycle = cycle_;
    ++holding_;
    ++counters_.held;
    return Fate::kHeld;
  }
  if (ev.timed && self.nests) self.in_a_row = ev.nested ? self.in_a_row + 1 : 0;
  return Fate::kEmit;
}

}  // namespace ingero::capture
