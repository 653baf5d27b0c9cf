#!/usr/bin/env bash
# Installs everything the tests need, builds, and runs the whole suite: unit tests (no
# privilege), BPF tests (root, real vendor libraries), browser tests (Debian's chromium) and
# deploy tests (the Debian package installed and removed, the systemd unit, the DaemonSet and
# Prometheus files). Run as root; under CI=true a test that cannot get what it needs (BPF, root,
# a browser) fails instead of skipping.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh --with-tests
./scripts/build.sh
B=${BUILD_DIR:-build}
# tracefs is not needed (BTF tracepoints, uprobe PMU); the suite checks ingero works without it.
cd "$B"
# Every label runs, whatever an earlier one gave: a failing label must not hide another's
# failures (the deploy label once went unrun for a whole stop behind a failing BPF test).
failed=()
ctest --output-on-failure -j"$(nproc)" -L unit || failed+=(unit)
ctest --output-on-failure -L bpf || failed+=(bpf)
ctest --output-on-failure -L deploy || failed+=(deploy)
ctest --output-on-failure -L browser -LE bpf || failed+=(browser)
if ((${#failed[@]})); then
  echo "test.sh: failing labels: ${failed[*]}" >&2
  exit 1
fi
echo "test.sh: every label passed"
