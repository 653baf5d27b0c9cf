#include "store/trace_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <map>

#include "hal/clock.h"
#include "store/file_access.h"
#include "store/host_store.h"
#include "store/schema.h"

namespace ingero::store {

namespace {

constexpr off_t kReserveBytes = 256 * 1024;  // a few 16 KiB WAL frames, with room

// Legacy numbering for ops the original implementation also wrote, so numeric codes in
// saved queries keep meaning the same thing. Other ops are numbered from kFirstDynamicOp.
const std::map<std::pair<int, std::string_view>, int>& legacy_op_ids() {
  static const std::map<std::pair<int, std::string_view>, int> m = {
      {{kSourceCudaRuntime, "cudaMalloc"}, 1},
      {{kSourceCudaRuntime, "cudaFree"}, 2},
      {{kSourceCudaRuntime, "cudaLaunchKernel"}, 3},
      {{kSourceCudaRuntime, "cudaMemcpy"}, 4},
      {{kSourceCudaRuntime, "cudaStreamSynchronize"}, 5},
      {{kSourceCudaRuntime, "cudaDeviceSynchronize"}, 6},
      {{kSourceCudaRuntime, "cudaMemcpyAsync"}, 7},
      {{kSourceCudaRuntime, "cudaMallocManaged"}, 8},
      {{kSourceCudaDriver, "cuLaunchKernel"}, 1},
      {{kSourceCudaDriver, "cuMemcpy"}, 2},
      {{kSourceCudaDriver, "cuMemcpyAsync"}, 3},
      {{kSourceCudaDriver, "cuCtxSynchronize"}, 4},
      {{kSourceCudaDriver, "cuMemAlloc"}, 5},
      {{kSourceCudaDriver, "cuMemAllocManaged"}, 6},
      {{kSourceHost, "sched_switch"}, 1},
      {{kSourceHost, "sched_wakeup"}, 2},
      {{kSourceHost, "mm_page_alloc"}, 3},
      {{kSourceHost, "oom_kill"}, 4},
      {{kSourceHost, "process_exec"}, 5},
      {{kSourceHost, "process_exit"}, 6},
      {{kSourceHost, "process_fork"}, 7},
      {{kSourceIo, "block_read"}, 1},
      {{kSourceIo, "block_write"}, 2},
      {{kSourceIo, "block_discard"}, 3},
      {{kSourceTcp, "tcp_retransmit"}, 1},
  };
  return m;
}
constexpr int kFirstDynamicOp = 32;

ingero::Status validate_before_writing(const std::string& path) {
  if (auto st = prepare_writable(path, true); !st) return st;
  if (auto st = roll_back_interrupted_write(path); !st) return st;
  auto db = Db::open(path, Db::Mode::kReadOnly);
  if (!db) return db.error();
  auto info = inspect(**db);
  if (!info) return info.error();
  if (info->format == TraceFormat::kLegacyGo)
    return ingero::make_error(path + ": a trace from the original Go implementation (schema " +
                              info->legacy_version + "); it is opened read-only, never written");
  if (auto st = check_schema_writable(path, *info); !st) return st;
  if (auto st = check_tables(**db, *info); !st) return st;
  if (info->format == TraceFormat::kIngero) return check_intact(**db);
  return {};
}

}  // namespace

ingero::Result<std::unique_ptr<TraceWriter>> TraceWriter::open(const std::string& path,
                                                               std::span<const hal::SqlView> views,
                                                               bool made_by_caller) {
  // Classify and check on a read-only connection before the first write: a foreign, legacy,
  // newer or damaged file is refused byte-identical (closing a read-write connection would
  // already checkpoint its WAL into it).
  struct stat before {};
  const bool created = made_by_caller || (::stat(path.c_str(), &before) != 0 && errno == ENOENT);
  // An empty file the user made for the trace (SQLite takes it for an empty database).
  const bool was_empty = !created && S_ISREG(before.st_mode) && before.st_size == 0;
  std::vector<std::string> new_beside;  // SQLite's files beside it that this call would make
  for (const char* suffix : {"-wal", "-shm", "-journal"})
    if (struct stat st{}; ::lstat((path + suffix).c_str(), &st) != 0 && errno == ENOENT)
      new_beside.push_back(path + suffix);
  if (auto st = validate_before_writing(path); !st) return st.error();
  std::unique_ptr<TraceWriter> w;
  // A file this call created and could not make a trace of (a full disk while its tables were
  // created) is not left behind half-made: it and SQLite's files beside it go. An empty file
  // given is left empty: it grew to 16 KiB of a half-made schema.
  auto abandon = [&](const ingero::Error& e) -> ingero::Error {
    if (!created && !was_empty) return e;
    w.reset();
    if (created) {
      remove_database_files(path);
      return ingero::make_error(e.message + " (the new file was removed)");
    }
    for (const std::string& f : new_beside) (void)::unlink(f.c_str());
    if (::truncate(path.c_str(), 0) != 0)
      return ingero::Error::sys(e.message + "; emptying " + path + " again", errno);
    return ingero::make_error(e.message + " (the file was left empty, as it was)");
  };
  auto db = Db::open(path, Db::Mode::kCreate);
  if (!db) return abandon(db.error());
  auto info = inspect(**db);
  if (!info) return abandon(info.error());
  w.reset(new TraceWriter(std::move(*db)));
  Db& d = *w->db_;
  // WAL: readers can query a live trace. NORMAL: commits need no fsync; a power cut can lose
  // the last commits but never corrupts the file.
  // 16 KiB pages: fewer B-tree splits and WAL frames per event than 4 KiB (bench/: 661k vs
  // ~470k events/s), while an empty trace stays small. Only takes effect on a new file.
  if (info->format == TraceFormat::kEmpty) (void)d.exec("PRAGMA page_size = 16384");
  // Pages freed by retention go back to the file system (only before the first table).
  if (info->format == TraceFormat::kEmpty) (void)d.exec("PRAGMA auto_vacuum = INCREMENTAL");
  for (const char* p :
       {"PRAGMA journal_mode = WAL", "PRAGMA synchronous = NORMAL", "PRAGMA cache_size = -2048",
        "PRAGMA wal_autocheckpoint = 4000", "PRAGMA temp_store = MEMORY"}) {
    if (auto st = d.exec(p); !st)
      return abandon(ingero::make_error(path + ": " + st.error().message));
  }
  if (auto st = migrate(d, views); !st) return abandon(st.error());
  if (auto st = w->prepare(); !st) return abandon(st.error());
  // Best effort: without the reserve a full disk may also lose the session's final counters.
  // But a planted one (a symbolic link, another user's file) is refused, never written through.
  auto fd = open_owned_file(path + "-reserve");
  if (!fd && fd.error().sys_errno == 0) return fd.error();
  if (fd) {
    w->reserve_path_ = path + "-reserve";
    if (ftruncate(*fd, 0) != 0 || posix_fallocate(*fd, 0, kReserveBytes) != 0)
      (void)::unlink(w->reserve_path_.c_str());
    ::close(*fd);
  }
  return w;
}

TraceWriter::~TraceWriter() {
  if (in_txn_ || !calls_.empty() || !hosts_.empty()) (void)commit();
  if (!reserve_path_.empty()) (void)::unlink(reserve_path_.c_str());
}

ingero::Status TraceWriter::prepare() {
  auto ins = db_->prepare(host_store_insert_sql());
  if (!ins) return ins.error();
  insert_host_block_ = std::move(*ins);
  auto blk = db_->prepare(
      "INSERT OR REPLACE INTO call_store (id, node, session_id, first_id, last_id, first_ts, "
      "last_ts, end_ts, calls, untimed, kept, runs, folded, full, kept_data, run_data) VALUES "
      "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  if (!blk) return blk.error();
  insert_block_ = std::move(*blk);
  auto op = db_->prepare(
      "INSERT INTO ops (source_id, op_id, name, description, kind) VALUES (?, ?, ?, '', ?)");
  if (!op) return op.error();
  insert_op_ = std::move(*op);
  auto src = db_->prepare(
      "INSERT INTO sources (id, name, description, vendor, api) VALUES (?, ?, ?, ?, ?)");
  if (!src) return src.error();
  insert_source_ = std::move(*src);
  auto proc = db_->prepare(
      "INSERT INTO process_names (node, pid, name, cmdline, seen_at) VALUES (?, ?, ?, ?, ?) "
      "ON CONFLICT (node, pid) DO UPDATE SET name = excluded.name, cmdline = excluded.cmdline, "
      "seen_at = excluded.seen_at");
  if (!proc) return proc.error();
  insert_proc_ = std::move(*proc);

  // Load the dictionaries already in the file (an appended session reuses them).
  auto s = db_->prepare("SELECT id, vendor, api FROM sources");
  if (!s) return s.error();
  while (true) {
    auto r = s->step();
    if (!r) return r.error();
    if (!*r) break;
    int id = int(s->int64(0));
    source_by_api_[s->text(1) + '\0' + s->text(2)] = id;
    next_source_ = std::max(next_source_, id + 1);
  }
  next_source_ = std::max<int>(next_source_, kFirstDynamicSource);
  auto libs = db_->prepare("SELECT id, path FROM libraries ORDER BY id");
  if (!libs) return libs.error();
  while (true) {
    auto r = libs->step();
    if (!r) return r.error();
    if (!*r) break;
    library_ids_[libs->text(1)] = libs->int64(0);
  }
  auto o = db_->prepare(
      "SELECT o.source_id, o.op_id, o.name, s.api, o.kind FROM ops o JOIN sources s ON s.id = "
      "o.source_id");
  if (!o) return o.error();
  while (true) {
    auto r = o->step();
    if (!r) return r.error();
    if (!*r) break;
    int src = int(o->int64(0)), id = int(o->int64(1));
    bool launch = o->text_view(4) == "launch";
    op_by_name_[std::to_string(src) + '\0' + o->text(2)] = {src, id, launch};
    if (launch) launch_ops_.insert({src, id});
    next_op_[src] = std::max(next_op_[src], std::max(id + 1, kFirstDynamicOp));
  }
  return load_ids();
}

ingero::Result<int64_t> TraceWriter::begin_session(const SessionInfo& info) {
  // A block is of one session: the previous session's last calls are folded and written.
  if (!calls_.filling().empty() || !hosts_.filling().empty())
    if (auto c = commit_batch(true); !c) return c.error();
  session_cgroups_.clear();
  last_cgroup_ = ~uint64_t{0};
  auto st = db_->prepare(
      "INSERT INTO sessions (node, host, kernel, os_release, cpu_model, cpu_cores, mem_total, "
      "started_at, mono_offset_ns, ingero_ver, pid_filter, flags, backends, tracer_pid) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  if (!st) return st.error();
  st->bind(1, info.node)
      .bind(2, info.host)
      .bind(3, info.kernel)
      .bind(4, info.os_release)
      .bind(5, info.cpu_model)
      .bind(6, int64_t(info.cpu_cores))
      .bind(7, info.mem_total_mib)
      .bind(8, info.started_at_ns)
      .bind(9, info.mono_offset_ns)
      .bind(10, std::string_view(INGERO_VERSION))
      .bind(11, info.pid_filter)
      .bind(12, info.flags)
      .bind(13, info.backends)
      .bind(14, int64_t(info.tracer_pid));
  if (auto r = st->step(); !r) return r.error();
  session_id_ = sqlite3_last_insert_rowid(db_->handle());
  written_before_session_ = written_;
  retention_calls_ = retention_events_ = 0;
  mono_offset_ns_ = info.mono_offset_ns;
  node_ = info.node;
  return session_id_;
}

ingero::Result<int> TraceWriter::source_id(std::string_view vendor, std::string_view api,
                                           hal::EventKind kind) {
  if (vendor == "host") {
    if (kind == hal::EventKind::kBlockIo) return int(kSourceIo);
    if (kind == hal::EventKind::kTcpRetransmit) return int(kSourceTcp);
    return int(kSourceHost);
  }
  std::string key = std::string(vendor) + '\0' + std::string(api);
  if (auto it = source_by_api_.find(key); it != source_by_api_.end()) return it->second;
  int id = next_source_++;
  std::string name(api);
  for (auto& c : name) c = char(toupper(static_cast<unsigned char>(c)));
  insert_source_.reset();
  insert_source_.bind(1, int64_t(id))
      .bind(2, name)
      .bind(3, std::string(vendor) + " " + std::string(api) + " API - uprobes")
      .bind(4, vendor)
      .bind(5, api);
  if (auto r = insert_source_.step(); !r) return r.error();
  source_by_api_[key] = id;
  return id;
}

ingero::Result<TraceWriter::OpIds> TraceWriter::op_ids(const hal::Event& ev) {
  return op_ids(ev.vendor, ev.api, ev.op, ev.kind);
}

ingero::Result<TraceWriter::OpIds> TraceWriter::op_ids(std::string_view vendor,
                                                       std::string_view api, std::string_view op,
                                                       hal::EventKind kind) {
  OpKey k{api.data(), op.data()};
  if (k.op)
    for (const OpMemo& m : op_memo_)
      if (m.key == k) return m.ids;
  if (auto it = op_cache_.find(k); it != op_cache_.end()) {
    op_memo_[op_memo_next_] = {k, it->second};
    op_memo_next_ ^= 1;
    return it->second;
  }
  auto src = source_id(vendor, api, kind);
  if (!src) return src.error();
  std::string key = std::to_string(*src) + '\0' + std::string(op);
  OpIds ids;
  if (auto it = op_by_name_.find(key); it != op_by_name_.end()) {
    ids = it->second;
  } else {
    int id;
    auto legacy = legacy_op_ids().find({*src, op});
    if (legacy != legacy_op_ids().end()) {
      id = legacy->second;
    } else {
      int& next = next_op_[*src];
      if (next < kFirstDynamicOp) next = kFirstDynamicOp;
      id = next++;
    }
    insert_op_.reset();
    insert_op_.bind(1, int64_t(*src))
        .bind(2, int64_t(id))
        .bind(3, op)
        .bind(4, hal::kind_name(kind));
    if (auto r = insert_op_.step(); !r) return r.error();
    ids = {*src, id, kind == hal::EventKind::kLaunch};
    op_by_name_[key] = ids;
    if (ids.launch) launch_ops_.insert({*src, id});
  }
  op_cache_[k] = ids;
  return ids;
}

ingero::Status TraceWriter::begin_if_needed() {
  if (in_txn_) return {};
  if (auto st = db_->exec("BEGIN"); !st) return st;
  in_txn_ = true;
  return {};
}

ingero::Status TraceWriter::fail_batch(const ingero::Error& e) {
  if (in_txn_) (void)db_->exec("ROLLBACK");
  in_txn_ = false;
  calls_.restore();  // the calls and host events of the batch are lost with it, counted below
  hosts_.restore();
  summaries_.rolled_back();  // the seconds it wrote are written again with the next batch
  failed_ += pending_;
  pending_ = 0;
  // Dictionary rows inserted in the lost transaction are gone too.
  op_cache_.clear();
  for (OpMemo& m : op_memo_) m = {};
  op_by_name_.clear();
  source_by_api_.clear();
  next_op_.clear();
  library_ids_.clear();
  library_by_ptr_.clear();
  last_library_ptr_ = nullptr;
  launch_ops_.clear();
  next_source_ = 0;
  if (auto st = prepare(); !st) return ingero::make_error(e.message + "; " + st.error().message);
  return ingero::make_error("writing " + db_->path() + ": " + e.message);
}

ingero::Status TraceWriter::add(const hal::Event& ev) {
  if (auto st = begin_if_needed(); !st) return fail_batch(st.error());
  if (ev.cgroup_id != last_cgroup_) session_cgroups_.insert(last_cgroup_ = ev.cgroup_id);
  if (ev.has(hal::Field::kPeerCgroup))
    session_cgroups_.insert(ev.fields[size_t(hal::Field::kPeerCgroup)]);
  auto ids = op_ids(ev);
  ++pending_;
  if (!ids) return fail_batch(ids.error());
  if (!hal::is_host_kind(ev.kind)) return add_call(ev, *ids);
  add_host(ev, *ids);
  if (hosts_.full_rows() >= kMaxWaitingRows) return commit_batch(false, INT64_MIN, true);
  return {};
}

ingero::Status TraceWriter::commit() { return commit_batch(false); }

ingero::Status TraceWriter::summarise_before(int64_t before_ns) {
  return commit_batch(false, before_ns);
}

ingero::Status TraceWriter::commit_batch(bool final, int64_t summarise_before, bool blocks) {
  bool tail = final && (!calls_.filling().empty() || !hosts_.filling().empty());
  bool seconds = summaries_.open_seconds() && (final || summarise_before > INT64_MIN);
  bool timed = block_interval_ns_ > 0;
  int64_t now = !timed ? 0 : steady_now_ ? steady_now_() : hal::mono_now_ns();
  if (timed && !blocks && !final)
    blocks = blocks_written_ns_ == INT64_MIN || now - blocks_written_ns_ >= block_interval_ns_ ||
             summarise_before > calls_.oldest_unwritten_ts();
  else
    blocks = true;
  bool unwritten = blocks && (calls_.unwritten() || hosts_.unwritten());
  if (!in_txn_ && !unwritten && !tail && !seconds) return {};
  if (auto st = begin_if_needed(); !st) return fail_batch(st.error());
  if (blocks) {
    if (auto st = write_blocks(final); !st) return fail_batch(st.error());
    if (auto st = write_host_blocks(final); !st) return fail_batch(st.error());
  }
  // Seconds 2 s behind the newest call are complete (events reach the writer nearly in time
  // order); a late call for one of them starts a second row. At the end, every second. A
  // second with calls in blocks still waiting waits too: readers check that a second's calls
  // in the file are at least its summary's (store/call_count_check.h).
  int64_t complete = std::max(summaries_.newest_ns() - kSummaryLagNs, summarise_before);
  if (!blocks) complete = std::min(complete, calls_.oldest_unwritten_ts());
  if (auto st = summaries_.flush(*db_, final ? INT64_MAX : complete); !st)
    return fail_batch(st.error());
  if (auto st = db_->exec("COMMIT"); !st) return fail_batch(st.error());
  in_txn_ = false;
  summaries_.committed();
  // `final`: the blocks filling are done; the next events (a next session's) go into blocks
  // of their own.
  // Without the blocks, their events stay pending: the next batch's (lost with it if it fails).
  if (blocks) {
    calls_.committed(final);
    hosts_.committed(final);
    if (timed) blocks_written_ns_ = now;
    written_ += pending_;
    pending_ = 0;
  }
  return {};
}

int64_t TraceWriter::library_id(std::string_view path) {
  if (path.data() == last_library_ptr_) return last_library_id_;
  if (auto it = library_by_ptr_.find(path.data()); it != library_by_ptr_.end()) {
    last_library_ptr_ = path.data();
    return last_library_id_ = it->second;
  }
  std::string key(path);
  int64_t id = 0;
  if (auto it = library_ids_.find(key); it != library_ids_.end()) {
    id = it->second;
  } else {
    LibraryRow row;
    row.path = key;
    auto r = add_library(row);
    if (!r) return 0;
    id = *r;
  }
  library_by_ptr_[path.data()] = id;
  last_library_ptr_ = path.data();
  return last_library_id_ = id;
}

ingero::Result<int64_t> TraceWriter::add_library(const LibraryRow& row) {
  if (auto st = begin_if_needed(); !st) return st.error();
  auto st = db_->prepare(
      "INSERT INTO libraries (session_id, backend, vendor, api, path, soname, version, build_id, "
      "embedded, specs_total, specs_resolved, probes_attached, missing, errors, late_pid, late_ns) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  if (!st) return st.error();
  st->bind(1, session_id_)
      .bind(2, row.backend)
      .bind(3, row.vendor)
      .bind(4, row.api)
      .bind(5, row.path)
      .bind(6, row.soname)
      .bind(7, row.version)
      .bind(8, row.build_id)
      .bind(9, int64_t(row.embedded))
      .bind(10, int64_t(row.specs_total))
      .bind(11, int64_t(row.specs_resolved))
      .bind(12, int64_t(row.probes_attached))
      .bind(13, row.missing)
      .bind(14, row.errors)
      .bind(15, int64_t(row.late_pid))
      .bind(16, row.late_ns);
  if (auto r = st->step(); !r) return r.error();
  int64_t id = sqlite3_last_insert_rowid(db_->handle());
  library_ids_[row.path] = id;
  return id;
}

ingero::Status TraceWriter::note_process(uint32_t pid, std::string_view name,
                                         std::string_view cmdline, int64_t seen_at_ns) {
  if (auto st = begin_if_needed(); !st) return st;
  insert_proc_.reset();
  insert_proc_.bind(1, node_)
      .bind(2, int64_t(pid))
      .bind(3, name)
      .bind(4, cmdline)
      .bind(5, seen_at_ns);
  if (auto r = insert_proc_.step(); !r) return r.error();
  return {};
}

void TraceWriter::release_memory() {
  calls_.drop_spares();
  hosts_.drop_spares();
  sqlite3_db_release_memory(db_->handle());
}

}  // namespace ingero::store
