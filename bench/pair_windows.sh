#!/usr/bin/env bash
# What a kernel launch costs where the kernel has no uprobe sessions (before 6.12: the
# uprobe_multi pair, and before 6.6 the perf-event pair), with launches timed in windows
# (probe/launch_windows.h) against every launch timed through its return, as before
# (--launch-timing 1), on the stand-in runtime -> driver pair (bench/pair_runtime.c,
# bench/pair_driver.c). Rounds interleaved, medians, ns per launch:
#   untraced;
#   the floor: one minimal perf-event entry uprobe on the driver's cuLaunchKernel (1 trap);
#   the minimal counting pair on it (entry + return: 2 traps);
#   ingero under MODE with every launch timed (--launch-timing 1), and with windows.
# The windows' schedule is scaled down so that a run of a few seconds holds several: 100 ms in
# every 3.2 s (INGERO_LAUNCH_WINDOW_MS=100, --launch-timing 32), the default's 1 s in 32 s.
# For ingero: launches stored, traps per launch (entries, plus the returns that trapped: timed
# records, nested entries' and windows' edges'), and the tracer's CPU per launch.
#   bench/pair_windows.sh [BUILD_DIR]      (root: BPF)
# Environment: ROUNDS (3), LAUNCHES (5000000), MODE (multi | perf; multi).
set -euo pipefail
B=${1:-build}
NAME=pair_windows
# shellcheck source=bench/pair_env.sh
source "$(dirname "$0")/pair_env.sh"
N=${LAUNCHES:-5000000}
ROUNDS=${ROUNDS:-3}
MODE=${MODE:-multi}
HERE=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
[[ $EUID -eq 0 ]] || { echo "$NAME: needs root (BPF)" >&2; exit 2; }

loop() { "$B/bench/launch_loop" "$LIB" "$N"; }
with_min() {  # MODE of min_probe on the driver's cuLaunchKernel, then the loop
  coproc MP { "$B/bench/min_probe" "$DRV" cuLaunchKernel "$1" 2>> "$out/min_probe.err"; }
  read -r _ <&"${MP[0]}"
  loop | ns
  eval "exec ${MP[1]}>&-"
  wait "$MP_PID" 2>/dev/null || true
}
with_ingero() {  # NAME [flags...]
  local name=$1; shift
  CUDA_HOME=$PAIR INGERO_CALL_ATTACH=$MODE INGERO_LAUNCH_WINDOW_MS=100 \
    python3 "$HERE/tracer_cpu.py" "$out/$name.cpu" \
    "$ING" trace -q --no-live "$@" --db "$out/$name.db" -- "$B/bench/launch_loop" "$LIB" "$N" | ns
  # Under the perf pair the kernel frees the probes after the session, one at a time, in a
  # process of their own (ingero-detach): until it has, every call of a probed function still
  # traps, the next run's untraced loop included.
  while pgrep -x ingero-detach > /dev/null; do sleep 0.5; done
}

for r in $(seq 1 "$ROUNDS"); do
  loop | ns >> "$out/untraced"
  with_min entry >> "$out/floor"
  with_min pair >> "$out/pair"
  with_ingero every.$r --launch-timing 1 >> "$out/every"
  with_ingero windows.$r --launch-timing 32 >> "$out/windows"
done

python3 - "$out" "$ROUNDS" "$N" "$ING" "$MODE" <<'PY'
import json, os, statistics, subprocess, sys
out, rounds, n, ing, mode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
med = {k: statistics.median(float(x) for x in open(f"{out}/{k}"))
       for k in ("untraced", "floor", "pair", "every", "windows")}
base = med["untraced"]
print(f"pair windows ({mode}): {n} cudaLaunchKernel through the stand-in pair, median of "
      f"{rounds} interleaved rounds (ns per launch)")
labels = {"untraced": "untraced", "floor": "floor: one perf-event entry uprobe (1 trap)",
          "pair": "the minimal counting pair (2 traps)",
          "every": "ingero, every launch timed (--launch-timing 1)",
          "windows": "ingero, launches timed in windows (default)"}
for k, label in labels.items():
    extra = "" if k == "untraced" else f"  (+{med[k] - base:.1f}, {(med[k] - base) / (med['floor'] - base):.2f}x the floor)"
    print(f"  {label:52s} {med[k]:9.1f}{extra}")
print(f"  windows / every launch timed, cost over untraced: "
      f"{(med['windows'] - base) / (med['every'] - base):.2f}x")
def q(db, sql):
    r = subprocess.run([ing, "query", "--db", db, "--json", sql], capture_output=True, text=True)
    return json.loads(r.stdout)
for k in ("every", "windows"):
    for r in range(1, rounds + 1):
        db = f"{out}/{k}.{r}.db"
        s = json.loads(q(db, "SELECT bpf_stats FROM sessions")[0]["bpf_stats"])
        stored = q(db, "SELECT count(*) AS n FROM calls WHERE kind = 'launch'")[0]["n"]
        timed = s["calls"] - s["untimed"]
        # Without sessions every entry traps, and so does the return of a timed record, of a
        # nested entry (an upper bound: one outside a window pushes no placeholder) and of a
        # launch entered untimed at a window's edge.
        traps = s["untimed"] + 2 * timed + 2 * s["nested"] + s.get("window_edge_returns", 0)
        cpu = json.load(open(f"{out}/{k}.{r}.cpu"))
        print(f"  {k} round {r}: launches stored {stored}/{n}"
              f" ({'exact' if stored == n else 'NOT EXACT'}), timed {timed}, windows "
              f"{s.get('launch_windows_opened', 0)}, traps per launch {traps / n:.3f}, "
              f"tracer CPU {cpu['cpu_s'] * 1e9 / n:.0f} ns per launch")
PY
