#include "store/inflight_rows.h"

#include <unistd.h>

#include "hal/clock.h"
#include "store/schema.h"

namespace ingero::store {

const std::vector<std::string>& inflight_columns() {
  static const std::vector<std::string> cols = [] {
    std::vector<std::string> v = {"node",
                                  "what",
                                  "status",
                                  "pid",
                                  "tid",
                                  "comm",
                                  "vendor",
                                  "api",
                                  "kind",
                                  "op",
                                  "entered_at",
                                  "seen_at",
                                  "ended_at",
                                  "reported_at",
                                  "dur_ns",
                                  "thread_state",
                                  "thread_state_since",
                                  "off_cpu_ns",
                                  "stack_hash",
                                  "seq",
                                  "others_running",
                                  "others_sleeping",
                                  "others_io"};
    for (const auto& f : field_columns()) v.push_back(f);
    return v;
  }();
  return cols;
}

ingero::Result<std::vector<engine::InflightRow>> read_inflight(Db& db, const InflightFilter& f,
                                                               StringPool& strings) {
  std::vector<engine::InflightRow> out;
  if (!db.table_exists("inflight")) return out;
  std::string sql;
  for (const auto& c : inflight_columns()) sql += (sql.empty() ? "SELECT " : ", ") + c;
  // Stuck from entered_at to seen_at (a row that ended was last seen at its end).
  sql += " FROM inflight WHERE entered_at <= " + std::to_string(f.to_ns) +
         " AND seen_at >= " + std::to_string(f.from_ns);
  if (f.node) sql += " AND node = " + sql_quote(*f.node);
  if (f.pid) sql += " AND pid = " + std::to_string(*f.pid);
  if (f.session_id) sql += " AND session_id = " + std::to_string(*f.session_id);
  if (f.current) sql += " AND status = 'in_flight'";
  sql += " ORDER BY entered_at, id";
  auto st = db.prepare(sql);
  if (!st) return st.error();
  while (true) {
    auto r = st->step();
    if (!r) return r.error();
    if (!*r) break;
    out.push_back(inflight_row(*st, strings));
  }
  return out;
}

}  // namespace ingero::store

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <map>
#include <mutex>

namespace ingero::store {

bool trace_being_written(const std::string& path) {
  // One descriptor per file, kept open: closing a descriptor of a file drops every POSIX lock
  // the process holds on it, and the caller may hold SQLite's (a read transaction). A file
  // replaced at the path gets a new one; the old one is kept too, for the same reason.
  static std::mutex mu;
  static std::map<std::string, int> fds;
  struct stat now {};
  if (stat(path.c_str(), &now) != 0) return false;
  std::lock_guard<std::mutex> g(mu);
  int& fd = fds[path];
  struct stat had {};
  if (fd <= 0 || fstat(fd, &had) != 0 || had.st_ino != now.st_ino || had.st_dev != now.st_dev) {
    int f = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (f < 0) return false;
    fd = f;
  }
  if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
    (void)flock(fd, LOCK_UN);
    return false;
  }
  return errno == EWOULDBLOCK;
}

ingero::Result<std::optional<LatestSession>> latest_session(Db& db) {
  if (!db.table_exists("sessions")) return std::optional<LatestSession>{};
  // Files of the original implementation and of early builds lack some of these columns.
  auto col = [&](const char* c, const char* dflt) {
    return db.column_exists("sessions", c) ? std::string(c) : std::string(dflt);
  };
  auto st =
      db.prepare("SELECT id, " + col("node", "''") + ", " + col("stopped_at", "0") + ", " +
                 col("flags", "''") + ", " + col("host", "''") + ", " + col("mono_offset_ns", "0") +
                 ", " + col("started_at", "0") + " FROM sessions ORDER BY id DESC LIMIT 1");
  if (!st) return st.error();
  auto r = st->step();
  if (!r) return r.error();
  if (!*r) return std::optional<LatestSession>{};
  LatestSession s;
  s.id = st->int64(0);
  s.node = st->text(1);
  s.stopped_at = st->int64(2);
  s.host = st->text(4);
  s.mono_offset_ns = st->int64(5);
  s.started_at = st->int64(6);
  // flags: "...,inflight-after=5,..." (seconds) as app/cmd_trace.cc writes it.
  std::string flags = "," + st->text(3) + ",";
  const std::string key = ",inflight-after=";
  if (auto at = flags.find(key); at != std::string::npos)
    s.inflight_after_s = std::strtod(flags.c_str() + at + key.size(), nullptr);
  const std::string timing = ",launch-timing=";
  if (auto at = flags.find(timing); at != std::string::npos)
    s.launch_timing = std::atoi(flags.c_str() + at + timing.size());
  return std::optional<LatestSession>{s};
}

int64_t session_now_ns(const LatestSession& s) {
  char host[256] = {};
  if (s.mono_offset_ns && !s.host.empty() && gethostname(host, sizeof(host) - 1) == 0 &&
      s.host == host)
    return hal::TraceClock{s.mono_offset_ns}.now();
  return hal::wall_now_ns();
}

}  // namespace ingero::store

namespace ingero::store {

ingero::Result<StuckRead> read_stuck_now(Db& db, const std::string& path,
                                         std::optional<uint32_t> pid, StringPool& strings) {
  StuckRead out;
  out.live = trace_being_written(path);
  auto s = latest_session(db);
  if (!s) return s.error();
  out.session = *s;
  if (!out.session) return out;
  InflightFilter f;
  f.session_id = out.session->id;
  f.pid = pid;
  auto rows = read_inflight(db, f, strings);
  if (!rows) return rows.error();
  for (auto& r : *rows)
    if (r.in.status == hal::Inflight::Status::kInFlight ||
        (!out.live && r.in.status == hal::Inflight::Status::kStopped))
      out.rows.push_back(std::move(r));
  return out;
}

}  // namespace ingero::store
