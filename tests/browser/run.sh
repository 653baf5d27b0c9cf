#!/bin/sh
# Runs one browser test (a node script in this folder) when it can: node, the pinned
# packages (npm ci here, done by scripts/setup.sh --with-tests) and Debian's chromium.
# Without them it skips loudly (exit 77, ctest's SKIP_RETURN_CODE), or fails under CI=true.
dir=$(cd "$(dirname "$0")" && pwd)
CHROMIUM=${INGERO_CHROMIUM:-/usr/bin/chromium}
missing=""
if ! command -v node >/dev/null 2>&1; then
  missing="node is not installed (apt-get install nodejs npm)"
elif [ ! -f "$dir/node_modules/puppeteer-core/package.json" ]; then
  missing="tests/browser/node_modules is missing (scripts/setup.sh --with-tests runs npm ci there)"
elif [ ! -x "$CHROMIUM" ]; then
  missing="$CHROMIUM is missing (apt-get install chromium)"
fi
if [ -n "$missing" ]; then
  if [ "${CI:-}" = true ]; then
    echo "CI=true but this browser test cannot run: $missing" >&2
    exit 1
  fi
  echo "*** BROWSER TEST SKIPPED (not CI): $missing ***" >&2
  exit 77
fi
script=$1
shift
exec node "$dir/$script" --chromium "$CHROMIUM" "$@"
