#include "capture/stack_collector.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "capture/host_info.h"
#include "hal/clock.h"
#include "probe/bpf_session.h"

namespace ingero::capture {
namespace {

constexpr uint64_t kFnvBasis = 0xcbf29ce484222325ULL, kFnvPrime = 0x100000001b3ULL;

void mix(uint64_t& h, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * kFnvPrime;
}
void mix(uint64_t& h, const std::string& s) {
  mix(h, s.data(), s.size());
  h = (h ^ 0xff) * kFnvPrime;  // separator: "ab"+"c" differs from "a"+"bc"
}
void mix(uint64_t& h, uint64_t v) { mix(h, &v, sizeof v); }

bool is_eval_loop(const std::string& fn) {
  return fn == "_PyEval_EvalFrameDefault" || fn.rfind("_PyEval_EvalFrameDefault.", 0) == 0;
}

}  // namespace

StackCollector::StackCollector(hal::EventSink& out, hal::BpfSession* session, std::string proc_root)
    : out_(out), session_(session), proc_root_(std::move(proc_root)) {}

StackCollector::~StackCollector() = default;

void StackCollector::release() {
  symbolizer_.forget();
  std::unordered_map<uint32_t, Process>().swap(procs_);
  std::unordered_set<uint64_t>().swap(stored_);
  std::unordered_set<std::string>().swap(warned_);
  std::unordered_set<std::string>().swap(same_on_host_);
  last_ = {};
}

StackCollector::Process& StackCollector::process(uint32_t pid) {
  auto it = procs_.find(pid);
  if (it != procs_.end()) return it->second;
  Process& p = procs_[pid];
  snapshot(pid, p);
  setup_python(pid, p);
  return p;
}

namespace {

std::string module_key(const hal::MapEntry& m) {
  return m.inode ? std::to_string(m.dev_major) + ":" + std::to_string(m.dev_minor) + ":" +
                       std::to_string(m.inode)
                 : m.path;
}

// Whether `path` on this host is the very file the process mapped.
bool same_file(const std::string& path, const hal::MapEntry& m) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && st.st_ino == m.inode && major(st.st_dev) == m.dev_major &&
         minor(st.st_dev) == m.dev_minor;
}

}  // namespace

bool StackCollector::snapshot(uint32_t pid, Process& p, std::vector<hal::MapEntry> maps) {
  if (maps.empty()) {
    std::string text = read_small_file(proc_root_ + "/" + std::to_string(pid) + "/maps");
    if (text.empty()) return false;
    maps = hal::parse_proc_maps(text);
  }
  std::sort(maps.begin(), maps.end(),
            [](const auto& a, const auto& b) { return a.start < b.start; });
  p.maps = std::move(maps);
  // Code the host cannot reach by the same path (a container's files, a file replaced since)
  // is opened now, through the process's root, while it lives: the symbolizer keeps it open,
  // so the stacks of a container process that exits first still resolve.
  std::string root = proc_root_ + "/" + std::to_string(pid) + "/root";
  for (const auto& m : p.maps) {
    if (!m.executable() || !m.inode || m.path.empty() || m.path[0] != '/' || m.deleted) continue;
    std::string key = module_key(m);
    if (symbolizer_.has(key) || same_on_host_.count(key)) continue;
    if (!same_file(m.path, m)) {
      symbolizer_.preload(key, root + m.path);
    } else {
      if (same_on_host_.size() >= kMaxSameOnHost) same_on_host_.clear();
      same_on_host_.insert(std::move(key));
    }
  }
  return true;
}

void StackCollector::setup_python(uint32_t pid, Process& p) {
  // Inspected again until verified: a process seen at exec has no interpreter state yet, and
  // only a populated thread list can prove (or disprove) the layout.
  if (p.python && p.python->verified()) return;
  auto py = hal::PythonProcess::inspect(int(pid), p.maps, proc_root_);
  if (!py) {
    // Exited before it could be read: nothing to verify against. What BPF walked under the
    // configuration it already has stands (every frame passed the code-object type check).
    // (A zombie's maps read empty too.)
    if (read_small_file(proc_root_ + "/" + std::to_string(pid) + "/maps").empty()) return;
    if (p.python) {  // configured before its state existed; now refused: stop walking it
      if (session_) (void)session_->set_python(pid, nullptr);
      p.python.reset();
      --counters_.python_processes;
    }
    if (!p.refused) ++counters_.python_refused;
    p.refused = true;
    std::string key = py.error().message.substr(0, py.error().message.find(':'));
    if (warned_.insert(key).second && on_warning) on_warning(py.error().message);
    return;
  }
  if (!*py) return;  // not (yet) a Python process
  if (!p.python) ++counters_.python_processes;
  p.python = std::move(**py);
  if (session_) {
    ingero_py_config cfg = p.python->bpf_config();
    if (auto st = session_->set_python(pid, &cfg); !st && on_warning)
      on_warning(st.error().message);
  }
}

void StackCollector::process_changed(uint32_t pid, std::vector<hal::MapEntry> maps) {
  auto [it, fresh] = procs_.try_emplace(pid);
  Process& p = it->second;
  if (!snapshot(pid, p, std::move(maps))) {
    if (fresh) procs_.erase(it);  // gone already: nothing to keep
    return;
  }
  setup_python(pid, p);
}

void StackCollector::process_seen(uint32_t pid) { (void)process(pid); }

void StackCollector::process_exited(uint32_t pid) {
  auto it = procs_.find(pid);
  if (it == procs_.end()) return;
  if (it->second.python && session_) (void)session_->set_python(pid, nullptr);
  procs_.erase(it);
  last_ = {};
}

void StackCollector::forget_gone(const std::function<bool(uint32_t)>& keep) {
  std::vector<uint32_t> gone;
  for (const auto& [pid, p] : procs_)
    if (p.ids.empty() && !(keep && keep(pid)) &&
        access((proc_root_ + "/" + std::to_string(pid)).c_str(), F_OK) != 0)
      gone.push_back(pid);
  for (uint32_t pid : gone) process_exited(pid);
}

void StackCollector::scan_existing(const std::vector<int>& pids) {
  for (int pid : pids) {
    std::string text = read_small_file(proc_root_ + "/" + std::to_string(pid) + "/maps");
    if (text.find("python") == std::string::npos) continue;
    process_changed(uint32_t(pid));
  }
}

const hal::MapEntry* StackCollector::find(const Process& p, uint64_t ip) const {
  auto it = std::upper_bound(p.maps.begin(), p.maps.end(), ip,
                             [](uint64_t v, const hal::MapEntry& m) { return v < m.start; });
  if (it == p.maps.begin()) return nullptr;
  --it;
  return ip < it->end ? &*it : nullptr;
}

void StackCollector::on_stack(const ingero_stack_rec& rec) {
  ++counters_.received;
  Process& p = process(rec.pid);
  // A Python process inspected before its interpreter was up: check it now, once.
  if (p.python && !p.python->verified() && !p.rechecked) {
    p.rechecked = true;
    setup_python(rec.pid, p);
  }
  auto native = native_frames(rec, p);  // may read the maps again: before the Python frames
  std::vector<hal::StackFrame> frames = merge(std::move(native), python_groups(rec, p));
  if (frames.empty()) {
    // Arrived, but its first address already broke the frame-pointer chain: the calls that
    // name it have no stack, and lost no record.
    ++counters_.empty;
    p.ids[rec.hash] = 0;
    last_ = {};
    return;
  }
  uint64_t id = stack_identity(frames);
  if (stored_.insert(id).second) {
    if (auto st = out_.on_stack(id, frames); !st) {
      stored_.erase(id);
      if (on_warning) on_warning("storing a stack: " + st.error().message);
    } else {
      ++counters_.stored;
    }
  }
  p.ids[rec.hash] = id;
  last_ = {};
}

// The native frames of a stack record, symbolized; up to the first address that is no return
// address (a broken frame-pointer chain).
std::vector<hal::StackFrame> StackCollector::native_frames(const ingero_stack_rec& rec,
                                                           Process& p) {
  uint32_t n_ips = std::min<uint32_t>(rec.n_ips, INGERO_STACK_MAX);
  // Refresh once if an address is outside the snapshot (a library loaded since), while the
  // process still lives; not within kMapsRereadNs of a refresh that left its address outside
  // (garbage: a broken frame-pointer chain).
  bool refreshed = false;
  int64_t now = hal::mono_now_ns();
  bool may_reread = now - p.useless_reread_ns >= kMapsRereadNs;
  // A process that has exited but not been reaped (a zombie) still answers kill(0), and its
  // maps read empty: it is gone (its stacks were cut at their first frame, every frame of a
  // complete chain lost, and said to be a broken one).
  for (uint32_t i = 0; i < n_ips && !refreshed && may_reread && !p.gone; ++i)
    if (!find(p, rec.ips[i]) && kill(pid_t(rec.pid), 0) == 0) {
      ++counters_.maps_rereads;
      if (!snapshot(rec.pid, p)) {
        p.gone = true;
        break;
      }
      refreshed = true;
      if (!find(p, rec.ips[i])) p.useless_reread_ns = now;
    }

  std::vector<hal::StackFrame> native;
  native.reserve(n_ips);
  std::string root = proc_root_ + "/" + std::to_string(rec.pid) + "/root";
  for (uint32_t i = 0; i < n_ips; ++i) {
    uint64_t ip = rec.ips[i];
    hal::StackFrame f;
    const hal::MapEntry* m = find(p, ip);
    // A return address lies in executable memory. One that does not means the frame-pointer
    // chain broke (code built without frame pointers): what follows is not a stack.
    // Unmapped: garbage if the process is alive (its maps were refreshed) or the address is not
    // even a canonical user address; otherwise a library the exited process loaded after our
    // snapshot, kept as a raw address.
    if ((m && !m->executable()) ||
        (!m && (refreshed || ip >= (1ULL << 47) || (!p.gone && kill(pid_t(rec.pid), 0) == 0))))
      break;
    ++counters_.native_frames;
    if (!m || m->path.empty() || m->path[0] != '/') {
      f.module = m ? m->path : "";
      f.module_offset = m ? ip - m->start + m->offset : ip;
      ++counters_.unresolved;
      native.push_back(std::move(f));
      continue;
    }
    f.module = m->path;
    f.module_offset = ip - m->start + m->offset;
    std::string key = module_key(*m);
    // Through the process's root while it lives; after that only a host file that is the same
    // inode (never a different file at the same path: a container's libc is not the host's).
    // Files the host cannot reach were opened when the maps were taken.
    std::string open_path = access((root + m->path).c_str(), R_OK) == 0 ? root + m->path
                            : same_file(m->path, *m)                    ? m->path
                                                                        : "";
    // Every frame of a stack taken at a return is a return address: look up the call.
    hal::NativeSymbol s = symbolizer_.symbolize(key, open_path, *f.module_offset, true,
                                                !hal::system_library(m->path));
    f.function = s.function;
    f.file = s.file;
    f.line = s.line;
    f.build_id = s.build_id;
    if (f.function.empty()) ++counters_.unresolved;
    native.push_back(std::move(f));
  }

  return native;
}

// The Python frames of a stack record, grouped by the eval loop that runs them (innermost
// first).
std::vector<std::vector<hal::StackFrame>> StackCollector::python_groups(const ingero_stack_rec& rec,
                                                                        Process& p) {
  std::vector<std::vector<hal::StackFrame>> groups;
  if (p.python && rec.n_py) {
    const hal::PyLayout& l = p.python->layout();
    std::vector<hal::StackFrame> group;
    uint32_t n_py = std::min<uint32_t>(rec.n_py, INGERO_PY_MAX);
    for (uint32_t i = 0; i < n_py; ++i) {
      uint8_t flags = rec.py_flags[i];
      if (flags & INGERO_PY_SHIM) {  // 3.12+: a shim closes the group before it
        if (!group.empty()) groups.push_back(std::move(group));
        group.clear();
        continue;
      }
      if (flags & INGERO_PY_NOT_CODE) {  // BPF saw no PyCodeObject there: never a frame
        ++counters_.python_invalid;
        continue;
      }
      uint64_t gone_before = p.python->unreadable_frames();
      auto info = p.python->resolve(rec.py[i].code, rec.py[i].instr);
      if (info) {
        if (!info->line) ++counters_.python_no_line;
        hal::StackFrame f;
        f.python = true;
        f.function = info->function;
        f.file = info->file;
        f.line = info->line;
        group.push_back(std::move(f));
        ++counters_.python_frames;
      } else if (p.python->unreadable_frames() != gone_before) {
        ++counters_.python_gone;
      } else {
        ++counters_.python_invalid;
      }
      if ((flags & INGERO_PY_ENTRY) && l.owner_cstack == 0xff) {  // 3.10/3.11: entry frame ends it
        groups.push_back(std::move(group));
        group.clear();
      }
    }
    if (!group.empty()) groups.push_back(std::move(group));
    if (rec.py_status == INGERO_PY_TRUNCATED) ++counters_.python_truncated;
  } else if (p.python) {
    ++counters_.python_missing;
  }

  return groups;
}

// Each eval-loop frame of the native stack becomes its Python frames; groups the native stack
// does not reach (no frame pointers in the interpreter) go outermost.
std::vector<hal::StackFrame> StackCollector::merge(
    std::vector<hal::StackFrame> native, std::vector<std::vector<hal::StackFrame>> groups) {
  std::vector<hal::StackFrame> frames;
  size_t g = 0;
  for (auto& f : native) {
    if (g < groups.size() && is_eval_loop(f.function)) {
      for (auto& x : groups[g]) frames.push_back(x);
      ++g;
      continue;
    }
    frames.push_back(std::move(f));
  }
  for (; g < groups.size(); ++g)
    for (auto& x : groups[g]) frames.push_back(std::move(x));

  return frames;
}

// A stack's id: a hash of its frames (Python by file, function and line; native by build id or
// module, and offset), positive for SQLite, never 0.
uint64_t StackCollector::stack_identity(const std::vector<hal::StackFrame>& frames) {
  uint64_t id = kFnvBasis;
  for (const auto& f : frames) {
    if (f.python) {
      mix(id, std::string("P"));
      mix(id, f.file);
      mix(id, f.function);
      mix(id, uint64_t(f.line));
    } else {
      mix(id, std::string("N"));
      mix(id, f.build_id.empty() ? f.module : f.build_id);
      mix(id, f.module_offset.value_or(0));
    }
  }
  id &= 0x7fffffffffffffffULL;  // SQLite integers are signed: keep ids positive
  if (!id) id = 1;
  return id;
}

void StackCollector::on_py_code(const ingero_py_code_rec& rec) {
  Process& p = process(rec.pid);
  if (p.python) p.python->add_code(rec);
}

bool StackCollector::knows(uint32_t pid, uint64_t hash) const {
  if (hash && hash == last_.hash && pid == last_.pid) return true;
  auto it = procs_.find(pid);
  if (it == procs_.end()) return false;
  auto s = it->second.ids.find(hash);
  if (s == it->second.ids.end()) return false;
  last_ = {pid, hash, s->second};
  return true;
}

uint64_t StackCollector::stack_id(uint32_t pid, uint64_t hash) {
  if (!hash) return 0;
  if (hash == last_.hash && pid == last_.pid) return last_.id;
  auto it = procs_.find(pid);
  if (it != procs_.end()) {
    auto s = it->second.ids.find(hash);
    if (s != it->second.ids.end()) {
      last_ = {pid, hash, s->second};
      return s->second;
    }
  }
  ++counters_.unknown_refs;
  return 0;
}

}  // namespace ingero::capture
