// Read-only access to a trace file, ours or the original implementation's.
//
// open() uses a SQLITE_OPEN_READONLY connection: the input file is never modified. It
// classifies the file, refuses foreign/corrupt/newer files with a clear message, and
// installs the TEMP contract views and the backends' `views` (store/contract_views.h) so
// every reader sees one shape. Without `views`, only the views the file itself holds exist.
//
// run_query() is the confinement for user and agent SQL. It is enforced by SQLite, not by
// inspecting keywords: read-only connection, PRAGMA query_only, an authorizer that allows
// reads and a short list of read-only pragmas and denies everything else (writes, ATTACH,
// state-changing pragmas, load_extension), one statement only, a progress-handler time
// limit, a row limit, a result-size limit and SQLite's own length limit on values.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "hal/error_codes.h"
#include "hal/result.h"
#include "hal/side_channel.h"
#include "store/schema.h"
#include "store/sqlite_db.h"

namespace ingero::store {

struct LegacyFold;  // store/legacy_views.h

class TraceReader {
 public:
  // Not copied or moved: its connection's SQL functions hold the address of its error codes.
  TraceReader(const TraceReader&) = delete;
  TraceReader& operator=(const TraceReader&) = delete;
  // `error_codes` names the calls' return codes for the engine (TraceSource::error_code): the
  // backends' tables (hal::BackendRegistry::error_code); without it codes are numbers.
  static ingero::Result<std::unique_ptr<TraceReader>> open(const std::string& path,
                                                           std::span<const hal::SqlView> views = {},
                                                           hal::ErrorCodeFn error_codes = {});
  Db& db() { return *db_; }
  const TraceFileInfo& info() const { return info_; }
  bool is_legacy() const { return info_.format == TraceFormat::kLegacyGo; }
  std::string format_name() const;
  // The driver calls of a legacy file folded into the runtime calls they were made in
  // (store/legacy_views.h): said beside its format. All of them, or those begun in a window
  // (of one node).
  int64_t legacy_nested_calls() const;
  int64_t legacy_nested_calls(const std::optional<std::string>& node, int64_t from_ns,
                              int64_t to_ns);
  // Installs the query confinement once; later calls are no-ops.
  ingero::Status confine(int max_value_bytes);
  // A second reader of the same file with the same views (its own connection, for another
  // thread). The views' text must outlive both: backends' views are static.
  ingero::Result<std::unique_ptr<TraceReader>> reopen() const;
  // False once `ingero compact` or a live trace archived calls or runs of the file where this
  // reader had none (its `events` or `call_runs` would miss them): a reader kept across
  // requests opens again.
  bool archive_current();
  // The name and class of return code `ret` of API `api`; nullopt when not known.
  std::optional<hal::ErrorCode> error_code(std::string_view api, int64_t ret) const {
    return error_codes_ ? error_codes_(api, ret) : std::nullopt;
  }

 private:
  TraceReader() = default;
  // open(), given a legacy file's fold where a reader of the file already found it.
  static ingero::Result<std::unique_ptr<TraceReader>> open_with(
      const std::string& path, std::span<const hal::SqlView> views, hal::ErrorCodeFn error_codes,
      std::shared_ptr<const LegacyFold> fold);
  std::unique_ptr<Db> db_;
  std::vector<hal::SqlView> views_;
  hal::ErrorCodeFn error_codes_;
  bool confined_ = false;
  std::pair<bool, bool> archive_installed_{false, false};  // calls, runs
  TraceFileInfo info_;
  std::shared_ptr<const LegacyFold> legacy_fold_;  // a legacy file's (store/legacy_views.h)
};

struct QueryLimits {
  size_t max_rows = 10000;
  // The result's size as JSON text, every value type counted (its rendering, quotes, escapes
  // and a separator): a row that would pass it is not read, and the result is truncated.
  size_t max_bytes = 16u << 20;
  // The rows are rendered as objects keyed by column name (`ingero query --json`): each row's
  // keys count in max_bytes too (746 MB were written under a cut said to be at 256 MiB).
  bool keyed_rows = false;
  int timeout_ms = 10000;
  int max_value_bytes = 1 << 20;              // SQLITE_LIMIT_LENGTH: zeroblob(1e9) fails fast
  const std::atomic<bool>* cancel = nullptr;  // set (by another thread) to abort the query
};

using Value = std::variant<std::monostate, int64_t, double, std::string>;

struct QueryResult {
  std::vector<std::string> columns;
  std::vector<std::vector<Value>> rows;
  bool truncated = false;
  std::string truncated_reason;  // "row limit 10000", "result size limit"
  // What the answer leaves out of the trace (store/query_note.h); empty when nothing.
  std::string note;
};

// Runs one read-only statement with the limits. Any denied operation, second statement,
// timeout or oversized value is an Error whose message says which.
ingero::Result<QueryResult> run_query(TraceReader& reader, std::string_view sql,
                                      const QueryLimits& limits = {});

// Installs the confinement on a connection (authorizer, query_only, length limit).
ingero::Status confine(Db& db, int max_value_bytes);

}  // namespace ingero::store
