#include "store/wal_limit.h"

#include <algorithm>
#include <string>

namespace ingero::store {

ingero::Status limit_wal(Db& db, uint64_t bytes) {
  auto page = db.query_int("PRAGMA page_size");
  if (!page) return page.error();
  int64_t pages =
      std::max<int64_t>(16, int64_t(bytes) / std::max<int64_t>(1, page->value_or(4096)));
  if (auto st = db.exec("PRAGMA wal_autocheckpoint = " + std::to_string(pages)); !st) return st;
  return db.exec("PRAGMA journal_size_limit = " + std::to_string(bytes));
}

}  // namespace ingero::store
