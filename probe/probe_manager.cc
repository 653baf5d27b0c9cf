#include "probe/probe_manager.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <unordered_set>
#include <utility>

namespace ingero::hal {
namespace {

DiscoveryOptions options_for(const std::vector<const VendorBackend*>& backends,
                             const HostView& host) {
  DiscoveryOptions o;
  std::set<std::string> hints, dirs;
  auto getenv = [&](const char* n) { return host.env(n); };
  for (const auto* b : backends) {
    for (auto h : b->file_hints()) hints.insert(std::string(h));
    for (auto& d : b->install_dirs(getenv)) dirs.insert(d);
  }
  // Where this environment's programs find libraries the loader's cache does not list (a
  // ROCm or CUDA install under /opt, a job's own copy): `check` said "no library of this
  // vendor found" where `trace` then traced them.
  const std::string path = getenv("LD_LIBRARY_PATH");
  for (size_t at = 0; at <= path.size();) {
    size_t end = path.find(':', at);
    if (end == std::string::npos) end = path.size();
    if (end > at && path[at] == '/') dirs.insert(path.substr(at, end - at));
    at = end + 1;
  }
  o.hints.assign(hints.begin(), hints.end());
  o.dirs.assign(dirs.begin(), dirs.end());
  return o;
}

// Names any backend could ask for, with every variant spelling; .symtab is filtered by it.
SymbolFilter wanted_names(const std::vector<const VendorBackend*>& backends) {
  auto names = std::make_shared<std::unordered_set<std::string>>();
  static constexpr Variant kAll[] = {kBase, kPtsz, kPtds, kV2, kV2Ptsz, kV2Ptds, kSpt};
  for (const auto* b : backends) {
    for (auto table : b->tables()) {
      for (const auto& spec : table) {
        for (Variant v : kAll) {
          std::string n = std::string(spec.symbol) + std::string(variant_suffix(v));
          names->insert(n);
          names->insert("p" + n);
        }
      }
    }
  }
  return [names](std::string_view n) { return names->count(std::string(n)) > 0; };
}

}  // namespace

std::string library_version(std::string_view real_name, std::string_view soname) {
  for (std::string_view n : {real_name, soname}) {
    size_t at = n.find(".so.");
    if (at != std::string_view::npos && at + 4 < n.size()) return std::string(n.substr(at + 4));
  }
  return "";
}

ProbeManager::ProbeManager(BpfSession* session, std::vector<const VendorBackend*> backends,
                           const HostView& host)
    : session_(session),
      backends_(std::move(backends)),
      host_(host),
      discovery_(host, options_for(backends_, host)),
      symbols_(wanted_names(backends_)) {
  if (!session_ || session_->call_attach() == CallAttach::kSession) return;
  uint32_t every = session_->config().launch_timing_every;
  if (every <= 1) return;  // 1: every launch timed, its return probe always attached
  if (const char* ms = std::getenv("INGERO_LAUNCH_WINDOW_MS"); ms && std::atoll(ms) > 0)
    windows_.window_ns = std::atoll(ms) * 1'000'000;
  windows_.period_ns = windows_.window_ns * int64_t(every);
}

std::vector<LibraryStatus> ProbeManager::scan_all(const std::vector<int>* only) {
  return handle(discovery_.scan_all(only));
}

std::vector<LibraryStatus> ProbeManager::scan_pid(int pid, std::vector<MapEntry>* maps) {
  return handle(discovery_.scan_process(pid, maps));
}

std::vector<LibraryStatus> ProbeManager::scan_file(const std::string& path, bool main_executable) {
  return handle(discovery_.scan_file(path, main_executable));
}

std::vector<LibraryStatus> ProbeManager::handle(std::vector<DiscoveredFile> files) {
  std::vector<LibraryStatus> fresh;
  for (auto& f : files) {
    // Pids mapping an already-handled file are still worth remembering for check/trace.
    if (handled_.count(f.id)) {
      for (auto& lib : libraries_)
        if (lib.path == f.display_path) lib.pids.insert(f.pids.begin(), f.pids.end());
      // By identity: a process may map the file by another path (a soname link).
      if (lookup_files_.count(f.id))
        for (int pid : f.pids) lookup_newcomer_ |= lookup_pids_.insert(pid).second;
      continue;
    }
    handled_.insert(f.id);
    auto idx = symbols_.get(f.path);
    if (!idx) {
      // Only files a backend hinted at by name are worth an error line; an unparsable
      // main executable is just not a candidate.
      if (!f.main_executable) {
        LibraryStatus st;
        st.path = f.display_path;
        st.sources = f.sources;
        st.pids = f.pids;
        st.errors.push_back(idx.error().message);
        errors_.push_back(idx.error().message);
        libraries_.push_back(st);
        fresh.push_back(std::move(st));
      }
      continue;
    }
    // A file replaced on disk since it was mapped is shown "PATH (deleted)" (discovery reaches
    // it through /proc/PID/map_files): its name is the name before the mark.
    std::string_view base = path_basename(f.display_path);
    if (base.ends_with(kDeletedMark)) base.remove_suffix(kDeletedMark.size());
    MappedFile mf{f.path, f.display_path, base, idx->get(), f.main_executable};
    char real[PATH_MAX];
    std::string real_name = realpath(f.path.c_str(), real) ? std::string(path_basename(real))
                                                           : std::string(mf.basename);
    if (real_name.ends_with(kDeletedMark)) real_name.resize(real_name.size() - kDeletedMark.size());
    for (auto& plan : plan_file(mf, backends_, want_)) {
      LibraryStatus st;
      st.backend = std::string(plan.backend->name());
      st.vendor = std::string(plan.match.vendor);
      st.api = std::string(plan.match.api);
      st.path = f.display_path;
      st.soname = plan.soname;
      st.version = library_version(real_name, plan.soname);
      st.build_id = plan.build_id;
      st.sources = f.sources;
      st.pids = f.pids;
      st.embedded = plan.match.embedded;
      st.stub = f.display_path.find("/stubs/") != std::string::npos;
      st.specs_total = plan.specs_total;
      st.specs_resolved = plan.specs_resolved;
      st.probes_planned = plan.probes.size();
      for (auto m : plan.missing_required) st.missing_required.emplace_back(m);
      for (auto m : plan.missing_optional) st.missing_optional.emplace_back(m);
      if (session_ && !plan.probes.empty()) attach_file(f, plan.probes, st);
      libraries_.push_back(st);
      fresh.push_back(std::move(st));
    }
  }
  return fresh;
}

void ProbeManager::attach_file(const DiscoveredFile& f, const std::vector<ResolvedProbe>& probes,
                               LibraryStatus& st) {
  AttachedFile a;
  a.path = f.path;
  a.display_path = f.display_path;
  // The file's probes in three kinds of links: launches and kernel-name look-ups (a recipe that
  // holds repeats back: INGERO_NAME_ONCE) apart from the others, so that either can be detached
  // alone.
  enum Group { kOther, kLaunches, kLookups };
  std::vector<ingero_recipe> recipes;
  std::vector<Group> groups;
  for (const ResolvedProbe& rp : probes) {
    recipes.push_back(make_recipe(*rp.spec, rp.match.layer));
    groups.push_back(rp.spec->kind == EventKind::kLaunch ? kLaunches
                     : recipes.back().name_once          ? kLookups
                                                         : kOther);
  }
  for (Group g : {kOther, kLaunches, kLookups}) {
    std::vector<CallSite> sites;
    std::vector<const ResolvedProbe*> of;
    for (size_t k = 0; k < probes.size(); ++k) {
      if (groups[k] != g) continue;
      const ResolvedProbe& rp = probes[k];
      uint32_t id = table_.add({rp.backend, rp.spec, rp.match, f.display_path, rp.symbol});
      sites.push_back({rp.file_offset, id, recipes[k]});
      of.push_back(&rp);
    }
    if (sites.empty()) continue;
    bool launches = g == kLaunches;
    bool windows = launches && windows_.period_ns;
    auto res = session_->attach_calls(f.path, sites, windows);
    for (auto& [i, why] : res.failed) st.errors.push_back(of[i]->symbol + ": " + why);
    st.probes_attached += sites.size() - res.failed.size();
    auto& kept = launches ? a.launch_sites : g == kLookups ? a.lookup_sites : a.sites;
    for (size_t i = 0; i < sites.size(); ++i)
      if (std::none_of(res.failed.begin(), res.failed.end(),
                       [&](const auto& x) { return x.first == i; }))
        kept.push_back(sites[i]);
    auto& links = launches ? a.launch_links : g == kLookups ? a.lookup_links : a.links;
    for (Link& l : res.links) links.push_back(std::move(l));
    // The first window, from now until a window's length after the file's first launch.
    if (windows && !a.launch_sites.empty() && !open_window(a)) a.window.next_ns = INT64_MAX;
  }
  attached_ += st.probes_attached;
  a.lookup_resting.assign(a.lookup_sites.size(), false);
  if (!a.lookup_sites.empty()) {
    lookup_files_.insert(f.id);
    lookup_pids_.insert(f.pids.begin(), f.pids.end());
  }
  attached_files_.push_back(std::move(a));
}

Result<size_t> ProbeManager::detach_launches(const std::string& path,
                                             std::function<void(size_t)> gone) {
  std::vector<uint32_t> ids;
  std::vector<Link> links;
  for (AttachedFile& a : attached_files_) {
    if (a.display_path != path || a.launch_sites.empty() || !session_) continue;
    std::vector<uint32_t> of;
    for (const CallSite& c : a.launch_sites) of.push_back(c.probe_id);
    // First no launch enters through them any more (the driver's probe sees it), while a launch
    // in flight through them still gets its return; then their links go, and with them any
    // return still due, whose frame BPF retires at its thread's next call. The file's other
    // probes, in links of their own, are not touched: their calls in flight keep their returns.
    if (auto st = session_->retire_probes(of, false); !st)
      return make_error(path + ": " + st.error().message);
    ids.insert(ids.end(), of.begin(), of.end());
    for (auto* ls : {&a.launch_links, &a.launch_returns, &a.closing_returns})
      for (Link& l : *ls) links.push_back(std::move(l));
    a.launch_links.clear();
    a.launch_returns.clear();
    a.closing_returns.clear();
    a.launch_sites.clear();
  }
  size_t total = ids.size();
  attached_ -= total;
  for (LibraryStatus& st : libraries_)
    if (st.path == path) st.probes_attached -= std::min(st.probes_attached, total);
  if (links.empty()) return total;
  // The links close on the closer's thread (probe/link_closer.h): the caller reads the rings.
  BpfSession* session = session_;
  closer_.close(std::move(links), [session, ids = std::move(ids), path, gone, total] {
    if (auto st = session->retire_probes(ids, true); !st)
      std::fprintf(stderr, "ingero: warning: %s: %s\n", path.c_str(), st.error().message.c_str());
    if (gone) gone(total);
  });
  return total;
}

HandOff ProbeManager::detach() {
  std::vector<Link> all;
  for (AttachedFile& a : attached_files_) {
    for (auto* links :
         {&a.links, &a.launch_links, &a.lookup_links, &a.launch_returns, &a.closing_returns})
      for (Link& l : *links) all.push_back(std::move(l));
  }
  for (Link& l : loader_links_) all.push_back(std::move(l));
  attached_files_.clear();
  loader_links_.clear();
  HandOff off;
  size_t perf =
      size_t(std::count_if(all.begin(), all.end(), [](const Link& l) { return l.perf_uprobe(); }));
  // Each close waits for a grace period (the program's detach), which the closes made together
  // share: perf-event links 16 at a time took 0.8 s for 357 links here, 64 ~0.15 s; a session's
  // ~25 uprobe_multi links (a file's other probes, launches and look-ups apart), 16 at a time,
  // two rounds of grace periods where 64 at a time take one.
  auto close_here = [&] {
    closer_.wait();
    {  // windows opened since: their return probes too
      std::lock_guard lk(opened_mu_);
      for (Opened& o : opened_)
        if (o.links)
          for (Link& l : *o.links) all.push_back(std::move(l));
      opened_.clear();
    }
    close_links(std::move(all), 64);
  };
  // The launch links the closer still holds are then not the last references either.
  if (perf >= kHandOffPerfLinks)
    off = hand_off_perf_events(close_here);
  else
    close_here();
  return off;
}

std::vector<uint32_t> ProbeManager::launch_ids(const AttachedFile& a) const {
  std::vector<uint32_t> ids;
  for (const CallSite& c : a.launch_sites) ids.push_back(c.probe_id);
  return ids;
}

namespace {

// Attaches the return probes of `sites` in `path`, then sets their launch window to `w` (entries
// push frames from then on): their links, or why not (those attached are then closed on
// `closer`'s thread).
Result<std::vector<Link>> attach_window(BpfSession& session, LinkCloser& closer,
                                        const std::string& path, const std::vector<CallSite>& sites,
                                        const std::vector<uint32_t>& ids, uint16_t w) {
  auto links = session.attach_returns(path, sites);
  if (!links) return links.error();
  if (auto st = session.set_launch_window(ids, w); !st) {
    closer.close(std::move(*links));
    return st.error();
  }
  return links;
}

}  // namespace

// Opens the file's first window, at its attach. False when it could not: its launches stay
// untimed, as said once.
bool ProbeManager::open_window(AttachedFile& a) {
  uint16_t w = next_window(a.window.window);
  auto links = attach_window(*session_, closer_, a.path, a.launch_sites, launch_ids(a), w);
  if (!links) {
    std::fprintf(stderr,
                 "ingero: warning: %s: its launches are not timed (%s); they are still counted, "
                 "at one trap each\n",
                 a.display_path.c_str(), links.error().message.c_str());
    return false;
  }
  a.window.window = w;
  a.launch_returns = std::move(*links);
  ++windows_opened_;
  return true;
}

// Closes the window: entries push no frame from then on. Its return probes go a tick later, on
// the closer's thread, so that the launches in flight as it closed return timed (a launch
// returns within microseconds, unless the GPU's queue is full); meanwhile a launch entered
// untimed still traps at its return. A frame whose return goes with them is shipped untimed by
// BPF at its thread's next call.
void ProbeManager::close_window(AttachedFile& a, int64_t now_ns) {
  if (auto st = session_->set_launch_window(launch_ids(a), next_window(a.window.window)); !st) {
    // Its frames would wait for returns that never come: the window stays open.
    std::fprintf(stderr, "ingero: warning: %s: %s\n", a.display_path.c_str(),
                 st.error().message.c_str());
    return;
  }
  a.window.window = next_window(a.window.window);
  for (Link& l : a.launch_returns) a.closing_returns.push_back(std::move(l));
  a.launch_returns.clear();
  a.close_returns_at = now_ns + kReturnGraceNs;
}

void ProbeManager::launch_seen(uint32_t probe_id, int64_t now_ns) {
  if (!windows_.period_ns) return;
  for (AttachedFile& a : attached_files_)
    for (const CallSite& c : a.launch_sites)
      if (c.probe_id == probe_id) return window_first_launch(a.window, now_ns, windows_);
}

// Attaches file `file`'s launch return probes on the closer's thread, then opens its window
// there; take_opened() hands the result to the reading thread.
void ProbeManager::open_later(size_t file) {
  AttachedFile& a = attached_files_[file];
  a.opening = true;
  uint16_t w = next_window(a.window.window);
  closer_.run([this, file, w, path = a.path, sites = a.launch_sites, ids = launch_ids(a)] {
    Opened o{file, w, attach_window(*session_, closer_, path, sites, ids, w)};
    std::lock_guard lk(opened_mu_);
    opened_.push_back(std::move(o));
  });
}

void ProbeManager::take_opened(int64_t now_ns) {
  std::vector<Opened> got;
  {
    std::lock_guard lk(opened_mu_);
    got.swap(opened_);
  }
  for (Opened& o : got) {
    if (o.file >= attached_files_.size()) continue;  // (never: files are only added)
    AttachedFile& a = attached_files_[o.file];
    a.opening = false;
    if (!o.links) {
      // Tried again a period later; meanwhile its launches are counted, untimed.
      std::fprintf(stderr, "ingero: warning: %s: a launch timing window did not open (%s)\n",
                   a.display_path.c_str(), o.links.error().message.c_str());
      a.window.next_ns = now_ns + windows_.period_ns;
      continue;
    }
    if (a.launch_sites.empty()) {  // its launch probes went meanwhile (detach_launches)
      closer_.close(std::move(*o.links));
      continue;
    }
    a.window.window = o.window;
    a.window.next_ns = now_ns + windows_.window_ns;
    a.launch_returns = std::move(*o.links);
    ++windows_opened_;
  }
}

void ProbeManager::tick_launch_windows(int64_t now_ns) {
  if (!windows_.period_ns) return;
  take_opened(now_ns);
  for (size_t i = 0; i < attached_files_.size(); ++i) {
    AttachedFile& a = attached_files_[i];
    if (!a.closing_returns.empty() && now_ns >= a.close_returns_at) {
      closer_.close(std::move(a.closing_returns));
      a.closing_returns.clear();
    }
    if (a.launch_sites.empty() || a.opening) continue;  // none, detached, or being opened
    switch (window_step(a.window, now_ns, windows_)) {
      case WindowStep::kOpen:
        open_later(i);
        break;
      case WindowStep::kClose:
        close_window(a, now_ns);
        break;
      case WindowStep::kNone:
        break;
    }
  }
}

namespace {

// Where the loader's _r_debug lies from _dl_debug_state, for its probe to report a change of
// the link map once it is done, not also before (INGERO_LINKMAP_STATE_KNOWN). Only glibc's
// 64-bit layout (an object of at least 40 bytes: r_state at byte 24) is read; other loaders
// report every call.
uint64_t linkmap_cookie(const SymbolIndex& idx, const ElfSymbol& debug_state) {
  const ElfSymbol* r = idx.find_object("_r_debug");
  if (!r || r->size < 40) return 0;
  int64_t delta = int64_t(r->value) - int64_t(debug_state.value);
  if (delta < INT32_MIN || delta > INT32_MAX) return 0;
  return INGERO_LINKMAP_STATE_KNOWN | uint32_t(int32_t(delta));
}

}  // namespace

void ProbeManager::watch_loaders() {
  if (!session_) return;
  for (const auto& ld : discovery_.loaders()) {
    if (!loaders_handled_.insert(ld.id).second) continue;
    auto idx = SymbolIndex::load(ld.path);
    if (!idx) continue;
    const ElfSymbol* s = (*idx)->find_function("_dl_debug_state");
    if (!s) continue;
    auto off = (*idx)->file_offset(s->value);
    if (!off) continue;
    auto link = session_->attach_linkmap(ld.path, *off, linkmap_cookie(**idx, *s));
    if (link)
      loader_links_.push_back(std::move(*link));
    else
      errors_.push_back(loader_error_ = link.error().message);
  }
}

}  // namespace ingero::hal
