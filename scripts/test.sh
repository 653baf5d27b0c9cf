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
ctest --output-on-failure -j"$(nproc)" -L unit
ctest --output-on-failure -L bpf
ctest --output-on-failure -L deploy
ctest --output-on-failure -L browser -LE bpf
