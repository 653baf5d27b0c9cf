#!/usr/bin/env bash
# What a kernel look-up before every launch costs under ingero, as cuDNN launches (125-131
# look-ups a step of ResNet-18 on an H200): bench/lookup_loop.c asks the stand-in driver
# (bench/pair_driver.c, ordinary -O2 code) for the kernel by name (cuLibraryGetKernel) and its
# function (cuKernelGetFunction) before each cuLaunchKernel. Rounds interleaved, medians, ns per
# launch over untraced:
#   ingero --no-stack --no-kernel-names: the launch alone is traced (the floor of this question);
#   ingero --no-stack: the look-ups too, each answer shipped once a second (INGERO_NAME_ONCE),
#     the look-ups at rest once they only repeat (capture/lookup_rest.h: from the tracer's first
#     second on, so LAUNCHES should make a round last several seconds);
#   ingero --no-stack --keep-lookup-probes: the look-ups never rest;
#   OLD=path/to/ingero: the same under another build, side by side.
# Also the tracer's own CPU per launch (utime + stime, its end included) and the name records it
# read, and the launches stored (exact).
# MIX=1: LAUNCHES steps of ResNet-18's launches instead (bench/lookup_loop.c: 264 runtime
# launches through the stand-in runtime, 64 after their two look-ups, 11 plain driver launches),
# and the cost a step besides.
#   bench/lookup_cost.sh [BUILD_DIR]      (root: BPF)
# Environment: ROUNDS (5), LAUNCHES (200000), OLD, WARM_MS (3000: each traced loop runs that long
# before its LAUNCHES are timed, the look-ups at rest by then; its launches are stored too).
# The launches stored are counted against LAUNCHES plus the warm-up's, which the loop reports.
set -euo pipefail
B=${1:-build}
NAME=lookup_cost
# shellcheck source=bench/pair_env.sh
source "$(dirname "$0")/pair_env.sh"
N=${LAUNCHES:-200000}
ROUNDS=${ROUNDS:-5}
HERE=$(cd "$(dirname "$0")" && pwd)
[[ $EUID -eq 0 ]] || { echo "$NAME: needs root (BPF)" >&2; exit 2; }
[[ -x $B/bench/lookup_loop ]] || { echo "$NAME: build the target lookup_loop first" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

loop_args=("$DRV" "$N")
[[ ${MIX:-0} == 1 ]] && loop_args+=(mix "$LIB")
traced() {  # NAME TRACER [flags...]
  local name=$1 tracer=$2; shift 2
  CUDA_HOME=$PAIR LOOKUP_WARM_MS=${WARM_MS:-3000} python3 "$HERE/tracer_cpu.py" "$out/$name.cpu" \
    "$tracer" trace -q --no-live "$@" --db "$out/$name.db" -- \
    "$B/bench/lookup_loop" "${loop_args[@]}" | tee "$out/$name.json" | ns
}
modes=(untraced floor names keep)
[[ -n ${OLD:-} ]] && modes+=(old)
for r in $(seq 1 "$ROUNDS"); do
  "$B/bench/lookup_loop" "${loop_args[@]}" | ns >> "$out/untraced"
  traced floor.$r "$ING" --no-stack --no-kernel-names >> "$out/floor"
  traced names.$r "$ING" --no-stack >> "$out/names"
  traced keep.$r "$ING" --no-stack --keep-lookup-probes >> "$out/keep"
  [[ -n ${OLD:-} ]] && traced old.$r "$OLD" --no-stack >> "$out/old"
done

python3 - "$out" "$ROUNDS" "$N" "$ING" "${MIX:-0}" "${modes[@]}" <<'PY'
import json, os, sqlite3, statistics, subprocess, sys
out, rounds, n, ing, mix, modes = (sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4],
                                   sys.argv[5] == "1", sys.argv[6:])
step = 339 if mix else 1  # launches a step of the mix (bench/lookup_loop.c)
def vals(m): return [float(x) for x in open(f"{out}/{m}").read().split()]
base = statistics.median(vals("untraced"))
if mix:
    print(f"lookup_cost: {n} steps of ResNet-18's 339 launches timed (64 of them after 2 look-ups), "
          f"after a warm-up of the same; {rounds} rounds interleaved; medians")
else:
    print(f"lookup_cost: {n} launches timed, each after 2 look-ups, after a warm-up of the same; "
          f"{rounds} rounds interleaved; medians")
print(f"  {'untraced':40s} {base:8.1f} ns a launch" +
      (f" ({base * step / 1e3:.1f} us a step)" if mix else ""))
for m in modes[1:]:
    v = statistics.median(vals(m))
    cpu, recs, stored, again, rested = [], [], [], [], []
    for r in range(1, rounds + 1):
        c = json.load(open(f"{out}/{m}.{r}.cpu"))
        lj = json.loads(open(f"{out}/{m}.{r}.json").read().strip().splitlines()[-1])
        made = lj["calls"] + lj["warm"]
        cpu.append((c["utime_s"] + c["stime_s"]) * 1e6 / made)
        q = subprocess.run([ing, "query", "--db", f"{out}/{m}.{r}.db", "--json",
                            "SELECT bpf_stats, (SELECT count(*) FROM calls WHERE kind = 'launch') AS l FROM sessions"],
                           capture_output=True, text=True, check=True)
        row = json.loads(q.stdout)[0]
        st = json.loads(row["bpf_stats"])
        recs.append(st.get("kernel_name_records", 0))
        again.append(st.get("name_answered_again", 0) + st.get("name_asked_again", 0))
        rested.append(f'{st.get("lookup_probes_rested", 0)}/{st.get("lookup_wakes", 0)}')
        stored.append(f'{row["l"]}/{made}')
    label = {"floor": "ingero --no-stack --no-kernel-names", "names": "ingero --no-stack",
             "keep": "ingero --no-stack --keep-lookup-probes", "old": "OLD --no-stack"}[m]
    if mix:
        print(f"  {label:40s} {v * step / 1e3:8.1f} us a step (+{(v - base) * step / 1e3:.1f})")
    print(f"  {label:40s} {v:8.1f} ns (+{v - base:.1f}); tracer CPU {min(cpu):.2f}-{max(cpu):.2f} us a launch; "
          f"name records {min(recs)}-{max(recs)}, held back {min(again)}-{max(again)}; "
          f"launches stored/made {' '.join(stored)}; look-up probes rested/wakes "
          f"{' '.join(rested)}")
PY
