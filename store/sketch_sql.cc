#include "store/sketch_sql.h"

#include <cmath>
#include <cstdint>
#include <new>
#include <optional>
#include <string>
#include <string_view>

#include "engine/quantile_sketch.h"

namespace ingero::store {

namespace {

using engine::QuantileSketch;

void fail(sqlite3_context* ctx, const char* function, std::string_view why) {
  std::string msg = std::string(function) + ": " + std::string(why);
  sqlite3_result_error(ctx, msg.c_str(), int(msg.size()));
}

// The sketch in `v`, or nullopt after reporting the error on `ctx`. `v` must not be NULL.
std::optional<QuantileSketch> read_sketch(sqlite3_context* ctx, const char* function,
                                          sqlite3_value* v) {
  std::optional<QuantileSketch> s;
  if (sqlite3_value_type(v) == SQLITE_BLOB) {
    const void* data = sqlite3_value_blob(v);
    int size = sqlite3_value_bytes(v);
    s = QuantileSketch::deserialize(
        data ? std::string_view(static_cast<const char*>(data), size_t(size)) : "");
  }
  if (!s) fail(ctx, function, "damaged sketch");
  return s;
}

void result_sketch(sqlite3_context* ctx, const QuantileSketch& s) {
  std::string blob = s.serialize();
  sqlite3_result_blob(ctx, blob.data(), int(blob.size()), SQLITE_TRANSIENT);
}

void sketch_quantile(sqlite3_context* ctx, int, sqlite3_value** argv) try {
  if (sqlite3_value_type(argv[0]) == SQLITE_NULL || sqlite3_value_type(argv[1]) == SQLITE_NULL) {
    sqlite3_result_null(ctx);
    return;
  }
  int qtype = sqlite3_value_type(argv[1]);
  double q = sqlite3_value_double(argv[1]);
  if ((qtype != SQLITE_INTEGER && qtype != SQLITE_FLOAT) || !(q >= 0 && q <= 1)) {
    fail(ctx, "sketch_quantile", "q must be a number in [0, 1]");
    return;
  }
  auto s = read_sketch(ctx, "sketch_quantile", argv[0]);
  if (!s) return;
  uint64_t v = s->quantile(q);
  if (v > uint64_t(INT64_MAX)) {
    fail(ctx, "sketch_quantile", "the estimate is above the INTEGER range");
    return;
  }
  sqlite3_result_int64(ctx, int64_t(v));
} catch (const std::bad_alloc&) {
  sqlite3_result_error_nomem(ctx);
}

void sketch_count(sqlite3_context* ctx, int, sqlite3_value** argv) try {
  if (sqlite3_value_type(argv[0]) == SQLITE_NULL) {
    sqlite3_result_null(ctx);
    return;
  }
  auto s = read_sketch(ctx, "sketch_count", argv[0]);
  if (s) sqlite3_result_int64(ctx, int64_t(s->count()));
} catch (const std::bad_alloc&) {
  sqlite3_result_error_nomem(ctx);
}

// sketch_merge's state, in SQLite's zeroed aggregate context: the merged sketch is created by
// the first non-NULL row and deleted by the final call, which SQLite makes even after an error.
struct MergeState {
  QuantileSketch* merged;
};

void sketch_merge_step(sqlite3_context* ctx, int, sqlite3_value** argv) try {
  if (sqlite3_value_type(argv[0]) == SQLITE_NULL) return;
  auto* st = static_cast<MergeState*>(sqlite3_aggregate_context(ctx, sizeof(MergeState)));
  if (!st) {
    sqlite3_result_error_nomem(ctx);
    return;
  }
  auto s = read_sketch(ctx, "sketch_merge", argv[0]);
  if (!s) return;
  if (!st->merged) {
    st->merged = new QuantileSketch(std::move(*s));
    return;
  }
  if (s->count() > QuantileSketch::kMaxCount - st->merged->count()) {
    fail(ctx, "sketch_merge", "the merged count is above the INTEGER range");
    return;
  }
  st->merged->merge(*s);
} catch (const std::bad_alloc&) {
  sqlite3_result_error_nomem(ctx);
}

void sketch_merge_final(sqlite3_context* ctx) {
  auto* st = static_cast<MergeState*>(sqlite3_aggregate_context(ctx, 0));
  if (!st || !st->merged) {
    sqlite3_result_null(ctx);
    return;
  }
  try {
    result_sketch(ctx, *st->merged);
  } catch (const std::bad_alloc&) {
    sqlite3_result_error_nomem(ctx);
  }
  delete st->merged;
  st->merged = nullptr;
}

}  // namespace

void register_sketch_functions(sqlite3* db) {
  constexpr int kFlags = SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS;
  sqlite3_create_function_v2(db, "sketch_quantile", 2, kFlags, nullptr, sketch_quantile, nullptr,
                             nullptr, nullptr);
  sqlite3_create_function_v2(db, "sketch_count", 1, kFlags, nullptr, sketch_count, nullptr, nullptr,
                             nullptr);
  sqlite3_create_function_v2(db, "sketch_merge", 1, kFlags, nullptr, nullptr, sketch_merge_step,
                             sketch_merge_final, nullptr);
}

std::optional<engine::QuantileSketch> sketch_column(sqlite3_stmt* st, int col) {
  const void* b = sqlite3_column_blob(st, col);
  return engine::QuantileSketch::deserialize(
      std::string_view(static_cast<const char*>(b), size_t(sqlite3_column_bytes(st, col))));
}

}  // namespace ingero::store
