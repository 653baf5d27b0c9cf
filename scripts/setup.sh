#!/usr/bin/env bash
# Installs every Debian package ingero needs to build, test and run. Idempotent: packages
# already present are skipped, and apt-get update runs only when something is missing.
set -euo pipefail

BUILD_PKGS=(build-essential cmake pkg-config clang llvm libbpf-dev bpftool libelf-dev libdw-dev
            libsqlite3-dev sqlite3 prometheus-cpp-dev libcli11-dev nlohmann-json3-dev
            libssl-dev zlib1g-dev libboost1.74-dev libyaml-cpp-dev libcrypt-dev
            libcurl4-openssl-dev)
TEST_PKGS=(googletest libgtest-dev libgmock-dev libbenchmark-dev libamdhip64-5 libibverbs1
           prometheus python3 python3-dev clang-format openssl clickhouse-server clickhouse-client
           victoria-metrics)

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
# Node.js (for the MCP SDK integration tests) may come from another repository with npm
# bundled; install Debian's only when no node is present at all.
if [[ "${1:-}" == "--with-tests" ]]; then
  if ! command -v npm >/dev/null; then
    echo "setup: installing nodejs npm"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
  fi
  # The official MCP TypeScript SDK, pinned by tests/mcp/package-lock.json.
  mcp_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tests/mcp
  if [[ ! -f $mcp_dir/node_modules/@modelcontextprotocol/sdk/package.json ||
        $mcp_dir/package-lock.json -nt $mcp_dir/node_modules/.package-lock.json ]]; then
    echo "setup: installing the MCP TypeScript SDK (npm ci in tests/mcp)"
    npm ci --prefix "$mcp_dir" --no-audit --no-fund --loglevel=error
  fi
fi
