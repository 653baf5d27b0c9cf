#!/usr/bin/env bash
# The step proxy (bench/step_proxy.py) on the real libcudart: step time untraced, under the
# smallest probe that counts the same three functions (a uprobe+uretprobe pair each), under
# `ingero trace --no-stack` and under the default `ingero trace`; rounds interleaved, medians
# of ROUNDS. For ingero, calls stored vs made per function, every loss counter, and the tracer's
# own CPU per call (bench/tracer_cpu.py: utime + stime over its whole run, its end included).
#   bench/step_proxy.sh [BUILD_DIR]     (root: BPF)
# Two figures per configuration: the step's wall time, and a stepping thread's own CPU a step
# (user + system, where a probe's traps and programs are charged). With the GIL held the
# threads' Python runs one at a time, so what a probe adds to that CPU it adds to the step;
# the wall time also moves with how the GIL is handed over (12 to 20 ms untraced from run to
# run on the 2-vCPU VM), which hides a trap's cost.
# Environment: ROUNDS (3), STEPS (60), THREADS (2), WORK_US (20), LIB (real libcudart), GIL
# (held: as PyTorch calls the runtime; released: a context switch a call, the stress case),
# PAIR (1: the stand-in runtime -> driver pair of bench/pair_*.c instead of LIB, whose calls
# enter the driver as the real runtime's do on a GPU host; the minimal counting pair then
# probes both layers, as measured on the H100: 4 traps a launch).
set -euo pipefail
B=${1:-build}
ING=$B/app/ingero
LIB=${LIB:-/usr/local/cuda/lib64/libcudart.so.13}
SYMS=cudaLaunchKernel,cudaMemcpyAsync,cudaStreamSynchronize
DRV= DRV_SYMS=cuLaunchKernel,cuMemcpyAsync,cuStreamSynchronize
if [[ ${PAIR:-0} == 1 ]]; then
  [[ -d $B/bench/pair ]] || { echo "step_proxy: build the pair first (target launch_loop)" >&2; exit 2; }
  export CUDA_HOME=$(cd "$B/bench/pair" && pwd)
  LIB=$CUDA_HOME/lib64/libcudart.so.13 DRV=$CUDA_HOME/lib64/libcuda.so.1
fi
ROUNDS=${ROUNDS:-3} STEPS=${STEPS:-60} THREADS=${THREADS:-2} WORK_US=${WORK_US:-20}
GIL=${GIL:-held}
HERE=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
[[ -e $LIB ]] || { echo "step_proxy: $LIB is missing (set LIB)" >&2; exit 2; }
export STEP_PROXY_SLEEPER=${STEP_PROXY_SLEEPER:-$(realpath "$B/bench/libproxy_sleeper.so")}
[[ -e $STEP_PROXY_SLEEPER ]] || { echo "step_proxy: build $B/bench first (libproxy_sleeper.so)" >&2; exit 2; }
[[ $EUID -eq 0 ]] || { echo "step_proxy: needs root (BPF)" >&2; exit 2; }

proxy() { python3 "$HERE/step_proxy.py" "$LIB" "$STEPS" "$THREADS" "$WORK_US" "$GIL"; }
run_untraced() { proxy > "$out/$1.json"; }
run_min() {
  coproc MP { "$B/bench/min_probe" "$LIB" "$SYMS" pair; }
  read -r _ <&"${MP[0]}"
  if [[ -n $DRV ]]; then
    coproc MD { "$B/bench/min_probe" "$DRV" "$DRV_SYMS" pair; }
    read -r _ <&"${MD[0]}"
  fi
  proxy > "$out/$1.json"
  if [[ -n $DRV ]]; then
    eval "exec ${MD[1]}>&-"
    wait "$MD_PID" 2>/dev/null || true
  fi
  eval "exec ${MP[1]}>&-"
  wait "$MP_PID" 2>/dev/null || true
}
run_ingero() {  # NAME [flags...]
  local name=$1; shift
  python3 "$HERE/tracer_cpu.py" "$out/$name.cpu" "$ING" trace -q --no-live "$@" \
    --db "$out/$name.db" -- \
    python3 "$HERE/step_proxy.py" "$LIB" "$STEPS" "$THREADS" "$WORK_US" "$GIL" > "$out/$name.json"
  "$ING" query --db "$out/$name.db" --json \
    "SELECT op, count(*) AS n FROM calls GROUP BY op" > "$out/$name.calls.json"
  "$ING" query --db "$out/$name.db" --json \
    "SELECT ringbuf_drops, call_drops, stack_drops, host_drops, sample_drops, lost_calls,
            calls_lost_at_exit, store_errors FROM sessions" > "$out/$name.loss.json"
  "$ING" query --db "$out/$name.db" --json \
    "SELECT count(*) AS n FROM host_events" > "$out/$name.host.json"
}

for r in $(seq 1 "$ROUNDS"); do
  run_untraced "untraced.$r"
  run_min "minimal.$r"
  run_ingero "nostack.$r" --no-stack
  run_ingero "default.$r"
done

python3 - "$out" "$ROUNDS" "${PAIR:-0}" <<'PY'
import json, statistics, sys
out, rounds, pair = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
def load(name, r, ext="json"):
    with open(f"{out}/{name}.{r}.{ext}") as f:
        return json.load(f) if ext != "json" else json.loads(f.read().strip().splitlines()[-1])
configs = [("untraced", "untraced"),
           ("minimal", "minimal counting pair, 3 functions x 2 layers" if pair else
            "minimal counting pair on the 3 functions"),
           ("nostack", "ingero --no-stack"), ("default", "ingero (default: stacks on)")]
med, cpu = {}, {}
for key, label in configs:
    runs = [load(key, r) for r in range(1, rounds + 1)]
    med[key] = statistics.median(x["step_ms"] for x in runs)
    cpu[key] = statistics.median(x["cpu_ms"] for x in runs)
base = med["untraced"]
print(f"step proxy: {runs[0]['threads']} threads x {runs[0]['steps']} steps, 330 launches + 4 copies"
      f" + 1 sync per step, {runs[0]['work_us']:.0f} us of Python per launch, ~25 frames deep")
calls = sum(runs[0]["made"].values()) / runs[0]["threads"] / runs[0]["steps"]  # per thread-step
for key, label in configs:
    added = (med[key] - base) * 1000 / (calls * runs[0]["threads"])  # all threads' calls
    print(f"  {label:44s} {med[key]:7.2f} ms/step  {100 * (med[key] / base - 1):+6.1f}%"
          + (f"  (+{added:.2f} us of wall per call)" if key != "untraced" else ""))
m = med["minimal"] - base
for key in ("nostack", "default"):
    print(f"  {key}: cost over untraced / the minimal pair's = {(med[key] - base) / m:.2f}x")
print("  a stepping thread's own CPU a step (user + system; the GIL held: serial):")
for key, label in configs:
    print(f"    {label:42s} {cpu[key]:7.2f} ms/step  {100 * (cpu[key] / cpu['untraced'] - 1):+6.1f}%")
mc = cpu["minimal"] - cpu["untraced"]
for key in ("nostack", "default"):
    print(f"    {key}: CPU added / the minimal pair's = {(cpu[key] - cpu['untraced']) / mc:.2f}x")
for key in ("nostack", "default"):
    for r in range(1, rounds + 1):
        made = load(key, r)["made"]
        stored = {row["op"]: row["n"] for row in json.load(open(f"{out}/{key}.{r}.calls.json"))}
        loss = json.load(open(f"{out}/{key}.{r}.loss.json"))[0]
        exact = all(stored.get(op, 0) == n for op, n in made.items()) and len(stored) == len(made)
        cpu = json.load(open(f"{out}/{key}.{r}.cpu"))["cpu_s"]
        host = json.load(open(f"{out}/{key}.{r}.host.json"))[0]["n"]
        print(f"  {key} round {r}: stored/made " +
              ", ".join(f"{op} {stored.get(op, 0)}/{n}" for op, n in made.items()) +
              f" -> {'exact' if exact else 'NOT EXACT'}; losses " +
              (", ".join(f"{k} {v}" for k, v in loss.items() if v) or "none") +
              f"; tracer CPU {cpu:.2f} s = {cpu * 1e6 / sum(made.values()):.2f} us a call"
              f"; {host / sum(made.values()):.2f} host events a call")
print(f"targets on this VM: default <= +10%, --no-stack <= +6%, exact counts")
PY
