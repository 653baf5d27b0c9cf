// Reading ClickHouse's TabSeparated answers as the fleet's sources read rows: a field as a
// number (NULL and '' read 0), and a row as the store's row mappings read rows
// (store/event_columns.h, store/inflight_rows.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fleet/tsv.h"

namespace ingero::fleet {

inline int64_t i64(const TsvField& f) { return f.null || f.text.empty() ? 0 : std::stoll(f.text); }
inline uint64_t u64(const TsvField& f) { return uint64_t(i64(f)); }
inline double f64(const TsvField& f) { return f.null || f.text.empty() ? 0 : std::stod(f.text); }

struct TsvRow {
  const std::vector<TsvField>& f;
  bool is_null(int c) const { return f[size_t(c)].null; }
  int64_t int64(int c) const { return i64(f[size_t(c)]); }
  std::string_view text_view(int c) const { return f[size_t(c)].text; }
};

}  // namespace ingero::fleet
