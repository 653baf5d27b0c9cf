// One state of a file for a read made of several statements. In WAL mode each statement run
// outside a transaction sees the file as of its own start: a read that lists, then loads, then
// merges from two tables sees the writer's commits land between its statements, and rows one
// statement saw and another did not are lost or doubled (the shipper's call blocks against its
// host rows: fleet/block_rows.cc), or a block rewritten since it was listed reads as damaged
// (store/archive_scan.h).
#pragma once

struct sqlite3;

namespace ingero::store {

class Db;

// Whether `db` is inside a transaction now (BEGIN ... not yet ended): a read on it sees one
// state of the file, and a second connection can be checked to match it
// (SqlTraceSource::open_another).
bool in_transaction(Db& db);

class ReadSnapshot {
 public:
  // For a transaction the caller has begun itself: the guard ends it.
  enum Adopt { kAdopt };
  // Begins a read transaction on `db` where none is open and no statement of the connection
  // is running (inside one, the reads already share its state); the first statement run takes
  // the state. Ended (COMMIT) with this guard: a statement still running then keeps its state
  // until it is reset, and the connection sees new commits after that.
  explicit ReadSnapshot(sqlite3* db);
  explicit ReadSnapshot(Db& db);
  ReadSnapshot(Db& db, Adopt);
  ~ReadSnapshot();
  ReadSnapshot(const ReadSnapshot&) = delete;
  ReadSnapshot& operator=(const ReadSnapshot&) = delete;

  // This guard began the transaction, and ends it.
  bool began() const { return began_; }
  // The read is in one transaction: this guard's, or one the connection had open already.
  bool consistent() const { return began_ || was_open_; }

 private:
  sqlite3* db_;
  bool began_ = false;
  bool was_open_ = false;
};

}  // namespace ingero::store
