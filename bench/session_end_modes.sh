#!/usr/bin/env bash
# How long `ingero trace -- COMMAND` takes under each way calls are probed (uprobe sessions,
# uprobe_multi pair, perf-event pair: INGERO_CALL_ATTACH), and, under the perf pair, how long
# the kernel then takes to free the probes (ingero-detach's life: probe/link_closer.h). The
# tracer's wall time under the perf pair over that under sessions is the figure: the tracer must
# not wait for the kernel's one-at-a-time frees (45 s for 389 probes here, before).
#   bench/session_end_modes.sh BUILD      (root: BPF)
# Environment: ROUNDS (3). The command: build/tests/cuda_calls on the real libcudart.
set -euo pipefail
[[ $# -eq 1 ]] || { echo "usage: bench/session_end_modes.sh BUILD" >&2; exit 2; }
[[ $EUID -eq 0 ]] || { echo "session_end_modes: needs root (BPF)" >&2; exit 2; }
B=$1
ROUNDS=${ROUNDS:-3}
CMD=("$B/tests/cuda_calls")
[[ -x ${CMD[0]} ]] || { echo "session_end_modes: no ${CMD[0]} (build the tests)" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
now() { date +%s.%N; }
wait_detach() {  # until no ingero-detach is left: a previous round's frees would slow this one
  while pgrep -x ingero-detach > /dev/null; do sleep 0.2; done
}
for r in $(seq 1 "$ROUNDS"); do
  for mode in session multi perf; do
    wait_detach
    rm -f "$out"/t.db*
    t0=$(now)
    INGERO_CALL_ATTACH=$mode "$B/app/ingero" trace --no-live --db "$out/t.db" -- "${CMD[@]}" \
      > /dev/null 2> "$out/err"
    t1=$(now)
    free=0
    if pid=$(grep -o 'process [0-9]* (ingero-detach)' "$out/err" | grep -o '[0-9]*'); then
      while kill -0 "$pid" 2> /dev/null; do sleep 0.1; done
      free=$(echo "$(now) - $t1" | bc)
    fi
    echo "$mode $(echo "$t1 - $t0" | bc) $free" >> "$out/all"
  done
done
echo "ingero trace -- ${CMD[*]}: the tracer's wall time, median of $ROUNDS (and the kernel's"
echo "frees after it under the perf pair, in ingero-detach)"
python3 - "$out/all" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    mode, wall, free = line.split()
    rows.setdefault(mode, []).append((float(wall), float(free)))
med = {m: statistics.median(w for w, _ in v) for m, v in rows.items()}
for m, v in rows.items():
    frees = [f for _, f in v if f > 0]
    tail = f", probes freed {statistics.median(frees):.1f} s after it" if frees else ""
    print(f"  {m:8} {med[m]:6.2f} s ({med[m] / med['session']:.1f}x sessions){tail}")
PY
