#include "store/query_note.h"

#include <cctype>

#include "engine/chain.h"
#include "store/call_store.h"

namespace ingero::store {

bool names_identifier(std::string_view sql, std::string_view name) {
  auto part = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t i = 0; i < sql.size();) {
    if (!part(sql[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < sql.size() && part(sql[j])) ++j;
    std::string_view word = sql.substr(i, j - i);
    if (word.size() == name.size()) {
      bool same = true;
      for (size_t k = 0; k < word.size() && same; ++k)
        same = std::tolower(static_cast<unsigned char>(word[k])) ==
               std::tolower(static_cast<unsigned char>(name[k]));
      if (same) return true;
    }
    i = j;
  }
  return false;
}

std::string folded_calls_note(Db& db, std::string_view sql) {
  bool rows = false;
  for (std::string_view n : {"events", "calls", "cuda_events", "hip_events", "nccl_events"})
    rows = rows || names_identifier(sql, n);
  if (!rows) return "";
  // Schema 10: the blocks folded for good (store/call_store.h); before, call_folding.
  bool store = has_call_store(db);
  if (!store && !db.table_exists("call_folding")) return "";
  auto st = db.prepare(store ? "SELECT max(end_ts), coalesce(sum(folded), 0), coalesce(sum(runs), "
                               "0) FROM call_store WHERE full IS NULL AND folded > 0"
                             : "SELECT folded_before, folded_calls, runs FROM call_folding");
  if (!st) return "";
  auto row = st->step();
  if (!row || !*row || st->int64(1) <= 0) return "";
  int64_t calls = st->int64(1), runs = st->int64(2);
  return engine::format_count(uint64_t(calls)) + " launches before " +
         engine::format_wall(st->int64(0)) + " were folded into " +
         engine::format_count(uint64_t(runs)) + " runs (call_runs) by tiered retention: they " +
         "have no row in events or the views of calls. call_summaries counts every call, "
         "per second.";
}

}  // namespace ingero::store
