#include "store/op_dictionary.h"

#include <string>

namespace ingero::store {

ingero::Status for_each_op(Db& db, OpVendors vendors,
                           const std::function<void(const OpEntry&)>& fn) {
  std::string sql =
      "SELECT s.id, o.op_id, s.vendor, s.api, o.name, o.kind FROM sources s JOIN ops o ON "
      "o.source_id = s.id";
  if (vendors == OpVendors::kCalls) sql += " WHERE s.vendor <> 'host'";
  if (vendors == OpVendors::kHost) sql += " WHERE s.vendor = 'host'";
  auto st = db.prepare(sql);
  if (!st) return st.error();
  while (true) {
    auto r = st->step();
    if (!r) return r.error();
    if (!*r) return {};
    fn(OpEntry{st->int64(0), st->int64(1), st->text_view(2), st->text_view(3), st->text_view(4),
               st->text_view(5)});
  }
}

}  // namespace ingero::store
