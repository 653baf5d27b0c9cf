#!/usr/bin/env bash
# The Debian package, installed for real on this machine:
#   1. cpack builds the .deb from the build tree (what `--target package` produces);
#   2. its control data: the conffile, the maintainer scripts, the dependencies;
#   3. dpkg -i installs it; systemd-analyze verify checks the installed unit;
#   4. /usr/bin/ingero runs: version, man page, `check --config` on the installed config;
#   5. the installed binary traces a workload under exactly the unit's sandbox: only the
#      capabilities of its CapabilityBoundingSet (setpriv), and a read-only file system
#      except the state directory (ProtectSystem=strict, emulated in a mount namespace);
#   6. dpkg --purge removes everything it installed.
# Before installing, the maintainer scripts run as under systemd (a stub systemctl): an upgrade
# restarts a running service, and only then; a removal stops and disables it.
# The package is purged on every exit path. Needs root; skips (77) elsewhere, fails under CI.
#   package_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
B=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
skip_or_fail() {
  if [[ "${CI:-}" == "true" ]]; then echo "FAIL: $*" >&2; exit 1; fi
  echo "SKIP: $*" >&2
  exit 77
}
fail() { echo "FAIL: $*" >&2; exit 1; }
[[ $EUID -eq 0 ]] || skip_or_fail "installing a package needs root"
for tool in cpack dpkg dpkg-deb systemd-analyze setpriv unshare capsh; do
  command -v "$tool" >/dev/null || skip_or_fail "$tool is not installed"
done
if dpkg-query -W -f='${Status}' ingero 2>/dev/null | grep -q "install ok installed"; then
  skip_or_fail "a package named ingero is already installed here; not replacing it"
fi

work=$(mktemp -d /tmp/ingero-pkg.XXXXXX)
installed=0
cleanup() {
  local rc=$?
  if ((installed)); then
    dpkg_locked --purge ingero >/dev/null || echo "cleanup: dpkg --purge ingero failed" >&2
  fi
  rm -rf "$work"
  exit $rc
}
trap cleanup EXIT
# dpkg refuses to run while another dpkg/apt holds its lock: wait up to 2 minutes.
dpkg_locked() {
  local i out
  for i in $(seq 1 60); do
    if out=$(dpkg "$@" 2>&1); then echo "$out"; return 0; fi
    if ! grep -q "lock" <<<"$out"; then echo "$out" >&2; return 1; fi
    sleep 2
  done
  echo "$out" >&2
  return 1
}

echo "== cpack"
(cd "$B" && cpack -G DEB -B "$work/out" >"$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; fail "cpack"; }
deb=$(ls "$work"/out/ingero_*.deb)
echo "built $deb ($(du -h "$deb" | cut -f1))"

echo "== control data"
dpkg-deb -e "$deb" "$work/control"
[[ $(cat "$work/control/conffiles") == "/etc/ingero/ingero.toml" ]] || fail "conffiles: $(cat "$work/control/conffiles")"
for s in postinst prerm postrm; do [[ -x $work/control/$s ]] || fail "$s missing or not executable"; done
grep -q '^Depends: .*libbpf1' "$work/control/control" || fail "Depends lacks libbpf1: $(grep Depends "$work/control/control")"
dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\.||' >"$work/files"
for f in /usr/bin/ingero /lib/systemd/system/ingero.service /etc/ingero/ingero.toml \
         /usr/share/man/man1/ingero.1.gz /usr/share/doc/ingero/deploy.md /usr/share/doc/ingero/cli.md \
         /usr/share/doc/ingero/examples/k8s/ingero.yaml /usr/share/doc/ingero/examples/prometheus/ingero-alerts.yml; do
  grep -qx "$f" "$work/files" || fail "$f is not in the package"
done

echo "== maintainer scripts under systemd"
# No systemd runs here: the scripts run in a mount namespace whose /run says it does, with a
# systemctl that logs what it is asked and answers is-active as told.
mkdir -p "$work/stub"
printf '%s\n' '#!/bin/sh' 'echo "$*" >>"$STUB_LOG"' \
  'if [ "$1" = is-active ]; then exit "$STUB_ACTIVE"; fi' 'exit 0' >"$work/stub/systemctl"
chmod +x "$work/stub/systemctl"
# maint SCRIPT ACTIVE ARGS...: what the script asked systemctl, one call a line.
maint() {
  local script=$1 active=$2
  shift 2
  : >"$work/stub.log"
  STUB_LOG="$work/stub.log" STUB_ACTIVE=$active PATH="$work/stub:$PATH" unshare --mount sh -c \
    'mount -t tmpfs tmpfs /run && mkdir -p /run/systemd/system && exec "$@"' sh \
    "$work/control/$script" "$@" || fail "$script $* exited $?"
  tr '\n' ';' <"$work/stub.log"
}
got=$(maint postinst 0 configure "")
[[ $got == "daemon-reload;" ]] || fail "a first install asked systemctl: $got"
got=$(maint postinst 0 configure 0.0.9)
[[ $got == "daemon-reload;is-active --quiet ingero.service;restart ingero.service;" ]] ||
  fail "an upgrade with the service running did not restart it: $got"
got=$(maint postinst 3 configure 0.0.9)
[[ $got == "daemon-reload;is-active --quiet ingero.service;" ]] ||
  fail "an upgrade with the service stopped asked systemctl: $got"
got=$(maint prerm 0 remove)
[[ $got == "stop ingero.service;disable ingero.service;" ]] || fail "prerm remove asked systemctl: $got"
got=$(maint prerm 0 upgrade 0.1.1)
[[ -z $got ]] || fail "prerm upgrade asked systemctl: $got"

echo "== dpkg -i"
dpkg_locked -i "$deb" || fail "dpkg -i"
installed=1
[[ -x /usr/bin/ingero ]] || fail "/usr/bin/ingero missing after install"
cmp -s /etc/ingero/ingero.toml "$SRC/deploy/ingero.toml" || fail "/etc/ingero/ingero.toml differs from deploy/ingero.toml"

echo "== systemd-analyze verify"
# The sandbox docs/deploy.md and security.md promise, line by line: verify checks syntax only.
unit=/lib/systemd/system/ingero.service
for line in NoNewPrivileges=yes ProtectSystem=strict ProtectHome=read-only PrivateTmp=yes \
  PrivateDevices=yes UMask=0027 StateDirectory=ingero StateDirectoryMode=0750 \
  Restart=on-failure RestartSec=5s StartLimitBurst=5 TimeoutStopSec=30 KillSignal=SIGTERM \
  MemoryDenyWriteExecute=yes LimitMEMLOCK=infinity; do
  grep -qx "$line" "$unit" || fail "the unit lacks $line"
done
# Offline: no running systemd is needed; a unit with unknown keys or a bad ExecStart fails.
out=$(systemd-analyze verify /lib/systemd/system/ingero.service 2>&1) || fail "systemd-analyze verify: $out"
[[ -z $out ]] || fail "systemd-analyze verify warned: $out"

echo "== the installed binary"
ver=$(/usr/bin/ingero version)
[[ $ver == "ingero $(sed -n 's/^project(ingero VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt") "* ]] || fail "version: $ver"
zcat /usr/share/man/man1/ingero.1.gz >"$work/ingero.1"
[[ $(head -1 "$work/ingero.1") == '.TH INGERO 1 '* ]] || fail "man page header: $(head -1 "$work/ingero.1")"
grep -q '^\.SS "ingero trace"' "$work/ingero.1" || fail "the man page lacks ingero trace"
out=$(/usr/bin/ingero check --config /etc/ingero/ingero.toml) || fail "check --config: $out"
[[ $out == "/etc/ingero/ingero.toml: valid, 2 settings"* ]] || fail "check --config: $out"

WORKLOAD=${INGERO_PKG_WORKLOAD:-}
# Only capabilities this test itself holds can be passed on (a container may lack some, e.g.
# CAP_SYS_RESOURCE): the trace then runs with fewer than the unit grants, a stricter test.
unit_capabilities() {
  local caps have c name bit set="-all"
  caps=$(sed -n 's/^CapabilityBoundingSet=//p' /lib/systemd/system/ingero.service)
  [[ -n $caps ]] || fail "the unit has no CapabilityBoundingSet"
  have=$((16#$(awk '/^CapBnd:/ {print $2}' /proc/self/status)))
  for c in $caps; do
    name=$(tr 'A-Z' 'a-z' <<<"${c#CAP_}")
    bit=$(capsh --explain="cap_$name" | sed -n 's/^cap_[a-z_]* (\([0-9]*\)).*/\1/p')
    [[ -n $bit ]] || fail "capsh does not know cap_$name"
    if (((have >> bit) & 1)); then set+=",+$name"; else echo "note: this environment lacks $c; tracing without it" >&2; fi
  done
  echo "$set"
}

echo "== trace under the unit's capabilities and ProtectSystem=strict"
trace_skipped=0
if [[ -n $WORKLOAD ]]; then
  bounding=$(unit_capabilities) || fail "reading the unit's capabilities"
  echo "capabilities: $bounding"
  state="$work/state"
  mkdir -p "$state"
  # An upgrade: the state directory holds a trace an earlier ingero wrote (schema 9, calls as
  # rows). The unit's own command line (its ExecStart) must move it aside, not refuse it.
  xz -dc "$SRC/tests/fixtures/legacy/v8-archived.db.xz" >"$state/ingero.db"
  older_sum=$(sha256sum <"$state/ingero.db")
  execstart=$(sed -n 's|^ExecStart=/usr/bin/ingero ||p' /lib/systemd/system/ingero.service)
  [[ $execstart == "trace --config /etc/ingero/ingero.toml "* ]] || fail "ExecStart: $execstart"
  # A private mount namespace: every mount read-only, then the state directory writable.
  cat >"$work/sandbox.sh" <<EOF
set -e
mount --make-rprivate /
for mp in \$(awk '{print \$2}' /proc/self/mounts | sort -u); do
  case \$mp in /proc|/proc/*|/sys|/sys/*|/dev|/dev/*) continue;; esac
  mount -o remount,bind,ro "\$mp" 2>/dev/null || mount --bind -o ro "\$mp" "\$mp" 2>/dev/null || true
done
mount --bind "$state" "$state"
mount -o remount,bind,rw "$state"
touch /usr/ingero-ro-probe 2>/dev/null && { echo "root file system is writable"; exit 9; }
exec setpriv --bounding-set $bounding --inh-caps $bounding --ambient-caps $bounding -- \\
  /usr/bin/ingero $execstart --db "$state/ingero.db" \\
  --prometheus "" --duration 60s -q -- $WORKLOAD
EOF
  rm -f /usr/ingero-ro-probe
  unshare --mount bash "$work/sandbox.sh" >"$work/trace.log" 2>&1 || {
    cat "$work/trace.log"
    fail "ingero trace under the unit's sandbox"
  }
  calls=$(/usr/bin/ingero query --db "$state/ingero.db" --json \
    "SELECT count(*) AS n FROM calls WHERE op = 'cudaMalloc'" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["n"])')
  echo "cudaMalloc calls traced under the sandbox: $calls"
  aside=$(ls "$state"/ingero.db.schema9-* 2>/dev/null)
  [[ -n $aside && $(sha256sum <"$aside") == "$older_sum" ]] || {
    cat "$work/trace.log"
    fail "the earlier ingero's trace was not moved aside whole: ${aside:-none}"
  }
  grep -q "moved aside to $aside" "$work/trace.log" || fail "the move was not said: $(cat "$work/trace.log")"
  [[ $calls == "${INGERO_PKG_EXPECT_CALLS:-}" ]] || {
    cat "$work/trace.log"
    fail "expected ${INGERO_PKG_EXPECT_CALLS:-?} cudaMalloc calls, got $calls"
  }
else
  trace_skipped=1
fi

echo "== dpkg --purge"
# The service's trace file (its StateDirectory) goes with a purge, as deploy.md says.
state_dir_was_there=0
[[ -e /var/lib/ingero ]] && state_dir_was_there=1
if ((!state_dir_was_there)); then mkdir -p /var/lib/ingero && : >/var/lib/ingero/ingero.db; fi
dpkg_locked --purge ingero >/dev/null || fail "dpkg --purge"
installed=0
if ((!state_dir_was_there)); then [[ ! -e /var/lib/ingero ]] || fail "/var/lib/ingero is still there after purge"; fi
for f in /usr/bin/ingero /lib/systemd/system/ingero.service /etc/ingero/ingero.toml /usr/share/doc/ingero; do
  [[ ! -e $f ]] || fail "$f is still there after purge"
done
((trace_skipped == 0)) || skip_or_fail "no CUDA toolkit: nothing was traced under the unit's sandbox"
echo "PASS"
