#include "store/stacks.h"

#include <nlohmann/json.hpp>

namespace ingero::store {

bool has_stacks(Db& db) {
  for (const char* t : {"stacks", "stack_traces"})
    if (db.table_exists(t)) {
      auto n = db.query_int(std::string("SELECT count(*) FROM (SELECT 1 FROM ") + t + " LIMIT 1)");
      if (n && *n && **n > 0) return true;
    }
  return false;
}

ingero::Result<std::vector<StackFrame>> parse_legacy_frames(std::string_view text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_array())
    return ingero::make_error("stack frames are not a JSON array");
  std::vector<StackFrame> out;
  for (const auto& f : j) {
    if (!f.is_object()) return ingero::make_error("stack frame is not an object");
    StackFrame fr;
    auto str = [&](const char* k) {
      auto it = f.find(k);
      return it != f.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    std::string ip = str("i");
    if (!ip.empty()) fr.ip = std::strtoull(ip.c_str(), nullptr, 16);
    fr.symbol = str("s");
    fr.file = str("f");
    fr.py_file = str("pf");
    fr.py_func = str("pfn");
    if (auto it = f.find("pl"); it != f.end() && it->is_number_integer())
      fr.py_line = it->get<uint32_t>();
    out.push_back(std::move(fr));
  }
  return out;
}

ingero::Result<std::optional<std::vector<StackFrame>>> read_stack(Db& db, int64_t hash) {
  if (db.table_exists("stack_traces")) {
    auto st = db.prepare("SELECT frames FROM stack_traces WHERE hash = ?");
    if (!st) return st.error();
    st->bind(1, hash);
    auto row = st->step();
    if (!row) return row.error();
    if (*row) {
      auto frames = parse_legacy_frames(st->text(0));
      if (!frames) return frames.error();
      return std::optional<std::vector<StackFrame>>(std::move(*frames));
    }
  }
  return std::optional<std::vector<StackFrame>>();
}

}  // namespace ingero::store
