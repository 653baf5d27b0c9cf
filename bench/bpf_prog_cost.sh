#!/usr/bin/env bash
# Where a launch's time goes inside BPF: the kernel's own count of each program's runs and run
# time (kernel.bpf_stats_enabled), for ingero's call program against the smallest session
# program on the same function (bench/min_probe), on the stand-in pair of bench/launch_cost.sh.
# The trap itself (the uprobe machinery around the program) is not in these figures; it is
# what launch_cost.sh's floor measures.
#   bench/bpf_prog_cost.sh [BUILD_DIR]      (root: BPF)
# Environment: ROUNDS (3), LAUNCHES (300000).
set -euo pipefail
B=${1:-build}
NAME=bpf_prog_cost
# shellcheck source=bench/pair_env.sh
source "$(dirname "$0")/pair_env.sh"
ROUNDS=${ROUNDS:-3}
out=$(mktemp -d)
was=$(sysctl -n kernel.bpf_stats_enabled)
trap 'sysctl -qw kernel.bpf_stats_enabled="$was"; rm -rf "$out"' EXIT
[[ $EUID -eq 0 ]] || { echo "bpf_prog_cost: needs root (BPF)" >&2; exit 2; }
sysctl -qw kernel.bpf_stats_enabled=1

# The programs' run counts and times, as JSON, while the loop runs under them.
snapshot() { bpftool prog show -j > "$1"; }
minimal() {
  coproc MP { "$B/bench/min_probe" "$DRV" cuLaunchKernel session-skip; }
  read -r _ <&"${MP[0]}"
  "$B/bench/launch_loop" "$LIB" "$N" > /dev/null
  snapshot "$1"
  eval "exec ${MP[1]}>&-"
  wait "$MP_PID" 2>/dev/null || true
}
ingero() {  # OUT [flags...]
  local o=$1; shift
  CUDA_HOME=$PAIR "$ING" trace -q --no-live "$@" --db "$out/t.db" -- \
    bash -c "'$B/bench/launch_loop' '$LIB' $N > /dev/null; bpftool prog show -j > '$o'"
  rm -f "$out"/t.db*
}
for r in $(seq 1 "$ROUNDS"); do
  minimal "$out/min.$r"
  ingero "$out/nostack.$r" --no-stack
  ingero "$out/default.$r"
done
python3 - "$out" "$ROUNDS" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def per_run(path, name):
    for p in json.load(open(path)):
        if p.get("name", "")[:15] == name[:15] and p.get("run_cnt"):
            return p["run_time_ns"] / p["run_cnt"]
    return float("nan")
rows = {"minimal session program (min_probe)": ("min", "min_session_skip"),
        "ingero --no-stack (ingero_call)": ("nostack", "ingero_call"),
        "ingero default (ingero_call)": ("default", "ingero_call")}
print(f"BPF run time per launch, median of {rounds} rounds (ns; the trap around it excluded)")
for label, (k, prog) in rows.items():
    v = [per_run(f"{out}/{k}.{r}", prog) for r in range(1, rounds + 1)]
    print(f"  {label:40s} {statistics.median(v):7.1f}   rounds: " + ", ".join(f"{x:.0f}" for x in v))
PY
