// What the trace writer's block encoding costs a row, on the blocks of a real trace: each call
// block's `full` and each host block of FILE is decoded, appended again row by row into the
// writer's own ColumnBlock, then encoded as the writer encodes it (store/column_block.h): the
// columns before compression, and the whole with zstd. Call blocks are also folded
// (store/call_block.h) and their kept calls and runs encoded, as a full block's commit does.
// Prints one JSON line: ns a row for each step (the appends value by value included), and
// compressed bytes a row.
//   block_encode_bench FILE [ROUNDS] [LEVEL]      (FILE: a trace `ingero trace` wrote; LEVEL:
//   zstd's, the writer's 3 by default)
#include <sqlite3.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "store/call_block.h"
#include "store/column_block.h"
#include "store/row_block.h"

using namespace ingero;

namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> blobs(sqlite3* db, const char* sql) {
  std::vector<std::string> out;
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) != SQLITE_OK) {
    std::fprintf(stderr, "block_encode_bench: %s\n", sqlite3_errmsg(db));
    std::exit(1);
  }
  while (sqlite3_step(st) == SQLITE_ROW)
    out.emplace_back(static_cast<const char*>(sqlite3_column_blob(st, 0)),
                     size_t(sqlite3_column_bytes(st, 0)));
  sqlite3_finalize(st);
  return out;
}

store::RowBlock decode(const std::string& blob) {
  auto r = store::RowBlock::decode(blob);
  if (!r) {
    std::fprintf(stderr, "block_encode_bench: %s\n", r.error().message.c_str());
    std::exit(1);
  }
  return std::move(*r);
}

// The rows of `rows` appended to a ColumnBlock of the same columns, value by value.
void refill(const store::RowBlock& rows, store::ColumnBlock& into) {
  into.clear();
  for (size_t r = 0; r < rows.rows(); ++r) {
    for (size_t c = 0; c < rows.columns().size(); ++c) {
      int type = rows.type(r, c);
      if (type == SQLITE_INTEGER) into.set_int(c, rows.int64(r, c));
      if (type == SQLITE_TEXT) into.set_text(c, rows.bytes(r, c));
    }
    into.end_row();
  }
}

// FNV-1a over every block encoded: two builds that encode alike print the same digest.
void digest(uint64_t& h, const std::string& bytes) {
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ull;
}

double ns_since(Clock::time_point t0) {
  return double(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: block_encode_bench FILE [ROUNDS]\n");
    return 2;
  }
  int rounds = argc > 2 ? std::stoi(argv[2]) : 5;
  int level = argc > 3 ? std::stoi(argv[3]) : 3;
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(argv[1], &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    std::fprintf(stderr, "block_encode_bench: cannot open %s\n", argv[1]);
    return 1;
  }
  auto call_blobs = blobs(db, "SELECT full FROM call_store WHERE full IS NOT NULL ORDER BY id");
  auto host_blobs = blobs(db, "SELECT data FROM host_store ORDER BY id");
  std::set<std::pair<int, int>> launch_ops;
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "SELECT source_id, op_id FROM ops WHERE kind = 'launch'", -1, &st,
                     nullptr);
  while (sqlite3_step(st) == SQLITE_ROW)
    launch_ops.insert({sqlite3_column_int(st, 0), sqlite3_column_int(st, 1)});
  sqlite3_finalize(st);
  sqlite3_close(db);
  if (call_blobs.empty() || host_blobs.empty()) {
    std::fprintf(stderr, "block_encode_bench: %s has no call or no host blocks\n", argv[1]);
    return 1;
  }

  std::vector<store::RowBlock> calls, hosts;
  for (const auto& b : call_blobs) calls.push_back(decode(b));
  for (const auto& b : host_blobs) hosts.push_back(decode(b));
  auto launch = [&](int source, int op) { return launch_ops.count({source, op}) > 0; };
  // One launch limit for every op: the step's own launches fold, as a trace's do.
  store::FoldLimitFn limit = [](uint32_t, int, int) { return std::optional<int64_t>(1'000'000); };

  struct Step {
    double ns = 0;
    size_t rows = 0, bytes = 0;
  };
  Step call_append, call_raw, call_zstd, call_fold, host_append, host_raw, host_zstd;
  std::string raw, out;
  uint64_t hash = 0xcbf29ce484222325ull;
  store::FoldedCalls folded;
  // A block's columns before compression, then compressed, as the writer encodes them.
  auto encode = [&](const store::RowBlock& rows, Step& append, Step& before, Step& after,
                    bool first) {
    store::ColumnBlock cols(rows.columns());
    auto t0 = Clock::now();
    refill(rows, cols);
    append.ns += ns_since(t0);
    append.rows += cols.rows();
    t0 = Clock::now();
    cols.encode_raw(raw);
    before.ns += ns_since(t0);
    before.rows += cols.rows();
    before.bytes += raw.size();
    t0 = Clock::now();
    cols.encode_into(out, level);
    after.ns += ns_since(t0);
    after.rows += cols.rows();
    after.bytes += out.size();
    if (first) digest(hash, out);
  };
  for (int round = 0; round < rounds; ++round) {
    for (const auto& rows : calls) {
      encode(rows, call_append, call_raw, call_zstd, round == 0);
      store::CallBlock block;
      if (auto s = block.add_decoded(rows, launch); !s) {
        std::fprintf(stderr, "block_encode_bench: %s\n", s.error().message.c_str());
        return 1;
      }
      auto t0 = Clock::now();
      block.fold(limit, folded);
      folded.kept.encode_into(out, level);
      size_t kept = out.size();
      if (round == 0) digest(hash, out);
      folded.runs.encode_into(out, level);
      if (round == 0) digest(hash, out);
      call_fold.ns += ns_since(t0);
      call_fold.rows += block.size();
      call_fold.bytes += kept + out.size();
    }
    for (const auto& rows : hosts) encode(rows, host_append, host_raw, host_zstd, round == 0);
  }
  auto per = [](const Step& s, double v) { return s.rows ? v / double(s.rows) : 0.0; };
  std::printf(
      "{\"call_rows\": %zu, \"host_rows\": %zu, \"call_append_ns\": %.1f, \"host_append_ns\": "
      "%.1f, "
      "\"call_columns_ns\": %.1f, \"call_encode_ns\": %.1f, \"call_fold_encode_ns\": %.1f, "
      "\"host_columns_ns\": %.1f, \"host_encode_ns\": %.1f, "
      "\"call_raw_bytes\": %.1f, \"call_bytes\": %.2f, \"call_fold_bytes\": %.2f, "
      "\"host_raw_bytes\": %.1f, \"host_bytes\": %.2f, \"digest\": \"%016llx\"}\n",
      call_raw.rows / size_t(rounds), host_raw.rows / size_t(rounds),
      per(call_append, call_append.ns), per(host_append, host_append.ns),
      per(call_raw, call_raw.ns), per(call_zstd, call_zstd.ns), per(call_fold, call_fold.ns),
      per(host_raw, host_raw.ns), per(host_zstd, host_zstd.ns),
      per(call_raw, double(call_raw.bytes)), per(call_zstd, double(call_zstd.bytes)),
      per(call_fold, double(call_fold.bytes)), per(host_raw, double(host_raw.bytes)),
      per(host_zstd, double(host_zstd.bytes)), (unsigned long long)hash);
  return 0;
}
