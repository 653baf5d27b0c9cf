#include "tests/support/damaged_trace.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <vector>

#include "store/trace_writer.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

// A SQLite varint at `p`; advances `p`.
uint64_t varint(const std::vector<char>& b, size_t& p) {
  uint64_t v = 0;
  for (int i = 0; i < 9; ++i) {
    auto c = static_cast<uint8_t>(b.at(p++));
    if (i == 8) return (v << 8) | c;
    v = (v << 7) | (c & 0x7f);
    if (!(c & 0x80)) break;
  }
  return v;
}

}  // namespace

std::string write_free_calls(const std::string& path, int calls) {
  auto w = store::TraceWriter::open(path);
  EXPECT_TRUE(w) << (w ? "" : w.error().message);
  if (!w) return path;
  // Blocks of 64 calls: the call store spans many leaf pages, as a long trace's does, and a
  // page in its middle holds rows of blocks rather than one block's overflow.
  (*w)->set_block_rows(64);
  store::SessionInfo si;
  si.node = "gpu-node-01";
  si.mono_offset_ns = 1'700'000'000'000'000'000;
  // Each file its own session, as each run of a tracer is (merge tells sessions apart by node,
  // start and host).
  static std::atomic<int64_t> files{0};
  si.started_at_ns = si.mono_offset_ns + ++files;
  EXPECT_TRUE((*w)->begin_session(si));
  for (int i = 0; i < calls; ++i) {
    hal::Event e = runtime_call(uint64_t(i) * 1000, 500 + uint64_t(i % 7), 100, 101,
                                hal::EventKind::kFree, "cudaFree");
    e.set(hal::Field::kDptr, 0x7000'0000 + uint64_t(i));
    EXPECT_TRUE((*w)->add(e));
  }
  store::SessionEnd end;
  end.exit_reason = "test";
  EXPECT_TRUE((*w)->finish(end));
  return path;
}

DamageSpots damage_spots(const std::string& path) {
  DamageSpots d;
  int64_t page_size = query_int(path, "PRAGMA page_size");
  auto pages =
      query_rows(path,
                 "SELECT pageno FROM dbstat WHERE name = 'call_store' AND pagetype = 'leaf' "
                 "ORDER BY pageno");
  EXPECT_GT(pages.size(), 10u);
  if (pages.empty()) return d;
  d.page = std::stoll(pages[pages.size() / 2][0]);
  int64_t base = (d.page - 1) * page_size;
  d.page_type = base;
  std::ifstream in(path, std::ios::binary);
  std::vector<char> b(static_cast<size_t>(page_size));
  in.seekg(base);
  in.read(b.data(), page_size);
  auto u16 = [&](size_t at) { return (size_t(uint8_t(b[at])) << 8) | uint8_t(b[at + 1]); };
  size_t cells = u16(3);
  size_t cell = u16(8 + 2 * (cells / 2));  // the middle row's cell
  varint(b, cell);                         // payload length
  varint(b, cell);                         // rowid
  d.record_header = base + int64_t(cell);  // the record's header-size varint
  return d;
}

int64_t drop_index_entries(const std::string& path, const std::string& index) {
  int64_t page_size = query_int(path, "PRAGMA page_size");
  auto pages = query_rows(path, "SELECT pageno, ncell FROM dbstat WHERE name = '" + index +
                                    "' AND pagetype = 'leaf' ORDER BY pageno");
  EXPECT_GT(pages.size(), 2u) << index;
  if (pages.size() < 3) return 0;
  int64_t page = std::stoll(pages[pages.size() / 2][0]);
  int64_t cells = std::stoll(pages[pages.size() / 2][1]), kept = cells / 2;
  // The b-tree header's cell count: bytes 3-4, big-endian (the page is not page 1).
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp((page - 1) * page_size + 3);
  char count[2] = {char(kept >> 8), char(kept & 0xff)};
  f.write(count, 2);
  EXPECT_TRUE(f.good()) << "cannot damage " << path;
  return cells - kept;
}

void flip_byte(const std::string& path, int64_t offset, uint8_t mask) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(offset);
  char c = 0;
  f.read(&c, 1);
  c = char(uint8_t(c) ^ mask);
  f.seekp(offset);
  f.write(&c, 1);
  ASSERT_TRUE(f.good()) << "cannot damage " << path;
}

void alter_trace(const std::string& db, const std::string& sql) {
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(h, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK)
      << sql << ": " << sqlite3_errmsg(h);
  sqlite3_close(h);
}

void leave_in_wal(const std::string& db, const std::string& sql) {
  pid_t child = fork();
  if (child == 0) {
    sqlite3* h = nullptr;
    const std::string all = "PRAGMA journal_mode=WAL; " + sql;
    if (sqlite3_open(db.c_str(), &h) != SQLITE_OK ||
        sqlite3_exec(h, all.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK)
      _exit(1);
    _exit(0);  // without closing: the change stays in the -wal
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_EQ(status, 0) << sql;
  ASSERT_GT(std::filesystem::file_size(db + "-wal"), 0u);
}

}  // namespace ingero::test
