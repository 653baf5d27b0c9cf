#!/usr/bin/env bash
# The main job, from a fresh Debian 12 machine (as root; no sudo needed): install what is
# needed, build ingero and the workloads it traces here (not the tests: scripts/test.sh
# builds those), trace the bundled workload calling the installed vendor libraries, print what
# was captured, and write the one-file HTML report (its path is the last line).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $EUID -ne 0 ]]; then
  echo "quickstart: run as root (it installs packages and attaches BPF probes)" >&2
  exit 1
fi
./scripts/setup.sh
./scripts/build.sh quickstart
B=${BUILD_DIR:-build}
DB=${INGERO_DB:-/tmp/ingero-quickstart.db}
REPORT=${INGERO_REPORT:-/tmp/ingero-quickstart.html}
rm -f "$DB"
FAKE_VENV=$B/tests/fake/venv
FAKE_RT=$FAKE_VENV/lib/python3.11/site-packages/nvidia/cuda_runtime/lib/libcudart.so.13
# The bundled workload:
#  1. cuda_calls drives the installed CUDA 13 runtime (and the driver API through the toolkit's
#     stub libcuda). Without a GPU every call fails fast, but each enters the library with
#     real arguments, which is what is traced.
#  2. A planted incident, so the report has a stall to explain: a training loop whose
#     cudaStreamSynchronize spins 2 ms per step (the bundled stand-in runtime), sharing CPU 1
#     with a CPU hog named noisy_neighbor.
STEPS="INGERO_FAKE_SYNC_SPIN_US=2000 $B/tests/fake_calls steps $FAKE_RT 1500 1"
HOG="$B/tests/cpu_hog 1 8"
if [[ -x $B/tests/cuda_calls ]]; then
  REAL="$B/tests/cuda_calls /usr/local/cuda/lib64/stubs/libcuda.so 20"
else
  echo "quickstart: no CUDA toolkit found; tracing the bundled stand-in runtime only" >&2
  REAL=true
fi
VIRTUAL_ENV=$FAKE_VENV CUDA_HOME=$B/tests/fake/cuda_home \
  "$B/app/ingero" trace --db "$DB" -- /bin/sh -c "$REAL; $HOG & $STEPS; wait" >/dev/null
echo
"$B/app/ingero" explain --db "$DB"
"$B/app/ingero" report --db "$DB" -o "$REPORT"
echo
echo "Report: $REPORT (one file: open it in a browser, offline; or run"
echo "  $B/app/ingero dashboard --db $DB   and open http://127.0.0.1:8080/)"
