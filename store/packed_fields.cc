// The SQL function pack_fields() (store/packed_fields.h), which EventCursor registers.
#include "store/packed_fields.h"

#include <sqlite3.h>

#include "hal/event.h"

namespace ingero::store {

void sql_pack_fields(sqlite3_context* ctx, int n, sqlite3_value** v) {
  uint8_t buf[hal::kFieldCount * kPackedFieldMax];
  size_t k = 0;
  for (int i = 0; i < n && i < int(hal::kFieldCount); ++i)
    if (sqlite3_value_type(v[i]) != SQLITE_NULL)
      k = put_packed_field(buf, k, uint8_t(i), uint64_t(sqlite3_value_int64(v[i])));
  if (k == 0)
    sqlite3_result_null(ctx);
  else
    sqlite3_result_blob(ctx, buf, int(k), SQLITE_TRANSIENT);
}

}  // namespace ingero::store
