// A ClickHouse client over its HTTP interface, with libcurl. One client per thread: it owns
// one curl handle and reuses its keep-alive connection.
//
// Every request POSTs to ENDPOINT/?params: a query in the body (execute, stream), or rows in
// the body with the INSERT statement in the `query` parameter (insert; RowBinary,
// gzip-compressed, "Content-Encoding: gzip"). Names are always qualified with the database, so the
// database need not exist for `CREATE DATABASE IF NOT EXISTS`.
//
// Failures are values whose message names the URL and, when ClickHouse answered, its own
// message ("Code: 60, ... Table x.y doesn't exist"). last_failure() says what the failure
// means for an INSERT, which is what the shipper needs to stay exactly-once:
//   kUnreachable: nothing was sent (no connection): the statement did not run;
//   kRejected:    ClickHouse answered with an error: the statement failed (an INSERT of one
//                 block into one partition is atomic: nothing of it was stored);
//   kAmbiguous:   the request went out and no complete answer came back (timeout, reset):
//                 it may or may not have run. The caller must ask the server.
// Timeouts: connecting, and the whole request (a stream() may pass its own). A deadline, when
// set, bounds both and every request begun before it, including one in flight on another
// thread when it is set (checked as the transfer progresses, at least once a second): what it
// cuts is a failure like a timeout (kAmbiguous once something was sent).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fleet/clickhouse_endpoint.h"
#include "hal/result.h"

namespace ingero::fleet {

enum class Failure : uint8_t { kNone = 0, kUnreachable, kRejected, kAmbiguous };
const char* failure_name(Failure f);  // "none", "unreachable", "rejected", "ambiguous"

// ClickHouse settings passed as URL parameters, in order ("readonly" should come last: once
// it is 1, later settings are refused by current ClickHouse versions).
using Settings = std::vector<std::pair<std::string, std::string>>;
// A user's statement run read-only (readonly=1, enforced by the server, last) in the endpoint's
// database, answered in `format`, at most `max_rows` rows (the server stops past them), within
// `timeout_s`: what `ingero query --source` and MCP's run_sql over a fleet send.
Settings read_only_settings(const std::string& database, const std::string& format, size_t max_rows,
                            int timeout_s);
// Receives a response body as it arrives; false stops reading (not an error).
using ChunkFn = std::function<bool(std::string_view)>;

struct ClientOptions {
  int connect_timeout_ms = 3000;
  int request_timeout_ms = 30000;  // whole request; 0 = none
  int gzip_level = 1;
};

// ClickHouse, failing a statement after its 200 and some rows (a time limit, throwIf, memory),
// appends the exception to the body: "Code: 159, e.displayText() = DB::Exception: Timeout
// exceeded ..." (18.x), "Code: 159. DB::Exception: ..." (later). The line, where the last line
// of `tail` (a body's end) is one; "" otherwise.
std::string trailing_exception(std::string_view tail);

class ClickHouseClient {
 public:
  ClickHouseClient(Endpoint endpoint, ClientOptions options = {});
  virtual ~ClickHouseClient();
  ClickHouseClient(const ClickHouseClient&) = delete;
  ClickHouseClient& operator=(const ClickHouseClient&) = delete;

  const Endpoint& endpoint() const { return endpoint_; }
  const ClientOptions& options() const { return options_; }
  void set_request_timeout_ms(int ms) { options_.request_timeout_ms = ms; }
  // No request runs past `deadline` (steady clock); any thread may set or clear it.
  void set_deadline(std::chrono::steady_clock::time_point deadline);
  void clear_deadline() { deadline_ns_ = 0; }
  // For the length of a drain: the deadline moved to `deadline` where none is set or the one
  // set is later; end_bound() puts back the one before, unless another thread set one since.
  struct Bound {
    int64_t was = 0, set = 0;
  };
  Bound bound_deadline(std::chrono::steady_clock::time_point deadline);
  void end_bound(Bound b) { deadline_ns_.compare_exchange_strong(b.set, b.was); }
  // Whether a deadline is set and has passed (a drain gives up then: nothing more is sent).
  bool deadline_passed() const {
    int64_t d = deadline_ns_.load();
    return d && d <= std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::steady_clock::now().time_since_epoch())
                         .count();
  }

  // A statement with a small answer (DDL, max(), count()): the whole body.
  virtual ingero::Result<std::string> execute(const std::string& sql,
                                              const Settings& settings = {});
  // A SELECT whose answer is handed over in chunks (bounded memory); the response is
  // gzip-compressed by the server. timeout_ms overrides the request timeout (0 = none).
  virtual ingero::Status stream(const std::string& sql, const Settings& settings,
                                const ChunkFn& on_chunk, int timeout_ms);
  // Whether ClickHouse answers within timeout_ms. The first request of a client asks the
  // user's profile, and its answer (a number) says so at once; later, or where the profile's
  // question was refused, a bare SELECT 1 is sent. An error names what the server did: no
  // answer in time, or one that is not ClickHouse's.
  ingero::Status ping(int timeout_ms);
  // INSERT INTO db.table (columns) FORMAT <format>: `body` holds `rows` rows in that format
  // (compressed here). A success says only that the server answered 200: written_rows() says
  // what a ClickHouse that sends X-ClickHouse-Summary stored; else it is read back
  // (ship_confirm.h).
  virtual ingero::Status insert(const std::string& table, const std::string& columns,
                                std::string_view body, size_t rows,
                                std::string_view format = "RowBinary");

  // Each later insert is sent with query_id `prefix` and its number (1, 2, ...), so that
  // ClickHouse can say whether it is still running (ship_state.h: await_inserts_in_flight).
  // "" (the default): no query_id.
  void tag_inserts(std::string prefix) {
    insert_prefix_ = std::move(prefix);
    inserts_tagged_ = 0;
  }

  // The `written_rows` of the latest answer's X-ClickHouse-Summary header, where the server
  // sent one (later versions do; 18.16, checked, sends none): nullopt otherwise, and after a
  // failure. forget_written_rows() clears it before a request another class may answer.
  std::optional<uint64_t> written_rows() const { return written_rows_; }
  void forget_written_rows() { written_rows_.reset(); }

  Failure last_failure() const { return last_failure_; }
  // The latest failure is a refusal that will be the same on retry (kRejected): the server
  // does not know the user or password (HTTP 401, 403; ClickHouse 192-194, 516), the user
  // may not write (164 readonly, 497 access denied), or a table is not ours (47 unknown
  // identifier, 16 no such column): a drain gives up at once instead of until its timeout.
  bool refused_for_good() const { return refused_for_good_; }
  // What the caller found in an answer will be the same on retry (a table not ingero's).
  void refuse_for_good() { refused_for_good_ = true; }
  uint64_t bytes_sent() const { return bytes_sent_; }         // request bodies, compressed
  uint64_t bytes_uncompressed() const { return bytes_raw_; }  // request bodies before gzip

 protected:
  Failure last_failure_ = Failure::kNone;
  bool refused_for_good_ = false;

 private:
  ingero::Status perform(const Settings& params, std::string_view body, bool gzip_body,
                         const ChunkFn* on_chunk, int timeout_ms);
  std::string url(const Settings& params) const;
  // The user's profile's `readonly` (0, 1, 2) into profile_readonly_, asked once without
  // settings; 0 where the server refuses to say. An error where it does not answer.
  ingero::Status learn_profile(int timeout_ms);
  int profile_readonly_ = -1;
  bool profile_answered_ = false;  // the profile's question had ClickHouse's answer, a number
  Endpoint endpoint_;
  ClientOptions options_;
  void* curl_ = nullptr;                 // CURL*
  std::atomic<int64_t> deadline_ns_{0};  // steady clock; 0 = none
  uint64_t bytes_sent_ = 0, bytes_raw_ = 0;
  std::optional<uint64_t> written_rows_;
  std::string insert_prefix_;
  uint64_t inserts_tagged_ = 0;
};

// "written_rows" of an X-ClickHouse-Summary value ({"read_rows":"0",...,"written_rows":"2",
// ...}): nullopt when it has none, or one that is not a number.
std::optional<uint64_t> summary_written_rows(std::string_view summary);

// 'text' as a ClickHouse string literal.
std::string sql_quote(std::string_view text);

}  // namespace ingero::fleet
