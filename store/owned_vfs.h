// The files SQLite opens beside a trace it writes: its write-ahead log, the log's index and its
// rollback journal must be the effective user's own (store/file_access.h, open_owned_file), as
// SQLite opens them, not only when ingero looked before. Whoever may write the trace's folder
// (a sticky /tmp) could plant TRACE-wal between ingero's check and SQLite's open, keep it open
// and read every frame the tracer wrote through it (root's command lines), or plant a hot
// TRACE-journal whose "original pages" SQLite rolled back into the trace.
#pragma once

namespace ingero::store {

// The name of a VFS that is SQLite's default one, except that opening a write-ahead log or a
// rollback journal (and, with the log, its -shm index) first passes open_owned_file(): a
// missing file is made 0600 and ours; a planted link, another user's file, a hard link or a
// FIFO fails the open (SQLITE_CANTOPEN). Registered on first use; for connections that write.
const char* owned_vfs_name();

}  // namespace ingero::store
