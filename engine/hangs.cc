#include "engine/hangs.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "engine/analysis.h"

namespace ingero::engine {
namespace {

using What = hal::Inflight::What;
using Status = hal::Inflight::Status;

std::string hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof(b), "0x%llx", (unsigned long long)v);
  return b;
}

bool is_collective_call(const hal::Inflight& in) {
  return in.what == What::kCall && in.call.kind == hal::EventKind::kCollective &&
         in.seq != hal::kNoSeq && in.call.has(hal::Field::kCommHash) &&
         in.call.has(hal::Field::kRank);
}

std::string basename(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string list_ranks(const std::vector<uint64_t>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i) s += i + 1 == ranks.size() ? " and " : ", ";
    s += std::to_string(ranks[i]);
  }
  return (ranks.size() == 1 ? "rank " : "ranks ") + s;
}

std::string state_words(hal::ThreadState s) {
  switch (s) {
    case hal::ThreadState::kRunning:
      return "on a CPU";
    case hal::ThreadState::kRunnable:
      return "runnable, waiting for a CPU";
    case hal::ThreadState::kSleeping:
      return "asleep";
    case hal::ThreadState::kIo:
      return "in uninterruptible I/O";
    case hal::ThreadState::kExited:
      return "gone";
    case hal::ThreadState::kStopped:
      return "stopped, by a signal or a debugger holding it";
    default:
      return "in an unknown state";
  }
}

int64_t waited(const hal::Inflight& in) { return int64_t(in.call.dur_ns); }

std::string ordinal(uint64_t n) {
  uint64_t t = n % 100, u = n % 10;
  const char* suffix = (t >= 11 && t <= 13) ? "th"
                       : u == 1             ? "st"
                       : u == 2             ? "nd"
                       : u == 3             ? "rd"
                                            : "th";
  return std::to_string(n) + suffix;
}

}  // namespace

size_t CollectiveHang::inside() const {
  size_t n = 0;
  for (const auto& r : ranks) n += r.inside;
  return n;
}

bool CollectiveHang::passed(const HangRank& r) const {
  return !r.inside && r.completed != hal::kNoSeq && r.completed > seq;
}

std::vector<const HangRank*> CollectiveHang::missing() const {
  std::vector<const HangRank*> out;
  for (const auto& r : ranks)
    if (!r.inside && !passed(r)) out.push_back(&r);
  return out;
}

std::vector<CollectiveHang> find_collective_hangs(
    const std::vector<InflightRow>& rows, const std::vector<FleetCommunicator>& communicators,
    uint64_t after_ns) {
  struct Who {
    std::string node;
    uint32_t pid = 0, tid = 0;
  };
  std::map<std::pair<uint64_t, uint64_t>, Who> where;  // (comm hash, rank)
  std::map<uint64_t, uint64_t> nranks_of;
  for (const auto& c : communicators) {
    nranks_of[c.hash] = std::max(nranks_of[c.hash], c.nranks);
    for (const auto& [rk, r] : c.ranks) where[{c.hash, rk}] = {r.node, r.pid, 0};
  }
  std::map<std::pair<std::string, uint32_t>, std::vector<const InflightRow*>> by_proc;
  std::map<std::pair<uint64_t, uint64_t>, std::vector<const InflightRow*>> groups;
  for (const auto& row : rows) {
    const hal::Inflight& in = row.in;
    by_proc[{row.node, in.call.pid}].push_back(&row);
    auto hash = in.call.get(hal::Field::kCommHash), rank = in.call.get(hal::Field::kRank);
    if (hash && rank) {
      where[{*hash, *rank}] = {row.node, in.call.pid, in.call.tid};
      nranks_of[*hash] = std::max(nranks_of[*hash], in.call.get_or(hal::Field::kNranks, 0));
    }
    if (is_collective_call(in) && in.call.dur_ns >= after_ns)
      groups[{*hash, in.seq}].push_back(&row);
  }
  std::vector<CollectiveHang> out;
  for (const auto& [key, inside] : groups) {
    // A collective every rank inside has left completed: a late rank, not a hang (a rank 7 s
    // late read as a HIGH hang whose late rank "never entered it").
    if (std::all_of(inside.begin(), inside.end(),
                    [](const InflightRow* r) { return r->in.status == Status::kReturned; }))
      continue;
    CollectiveHang h;
    h.comm_hash = key.first;
    h.seq = key.second;
    h.nranks = nranks_of[h.comm_hash];
    h.entered_ns = INT64_MAX;
    std::map<uint64_t, HangRank> ranks;
    for (const InflightRow* r : inside) {
      const hal::Inflight& in = r->in;
      HangRank hr;
      hr.rank = in.call.get_or(hal::Field::kRank, 0);
      hr.node = r->node;
      hr.pid = in.call.pid;
      hr.tid = in.call.tid;
      hr.inside = true;
      hr.completed = h.seq;
      hr.now = r;
      ranks[hr.rank] = hr;
      if (h.op.empty()) {
        h.op = std::string(in.call.op);
        h.vendor = std::string(in.call.vendor);
        h.api = std::string(in.call.api);
      }
      h.entered_ns = std::min(h.entered_ns, int64_t(in.call.ts_ns));
      h.longest_ns = std::max(h.longest_ns, waited(in));
      h.seen_ns = std::max(h.seen_ns, int64_t(in.seen_ns));
      h.ongoing = h.ongoing || in.status == Status::kInFlight;
    }
    // Every other rank anything recorded: where it is, and what its thread does.
    for (const auto& [wk, who] : where) {
      if (wk.first != h.comm_hash || ranks.count(wk.second)) continue;
      HangRank hr;
      hr.rank = wk.second;
      hr.node = who.node;
      hr.pid = who.pid;
      hr.tid = who.tid;
      auto procs = by_proc.find({who.node, who.pid});
      if (procs != by_proc.end()) {
        // Its stuck call first (the thread that should enter the collective is inside something
        // else), then its idle episode.
        for (const InflightRow* r : procs->second)
          if (r->in.what == What::kCall && (!hr.now || r->in.call.dur_ns > hr.now->in.call.dur_ns))
            hr.now = r;
        for (const InflightRow* r : procs->second)
          if (r->in.what == What::kIdle && r->in.call.get(hal::Field::kCommHash) == h.comm_hash) {
            if (!hr.now) hr.now = r;
            if (r->in.seq != hal::kNoSeq) hr.completed = r->in.seq;
          }
      }
      for (const auto& c : communicators) {
        if (c.hash != h.comm_hash) continue;
        auto it = c.ranks.find(hr.rank);
        if (it == c.ranks.end() || it->second.calls.empty()) continue;
        const RankCall& last = it->second.calls.back();
        if (hr.completed == hal::kNoSeq) hr.completed = last.seq + 1;
        hr.last_call_end = last.end;
        if (!hr.tid) hr.tid = last.tid;
      }
      ranks[hr.rank] = hr;
    }
    for (uint64_t rk = 0; rk < h.nranks && rk < 65536; ++rk)
      if (!ranks.count(rk)) h.unseen.push_back(rk);
    for (auto& [rk, hr] : ranks) h.ranks.push_back(std::move(hr));
    out.push_back(std::move(h));
  }
  return out;
}

std::string stack_location(const std::vector<StackFrameInfo>& frames) {
  for (const auto& f : frames)
    if (f.python && !f.file.empty())
      return basename(f.file) + ":" + std::to_string(f.line) +
             (f.function.empty() ? "" : " (" + f.function + ")");
  for (const auto& f : frames)
    if (!f.python && !f.function.empty())
      return f.function +
             (f.file.empty() ? "" : " at " + basename(f.file) + ":" + std::to_string(f.line));
  for (const auto& f : frames)
    if (!f.address.empty()) return f.address;
  return "";
}

std::string hang_duration(int64_t ns) {
  if (ns < 0) ns = 0;
  char b[48];
  double s = double(ns) / 1e9;
  if (s < 10)
    std::snprintf(b, sizeof(b), "%.1f s", s);
  else if (s < 600)
    std::snprintf(b, sizeof(b), "%.0f s", s);
  else
    std::snprintf(b, sizeof(b), "%lld min %lld s", (long long)(s / 60), (long long)s % 60);
  return b;
}

std::string others_text(const hal::Inflight& in) {
  uint32_t run = in.others_running, sleep = in.others_sleeping, io = in.others_io;
  if (run + sleep + io == 0) return "it has no other thread";
  if (run == 0 && io == 0)
    return sleep == 1 ? "its other thread is asleep" : "its other threads are asleep";
  std::string s = "of its other threads, ";
  std::vector<std::string> parts;
  if (run) parts.push_back(std::to_string(run) + " on a CPU");
  if (sleep) parts.push_back(std::to_string(sleep) + " asleep");
  if (io) parts.push_back(std::to_string(io) + " in I/O");
  for (size_t i = 0; i < parts.size(); ++i) s += (i ? ", " : "") + parts[i];
  return s;
}

std::string hang_line(const InflightRow& r, const std::string& process,
                      const std::vector<StackFrameInfo>& stack, int64_t waited_ns) {
  const hal::Inflight& in = r.in;
  std::string who = (process.empty() ? std::string(in.call.comm_view()) : process) + " (pid " +
                    std::to_string(in.call.pid) +
                    (in.call.tid != in.call.pid ? ", thread " + std::to_string(in.call.tid) : "") +
                    ")";
  std::string where = stack_location(stack);
  std::string at = where.empty() ? "" : " at " + where;
  std::string state = " (" + state_words(in.state) + ")";
  if (in.what == What::kIdle) {
    // Past tense once the episode is over: after the tracer stopped, "has made no GPU call ...;
    // it is asleep" spoke of a process that may be long gone.
    const bool now = in.status == Status::kInFlight;
    std::string s =
        who + (now ? " has made" : " had made") + " no GPU call for " + hang_duration(waited_ns);
    if (in.seq != hal::kNoSeq)
      s += " after " + std::to_string(in.seq) + " collective" + (in.seq == 1 ? "" : "s");
    s += std::string(now ? "; it is " : "; it was ") + state_words(in.state) +
         (where.empty() ? "" : " at " + where);
    switch (in.status) {
      case Status::kInFlight:
        return s + "; " + others_text(in);
      case Status::kStopped:
        return s + " when tracing stopped";
      case Status::kUnfinished:
        return s + " when its thread exited";
      case Status::kReturned:
        return s + ", then called again";
    }
    return s;
  }
  std::string op = "`" + std::string(in.call.op) + "`";
  if (in.seq != hal::kNoSeq) op += " #" + std::to_string(in.seq);
  switch (in.status) {
    case Status::kInFlight:
      return who + " has been inside " + op + " for " + hang_duration(waited_ns) + at + state +
             "; " + others_text(in);
    case Status::kUnfinished:
      return who + " was inside " + op + " for " + hang_duration(waited_ns) + at +
             " when its thread exited";
    case Status::kStopped:
      return who + " was still inside " + op + " after " + hang_duration(waited_ns) + at +
             " when tracing stopped";
    case Status::kReturned:
      return who + " was inside " + op + " for " + hang_duration(waited_ns) + at +
             " before it returned";
  }
  return who;
}

namespace {

std::string name_of(const std::map<std::string, std::map<uint32_t, std::string>>& names,
                    const std::string& node, uint32_t pid, const InflightRow* row) {
  if (auto n = names.find(node); n != names.end())
    if (auto p = n->second.find(pid); p != n->second.end() && !p->second.empty()) return p->second;
  return row ? std::string(row->in.call.comm_view()) : "";
}

std::vector<StackFrameInfo> frames_of(TraceSource* source, uint64_t stack_id) {
  if (!source || !stack_id) return {};
  return source->stack(stack_id);
}

// What a rank that is not inside does now, as a sentence's end.
std::string rank_now(TraceSource* source, const HangRank& r, int64_t seen_ns) {
  if (r.now) {
    const hal::Inflight& in = r.now->in;
    std::string where = stack_location(frames_of(source, in.stack_id));
    std::string at = where.empty() ? "" : " at " + where;
    if (in.what == What::kCall)
      return "its thread is inside `" + std::string(in.call.op) + "`" + at + " (for " +
             hang_duration(waited(in)) + ", " + state_words(in.state) + ")";
    return "its thread has made no GPU call for " + hang_duration(waited(in)) + " and is " +
           state_words(in.state) + at;
  }
  // No row: its latest on-CPU samples say where it ran last.
  if (source && r.pid) {
    Window w;
    w.pid = r.pid;
    if (!r.node.empty()) w.node = r.node;
    w.from_ns = (r.last_call_end ? r.last_call_end : seen_ns) - 60'000'000'000LL;
    CpuSample last;
    bool any = false;
    source->cpu_samples(w, [&](const CpuSample& s) {
      if (r.tid && s.tid != r.tid) return;
      last = s;
      any = true;
    });
    if (any) {
      std::string where = stack_location(frames_of(source, last.stack_id));
      if (!where.empty())
        return "its latest on-CPU sample (" + format_wall(last.ts_ns) + ") has it at " + where;
    }
  }
  if (r.last_call_end)
    return "nothing was recorded of it since its last collective ended at " +
           format_wall(r.last_call_end);
  return "nothing was recorded of what it does";
}

}  // namespace

Chain collective_hang_chain(TraceSource* source, const CollectiveHang& h,
                            const std::map<std::string, std::map<uint32_t, std::string>>& names) {
  std::vector<uint64_t> inside, missing;
  for (const auto& r : h.ranks)
    if (r.inside)
      inside.push_back(r.rank);
    else if (!h.passed(r))
      missing.push_back(r.rank);
  std::string coll = h.op + " #" + std::to_string(h.seq);
  std::string where_inside;
  std::set<std::string> nodes;
  for (const auto& r : h.ranks)
    if (r.inside) nodes.insert(r.node);
  for (const auto& n : nodes) where_inside += (where_inside.empty() ? "" : ", ") + n;
  std::vector<uint32_t> pids;
  for (const auto& r : h.ranks) pids.push_back(r.pid);
  Chain ch = new_chain("collective_hang", h.vendor, h.api, h.op, pids, h.entered_ns, h.seen_ns);
  ch.severity = Severity::kHigh;
  std::string verb = h.ongoing ? " have waited " : " waited ";
  if (inside.size() == 1) verb = h.ongoing ? " has waited " : " waited ";
  ch.summary = "Collective hang: " + list_ranks(inside) + verb + hang_duration(h.longest_ns) +
               " inside " + coll + " (the " + ordinal(h.seq + 1) + " collective on communicator " +
               hex(h.comm_hash) + (h.nranks ? ", " + std::to_string(h.nranks) + " ranks" : "") +
               ")";
  if (!missing.empty())
    ch.summary += "; " + list_ranks(missing) + " never entered it";
  else if (h.unseen.empty())
    ch.summary += "; every rank entered it";
  std::vector<std::string> causes;
  for (const auto& r : h.ranks) {
    std::string name = name_of(names, r.node, r.pid, r.now);
    std::string who = "rank " + std::to_string(r.rank) + " (" + (name.empty() ? "" : name + ", ") +
                      "pid " + std::to_string(r.pid) + (r.node.empty() ? "" : " on " + r.node) +
                      ")";
    if (r.inside) {
      const hal::Inflight& in = r.now->in;
      std::string where = stack_location(frames_of(source, in.stack_id));
      ch.timeline.push_back({layer_of(h.api), h.op,
                             who + " inside " + coll + " for " + hang_duration(waited(in)) +
                                 (where.empty() ? "" : " at " + where) + ", " +
                                 state_words(in.state),
                             uint64_t(waited(in)) / 1000});
      continue;
    }
    // A rank past the collective (its latest row was read after it left) entered it.
    std::string line =
        h.passed(r) ? who + " has completed " + coll + " already: " + rank_now(source, r, h.seen_ns)
                    : who + " never entered " + coll + ": " +
                          (r.completed == hal::kNoSeq
                               ? ""
                               : "it completed " + std::to_string(r.completed) + " collective" +
                                     (r.completed == 1 ? "" : "s") + " on the communicator; ") +
                          rank_now(source, r, h.seen_ns);
    ch.timeline.push_back({"HOST", "rank " + std::to_string(r.rank), line, 0});
    if (h.passed(r)) continue;
    causes.push_back(line);
    if (ch.node.empty()) ch.node = r.node;
  }
  for (uint64_t rk : h.unseen)
    ch.timeline.push_back({"HOST", "rank " + std::to_string(rk),
                           "rank " + std::to_string(rk) +
                               ": no traced process recorded it (not traced, or on a node "
                               "this source does not hold)",
                           0});
  if (ch.node.empty() && !h.ranks.empty()) ch.node = h.ranks.front().node;
  if (!causes.empty()) {
    ch.root_cause = causes.front();
    for (size_t i = 1; i < causes.size(); ++i) ch.root_cause += "; " + causes[i];
  } else if (!h.unseen.empty()) {
    ch.root_cause =
        list_ranks(h.unseen) + " of the communicator " + (h.unseen.size() == 1 ? "is" : "are") +
        " not in this trace: the ranks inside wait for " + (h.unseen.size() == 1 ? "it" : "them");
  } else {
    ch.root_cause = "Every rank entered " + coll +
                    " and none left it: the collective itself does not complete (the network or "
                    "a device), not a rank that stays away";
  }
  ch.explanation =
      "Collectives are matched across ranks by their sequence number on the communicator (the "
      "n-th collective each rank issued on it since its init); the tracer reports a call in "
      "flight once it has run longer than its --inflight-after, with the arguments it was "
      "called with. Ranks inside " +
      coll + " since " + format_wall(h.entered_ns) + " on " + where_inside + "; last seen " +
      format_wall(h.seen_ns) + ".";
  if (!missing.empty())
    ch.fixes.push_back("Look at what " + list_ranks(missing) + " does instead (above): the code " +
                       "path that skips or delays the collective on " +
                       (missing.size() == 1 ? "that rank" : "those ranks"));
  ch.fixes.push_back(
      "The NCCL watchdog ends the job after its timeout (TORCH_NCCL_... / NCCL_TIMEOUT); "
      "`ingero status` on each node shows the waiting threads now");
  ch.id = ch.rule + ":" + hex(h.comm_hash) + ":" + std::to_string(h.seq);
  ch.score = 2e6 + double(h.longest_ns) / 1e9;
  return ch;
}

void rule_hangs(TraceSource& source, Analysis& a, std::vector<Chain>& out) {
  if (a.inflight.empty()) return;
  std::map<std::string, std::map<uint32_t, std::string>> names;
  for (const auto& [pid, info] : a.names) names[a.window.node.value_or("")][pid] = info.name;
  // Collectives whose group names ranks: one chain per collective, not one per rank.
  std::set<const InflightRow*> grouped;
  for (const auto& h : find_collective_hangs(a.inflight, {})) {
    for (const auto& r : h.ranks)
      if (r.inside) grouped.insert(r.now);
    std::map<std::string, std::map<uint32_t, std::string>> by_node;
    for (const auto& r : h.ranks) by_node[r.node][r.pid] = a.process_name(r.pid);
    out.push_back(collective_hang_chain(&source, h, by_node));
  }
  for (const auto& row : a.inflight) {
    const hal::Inflight& in = row.in;
    if (in.what != What::kCall || in.status == Status::kReturned || grouped.count(&row)) continue;
    // A wait for device events blocks by design for the whole job (NCCL's IB async thread):
    // recorded as stuck by builds before the tracer left it out, it is no hang.
    if (in.call.kind == hal::EventKind::kRdmaAsyncEvent) continue;
    auto frames = source.stack(in.stack_id);
    std::string name = a.process_name(in.call.pid);
    Chain ch = new_chain("hung_call", std::string(in.call.vendor), std::string(in.call.api),
                         std::string(in.call.op), {in.call.pid}, int64_t(in.call.ts_ns),
                         int64_t(in.seen_ns));
    ch.severity = Severity::kHigh;
    ch.node = row.node;
    ch.summary = hang_line(row, name, frames, waited(in));
    ch.root_cause = "A " + std::string(hal::kind_name(in.call.kind)) + " call that does not " +
                    (in.status == Status::kInFlight ? "return" : "return before its end") +
                    ": the thread waits on something that does not come (the device, a peer, a "
                    "lock)";
    ch.explanation =
        "Entered " + format_wall(int64_t(in.call.ts_ns)) + ", last seen in flight " +
        format_wall(int64_t(in.seen_ns)) + "; its thread was " + state_words(in.state) +
        (in.state_since_ns ? " since " + format_wall(int64_t(in.state_since_ns)) : "") + ".";
    ch.timeline.push_back(
        {layer_of(in.call.api), std::string(in.call.op), ch.summary, uint64_t(waited(in)) / 1000});
    if (in.stack_id) {
      ChainStack cs;
      cs.stack_id = in.stack_id;
      cs.calls = cs.examined = 1;
      cs.worst_ns = uint64_t(waited(in));
      cs.pid = in.call.pid;
      cs.tid = in.call.tid;
      cs.frames = user_frames(frames);
      ch.stacks.push_back(std::move(cs));
    }
    ch.stacks_sought = true;
    ch.fixes = {
        "`ingero status` shows what is stuck now; the stack above is where it was "
        "called from",
        "A sync or copy that never returns waits for device work that does not finish: "
        "check the device (nvidia-smi, dmesg for Xid errors) and any peer it waits for"};
    ch.id = ch.rule + ":" + std::to_string(in.call.pid) + ":" + std::to_string(in.call.tid) + ":" +
            std::to_string(in.call.ts_ns);
    ch.score = 1e6 + double(waited(in)) / 1e9;
    out.push_back(std::move(ch));
  }
}

void rule_fleet_hangs(TraceSource& source, const std::vector<FleetCommunicator>& communicators,
                      const std::vector<InflightRow>& rows, std::vector<Chain>& out) {
  for (const auto& h : find_collective_hangs(rows, communicators))
    out.push_back(collective_hang_chain(&source, h, {}));
}

}  // namespace ingero::engine
