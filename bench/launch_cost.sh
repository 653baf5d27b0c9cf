#!/usr/bin/env bash
# What a kernel launch costs under ingero, on a stand-in runtime whose cudaLaunchKernel calls a
# stand-in driver's cuLaunchKernel (bench/pair_runtime.c, bench/pair_driver.c: ordinary -O2
# code whose first instruction the kernel emulates at a uprobe). Rounds interleaved, medians:
#   untraced;
#   the floor: the smallest probe on the driver's cuLaunchKernel, entry only (a uprobe session
#     program that asks for no return, as ingero's own launch probe; and a perf-event uprobe);
#   the recording floor: the smallest probe that records each launch on the same function
#     (bench/record_floor.bpf.c: ids, clock, registers, one user-stack read, a 96-byte record in
#     an 8 MiB ring read on another thread), what any tracer keeping every launch pays; and the
#     batched recording floor, the same records gathered 32 at a time per CPU before the ring
#     (as ingero's launches in batches, bpf/launch_batch.h);
#   two minimal entry-only probes, on the runtime's launch and the driver's (2 traps);
#   ingero --no-stack and ingero (default), which detach the runtime's launch probes once every
#     launch is seen to reach the driver (capture/launch_nesting.h): one trap a launch.
# For ingero: the traps per launch (BPF's counters: records, timed records, nested entries),
# launches stored exactly, and the tracer's own CPU per call (utime + stime of the tracer
# process, session end included).
# Then the floor and ingero again with every other CPU kept busy (bench/busy_cpus.sh): on this
# VM a busy second vCPU alone makes every trap ~100 ns dearer, so the plain ratio also counts
# the tracer's own CPU, which runs there. Both ratios are printed; the target is the plain one.
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

PIN=()     # the loop's CPU, while the other CPUs are kept busy
TRACER=()  # the tracer's CPUs meanwhile: the others
loop() { "${PIN[@]}" "$B/bench/launch_loop" "$LIB" "$N"; }
with_min() {  # LIBRARY SYMBOL MODE, then the loop under that probe
  coproc MP { "$B/bench/min_probe" "$1" "$2" "$3" 2>> "$out/min_probe.err"; }
  read -r _ <&"${MP[0]}"
  loop | ns
  eval "exec ${MP[1]}>&-"
  wait "$MP_PID" 2>/dev/null || true
}
# Starts min_probe LIBRARY SYMBOL MODE in the background and waits until it is attached; it
# holds its probe until the writer fd HELD_FD is closed (two at once: bash keeps one coproc).
hold_probe() {
  local tag=$1; shift
  rm -f "$out/$tag.in" "$out/$tag.out"
  mkfifo "$out/$tag.in" "$out/$tag.out"
  "$B/bench/min_probe" "$@" < "$out/$tag.in" > "$out/$tag.out" 2>> "$out/min_probe.err" &
  HELD_PID=$!
  exec {HELD_FD}> "$out/$tag.in"
  read -r _ < "$out/$tag.out"
}
with_two() {  # both layers, entry only
  hold_probe drv "$DRV" cuLaunchKernel session-skip
  local fa=$HELD_FD pa=$HELD_PID
  hold_probe rt "$LIB" cudaLaunchKernel session-skip
  local fb=$HELD_FD pb=$HELD_PID
  loop | ns
  exec {fb}>&- {fa}>&-
  wait "$pb" "$pa" 2>/dev/null || true
}
with_ingero() {  # NAME [flags...]: ns per launch; the tracer's own CPU in NAME.cpu
  local name=$1; shift
  CUDA_HOME=$PAIR python3 "$HERE/tracer_cpu.py" "$out/$name.cpu" \
    "${TRACER[@]}" "$ING" trace -q --no-live "$@" --db "$out/$name.db" -- \
    "${PIN[@]}" "$B/bench/launch_loop" "$LIB" "$N" | ns
}

# shellcheck source=bench/busy_cpus.sh
source "$HERE/busy_cpus.sh"
trap 'busy_cpus_stop; rm -rf "$out"' EXIT

for r in $(seq 1 "$ROUNDS"); do
  loop | ns >> "$out/untraced"
  with_min "$DRV" cuLaunchKernel session-skip >> "$out/floor"
  with_min "$DRV" cuLaunchKernel entry >> "$out/floor_perf"
  with_min "$DRV" cuLaunchKernel record >> "$out/record"
  with_min "$DRV" cuLaunchKernel record-batch >> "$out/record_batch"
  with_two >> "$out/two"
  with_ingero nostack.$r --no-stack >> "$out/nostack"
  with_ingero default.$r >> "$out/default"
  if [[ $BUSY_LAST -gt 0 ]]; then
    busy_cpus_start
    PIN=("${BUSY_PIN[@]}") TRACER=("${BUSY_OTHERS[@]}")
    loop | ns >> "$out/busy_untraced"
    with_min "$DRV" cuLaunchKernel session-skip >> "$out/busy_floor"
    with_ingero busy_nostack.$r --no-stack >> "$out/busy_nostack"
    with_ingero busy_default.$r >> "$out/busy_default"
    PIN=() TRACER=()
    busy_cpus_stop
  fi
done

python3 - "$out" "$ROUNDS" "$N" "$ING" <<'PY'
import json, os, statistics, subprocess, sys
out, rounds, n, ing = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
med = {k: statistics.median(float(x) for x in open(f"{out}/{k}")) for k in
       ("untraced", "floor", "floor_perf", "record", "record_batch", "two", "nostack", "default")}
base = med["untraced"]
print(f"launch cost: {n} cudaLaunchKernel through a stand-in runtime -> driver pair, "
      f"median of {rounds} interleaved rounds (ns per launch)")
labels = {"untraced": "untraced", "floor": "floor: one session entry probe on cuLaunchKernel",
          "floor_perf": "one perf-event entry uprobe on cuLaunchKernel",
          "record": "the recording floor: the smallest recording probe",
          "record_batch": "the batched recording floor (32 a batch)",
          "two": "entry probes on both layers (2 traps)", "nostack": "ingero --no-stack",
          "default": "ingero (default: stacks on)"}
for k, label in labels.items():
    print(f"  {label:52s} {med[k]:9.1f}" + (f"  (+{med[k] - base:.1f})" if k != "untraced" else ""))
floor = med["floor"] - base
rec = med["record"] - base
recb = med["record_batch"] - base
print(f"  the recording floor: cost over untraced / the floor's = {rec / floor:.2f}x"
      f" (a record a launch), {recb / floor:.2f}x (in batches)")
for k in ("nostack", "default"):
    print(f"  {k}: cost over untraced / the floor's = {(med[k] - base) / floor:.2f}x   target <= 1.3x;"
          f" / the recording floor's = {(med[k] - base) / rec:.2f}x, batched {(med[k] - base) / recb:.2f}x")
# Every launch recorded by the recording floor, or its figure is of a probe that did less.
for line in open(f"{out}/min_probe.err"):
    w = line.split()
    if len(w) == 4 and w[0] == "records" and (int(w[1]) != n or int(w[3]) != 0):
        print(f"  the recording floor kept {w[1]} of {n} launches ({w[3]} refused): NOT EXACT")
busy = ("busy_untraced", "busy_floor", "busy_nostack", "busy_default")
if all(os.path.exists(f"{out}/{k}") for k in busy):
    bm = {k: statistics.median(float(x) for x in open(f"{out}/{k}")) for k in busy}
    bbase, bfloor = bm["busy_untraced"], bm["busy_floor"] - bm["busy_untraced"]
    print("  with every other CPU kept busy (SCHED_IDLE spinners; the loop pinned to the last CPU):")
    for k, label in (("busy_untraced", "untraced"), ("busy_floor", "the floor"),
                     ("busy_nostack", "ingero --no-stack"), ("busy_default", "ingero (default)")):
        print(f"    {label:50s} {bm[k]:9.1f}" + (f"  (+{bm[k] - bbase:.1f})" if k != "busy_untraced" else ""))
    for k in ("busy_nostack", "busy_default"):
        print(f"    {k[5:]}: cost over untraced / the floor's = {(bm[k] - bbase) / bfloor:.2f}x"
              f"   (the probe alone; the floor itself +{bfloor - floor:.0f} ns with the CPUs busy)")
def q(db, sql):
    r = subprocess.run([ing, "query", "--db", db, "--json", sql], capture_output=True, text=True)
    return json.loads(r.stdout)
for k in ("nostack", "default", "busy_nostack", "busy_default"):
    for r in range(1, rounds + 1):
        if not os.path.exists(f"{out}/{k}.{r}.cpu"):
            continue
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
