#!/usr/bin/env bash
# What reading the calls in flight costs the tracer (capture/inflight_monitor.h): once a second
# the BPF thread table is read through its iterator and the stuck calls are reported. Needs
# root.
#   bench/inflight_cost.sh [BUILD_DIR] [SECONDS] [THREADS]
#
# many_threads (bench/) starts THREADS threads (default 1,000) that each make one traced call
# through the bundled stand-in runtime, then either sleep (`idle`: every thread in the thread
# table, none inside a call: the read alone) or block inside cudaStreamSynchronize (`stuck`:
# every thread reported in flight, its row written, its process's threads' states read).
# `ingero trace --pid` (default --inflight-after 5s) traces it for SECONDS (default 30). The
# monitor times itself with CLOCK_THREAD_CPUTIME_ID around each tick, the iterator's read in
# the kernel included (sessions.bpf_stats: inflight_cpu_ns, inflight_ticks): the figure is
# its CPU per second of tracing, as a share of one core.
set -euo pipefail
B=${1:-build}
SECS=${2:-30}
N=${3:-1000}
ING=$B/app/ingero
LIB=$B/tests/fake/venv/lib/python3.11/site-packages/nvidia/cuda_runtime/lib/libcudart.so.13
[[ $EUID -eq 0 ]] || { echo "inflight_cost: needs root" >&2; exit 1; }
[[ -x $B/bench/many_threads ]] || { echo "inflight_cost: build many_threads first" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

run() {  # MODE -> prints the figures
  local mode=$1 db="$out/$1.db" pid tpid
  # The stuck threads' sync reads a pipe nobody writes: fd 9, this coproc's own. Its writer
  # (a sleep) is killed at the end: left, it held the bench's stdout open after it exited.
  coproc W {
    exec 9< <(sleep infinity)
    echo $! > "$out/$mode.sleep"
    INGERO_FAKE_SYNC_FD=9 exec "$B/bench/many_threads" "$LIB" "$N" "$mode"
  }
  read -r _ pid <&"${W[0]}"
  "$ING" trace -q --no-live --pid "$pid" --db "$db" >"$out/$mode.log" 2>&1 &
  tpid=$!
  for _ in $(seq 300); do [[ -s $db ]] && break; sleep 0.1; done
  sleep 2
  echo go >&"${W[1]}"
  read -r _ <&"${W[0]}"  # "ready": every thread where it stays
  sleep "$SECS"
  kill -INT "$tpid"
  wait "$tpid" || true
  kill "$W_PID" 2>/dev/null || true
  wait "$W_PID" 2>/dev/null || true
  kill "$(cat "$out/$mode.sleep")" 2>/dev/null || true
  sqlite3 "$db" "SELECT json_extract(bpf_stats, '$.inflight_ticks'),
                        json_extract(bpf_stats, '$.inflight_frames_read'),
                        json_extract(bpf_stats, '$.inflight_reported'),
                        json_extract(bpf_stats, '$.inflight_cpu_ns'),
                        (SELECT count(*) FROM inflight) FROM sessions" |
    python3 -c '
import sys
mode, n = sys.argv[1], int(sys.argv[2])
ticks, frames, reported, cpu_ns, rows = map(int, sys.stdin.read().strip().split("|"))
per_tick_us = cpu_ns / ticks / 1e3
print(f"{mode}: {n} threads, {ticks} ticks, {frames / ticks:.0f} frames read a tick, "
      f"{reported} calls reported, {rows} inflight rows")
print(f"  {per_tick_us:.0f} us of CPU a tick = {per_tick_us / 1e6 * 100:.3f}% of one core")
' "$mode" "$N"
}

run idle
run stuck
