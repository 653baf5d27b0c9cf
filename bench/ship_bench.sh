#!/bin/sh
# Shipping throughput: `ingero ship` of a generated trace (bench/trace_gen: two training ranks,
# calls in blocks, host events between them) to a real local ClickHouse server, and what it
# costs: rows per second of wall time, the shipper's CPU seconds (it is single-threaded: rows
# per CPU second is its rate on one core), the server's CPU seconds, the bytes sent.
#   bench/ship_bench.sh [BUILD_DIR] [EVENTS...]     default: build 1000000
# The server is started here (the Debian package's clickhouse-server, as user clickhouse when
# run as root, in a scratch folder, on free ports) and stopped at the end. With
# INGERO_BASELINE=/path/to/an/older/ingero, the same trace is shipped by that binary too, into
# a database of its own, for a ratio measured in the same run. Nothing here is a timed test.
set -eu
build=${1:-build}
[ $# -gt 0 ] && shift
sizes=${*:-1000000}
dir=${TMPDIR:-/tmp}/ingero-ship-bench
rm -rf "$dir"
mkdir -p "$dir/ch/log" "$dir/ch/data" "$dir/ch/tmp" "$dir/ch/user_files" "$dir/ch/format_schemas"
ports=$(python3 -c 'import socket
ps = []
for _ in range(2):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); ps.append(s); 
print(" ".join(str(s.getsockname()[1]) for s in ps))')
http=${ports% *}
tcp=${ports#* }
cat >"$dir/ch/config.xml" <<EOF
<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>$dir/ch/log/server.log</log><errorlog>$dir/ch/log/error.log</errorlog><size>10M</size><count>1</count></logger>
  <http_port>$http</http_port><tcp_port>$tcp</tcp_port><listen_host>127.0.0.1</listen_host>
  <path>$dir/ch/data/</path><tmp_path>$dir/ch/tmp/</tmp_path>
  <user_files_path>$dir/ch/user_files/</user_files_path>
  <format_schema_path>$dir/ch/format_schemas/</format_schema_path>
  <users_config>$dir/ch/users.xml</users_config>
  <default_profile>default</default_profile><default_database>default</default_database>
  <mark_cache_size>67108864</mark_cache_size><uncompressed_cache_size>67108864</uncompressed_cache_size>
</yandex>
EOF
cat >"$dir/ch/users.xml" <<'EOF'
<?xml version="1.0"?>
<yandex>
  <profiles><default><max_memory_usage>4000000000</max_memory_usage></default></profiles>
  <users><default><password></password><networks><ip>127.0.0.1</ip></networks>
    <profile>default</profile><quota>default</quota></default></users>
  <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors>
    <result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time>
  </interval></default></quotas>
</yandex>
EOF
server=$(command -v clickhouse-server || echo /usr/sbin/clickhouse-server)
start="$server --config-file=$dir/ch/config.xml --daemon --pid-file=$dir/ch/server.pid"
if [ "$(id -u)" = 0 ]; then
  chmod 755 "$dir" && chown -R clickhouse:clickhouse "$dir/ch"
  su -s /bin/sh clickhouse -c "$start"
else
  $start
fi
trap 'kill "$(cat "$dir/ch/server.pid")" 2>/dev/null || true' EXIT
i=0
until curl -sf "http://127.0.0.1:$http/ping" >/dev/null; do
  i=$((i + 1))
  [ $i -lt 300 ] || { echo "clickhouse-server did not start" >&2; exit 1; }
  sleep 0.2
done
printf '%-10s %-9s %9s %8s %10s %9s %12s %11s %9s\n' events shipper rows "wall s" "rows/s" \
  "cpu s" "rows/cpu s" "server cpu" "MiB sent"
for n in $sizes; do
  db="$dir/gen-$n.db"
  "$build/bench/trace_gen" "$db" "$n" >"$dir/gen-$n.json"
  for which in current ${INGERO_BASELINE:+baseline}; do
    bin="$build/app/ingero"
    [ "$which" = baseline ] && bin=$INGERO_BASELINE
    rm -f "$db.ship.lock"
    python3 - "$bin" "$db" "http://127.0.0.1:$http/bench_${which}_$n" \
      "$(cat "$dir/ch/server.pid")" "$n" "$which" <<'PY'
import os, re, resource, subprocess, sys, time
ingero, db, url, server, n, which = sys.argv[1:7]
def server_cpu():
    f = open("/proc/%s/stat" % server).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
c0, t0 = server_cpu(), time.monotonic()
r = subprocess.run(["taskset", "-c", "0", ingero, "ship", "--db", db, "--clickhouse", url],
                   capture_output=True, text=True)
wall, c1 = time.monotonic() - t0, server_cpu()
if r.returncode != 0:
    sys.exit("ship failed: " + r.stdout + r.stderr)
u = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = u.ru_utime + u.ru_stime
m = re.search(r"shipped (\d+) rows .* \((\d+) KiB compressed", r.stdout)
rows, kib = int(m.group(1)), int(m.group(2))
print("%-10s %-9s %9d %8.2f %10.0f %9.2f %12.0f %11.2f %9.1f" % (
    n, which, rows, wall, rows / wall, cpu, rows / cpu, c1 - c0, kib / 1024))
PY
  done
done
