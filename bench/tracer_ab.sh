#!/usr/bin/env bash
# Two builds' tracers side by side on the step proxy (bench/step_proxy.py, real libcudart):
# for each, in the same minutes and rounds interleaved, `--no-stack` and the default, the
# tracer's own CPU a call (bench/tracer_cpu.py: utime + stime, its end included), host events
# a call, the file's bytes a call and the tracer's peak RSS. For a change to the writer: the
# build before it and the build with it. Both shapes of the proxy's GIL (step_proxy.py): held,
# as PyTorch calls the runtime (the targets' shape), and released, a context switch a call
# (the host side's stress case).
#   bench/tracer_ab.sh BUILD_A BUILD_B      (root: BPF)
# Environment: ROUNDS (1), STEPS (1500: ~1 M calls), LIB (real libcudart), SHAPES ("held
# released").
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: bench/tracer_ab.sh BUILD_A BUILD_B" >&2; exit 2; }
[[ $EUID -eq 0 ]] || { echo "tracer_ab: needs root (BPF)" >&2; exit 2; }
HERE=$(cd "$(dirname "$0")" && pwd)
LIB=${LIB:-/usr/local/cuda/lib64/libcudart.so.13}
ROUNDS=${ROUNDS:-1} STEPS=${STEPS:-1500} SHAPES=${SHAPES:-held released}
[[ -e $LIB ]] || { echo "tracer_ab: $LIB is missing (set LIB)" >&2; exit 2; }
# The proxy's pin-memory thread (GIL held), from whichever build has the bench targets.
for b in "$1" "$2"; do
  [[ -e $b/bench/libproxy_sleeper.so ]] && : "${STEP_PROXY_SLEEPER:=$(realpath "$b/bench/libproxy_sleeper.so")}"
done
[[ -n ${STEP_PROXY_SLEEPER:-} ]] || { echo "tracer_ab: neither build has bench/libproxy_sleeper.so" >&2; exit 2; }
export STEP_PROXY_SLEEPER
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# One figure of a file: the first column of the first row of `ingero query --json`.
figure() { "$2/app/ingero" query --db "$1" --json "$3" |
  python3 -c "import json,sys; print(json.load(sys.stdin)[0][\"n\"])"; }
echo "tracer A/B on the step proxy: $STEPS steps x 2 threads, $ROUNDS round(s)"
# What this host charges work done in bursts after idling (bench/cold_burst.c), before and after
# the rounds: the tracer's reader works so at a training step's call rate, and its CPU a call
# follows this factor from host to host and hour to hour.
cold() {
  for b in "$1" "$2"; do
    [[ -x $b/bench/cold_burst ]] && { echo "  host cold factor ($3): $("$b/bench/cold_burst")"; return 0; }
  done
  return 0
}
cold "$1" "$2" before
trap 'cold "$1" "$2" after; rm -rf "$out"' EXIT
for r in $(seq 1 "$ROUNDS"); do
 for gil in $SHAPES; do
  for build in "$1" "$2"; do
    for mode in no-stack default; do
      flags=()
      [[ $mode == no-stack ]] && flags=(--no-stack)
      db=$out/t.db
      rm -f "$db"*
      python3 "$HERE/tracer_cpu.py" "$out/cpu.json" "$build/app/ingero" trace -q --no-live \
        "${flags[@]}" --db "$db" -- python3 "$HERE/step_proxy.py" "$LIB" "$STEPS" 2 20 "$gil" > /dev/null
      calls=$(figure "$db" "$build" "SELECT coalesce(sum(calls), 0) AS n FROM call_seconds")
      host=$(figure "$db" "$build" "SELECT count(*) AS n FROM host_events")
      python3 - "$build" "$mode" "$r" "$calls" "$host" "$(stat -c %s "$db")" "$out/cpu.json" \
        "$gil" <<'PY'
import json, sys
build, mode, r, calls, host, size, cpu, gil = sys.argv[1:]
calls, host, size = int(calls), int(host), int(size)
cpu = json.load(open(cpu))
cpu_s, end_s, hwm = cpu["cpu_s"], cpu.get("end_cpu_s"), cpu.get("hwm_kib")
end = f" ({end_s * 1e6 / calls:.2f} of it at the end)" if end_s is not None else ""
print(f"  {build:<28} {mode:<9} GIL {gil:<8} round {r}: {calls} calls, {host / calls:.2f} host events a call, "
      f"tracer CPU {cpu_s * 1e6 / calls:.2f} us a call{end}, file {size / calls:.1f} B a call"
      + (f", peak RSS {hwm / 1024:.0f} MiB" if hwm else ""))
PY
    done
  done
 done
done
