#!/usr/bin/env bash
# The report at scale: the H100 resnet-contended trace (98,686 events: a real ResNet loop with
# stacks, steps and chains) replicated N times end to end, shifted in time, into one file of
# about N x 98,686 events; then `ingero report` on it, timed, and the file's size.
#   bench/report_bench.sh [BUILD_DIR] [N=100] [OUT_DIR=/tmp/ingero-report-bench]
# Prints one JSON line. Needs sqlite3 and xz. Not a timed test: figures go to
# docs/performance.md.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}
N=${2:-100}
OUT=${3:-/tmp/ingero-report-bench}
mkdir -p "$OUT"
db=$OUT/contended-x$N.db
if [[ ! -f $db ]]; then
  xz -dc tests/fixtures/h100/resnet-contended.db.xz > "$db.tmp"
  cols=$(sqlite3 "$db.tmp" "SELECT group_concat(name, ', ') FROM pragma_table_info('events')
                            WHERE name NOT IN ('id', 'timestamp')")
  span=$(sqlite3 "$db.tmp" "SELECT max(timestamp) - min(timestamp) + 1000000000 FROM events")
  sqlite3 "$db.tmp" "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;
    DROP INDEX IF EXISTS idx_events_timestamp;
    WITH RECURSIVE k(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM k WHERE n < $((N - 1)))
    INSERT INTO events ($cols, timestamp) SELECT $cols, e.timestamp + k.n * $span
      FROM events e, k ORDER BY k.n, e.id;
    CREATE INDEX idx_events_timestamp ON events(timestamp);" >/dev/null
  mv "$db.tmp" "$db"
fi
events=$(sqlite3 "$db" "SELECT count(*) FROM events")
t0=$(date +%s.%N)
/usr/bin/time -f "%M" -o "$OUT/rss" "$B/app/ingero" report --db "$db" -o "$OUT/report.html" 2>"$OUT/stderr"
t1=$(date +%s.%N)
printf '{"events": %s, "db_bytes": %s, "report_seconds": %.1f, "report_bytes": %s, "max_rss_kib": %s}\n' \
  "$events" "$(stat -c %s "$db")" "$(echo "$t1 - $t0" | bc)" "$(stat -c %s "$OUT/report.html")" \
  "$(cat "$OUT/rss")"
