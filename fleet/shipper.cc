#include "fleet/shipper.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "store/file_access.h"

namespace ingero::fleet {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

ingero::Result<std::unique_ptr<Shipper>> Shipper::create(const std::string& db_path,
                                                         const Endpoint& endpoint,
                                                         ShipperOptions options,
                                                         std::unique_ptr<ClickHouseClient> client) {
  if (access(db_path.c_str(), R_OK) != 0)
    return ingero::Error::sys(db_path + ": cannot read the trace file to ship", errno);
  // Two shippers of one file would both ship the rows above the same resume point.
  // A planted lock (a symbolic link, another user's file) is refused (store/file_access.h).
  // Named after the file, not the path given: a symbolic link to it shipped every row twice.
  std::string lock = db_path + ".ship.lock";
  if (char* real = ::realpath(db_path.c_str(), nullptr)) {
    lock = std::string(real) + ".ship.lock";
    std::free(real);
  }
  auto opened = store::open_owned_file(lock);
  if (!opened) return ingero::make_error("the shipping lock: " + opened.error().message);
  int fd = *opened;
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    close(fd);
    return ingero::make_error(db_path + " is being shipped by another ingero process (" + lock +
                              " is locked)");
  }
  if (!client) client = std::make_unique<ClickHouseClient>(endpoint, options.client);
  return std::unique_ptr<Shipper>(new Shipper(db_path, std::move(options), std::move(client), fd));
}

Shipper::Shipper(std::string path, ShipperOptions o, std::unique_ptr<ClickHouseClient> c,
                 int lock_fd)
    : path_(std::move(path)), opts_(std::move(o)), client_(std::move(c)), lock_fd_(lock_fd) {
  for (const TableSpec& t : fleet_tables())
    if (t.mode == ShipMode::kRowid) through_[t.name] = 0;
}

int64_t Shipper::shipped_through(const std::string& table) const {
  auto it = through_.find(table);
  return it == through_.end() ? 0 : it->second.load();
}

std::map<std::string, int64_t> Shipper::shipped_through_all() const {
  std::map<std::string, int64_t> out;
  for (const auto& [table, through] : through_) out[table] = through.load();
  return out;
}

Shipper::~Shipper() {
  stop();
  if (lock_fd_ >= 0) close(lock_fd_);
}

void Shipper::start() {
  if (thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> g(mu_);
    stopping_ = false;
  }
  thread_ = std::thread([this] { loop(); });
}

void Shipper::stop() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  reset_spool();  // the tracer checkpoints the file next: no reader may hold it
}

ShipTotals Shipper::totals() const {
  std::lock_guard<std::mutex> g(mu_);
  ShipTotals t = totals_;
  return t;
}

void Shipper::note_failure(const std::string& message, bool retried) {
  state_.valid = false;  // re-read from ClickHouse before the next insert
  {
    std::lock_guard<std::mutex> g(mu_);
    ++totals_.failures;
    totals_.last_error = message;
  }
  if (!failing_ && opts_.log) {
    opts_.log(message + "; the rows stay in " + path_ +
              (retried ? " and are retried" : " (retrying cannot mend this)"));
    logged_error_ = message;
  }
  failing_ = true;
}

void Shipper::note_success() {
  if (failing_ && opts_.log)
    opts_.log("ClickHouse at " + endpoint().display() + " is back: shipping resumed");
  failing_ = false;
  std::lock_guard<std::mutex> g(mu_);
  totals_.last_error.clear();
}

// ClickHouse receives `events` rows, not runs: calls folded (store/tiers.h) before they were
// shipped, by a trace that was not shipping or by `ingero compact`, are not in it. Said once
// per file; "up to" since ClickHouse may have had some of them before they were folded.
void Shipper::warn_folded_unshipped() {
  if (!opts_.log || folding_warned_for_ == state_file_) return;
  auto f = spool_->folding();
  if (!f || f->calls == 0 || f->through_id <= events_shipped_through()) return;
  folding_warned_for_ = state_file_;
  opts_.log(path_ + ": up to " + std::to_string(f->calls) +
            " calls were folded into runs (tiered retention) before they were shipped; "
            "ClickHouse receives event rows only, so those calls are not in it (its per-second "
            "summaries stay in the file). Ship while tracing (ingero trace --clickhouse) to send "
            "every call before it is folded");
}

void Shipper::warn_shared_node() {
  if (!opts_.log || shared_node_warned_for_ == state_file_) return;
  shared_node_warned_for_ = state_file_;
  std::map<std::string, std::set<std::string>> mine;
  for (const SpoolSession& s : spool_->sessions()) mine[s.node].insert(s.host);
  auto quoted = [](const std::vector<std::string>& v) {
    std::string s;
    for (const std::string& h : v) s += (s.empty() ? "'" : ", '") + h + "'";
    return s;
  };
  for (const auto& [node, hosts] : mine) {
    std::vector<std::string> others;
    for (const std::string& h : state_.hosts[node])
      if (!hosts.contains(h)) others.push_back(h);
    if (others.empty()) continue;
    opts_.log(
        "ClickHouse at " + endpoint().display() + " holds sessions of node '" + node + "' from " +
        (others.size() == 1 ? "another host, " : std::to_string(others.size()) + " other hosts, ") +
        quoted(others) + ", beside this file's " + (hosts.size() == 1 ? "host " : "hosts ") +
        quoted({hosts.begin(), hosts.end()}) +
        ": a fleet reads a node's rows as one machine's, so explain --source mixes "
        "their processes, clocks and stacks. Give each host its own --node (the default "
        "is its hostname)");
  }
}

ingero::Status Shipper::same_trace() const {
  for (const SpoolSession& s : spool_->sessions()) {
    // A merge's or conversion's output holds sessions shipped before from their own files:
    // shipped again under this file's name, a node's events were there twice (400 of 200).
    if (auto other = state_.elsewhere.find({s.node, s.started_at});
        other != state_.elsewhere.end()) {
      client_->refuse_for_good();
      return ingero::make_error(
          path_ + ": ClickHouse at " + endpoint().display() +
          " holds this file's session of node '" + s.node + "' (started at " +
          std::to_string(s.started_at) + " ns) already, shipped from another file (file_start " +
          std::to_string(other->second) +
          "): this file is a copy or a merge of it, and its rows would be stored twice: nothing "
          "shipped (ship the files the nodes wrote, or ship this one to another database)");
    }
    auto it = state_.identity.find({s.node, s.started_at});
    if (it == state_.identity.end() || it->second == std::pair(s.host, s.flags)) continue;
    client_->refuse_for_good();  // the same on every retry: the drain ends at once
    return ingero::make_error(
        path_ + ": ClickHouse at " + endpoint().display() +
        " holds another trace under this "
        "file's name (node '" +
        s.node + "', started at " + std::to_string(s.started_at) + " ns): host '" +
        it->second.first + "', flags '" + it->second.second +
        "', where this "
        "file's session is host '" +
        s.host + "', flags '" + s.flags +
        "'. A fleet names a file "
        "by its node and start, and its rows would be taken for that trace's: nothing shipped "
        "(trace with --node to give it a name of its own, or ship it to another database)");
  }
  return {};
}

void Shipper::loop() {
  int backoff = 0;
  while (true) {
    {
      std::lock_guard<std::mutex> g(mu_);
      if (stopping_) return;
    }
    auto r = pass(Clock::now() + std::chrono::seconds(5));
    int wait_ms;
    if (!r) {
      note_failure(r.error().message, true);
      backoff = backoff ? std::min(backoff * 2, opts_.backoff_max_ms) : opts_.backoff_min_ms;
      wait_ms = backoff;
    } else {
      backoff = 0;
      wait_ms = *r ? opts_.interval_ms : 0;
    }
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait_for(lk, std::chrono::milliseconds(wait_ms), [this] { return stopping_; });
  }
}

const std::vector<ChType>& Shipper::types(const TableSpec& t) {
  auto it = types_.find(t.name);
  if (it == types_.end()) {
    // ch_schema.h uses only types row_binary.h encodes (tested): an unknown one is a bug.
    auto ts = column_types(t);
    if (!ts) throw std::logic_error(ts.error().message);
    it = types_.emplace(t.name, std::move(*ts)).first;
  }
  return it->second;
}

ingero::Status Shipper::insert(const TableSpec& t, std::string_view body, const BatchKey& key) {
  const std::string what = " (inserting " + std::to_string(key.rows) + " rows into " + t.name + ")";
  client_->forget_written_rows();
  auto st = client_->insert(t.name, t.column_list(), body, key.rows);
  {
    std::lock_guard<std::mutex> g(mu_);
    totals_.bytes_sent = client_->bytes_sent();
    totals_.bytes_raw = client_->bytes_uncompressed();
  }
  if (!st) return ingero::make_error(st.error().message + what);
  // A 200 says nothing of what was stored: count the batch only once ClickHouse holds it.
  // A server that says how many rows it wrote (X-ClickHouse-Summary) and wrote them all needs
  // no read-back; any other answer (none, as from 18.16, or fewer rows) is read back.
  const std::optional<uint64_t> written = client_->written_rows();
  const bool by_summary = written && *written >= key.rows;
  if (!by_summary)
    if (auto c = confirm_batch(*client_, t.name, key); !c) {
      std::lock_guard<std::mutex> g(mu_);
      ++totals_.unconfirmed;
      if (client_->last_failure() != Failure::kNone) ++totals_.unread;  // no answer to it
      return c;
    }
  std::lock_guard<std::mutex> g(mu_);
  ++(by_summary ? totals_.confirmed_by_summary : totals_.read_back);
  totals_.rows += key.rows;
  ++totals_.batches;
  return {};
}

void Shipper::reset_spool() {
  block_rows_.reset();
  block_rows_tried_ = false;
  spool_.reset();
}

ingero::Result<bool> Shipper::pass(Deadline deadline) {
  if (!spool_ || spool_->replaced()) {
    reset_spool();
    auto s = Spool::open(path_);
    if (!s) return s.error();
    spool_ = std::move(*s);
    state_.valid = false;
    stacks_seen_frames_ = -1;
  }
  if (auto st = spool_->refresh(); !st) return st.error();
  if (spool_->sessions().empty()) return true;  // nothing written yet
  if (spool_->file_start() != state_file_) state_.valid = false;
  if (!state_.valid) {
    if (auto st = spool_->refresh_nodes(); !st) return st.error();
    if (auto st = ensure_schema(*client_); !st) return st.error();
    // No earlier insert of this file may still be running (this shipper's, cut off by a
    // timeout; a killed one's): rows it stored after the read below would be sent again.
    const std::string prefix = ship_query_prefix(spool_->file_start());
    if (auto st = await_inserts_in_flight(*client_, prefix, client_->options().request_timeout_ms);
        !st)
      return st.error();
    client_->tag_inserts(prefix + std::to_string(getpid()) + "-" + std::to_string(++state_reads_) +
                         "-");
    auto s = read_ship_state(*client_, *spool_);
    if (!s) return s.error();
    state_ = std::move(*s);
    state_file_ = spool_->file_start();
    if (auto st = same_trace(); !st) {
      // The state read is the other trace's: none of this file's rows are in ClickHouse.
      state_.valid = false;
      state_file_ = 0;
      return st.error();
    }
    stacks_seen_frames_ = -1;
    for (auto& [table, through] : through_) through = state_.high_water[table];
    warn_folded_unshipped();
    warn_shared_node();
    std::lock_guard<std::mutex> g(mu_);
    ++totals_.resyncs;
  }
  bool done = true;
  if (auto st = ship_sessions(); !st) return st.error();
  if (auto st = ship_stacks(deadline, done); !st) return st.error();
  for (const TableSpec& t : fleet_tables()) {
    if (t.mode != ShipMode::kRowid || !spool_->has_table(t)) continue;
    if (auto st = ship_rowid(t, deadline, done); !st) return st.error();
  }
  if (auto st = ship_processes(); !st) return st.error();
  if (auto st = ship_cgroups(); !st) return st.error();
  if (auto st = ship_chains(); !st) return st.error();
  note_success();
  return done;
}

ingero::Status Shipper::next_rowid_batch(const TableSpec& t, int64_t after, RowBatch& out) {
  const BatchLimits limits{opts_.batch_rows, opts_.batch_bytes};
  if (t.name == "events" && !block_rows_tried_) {
    block_rows_tried_ = true;
    if (auto b = BlockRows::create(*spool_, t)) block_rows_ = std::move(*b);
  }
  if (t.name == "events" && block_rows_) {
    auto r = block_rows_->next_batch(after, limits, out);
    if (!r) return r.error();
    if (*r) return {};
    block_rows_.reset();  // ids out of order: this file is read through SQL
  }
  out.clear();
  const int day_col = t.column_index(t.day_column), id_col = t.column_index("src_id");
  const std::vector<ChType>& ts = types(t);
  const std::string tail =
      "WHERE " + t.source_id + " > :after ORDER BY " + t.source_id + " LIMIT :limit";
  return spool_->select(t, tail, {{":after", after}, {":limit", int64_t(limits.rows) + 1}},
                        [&](const SpoolRow& r) {
                          int64_t time = day_col >= 0 ? r.int64(day_col) : 0;
                          if (!out.admit(limits, day_col >= 0, time)) return false;
                          r.append_row_binary(out.body, ts);
                          out.added(r.int64(id_col), day_col >= 0, time);
                          return true;
                        });
}

ingero::Status Shipper::ship_rowid(const TableSpec& t, Deadline deadline, bool& done) {
  int64_t& high = state_.high_water[t.name];
  // The read-back's nodes: the file's, and '' (a row whose session is gone).
  std::vector<std::string> nodes = spool_->nodes();
  nodes.push_back("");
  const std::string nodes_sql = sql_string_list(nodes);
  while (true) {
    if (Clock::now() >= deadline) {
      done = false;
      return {};
    }
    if (auto st = next_rowid_batch(t, high, batch_); !st) return st;
    if (batch_.rows == 0) return {};
    BatchKey key = rowid_batch_key(nodes_sql, spool_->file_start(), batch_.first_id, batch_.last_id,
                                   t.day_column, batch_.min_time, batch_.max_time, batch_.rows);
    if (auto s = insert(t, batch_.body, key); !s) return s;
    high = batch_.last_id;
    through_.at(t.name) = high;
    if (!batch_.more) return {};
  }
}

ingero::Result<uint64_t> Shipper::pending() {
  if (!spool_) {
    auto s = Spool::open(path_);
    if (!s) return s.error();
    spool_ = std::move(*s);
  }
  if (auto st = spool_->refresh(); !st) return st.error();
  if (spool_->sessions().empty()) return uint64_t(0);
  bool known = state_file_ == spool_->file_start();
  uint64_t n = 0;
  auto count_rows = [&](const TableSpec& t, const std::string& tail,
                        const std::map<std::string, int64_t>& params,
                        const std::function<bool(const SpoolRow&)>& unshipped) -> ingero::Status {
    return spool_->select(t, tail, params, [&](const SpoolRow& r) {
      n += !known || unshipped(r);
      return true;
    });
  };
  for (const TableSpec& t : fleet_tables()) {
    if (!spool_->has_table(t)) continue;
    ingero::Status st;
    switch (t.mode) {
      case ShipMode::kRowid: {
        auto c = spool_->count_after(t, known ? state_.high_water[t.name] : 0);
        if (!c) return c.error();
        n += *c;
        break;
      }
      case ShipMode::kSessions:
        st = count_rows(t, "", {}, [&](const SpoolRow& r) {
          auto it = state_.sessions.find({r.text(0), uint64_t(r.int64(1))});
          return it == state_.sessions.end() || (r.int64(2) && it->second < uint64_t(r.int64(2)));
        });
        break;
      case ShipMode::kProcesses:
        st = count_rows(t, "", {}, [&](const SpoolRow& r) {
          auto it = state_.processes.find({r.text(0), uint32_t(r.int64(1))});
          return it == state_.processes.end() || it->second < uint64_t(r.int64(4));
        });
        break;
      case ShipMode::kCgroups:
        st = count_rows(t, "", {}, [&](const SpoolRow& r) {
          return !state_.cgroups.count({r.text(0), r.int64(1), cgroup_content(r)});
        });
        break;
      case ShipMode::kStacks:
        st = count_rows(t, "", {},
                        [&](const SpoolRow& r) { return !state_.stacks.count(r.int64(1)); });
        break;
      case ShipMode::kChains:
        for (const SpoolSession& s : spool_->sessions())
          if (!state_.chains.count({s.node, s.started_at}))
            if (st = count_rows(t, "WHERE c.session_id = :sid", {{":sid", s.id}},
                                [](const SpoolRow&) { return true; });
                !st)
              break;
        break;
    }
    if (!st) return st.error();
  }
  return n;
}

DrainReport Shipper::drain(std::chrono::milliseconds budget, int unreachable_tries) {
  // At most a century: a longer one overflowed the clock, and the drain gave up at once.
  budget = std::min<std::chrono::milliseconds>(budget, std::chrono::hours(24 * 365 * 100));
  const Deadline end = Clock::now() + budget;
  // Every request of the drain ends by then, each of a pass's (the schema's, the resume
  // point's) included: a slow server answering each in 2 s held a 7 s drain for 74 s.
  const auto bound = client_->bound_deadline(end);
  DrainReport rep;
  int backoff = 0, unreachable = 0;
  const int timeout = client_->options().request_timeout_ms;
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
    // The client's deadline too: another thread moves it to now to give up (the tracer, on a
    // second stop signal while its exit waits for ClickHouse).
    if (left <= 0 || client_->deadline_passed()) break;
    client_->set_request_timeout_ms(
        int(std::min<int64_t>({timeout ? timeout : left, left, INT32_MAX})));
    auto r = pass(end);
    if (r && *r) {
      rep.caught_up = true;
      break;
    }
    if (!r) {
      // A refusal the same request meets on every retry (a password, a user who may not
      // write, a table not ours) ends the drain: it waited out --timeout (5 minutes).
      const bool for_good = client_->refused_for_good();
      note_failure(r.error().message, !for_good);
      rep.last_error = r.error().message;
      if (for_good) break;
      unreachable = client_->last_failure() == Failure::kUnreachable ? unreachable + 1 : 0;
      if (unreachable_tries > 0 && unreachable >= unreachable_tries) break;
      backoff = backoff ? std::min(backoff * 2, opts_.backoff_max_ms) : opts_.backoff_min_ms;
      auto wait = std::min<int64_t>(
          backoff,
          std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count());
      // In slices, so that a deadline moved to now is seen within 100 ms.
      for (auto until = Clock::now() + std::chrono::milliseconds(wait);
           Clock::now() < until && !client_->deadline_passed();)
        std::this_thread::sleep_for(
            std::min<Clock::duration>(std::chrono::milliseconds(100), until - Clock::now()));
    }
  }
  client_->set_request_timeout_ms(timeout);
  client_->end_bound(bound);  // a later drain has its own time (a drain of 0 ms left it past)
  if (rep.caught_up) return rep;
  auto p = pending();
  if (!p) {
    rep.last_error = p.error().message;
    return rep;
  }
  rep.unshipped = *p;
  if (rep.unshipped == 0) rep.caught_up = state_.valid;
  // The background pass's failure when this drain had no time of its own to fail.
  if (rep.last_error.empty()) rep.last_error = totals().last_error;
  if (rep.last_error.empty()) rep.last_error = "the time allowed ran out";
  rep.logged = rep.last_error == logged_error_;
  return rep;
}

}  // namespace ingero::fleet
