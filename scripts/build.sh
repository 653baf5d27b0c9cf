#!/usr/bin/env bash
# Configures and builds ingero into ./build (or $BUILD_DIR). Warnings are errors.
#   scripts/build.sh [TARGET...]    (default: everything, tests included)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DINGERO_WERROR=ON >/dev/null
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$BUILD_DIR" -j"$(nproc)" "${targets[@]}"
