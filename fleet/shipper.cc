#include "fleet/shipper.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "store/file_access.h"

namespace ingero::fleet {
namespace {

using Clock = std::chrono::steady_clock;

const TableSpec& spec(const char* name) { return *find_table(name); }

}  // namespace

ingero::Result<std::unique_ptr<Shipper>> Shipper::create(const std::string& db_path,
                                                         const Endpoint& endpoint,
                                                         ShipperOptions options,
                                                         std::unique_ptr<ClickHouseClient> client) {
  if (access(db_path.c_str(), R_OK) != 0)
    return ingero::Error::sys(db_path + ": cannot read the trace file to ship", errno);
  // Two shippers of one file would both ship the rows above the same resume point.
  // A planted lock (a symbolic link, another user's file) is refused (store/file_access.h).
  std::string lock = db_path + ".ship.lock";
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
  spool_.reset();  // the tracer checkpoints the file next: no reader may hold it
}

ShipTotals Shipper::totals() const {
  std::lock_guard<std::mutex> g(mu_);
  ShipTotals t = totals_;
  return t;
}

void Shipper::note_failure(const std::string& message) {
  state_.valid = false;  // re-read from ClickHouse before the next insert
  {
    std::lock_guard<std::mutex> g(mu_);
    ++totals_.failures;
    totals_.last_error = message;
  }
  if (!failing_ && opts_.log)
    opts_.log(message + "; the rows stay in " + path_ + " and are retried");
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
      note_failure(r.error().message);
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

ingero::Status Shipper::insert(const TableSpec& t, const std::string& tsv, size_t rows) {
  auto st = client_->insert(t.name, t.column_list(), tsv);
  if (!st)
    return ingero::make_error(st.error().message + " (inserting " + std::to_string(rows) +
                              " rows into " + t.name + ")");
  std::lock_guard<std::mutex> g(mu_);
  totals_.rows += rows;
  ++totals_.batches;
  totals_.bytes_sent = client_->bytes_sent();
  totals_.bytes_raw = client_->bytes_uncompressed();
  return {};
}

ingero::Result<bool> Shipper::pass(Deadline deadline) {
  if (!spool_ || spool_->replaced()) {
    spool_.reset();
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
    if (auto st = ensure_schema(*client_); !st) return st.error();
    auto s = read_ship_state(*client_, *spool_);
    if (!s) return s.error();
    state_ = std::move(*s);
    state_file_ = spool_->file_start();
    stacks_seen_frames_ = -1;
    for (auto& [table, through] : through_) through = state_.high_water[table];
    warn_folded_unshipped();
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

ingero::Status Shipper::ship_sessions() {
  const TableSpec& t = spec("sessions");
  std::string tsv;
  std::vector<std::pair<std::pair<std::string, uint64_t>, uint64_t>> shipped;
  auto st = spool_->select(t, "ORDER BY s.id", {}, [&](const SpoolRow& r) {
    std::pair<std::string, uint64_t> key{r.text(0), uint64_t(r.int64(1))};
    uint64_t stopped = uint64_t(r.int64(2));
    auto it = state_.sessions.find(key);
    if (it != state_.sessions.end() && (stopped == 0 || it->second >= stopped)) return true;
    r.append_tsv(tsv);
    shipped.push_back({key, stopped});
    return true;
  });
  if (!st) return st;
  if (shipped.empty()) return {};
  if (auto s = insert(t, tsv, shipped.size()); !s) return s;
  for (const auto& [k, v] : shipped) state_.sessions[k] = v;
  return {};
}

ingero::Status Shipper::ship_rowid(const TableSpec& t, Deadline deadline, bool& done) {
  const int day_col = t.column_index(t.day_column), id_col = t.column_index("src_id");
  int64_t& high = state_.high_water[t.name];
  const std::string tail =
      "WHERE " + t.source_id + " > :after ORDER BY " + t.source_id + " LIMIT :limit";
  while (true) {
    if (Clock::now() >= deadline) {
      done = false;
      return {};
    }
    std::string tsv;
    size_t n = 0;
    int64_t last = high, day = -1;
    bool more = false;
    auto st = spool_->select(t, tail, {{":after", high}, {":limit", int64_t(opts_.batch_rows) + 1}},
                             [&](const SpoolRow& r) {
                               if (n >= opts_.batch_rows || tsv.size() >= opts_.batch_bytes) {
                                 more = true;
                                 return false;
                               }
                               if (day_col >= 0) {
                                 // A batch ends where the partition (UTC day) changes: one INSERT,
                                 // one partition.
                                 int64_t d = r.int64(day_col) / int64_t(kNsPerDay);
                                 if (day >= 0 && d != day) {
                                   more = true;
                                   return false;
                                 }
                                 day = d;
                               }
                               r.append_tsv(tsv);
                               ++n;
                               last = r.int64(id_col);
                               return true;
                             });
    if (!st) return st;
    if (n == 0) return {};
    if (auto s = insert(t, tsv, n); !s) return s;
    high = last;
    through_.at(t.name) = high;
    if (!more) return {};
  }
}

ingero::Status Shipper::ship_stacks(Deadline deadline, bool& done) {
  const TableSpec& t = spec("stack_frames");
  if (!spool_->has_table(t)) return {};
  auto frames = spool_->frame_count();
  if (!frames) return frames.error();
  if (*frames == stacks_seen_frames_) return {};
  auto ids = spool_->stack_ids();
  if (!ids) return ids.error();
  std::string tsv;
  size_t rows = 0;
  std::vector<int64_t> batch;
  auto flush = [&]() -> ingero::Status {
    if (batch.empty()) return {};
    if (auto s = insert(t, tsv, rows); !s) return s;
    state_.stacks.insert(batch.begin(), batch.end());
    tsv.clear();
    rows = 0;
    batch.clear();
    return {};
  };
  for (int64_t id : *ids) {
    if (state_.stacks.count(id)) continue;
    if (Clock::now() >= deadline) {
      done = false;
      return flush();
    }
    auto st = spool_->select(t, "WHERE f.stack_id = :sid ORDER BY f.frame", {{":sid", id}},
                             [&](const SpoolRow& r) {
                               r.append_tsv(tsv);
                               ++rows;
                               return true;
                             });
    if (!st) return st;
    batch.push_back(id);  // a stack's frames always travel in one INSERT
    if (rows >= opts_.batch_rows)
      if (auto s = flush(); !s) return s;
  }
  if (auto s = flush(); !s) return s;
  stacks_seen_frames_ = *frames;
  return {};
}

ingero::Status Shipper::ship_processes() {
  const TableSpec& t = spec("process_names");
  std::string tsv;
  std::vector<std::pair<std::pair<std::string, uint32_t>, uint64_t>> shipped;
  auto st = spool_->select(t, "ORDER BY p.rowid", {}, [&](const SpoolRow& r) {
    std::pair<std::string, uint32_t> key{r.text(0), uint32_t(r.int64(1))};
    uint64_t seen = uint64_t(r.int64(4));
    auto it = state_.processes.find(key);
    if (it != state_.processes.end() && it->second >= seen) return true;
    r.append_tsv(tsv);
    shipped.push_back({key, seen});
    return true;
  });
  if (!st) return st;
  if (shipped.empty()) return {};
  if (auto s = insert(t, tsv, shipped.size()); !s) return s;
  for (const auto& [k, v] : shipped) state_.processes[k] = v;
  return {};
}

ingero::Status Shipper::ship_cgroups() {
  const TableSpec& t = spec("cgroup_metadata");
  if (!spool_->has_table(t)) return {};
  std::string tsv;
  std::vector<std::tuple<std::string, int64_t, std::string>> shipped;
  auto st = spool_->select(t, "ORDER BY g.cgroup_id", {}, [&](const SpoolRow& r) {
    std::tuple<std::string, int64_t, std::string> key{r.text(0), r.int64(1), cgroup_content(r)};
    if (state_.cgroups.count(key)) return true;
    r.append_tsv(tsv);
    shipped.push_back(key);
    return true;
  });
  if (!st) return st;
  if (shipped.empty()) return {};
  if (auto s = insert(t, tsv, shipped.size()); !s) return s;
  state_.cgroups.insert(shipped.begin(), shipped.end());
  return {};
}

ingero::Status Shipper::ship_chains() {
  const TableSpec& t = spec("causal_chains");
  if (!spool_->has_table(t)) return {};
  // A session's chains are final once it has stopped (they are stored just before).
  for (const SpoolSession& s : spool_->sessions()) {
    std::pair<std::string, uint64_t> key{s.node, s.started_at};
    if (!s.stopped_at || state_.chains.count(key)) continue;
    std::string tsv;
    size_t rows = 0;
    auto st = spool_->select(t, "WHERE c.session_id = :sid ORDER BY c.rowid", {{":sid", s.id}},
                             [&](const SpoolRow& r) {
                               r.append_tsv(tsv);
                               ++rows;
                               return true;
                             });
    if (!st) return st;
    if (rows)
      if (auto x = insert(t, tsv, rows); !x) return x;
    state_.chains.insert(key);
  }
  return {};
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

DrainReport Shipper::drain(std::chrono::milliseconds budget) {
  const Deadline end = Clock::now() + budget;
  DrainReport rep;
  int backoff = 0;
  const int timeout = client_->options().request_timeout_ms;
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
    if (left <= 0) break;
    client_->set_request_timeout_ms(int(std::min<int64_t>(timeout ? timeout : left, left)));
    auto r = pass(end);
    if (r && *r) {
      rep.caught_up = true;
      break;
    }
    if (!r) {
      note_failure(r.error().message);
      rep.last_error = r.error().message;
      backoff = backoff ? std::min(backoff * 2, opts_.backoff_max_ms) : opts_.backoff_min_ms;
      auto wait = std::min<int64_t>(
          backoff,
          std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count());
      if (wait > 0) std::this_thread::sleep_for(std::chrono::milliseconds(wait));
    }
  }
  client_->set_request_timeout_ms(timeout);
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
  return rep;
}

}  // namespace ingero::fleet
