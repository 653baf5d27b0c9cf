// The packed decoded fields of a call: each field that is not NULL as its position among the
// field columns read (one byte) and its value as an unsigned LEB128 varint. One value per
// row where the fields are ~40 columns: pack_fields() writes it for rows of `events`
// (store/event_rows.cc), and EventCursor reads it. (Archived calls it reads from their
// blocks, column by column: store/archive_scan.h.)
#pragma once

#include <cstddef>
#include <cstdint>

struct sqlite3_context;
struct sqlite3_value;

namespace ingero::store {

// Bytes one field takes at most.
inline constexpr size_t kPackedFieldMax = 11;

// Appends field `position` = `x` at buf[k]; returns the new length.
inline size_t put_packed_field(uint8_t* buf, size_t k, uint8_t position, uint64_t x) {
  buf[k++] = position;
  do {
    uint8_t b = x & 0x7f;
    x >>= 7;
    buf[k++] = uint8_t(b | (x ? 0x80 : 0));
  } while (x);
  return k;
}

// The SQL function pack_fields(a, b, ...): the arguments that are not NULL, packed; NULL when all
// are. A call has ~40 optional field columns and uses a few: fetching each through the C API
// cost about as much as the rest of the row (docs/performance.md), one blob costs one fetch.
void sql_pack_fields(sqlite3_context* ctx, int n, sqlite3_value** v);

}  // namespace ingero::store
