// Traces for the hardening tests: a large synthetic trace written the way `ingero trace`
// writes one (store::TraceWriter), and byte flips that damage it the way a bad disk or a torn
// copy would, at places SQLite is able to detect.
#pragma once

#include <cstdint>
#include <string>

namespace ingero::test {

// `calls` cudaFree calls (pid 100, tid 101, comm "trainer", 1 us apart, 500..506 ns long) in
// one session, in blocks of 64 calls; returns `path`.
std::string write_free_calls(const std::string& path, int calls);

// Offsets in a trace file, from SQLite's dbstat table (the file must be intact).
struct DamageSpots {
  int64_t page = 0;           // the middle leaf page of the call store (1-based)
  int64_t page_type = 0;      // its page-type byte (the first byte of its b-tree header)
  int64_t record_header = 0;  // the record-header-size byte of its middle row
};
DamageSpots damage_spots(const std::string& path);

// Halves the cell count of the middle leaf page of `index` (from dbstat; the file must be
// intact): the page still parses, and a walk along the index skips the rest of that page's
// entries without an error from SQLite. Returns the entries dropped.
int64_t drop_index_entries(const std::string& path, const std::string& index);

// XORs the byte at `offset` with `mask`.
void flip_byte(const std::string& path, int64_t offset, uint8_t mask);

// Runs `sql` on `db` as a user with the sqlite3 shell would (a damaged count, a blob replaced).
void alter_trace(const std::string& db, const std::string& sql);

// Runs `sql` on `db` in WAL mode in a child process that ends without closing it, as a killed
// writer does: the change stays in DB-wal (and DB-shm), which must not be empty.
void leave_in_wal(const std::string& db, const std::string& sql);

}  // namespace ingero::test
