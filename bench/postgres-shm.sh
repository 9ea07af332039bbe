#!/bin/bash
# bench/postgres-shm.sh: PostgreSQL under the shim in a container's
# 64 MiB /dev/shm (issue: the program's own shared memory must not fail).
# 95 clients hold connections (95 backends, each a fork of the postmaster
# with a region of its own), then one more runs a parallel hash join,
# whose hash table is dynamic shared memory in /dev/shm. Run without the
# shim, then with it, each in a mount namespace of its own with a 64 MiB
# tmpfs on /dev/shm, as Docker, Podman and Kubernetes give a container.
# Needs root and Debian's postgresql (15); prints one line per run:
#   <mode>: join ok|failed, <regions> regions hold <KiB> KiB, peak <KiB> KiB of 64 MiB, workers <n>, hash <kB>
# ROWS (default 1000000) sizes the joined table.
set -euo pipefail
lib=${1:-$(cd "$(dirname "$0")/.." && pwd)/bin/libheap.so}
PG=${PG:-/usr/lib/postgresql/15/bin}
[ "$(id -u)" = 0 ] || { echo "postgres-shm.sh: needs root (a mount namespace, the postgres user)" >&2; exit 1; }
[ -x "$PG/postgres" ] || { echo "postgres-shm.sh: no $PG/postgres: apt-get install postgresql" >&2; exit 1; }
[ -f "$lib" ] || { echo "postgres-shm.sh: no $lib: make all" >&2; exit 1; }

# one run, in a private mount namespace: $1 the mode's name, $2 the shim or ""
one() {
	unshare -m bash -s "$1" "$2" "$PG" "${ROWS:-1000000}" <<'RUN'
set -euo pipefail
mode=$1 shim=$2 PG=$3 rows=$4
mount -t tmpfs -o size=64m,mode=1777 tmpfs /dev/shm
d=$(mktemp -d /tmp/heapline-pg.XXXXXX)
chown postgres "$d"
as_pg() { runuser -u postgres -- "$@"; }
psql() { as_pg "$PG/psql" -h "$d" -U postgres -qAt "$@"; }
used() { df --output=used -k /dev/shm | tail -1 | tr -d ' '; }
trap 'as_pg "$PG/pg_ctl" -D "$d/data" -w stop -m immediate >/dev/null 2>&1 || true; rm -rf "$d"' EXIT
as_pg "$PG/initdb" -D "$d/data" -A trust -U postgres >/dev/null
cat >>"$d/data/postgresql.conf" <<C
listen_addresses = ''
unix_socket_directories = '$d'
max_connections = 110
max_parallel_workers_per_gather = 4
parallel_setup_cost = 0
parallel_tuple_cost = 0
work_mem = '256MB'
shared_buffers = '32MB'
C
env ${shim:+LD_PRELOAD=$shim HEAPLINE_SUMMARY=0} runuser -u postgres -- "$PG/pg_ctl" -D "$d/data" -l "$d/log" -w start >/dev/null
psql -c "CREATE TABLE t AS SELECT g AS id, md5(g::text) AS pad FROM generate_series(1, $rows) g; ANALYZE t;"
echo "SELECT pg_sleep(600);" >"$d/idle.sql"
chmod 644 "$d/idle.sql"
as_pg "$PG/pgbench" -h "$d" -U postgres -n -c 95 -j 4 -t 1 -f "$d/idle.sql" postgres >"$d/idle.out" 2>&1 &
i=0
until [ "$(psql -c "SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(600);'")" = 95 ]; do
	i=$((i + 1))
	[ $i -lt 600 ] || { echo "$mode: the 95 clients never connected" >&2; exit 1; }
	sleep 0.1
done
regions=$(find /dev/shm -maxdepth 1 -name 'heapline.*' | wc -l)
held=$(find /dev/shm -maxdepth 1 -name 'heapline.*' -print0 | du -ck --files0-from=- 2>/dev/null | tail -1 | cut -f1)
# the peak of /dev/shm's use while the join runs, sampled every 10 ms
( peak=0; while [ ! -e "$d/done" ]; do u=$(used); [ "$u" -le "$peak" ] || { peak=$u; echo "$peak" >"$d/peak"; }; sleep 0.01; done ) &
mon=$!
ok=ok
psql -c "EXPLAIN (ANALYZE, COSTS OFF) SELECT count(*) FROM t a JOIN t b USING (id);" >"$d/join.out" 2>&1 || ok=failed
touch "$d/done"
wait $mon
grep -q 'Parallel Hash Join' "$d/join.out" || [ $ok = failed ] || { echo "$mode: no parallel hash join in the plan" >&2; cat "$d/join.out" >&2; exit 1; }
workers=$(grep -o 'Workers Launched: [0-9]*' "$d/join.out" | head -1 | grep -o '[0-9]*$' || echo 0)
hash=$(grep -o 'Memory Usage: [0-9]*kB' "$d/join.out" | head -1 | grep -o '[0-9]*kB' || echo -)
echo "$mode: join $ok, $regions regions hold $held KiB, peak $(cat "$d/peak") KiB of 65536, workers $workers, hash $hash"
[ $ok = ok ] || grep ERROR "$d/join.out" >&2
psql -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(600);'" >/dev/null
wait
RUN
}

one "without the shim" ""
one "with the shim" "$lib"
