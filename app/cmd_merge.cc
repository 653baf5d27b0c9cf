// `ingero merge a.db b.db ... -o out.db`: per-node trace files (ours and the original
// implementation's) into one file with a node column. Every event is re-encoded through the
// TraceWriter, so source/op codes, libraries and sessions are renumbered consistently; the
// inputs are opened read-only and never modified.
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include "app/commands.h"
#include "hal/event.h"
#include "store/schema.h"
#include "store/trace_reader.h"
#include "store/trace_writer.h"

namespace ingero::app {
namespace {

struct Interner {
  std::set<std::string, std::less<>> s;
  std::string_view operator()(std::string v) { return *s.insert(std::move(v)).first; }
};

std::string stem(const std::string& path) { return std::filesystem::path(path).stem().string(); }

// Reads every row of a contract view into Events, mapping columns by name.
ingero::Status copy_view(store::Db& db, const std::string& view, const std::string& node_col,
                         const std::string& node, Interner& intern, bool host,
                         const std::function<ingero::Status(const hal::Event&)>& sink) {
  std::string where = node_col.empty() ? "" : " WHERE node = ?";
  auto st = db.prepare("SELECT * FROM " + view + where + " ORDER BY ts_ns");
  if (!st) return st.error();
  if (!node_col.empty()) st->bind(1, node);
  sqlite3_stmt* s = st->get();
  int n = sqlite3_column_count(s);
  std::map<std::string, int> col;
  for (int i = 0; i < n; ++i) col[sqlite3_column_name(s, i)] = i;
  auto has = [&](const char* c) {
    return col.count(c) && sqlite3_column_type(s, col[c]) != SQLITE_NULL;
  };
  auto i64 = [&](const char* c) { return sqlite3_column_int64(s, col[c]); };
  auto txt = [&](const char* c) {
    const unsigned char* t = has(c) ? sqlite3_column_text(s, col[c]) : nullptr;
    return t ? std::string(reinterpret_cast<const char*>(t)) : std::string();
  };
  static const std::map<std::string, uint64_t> kDir = {{"H2H", 0}, {"H2D", 1},     {"D2H", 2},
                                                       {"D2D", 3}, {"default", 4}, {"peer", 5}};
  while (true) {
    auto r = st->step();
    if (!r) return r.error();
    if (!*r) break;
    hal::Event e;
    e.ts_ns = uint64_t(i64("ts_ns"));
    e.dur_ns = uint64_t(i64("dur_ns"));
    e.pid = uint32_t(i64("pid"));
    e.tid = uint32_t(i64("tid"));
    e.cgroup_id = uint64_t(i64("cgroup_id"));
    e.set_comm(txt("comm"));
    if (host) {
      e.vendor = "host";
      e.api = "kernel";
      e.op = intern(txt("event"));
      e.kind = hal::kind_from_name(txt("kind")).value_or(hal::EventKind::kUnknown);
      if (has("code")) {
        e.has_ret = true;
        e.ret = i64("code");
      }
      e.set_peer_comm(txt("peer_comm"));
      e.detail = txt("detail");
      e.saddr = txt("saddr");
      e.daddr = txt("daddr");
    } else {
      e.vendor = intern(txt("vendor"));
      e.api = intern(txt("api"));
      e.op = intern(txt("op"));
      e.kind = hal::kind_from_name(txt("kind")).value_or(hal::EventKind::kUnknown);
      e.unfinished = txt("status") == "unfinished";
      e.has_ret = has("ret");
      e.ret = i64("ret");
      e.off_cpu_ns = uint64_t(i64("off_cpu_ns"));
      e.preempts = uint32_t(i64("preempts"));
      e.switches = uint32_t(i64("switches"));
      e.set_peer_comm(txt("preemptor_comm"));
      if (has("preemptor_pid")) e.set(hal::Field::kPeerPid, uint64_t(i64("preemptor_pid")));
      if (has("direction"))
        e.set(hal::Field::kDirection, kDir.count(txt("direction")) ? kDir.at(txt("direction")) : 4);
      e.stack_id = uint64_t(i64("stack_hash"));
    }
    for (size_t f = 0; f < hal::kFieldCount; ++f) {
      const std::string& name = store::field_columns()[f];
      if (name == "direction" || !col.count(name) || !has(name.c_str())) continue;
      e.set(static_cast<hal::Field>(f), uint64_t(i64(name.c_str())));
    }
    if (auto st2 = sink(e); !st2) return st2;
  }
  return {};
}

ingero::Status merge_one(const std::string& in, const std::string& force_node,
                         store::TraceWriter& w, Interner& intern, size_t* events) {
  auto reader = store::TraceReader::open(in);
  if (!reader) return reader.error();
  store::Db& db = (*reader)->db();
  bool has_node = db.column_exists("events", "node");
  std::vector<std::string> nodes;
  if (has_node && force_node.empty()) {
    auto st = db.prepare("SELECT DISTINCT node FROM events");
    if (!st) return st.error();
    while (true) {
      auto r = st->step();
      if (!r) return r.error();
      if (!*r) break;
      nodes.push_back(st->text(0));
    }
  }
  if (nodes.empty()) nodes.push_back("");
  for (const std::string& src_node : nodes) {
    // Files without node names (schema 0.8) take --force-node, else the file's name.
    std::string node = !force_node.empty() ? force_node : !src_node.empty() ? src_node : stem(in);
    store::SessionInfo si;
    si.node = node;
    si.host = node;
    si.mono_offset_ns = 0;  // stored timestamps are already wall clock
    si.flags = "merged-from=" + in +
               ((*reader)->is_legacy() ? ",legacy=" + (*reader)->info().legacy_version : "");
    auto sp = db.prepare("SELECT min(timestamp) FROM events");
    if (sp && *sp->step()) si.started_at_ns = sp->int64(0);
    if (auto s = w.begin_session(si); !s) return s.error();
    std::string node_col = has_node && force_node.empty() ? "node" : "";
    auto sink = [&](const hal::Event& e) -> ingero::Status {
      ++*events;
      return w.add(e);
    };
    if (auto s = copy_view(db, "calls", node_col, src_node, intern, false, sink); !s) return s;
    if (auto s = copy_view(db, "host_events", node_col, src_node, intern, true, sink); !s) return s;
    // Processes (merged by node + pid), snapshots, chains.
    bool pn_node = db.column_exists("process_names", "node");
    auto pn = db.prepare(std::string("SELECT pid, name FROM process_names") +
                         (pn_node && !node_col.empty() ? " WHERE node = ?" : ""));
    if (pn) {
      if (pn_node && !node_col.empty()) pn->bind(1, src_node);
      while (true) {
        auto r = pn->step();
        if (!r || !*r) break;
        if (auto s = w.note_process(uint32_t(pn->int64(0)), pn->text(1), "", 0); !s) return s;
      }
    }
    if (db.table_exists("system_snapshots")) {
      bool sn_node = db.column_exists("system_snapshots", "node");
      auto ss = db.prepare(std::string("SELECT timestamp, cpu_pct, mem_pct, load_avg, mem_avail, "
                                       "swap_mb FROM system_snapshots") +
                           (sn_node && !node_col.empty() ? " WHERE node = ?" : ""));
      if (ss) {
        if (sn_node && !node_col.empty()) ss->bind(1, src_node);
        while (true) {
          auto r = ss->step();
          if (!r || !*r) break;
          if (auto s = w.add_snapshot({ss->int64(0), ss->real(1), ss->real(2), ss->real(3),
                                       ss->int64(4), ss->int64(5), 0});
              !s)
            return s;
        }
      }
    }
    if (auto s = w.commit(); !s) return s;
  }
  // Stacks: the original implementation's stack_traces, deduplicated by hash.
  if (db.table_exists("stack_traces")) {
    auto st = db.prepare("SELECT hash, ips, frames FROM stack_traces");
    if (st) {
      auto ins =
          w.db().prepare("INSERT OR IGNORE INTO stack_traces (hash, ips, frames) VALUES (?, ?, ?)");
      if (!ins) return ins.error();
      while (true) {
        auto r = st->step();
        if (!r || !*r) break;
        ins->reset();
        ins->bind(1, st->int64(0)).bind(2, st->text(1)).bind(3, st->text(2));
        if (auto x = ins->step(); !x) return x.error();
      }
    }
  }
  // Ours: stack_frames, keyed by a hash of their resolved frames, so the same stack on two
  // nodes is stored once.
  if (db.table_exists("stack_frames")) {
    auto st = db.prepare(
        "SELECT stack_id, kind, module, module_offset, build_id, function, file, line "
        "FROM stack_frames ORDER BY stack_id, frame");
    if (!st) return st.error();
    int64_t current = 0;
    std::vector<hal::StackFrame> frames;
    auto flush = [&]() -> ingero::Status {
      if (frames.empty()) return {};
      auto s = w.add_stack(uint64_t(current), frames);
      frames.clear();
      return s;
    };
    while (true) {
      auto r = st->step();
      if (!r) return r.error();
      if (!*r) break;
      if (st->int64(0) != current)
        if (auto s = flush(); !s) return s;
      current = st->int64(0);
      hal::StackFrame f;
      f.python = st->text(1) == "python";
      f.module = st->text(2);
      if (!st->is_null(3)) f.module_offset = uint64_t(st->int64(3));
      f.build_id = st->text(4);
      f.function = st->text(5);
      f.file = st->text(6);
      f.line = st->is_null(7) ? 0 : st->int64(7);
      frames.push_back(std::move(f));
    }
    if (auto s = flush(); !s) return s;
  }
  return w.commit();
}

}  // namespace

void add_merge_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand(
      "merge",
      "Merge per-node trace files (ours and the original implementation's) into one file with\n"
      "a node column: `ingero merge node-01.db node-02.db -o cluster.db`. Inputs are read-only.\n"
      "Files that carry no node name (schema 0.8) take --force-node or their file name.");
  struct Opts {
    std::vector<std::string> inputs;
    std::string out, force_node;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("inputs", o->inputs, "Trace files to merge")->required();
  cmd->add_option("-o,--out", o->out, "Merged trace file to create")->required();
  cmd->add_option("--force-node", o->force_node, "Node name for every event of every input");
  cmd->callback([&ctx, o] {
    if (std::filesystem::exists(o->out)) {
      std::cerr << "ingero merge: " << o->out << " exists; merge into a new file\n";
      ctx.exit_code = kExitUsage;
      return;
    }
    for (const auto& in : o->inputs) {
      auto r = store::TraceReader::open(in);
      if (!r) {
        std::cerr << "ingero merge: " << r.error().message << "\n";
        ctx.exit_code = kExitFailure;
        return;
      }
    }
    auto w = store::TraceWriter::open(o->out);
    if (!w) {
      std::cerr << "ingero merge: " << w.error().message << "\n";
      ctx.exit_code = kExitFailure;
      return;
    }
    (void)(*w)->db().exec(
        "CREATE TABLE IF NOT EXISTS stack_traces (hash INTEGER PRIMARY KEY, ips TEXT NOT NULL, "
        "frames TEXT NOT NULL DEFAULT '')");
    Interner intern;
    size_t events = 0;
    for (const auto& in : o->inputs) {
      if (auto s = merge_one(in, o->force_node, **w, intern, &events); !s) {
        std::cerr << "ingero merge: " << in << ": " << s.error().message << "\n";
        ctx.exit_code = kExitFailure;
        return;
      }
    }
    if (auto s = (*w)->finish({}); !s) {
      std::cerr << "ingero merge: " << s.error().message << "\n";
      ctx.exit_code = kExitFailure;
      return;
    }
    std::cerr << "ingero merge: " << events << " events from " << o->inputs.size() << " files into "
              << o->out << "\n";
    ctx.exit_code = kExitOk;
  });
}

}  // namespace ingero::app
