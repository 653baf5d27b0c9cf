#!/usr/bin/env bash
# Installs every Debian package ingero needs to build, test and run. Idempotent: packages
# already present are skipped, and apt-get update runs only when something is missing.
set -euo pipefail

BUILD_PKGS=(build-essential cmake pkg-config clang llvm libbpf-dev bpftool libelf-dev libdw-dev
            libsqlite3-dev sqlite3 prometheus-cpp-dev libcli11-dev nlohmann-json3-dev
            libssl-dev zlib1g-dev libzstd-dev libboost1.74-dev libyaml-cpp-dev libcrypt-dev
            libtomlplusplus-dev libcurl4-openssl-dev libprotobuf-dev protobuf-compiler
            libiberty-dev)
TEST_PKGS=(googletest libgtest-dev libgmock-dev libbenchmark-dev libamdhip64-5 libibverbs1
           prometheus python3 python3-dev clang-format openssl
           python3-yaml python3-jsonschema systemd libcap2-bin dpkg-dev
           chromium fonts-dejavu-core xz-utils
           clickhouse-server clickhouse-client victoria-metrics golang-go)

want=("${BUILD_PKGS[@]}")
if [[ "${1:-}" == "--with-tests" ]]; then want+=("${TEST_PKGS[@]}"); fi

missing=()
for p in "${want[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  if [[ $EUID -ne 0 ]]; then echo "setup: need root to install: ${missing[*]}" >&2; exit 1; fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "setup: all ${#want[@]} packages present"
fi
# Node.js and npm install the pinned front-end libraries the build embeds in the binary (the
# report and dashboard pages) and, for the tests, the MCP SDK and puppeteer-core. Node may come
# from another repository with npm bundled; Debian's is installed only when no npm is present.
if ! command -v npm >/dev/null; then
  if [[ $EUID -ne 0 ]]; then echo "setup: need root to install: nodejs npm" >&2; exit 1; fi
  echo "setup: installing nodejs npm"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# `npm ci` in DIR when its node_modules is missing or older than its package-lock.json.
npm_ci() {
  local dir=$root/$1 what=$2
  if [[ ! -f $dir/node_modules/.package-lock.json ||
        $dir/package-lock.json -nt $dir/node_modules/.package-lock.json ]]; then
    echo "setup: installing $what (npm ci in $1)"
    npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error
  fi
}
# uPlot, d3-flame-graph and the d3 modules, pinned by serve/report/web/package-lock.json.
npm_ci serve/report/web "the report's front-end libraries"
if [[ "${1:-}" == "--with-tests" ]]; then
  # The official MCP TypeScript SDK, pinned by tests/mcp/package-lock.json.
  npm_ci tests/mcp "the MCP TypeScript SDK"
  # puppeteer-core (drives Debian's chromium; downloads no browser), tests/browser.
  npm_ci tests/browser "puppeteer-core for the browser tests"
fi
