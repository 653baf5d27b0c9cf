#!/usr/bin/env bash
# A session's fixed cost: the tracer's CPU (utime + stime) for a session of /bin/true, with
# `--no-stack` and by default, mean of ROUNDS; most of it is loading the BPF programs (the
# kernel's verifier) and attaching. Builds interleaved, for a before/after in the same minutes.
#   bench/session_cost.sh BUILD [BUILD...]      (root: BPF)
# Environment: ROUNDS (5).
set -euo pipefail
[[ $# -ge 1 ]] || { echo "usage: bench/session_cost.sh BUILD [BUILD...]" >&2; exit 2; }
[[ $EUID -eq 0 ]] || { echo "session_cost: needs root (BPF)" >&2; exit 2; }
ROUNDS=${ROUNDS:-5}
HERE=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for r in $(seq 1 "$ROUNDS"); do
  for b in "$@"; do
    for mode in no-stack default; do
      flags=(-q --no-live --db "$out/s.db")
      [[ $mode == no-stack ]] && flags+=(--no-stack)
      rm -f "$out"/s.db*
      # The tracer's own utime + stime (bench/tracer_cpu.py), not its child's.
      python3 "$HERE/tracer_cpu.py" "$out/cpu.json" "$b/app/ingero" trace "${flags[@]}" \
        -- /bin/true > /dev/null 2>&1
      cpu=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["cpu_s"])' \
        "$out/cpu.json")
      echo "$b $mode $cpu 0" >> "$out/all"
    done
  done
done
echo "a session of /bin/true: tracer CPU (utime + stime), mean of $ROUNDS"
awk '{k=$1" "$2; t[k]+=$3+$4; n[k]++; if (!(k in o)) {o[k]=++m; key[m]=k}}
     END {for (i=1; i<=m; i++) {split(key[i], p, " ");
          printf "  %-36s %-9s %.3f s\n", p[1], p[2], t[key[i]]/n[key[i]]}}' "$out/all"
