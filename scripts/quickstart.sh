#!/usr/bin/env bash
# The main job, from a fresh Debian 12 machine (as root): install what is needed, build,
# trace the bundled workload calling the installed vendor libraries, and print what was
# captured.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh
B=${BUILD_DIR:-build}
DB=${INGERO_DB:-/tmp/ingero-quickstart.db}
rm -f "$DB"
if [[ -x $B/tests/cuda_calls ]]; then
  # The real CUDA 13 runtime, and the driver API through the toolkit's stub libcuda.
  WORKLOAD=("$B/tests/cuda_calls" /usr/local/cuda/lib64/stubs/libcuda.so 20)
  ENV=()
else
  echo "quickstart: no CUDA toolkit found; tracing the bundled fake runtime instead" >&2
  WORKLOAD=("$B/tests/fake_calls" threads "$B/tests/fake/venv/lib/python3.11/site-packages/nvidia/cuda_runtime/lib/libcudart.so.13" 4 200)
  ENV=(VIRTUAL_ENV="$B/tests/fake/venv" CUDA_HOME="$B/tests/fake/cuda_home")
fi
env "${ENV[@]}" "$B/app/ingero" trace --db "$DB" -- "${WORKLOAD[@]}" >/dev/null
echo
echo "== What was captured ($DB)"
"$B/app/ingero" query "$DB" \
  "SELECT vendor, api, kind, op, count(*) AS calls, sum(bytes) AS bytes,
          round(avg(dur_ns) / 1000.0, 1) AS avg_us, ret
     FROM calls GROUP BY vendor, api, kind, op, ret ORDER BY api, calls DESC"
