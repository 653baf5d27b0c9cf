#!/bin/sh
# explain at scale: generated long traces (bench/trace_gen: two training ranks, ~38,000 calls
# per second, a DataLoader stall planted in rank 1 from 60% to 75% of the steps), explain's
# wall time and peak memory, the file's size, and whether the planted fault is found; then
# `report --json` on the same trace, its wall time, peak and calls counted.
#   bench/explain_scale.sh [BUILD_DIR] [EVENTS...]     default: build 1000000 10000000
# With INGERO_NO_FAULT=1 nothing is planted and the fault must not be reported. Exits 1 when
# the answer is wrong either way (ctest Bench.PlantedFaultFoundOnlyWhenPlanted runs both).
# With INGERO_TIERED=1 the trace is folded first as `ingero trace` folds it by default
# (`ingero compact --full-rows 10m`). Traces of up to 10M events span less than 10 minutes:
# INGERO_FULL_ROWS=1s folds all but their last second. With INGERO_AS_TRACED=1 the generator
# folds as `ingero trace` does while it records, with its defaults (trace_gen --as-traced): the
# file a trace leaves, no compact. With INGERO_MAX_CALL_BYTES=B as well, the call store (its
# pages, as dbstat counts them) must take at most B bytes a call: the size target as a rate
# (0.5 GB an hour at 50,000 calls/s is 2.8 B a call, host events and summaries included).
# With INGERO_THREADS=N each rank's launches come from N threads in turn, one of them preempted
# each step (a process of thousands of threads; compare with N=1 at the same size).
set -eu
build=${1:-build}
[ $# -gt 0 ] && shift
sizes=${*:-1000000 10000000}
dir=${TMPDIR:-/tmp}/ingero-explain-scale
mkdir -p "$dir"
printf '%-11s %9s %12s %9s %10s %8s  %s\n' events seconds "file MB" "B/event" "peak MiB" found chain
for n in $sizes; do
  db="$dir/gen-$n.db"
  "$build/bench/trace_gen" "$db" "$n" ${INGERO_NO_FAULT:+--no-fault} \
    ${INGERO_THREADS:+--threads "$INGERO_THREADS"} >"$dir/gen-$n.json"
  if [ -n "${INGERO_AS_TRACED:-}" ]; then
    "$build/bench/trace_gen" "$db" "$n" ${INGERO_NO_FAULT:+--no-fault} --as-traced \
      ${INGERO_THREADS:+--threads "$INGERO_THREADS"} >"$dir/gen-$n.json"
  fi
  if [ -n "${INGERO_TIERED:-}" ]; then
    "$build/app/ingero" compact "$db" --full-rows "${INGERO_FULL_ROWS:-10m}" >&2
  fi
  if [ -n "${INGERO_MAX_CALL_BYTES:-}" ]; then
    python3 - "$db" "$INGERO_MAX_CALL_BYTES" <<'PY'
import sqlite3, sys
db, limit = sys.argv[1], float(sys.argv[2])
c = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
pages = c.execute("SELECT sum(pgsize) FROM dbstat WHERE name IN ('call_store', "
                  "'idx_call_store_ts', 'idx_call_store_id')").fetchone()[0]
calls = c.execute("SELECT sum(calls) FROM call_store").fetchone()[0]
per = pages / calls
print("call store: %d bytes for %d calls, %.2f B a call" % (pages, calls, per), file=sys.stderr)
if per > limit:
    print("call store: %.2f B a call, more than %s" % (per, limit), file=sys.stderr)
    sys.exit(1)
PY
  fi
  python3 - "$build/app/ingero" "$db" "$dir/gen-$n.json" "$dir/explain-$n.json" <<'PY'
import json, os, resource, subprocess, sys, time
ingero, db, gen, out = sys.argv[1:5]
g = json.load(open(gen))
t0 = time.monotonic()
with open(out, "w") as f:
    subprocess.run([ingero, "explain", "--db", db, "--json"], stdout=f, check=True)
secs = time.monotonic() - t0
peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
j = json.load(open(out))
hit = [c for c in j["chains"] if c["rule"] == "data_loader_starvation" and c["pids"] == [5001]]
size = os.path.getsize(db)
print("%-11d %9.1f %12.0f %9.0f %10.0f %8s  %s" % (
    g["events"], secs, size / 1e6, size / g["events"], peak_kib / 1024,
    "yes" if hit else "no", (hit[0]["summary"] if hit else "-")[:70]))
sys.exit(0 if bool(hit) == g["fault"] else 1)
PY
  # The report on the same trace: its wall time and peak beside explain's (the report runs
  # the same analysis, then counts the calls it read).
  /usr/bin/time -f "%e %M" -o "$dir/report-$n.time" "$build/app/ingero" report --db "$db" \
    --json -o "$dir/report-$n.json" 2>/dev/null
  read -r rs rk <"$dir/report-$n.time"
  printf '%-11s %9s %12s %9s %10s  report: %s calls\n' "" "$rs" "" "" "$((rk / 1024))" \
    "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["header"]["calls"])' \
      "$dir/report-$n.json")"
  rm -f "$db" "$db-reserve"
done
