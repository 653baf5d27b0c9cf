#!/usr/bin/env bash
# What a kernel launch costs under ingero, on a stand-in runtime whose cudaLaunchKernel calls a
# stand-in driver's cuLaunchKernel (bench/pair_runtime.c, bench/pair_driver.c: ordinary -O2
# code whose first instruction the kernel emulates at a uprobe). Rounds interleaved, medians:
#   untraced;
#   the floor: the smallest probe on the driver's cuLaunchKernel, entry only (a uprobe session
#     program that asks for no return, as ingero's own launch probe; and a perf-event uprobe);
#   two minimal entry-only probes, on the runtime's launch and the driver's (2 traps);
#   ingero --no-stack and ingero (default), which detach the runtime's launch probes once every
#     launch is seen to reach the driver (capture/launch_nesting.h): one trap a launch.
# For ingero: the traps per launch (BPF's counters: records, timed records, nested entries),
# launches stored exactly, and the tracer's own CPU per call (utime + stime of the tracer
# process, session end included).
#   bench/launch_cost.sh [BUILD_DIR]      (root: BPF)
# Environment: ROUNDS (5), LAUNCHES (300000).
set -euo pipefail
B=${1:-build}
NAME=launch_cost
# shellcheck source=bench/pair_env.sh
source "$(dirname "$0")/pair_env.sh"
ROUNDS=${ROUNDS:-5}
HERE=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
[[ $EUID -eq 0 ]] || { echo "launch_cost: needs root (BPF)" >&2; exit 2; }

ns() { python3 -c 'import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])["ns_per_call"])'; }
loop() { "$B/bench/launch_loop" "$LIB" "$N"; }
with_min() {  # LIBRARY SYMBOL MODE, then the loop under that probe
  coproc MP { "$B/bench/min_probe" "$1" "$2" "$3"; }
  read -r _ <&"${MP[0]}"
  loop | ns
  eval "exec ${MP[1]}>&-"
  wait "$MP_PID" 2>/dev/null || true
}
with_two() {  # both layers, entry only
  coproc MA { "$B/bench/min_probe" "$DRV" cuLaunchKernel session-skip; }
  read -r _ <&"${MA[0]}"
  coproc MB { "$B/bench/min_probe" "$LIB" cudaLaunchKernel session-skip; }
  read -r _ <&"${MB[0]}"
  loop | ns
  eval "exec ${MB[1]}>&-"
  wait "$MB_PID" 2>/dev/null || true
  eval "exec ${MA[1]}>&-"
  wait "$MA_PID" 2>/dev/null || true
}
with_ingero() {  # NAME [flags...]: ns per launch; the tracer's own CPU in NAME.cpu
  local name=$1; shift
  CUDA_HOME=$PAIR python3 "$HERE/tracer_cpu.py" "$out/$name.cpu" \
    "$ING" trace -q --no-live "$@" --db "$out/$name.db" -- "$B/bench/launch_loop" "$LIB" "$N" |
    ns
}

for r in $(seq 1 "$ROUNDS"); do
  loop | ns >> "$out/untraced"
  with_min "$DRV" cuLaunchKernel session-skip >> "$out/floor"
  with_min "$DRV" cuLaunchKernel entry >> "$out/floor_perf"
  with_two >> "$out/two"
  with_ingero nostack.$r --no-stack >> "$out/nostack"
  with_ingero default.$r >> "$out/default"
done

python3 - "$out" "$ROUNDS" "$N" "$ING" <<'PY'
import json, statistics, subprocess, sys
out, rounds, n, ing = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
med = {k: statistics.median(float(x) for x in open(f"{out}/{k}")) for k in
       ("untraced", "floor", "floor_perf", "two", "nostack", "default")}
base = med["untraced"]
print(f"launch cost: {n} cudaLaunchKernel through a stand-in runtime -> driver pair, "
      f"median of {rounds} interleaved rounds (ns per launch)")
labels = {"untraced": "untraced", "floor": "floor: one session entry probe on cuLaunchKernel",
          "floor_perf": "one perf-event entry uprobe on cuLaunchKernel",
          "two": "entry probes on both layers (2 traps)", "nostack": "ingero --no-stack",
          "default": "ingero (default: stacks on)"}
for k, label in labels.items():
    print(f"  {label:52s} {med[k]:9.1f}" + (f"  (+{med[k] - base:.1f})" if k != "untraced" else ""))
floor = med["floor"] - base
for k in ("nostack", "default"):
    print(f"  {k}: cost over untraced / the floor's = {(med[k] - base) / floor:.2f}x   target <= 1.3x")
def q(db, sql):
    r = subprocess.run([ing, "query", "--db", db, "--json", sql], capture_output=True, text=True)
    return json.loads(r.stdout)
for k in ("nostack", "default"):
    for r in range(1, rounds + 1):
        db = f"{out}/{k}.{r}.db"
        s = json.loads(q(db, "SELECT bpf_stats FROM sessions")[0]["bpf_stats"])
        stored = q(db, "SELECT count(*) AS n FROM calls WHERE kind = 'launch'")[0]["n"]
        # Every entry is a trap; a timed record's return is one more. Nested entries (a
        # driver launch inside a timed runtime launch) arm no return.
        traps = (s["calls"] - s["untimed"]) * 2 + s["untimed"] + s["nested"]
        cpu = json.load(open(f"{out}/{k}.{r}.cpu"))
        print(f"  {k} round {r}: launches stored {stored}/{n}"
              f" ({'exact' if stored == n else 'NOT EXACT'}), traps per launch "
              f"{traps / n:.3f}, tracer CPU {cpu['cpu_s']:.2f} s = "
              f"{cpu['cpu_s'] * 1e9 / n:.0f} ns per launch")
PY
