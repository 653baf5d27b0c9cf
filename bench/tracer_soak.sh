#!/usr/bin/env bash
# Whether the tracer's memory stays flat while it traces: the step proxy (bench/step_proxy.py,
# real libcudart, 2 threads, the GIL shape GIL: held by default) traced for MINUTES, the tracer's
# anonymous memory (RssAnon) sampled every 30 s. The first minute fills SQLite's page cache and
# the symbolizer's tables; after it an agent left on must not grow. Prints each sample, then the
# growth from the first minute to the end, in MiB a minute and as a ratio.
#   bench/tracer_soak.sh [BUILD_DIR]       (root: BPF)
# Environment: MINUTES (10), LIB (real libcudart), GIL (held or released). Target: growth after the first minute
# <= 1.05x (docs/performance.md, "Memory").
set -euo pipefail
[[ $EUID -eq 0 ]] || { echo "tracer_soak: needs root (BPF)" >&2; exit 2; }
B=${1:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
LIB=${LIB:-/usr/local/cuda/lib64/libcudart.so.13}
MINUTES=${MINUTES:-10}
[[ -e $LIB ]] || { echo "tracer_soak: $LIB is missing (set LIB)" >&2; exit 2; }
export STEP_PROXY_SLEEPER=${STEP_PROXY_SLEEPER:-$(realpath "$B/bench/libproxy_sleeper.so")}
[[ -e $STEP_PROXY_SLEEPER ]] || { echo "tracer_soak: build $B/bench first (libproxy_sleeper.so)" >&2; exit 2; }
out=$(mktemp -d)
"$B/app/ingero" trace -q --no-live --db "$out/t.db" -- \
  python3 "$HERE/step_proxy.py" "$LIB" 1000000 2 20 "${GIL:-held}" > /dev/null 2>&1 &
tracer=$!
# The traced command first (a signal to the tracer alone leaves it running), then the tracer.
stop() {
  pkill -P "$tracer" 2> /dev/null || true
  kill -INT "$tracer" 2> /dev/null || true
  wait "$tracer" 2> /dev/null || true
  rm -rf "$out"
}
trap stop EXIT
anon() { awk '/^RssAnon:/ {print $2}' "/proc/$tracer/status"; }
echo "tracer soak: the step proxy for $MINUTES min, RssAnon every 30 s"
first=""
for ((s = 30; s <= MINUTES * 60; s += 30)); do
  sleep 30
  kill -0 "$tracer" 2> /dev/null || { echo "tracer_soak: the tracer exited early" >&2; exit 1; }
  kib=$(anon)
  echo "  ${s}s: $((kib / 1024)) MiB"
  [[ $s -eq 60 ]] && first=$kib
  last=$kib
done
python3 - "$first" "$last" "$MINUTES" <<'PY'
import sys
first, last, minutes = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
per_min = (last - first) / 1024 / max(minutes - 1, 1)
print(f"growth after the first minute: {per_min:+.2f} MiB a minute, {last / first:.2f}x "
      f"({first / 1024:.0f} -> {last / 1024:.0f} MiB)   target <= 1.05x")
PY
