#!/usr/bin/env bash
# The command the device runs for docs/performance.md section 8, from the bundle that
# scripts/scaleout_bundle.sh made (it copies this script beside bundle.tar.xz):
#   bash scaleout-bundle/scaleout_device.sh [BUDGET_S] [options of python -m bench scaleout ...]
# Unpacks the bundle into $WORK, starts PostgreSQL 15 (as an unprivileged user, on 127.0.0.1:$PGPORT,
# its defaults but jit off) and Redis, runs `python -m bench scaleout` within BUDGET_S seconds in all,
# and leaves in $OUT: scaleout.json, scaleout.png, scaleout.log and scaleout.tar.gz (results and logs).
set -uo pipefail

STARTED=$(date +%s)
HERE=$(cd "$(dirname "$0")" && pwd)
BUDGET=${1:-540}
shift || true
WORK=${SCALEOUT_WORK:-/tmp/scaleout}
OUT=${OUT:-$WORK/out}
PGPORT=${PGPORT:-5432}
REDISPORT=${REDISPORT:-6379}
export PATH="$PATH:/usr/sbin:/sbin"
mkdir -p "$WORK" "$OUT"
chmod 755 "$WORK"
exec > >(tee -a "$OUT/scaleout.log") 2>&1

echo "== $(date -u '+%F %T UTC') on $(nproc) cores, $(free -g | awk '/^Mem/ {print $2}') GiB, kernel $(uname -r)"
tar -C "$WORK" -xJf "$HERE/bundle.tar.xz" ||
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$HERE/bundle.tar.xz" "$WORK" ||
    exit 1
chmod 755 "$WORK" # the archive's root entry carries its staging folder's mode
# SOURCE_TARBALL (a `git archive` of another commit, gzipped) replaces the bundle's source: an A/B of two
# commits on one device with one bundle.
if [ -n "${SOURCE_TARBALL:-}" ]; then
    rm -rf "$WORK/src" && mkdir -p "$WORK/src" && tar -C "$WORK/src" -xzf "$SOURCE_TARBALL" || exit 1
    echo "${SOURCE_COMMIT:-another commit}" >"$WORK/src/COMMIT"
fi
echo "unpacked in $(($(date +%s) - STARTED)) s; project at $(cat "$WORK/src/COMMIT")"
LIBS="$WORK/python/lib:$WORK/lib"
PY="$WORK/python/bin/python3"
PGBIN=$(dirname "$(find "$WORK/pg" -name initdb -type f | head -1)")
if [ ! -e /usr/share/zoneinfo/UTC ] && [ -w /usr/share ]; then
    mkdir -p /usr/share/zoneinfo && cp -r "$WORK/zoneinfo/." /usr/share/zoneinfo/
fi

# PostgreSQL refuses to run as root.
AS=()
if [ "$(id -u)" = 0 ]; then
    OWNER=$(id -u ubuntu >/dev/null 2>&1 && echo ubuntu || echo nobody)
    AS=(runuser -u "$OWNER" --)
    mkdir -p "$WORK/pgdata" "$WORK/pgrun" && chown "$OWNER" "$WORK/pgdata" "$WORK/pgrun"
fi
"${AS[@]}" env LD_LIBRARY_PATH="$LIBS" TZ=UTC "$PGBIN/initdb" -D "$WORK/pgdata" -U postgres --auth=trust \
    --no-locale -E UTF8 >"$WORK/initdb.log" 2>&1 || { cat "$WORK/initdb.log"; exit 1; }
"${AS[@]}" env LD_LIBRARY_PATH="$LIBS" "$PGBIN/pg_ctl" -D "$WORK/pgdata" -l "$WORK/pgrun/postgresql.log" -w \
    -o "-p $PGPORT -c listen_addresses=127.0.0.1 -c unix_socket_directories=$WORK/pgrun -c jit=off" start ||
    { cat "$WORK/pgrun/postgresql.log"; exit 1; }
env LD_LIBRARY_PATH="$LIBS" "$WORK/redis/redis-server" --port "$REDISPORT" --bind 127.0.0.1 --save '' \
    --appendonly no --daemonize yes --logfile "$WORK/redis.log" || exit 1
sleep 1
echo "PostgreSQL and Redis up after $(($(date +%s) - STARTED)) s"

LEFT=$((BUDGET - ($(date +%s) - STARTED) - 25))
(
    cd "$WORK/src" &&
        env LD_LIBRARY_PATH="$LIBS" PATH="$WORK/python/bin:$PATH" PYTHONUNBUFFERED=1 \
            PYTHONPATH="$WORK/src/protocol:$WORK/src/agent:$WORK/src" \
            timeout "$LEFT" "$PY" -m bench scaleout --host "postgres://postgres@127.0.0.1:$PGPORT" \
            --redis "redis://127.0.0.1:$REDISPORT/0" --budget $((LEFT - 10)) --out "$WORK/results" "$@"
)
echo "bench exited $? after $(($(date +%s) - STARTED)) s"

cp "$WORK/results/scaleout.json" "$WORK/results/scaleout.png" "$OUT/" 2>/dev/null
cp "$WORK/pgrun/postgresql.log" "$WORK/redis.log" "$WORK/results/" 2>/dev/null
cp -r "$WORK/src/bench/results/logs" "$WORK/results/service-logs" 2>/dev/null
tar -C "$WORK" -czf "$OUT/scaleout.tar.gz" results
"${AS[@]}" env LD_LIBRARY_PATH="$LIBS" "$PGBIN/pg_ctl" -D "$WORK/pgdata" -m fast stop >/dev/null
ls -la "$OUT"
