#!/usr/bin/env bash
# Packs what `python -m bench scaleout` needs on a bare machine that can download nothing (the
# 16-core device, docs/performance.md section 8) into DEST (default ./scaleout-bundle, gitignored):
#   scaleout_device.sh   the command the device runs (a copy of scripts/scaleout_device.sh)
#   bundle.tar.xz        python/  this machine's CPython (its .venv's base), the stdlib without its tests,
#                                 and the .venv's runtime site-packages (no dev tools, no editable links),
#                                 plus matplotlib's wheels from WHEELS if given (about 20 MiB more: over
#                                 the 64 MiB a device call carries, so the PNG is drawn from scaleout.json here)
#                        pg/      PostgreSQL 15's server binaries, modules and share/ at their Debian paths
#                                 under pg/ (PostgreSQL finds share/ and lib/ relative to its binary)
#                        redis/   redis-server
#                        lib/     every shared library those need (ldd), but glibc's own
#                        src/     the project at HEAD (git archive), which the bench runs from
# The device has another glibc (2.39) and Python (3.12): carrying the interpreter keeps the .venv's
# compiled wheels (cp311) usable, and glibc is backward compatible, so glibc is the one thing not carried.
# Usage: scripts/scaleout_bundle.sh [DEST] [WHEELS]   (WHEELS: a folder of matplotlib's cp311 wheels)
set -euo pipefail

ROOT=$(git rev-parse --show-toplevel)
DEST=${1:-$ROOT/scaleout-bundle}
WHEELS=${2:-}
VENV=${VENV:-/work/main/.venv}
PYTHON_HOME=$(sed -n 's/^home = //p' "$VENV/pyvenv.cfg")/..
PYTHON_HOME=$(cd "$PYTHON_HOME" && pwd)
PG_BIN=$(pg_config --bindir)
PG_LIB=$(pg_config --pkglibdir)
PG_SHARE=$(pg_config --sharedir)
VERSION=$("$VENV/bin/python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
chmod 755 "$STAGE"

echo "python: $PYTHON_HOME ($VERSION); PostgreSQL: $PG_BIN; staging in $STAGE"
mkdir -p "$STAGE"/{python/bin,python/lib,pg,redis,lib,src}

# The interpreter and its stdlib; site-packages are the .venv's, less what only development needs.
cp -a "$PYTHON_HOME/bin/python$VERSION" "$STAGE/python/bin/"
cp -a "$PYTHON_HOME"/lib/libpython"$VERSION"*.so* "$STAGE/python/lib/" 2>/dev/null || true
tar -C "$PYTHON_HOME/lib" -cf - --exclude="python$VERSION/test" --exclude="python$VERSION/site-packages" \
    --exclude="python$VERSION/idlelib" --exclude="python$VERSION/tkinter" --exclude="python$VERSION/ensurepip" \
    --exclude="python$VERSION/lib2to3" --exclude='__pycache__' --exclude='_tkinter*' --exclude="python$VERSION/config-*" "python$VERSION" |
    tar -C "$STAGE/python/lib" -xf -
SITE="$STAGE/python/lib/python$VERSION/site-packages"
mkdir -p "$SITE"
DEV_ONLY='mypy* mypyc* *__mypyc* selenium* schemathesis* hypothesis* trio* pytest* _pytest* py.py ruff* *stubs*
  types_* pip pip-* setuptools* _distutils_hack distutils-precedence.pth __editable__* benchhub-* benchhub_agent-*
  benchhub_protocol-* jsonschema_rs* markdown_it* mdurl* wsproto* outcome* sortedcontainers* harfile* pyrate_limiter*
  werkzeug* graphql* starlette_testclient* hypothesis_graphql* junit_xml* pluggy* iniconfig* pathspec* librt*
  numpy* gguf* plotly/labextension plotly/package_data/widgetbundle.js gemma3_* py_spy*'
EXCLUDES=()
for pattern in $DEV_ONLY; do EXCLUDES+=(--exclude="./$pattern"); done
tar -C "$VENV/lib/python$VERSION/site-packages" -cf - "${EXCLUDES[@]}" --exclude='__pycache__' . |
    tar -C "$SITE" -xf -
if [ -n "$WHEELS" ]; then
    "$VENV/bin/python" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" --upgrade \
        $(ls "$WHEELS"/*.whl | grep -v -E '/(numpy|packaging|tzdata|python_dateutil)-')
fi
# Entry points the production commands are started by (bench/stack.py runs them from PATH).
for tool in gunicorn celery; do
    printf '#!/bin/sh\nexec "$(dirname "$0")/python%s" -m %s "$@"\n' "$VERSION" "$tool" >"$STAGE/python/bin/$tool"
    chmod +x "$STAGE/python/bin/$tool"
done
ln -s "python$VERSION" "$STAGE/python/bin/python3"
ln -s "python$VERSION" "$STAGE/python/bin/python"

# PostgreSQL at its Debian paths under pg/, without the JIT (bench runs with jit = off).
mkdir -p "$STAGE/pg$PG_BIN" "$STAGE/pg$PG_LIB" "$STAGE/pg$PG_SHARE"
for tool in postgres initdb pg_ctl psql; do cp -a "$PG_BIN/$tool" "$STAGE/pg$PG_BIN/"; done
tar -C "$PG_LIB" -cf - --exclude='llvmjit*' --exclude=bitcode . | tar -C "$STAGE/pg$PG_LIB" -xf -
cp -a "$PG_SHARE/." "$STAGE/pg$PG_SHARE/"
cp -L "$(command -v redis-server)" "$STAGE/redis/redis-server"
# PostgreSQL (Debian) reads time zones from the system's tzdata; a bare machine may have none.
mkdir -p "$STAGE/zoneinfo/Etc" && cp -L /usr/share/zoneinfo/UTC "$STAGE/zoneinfo/" && cp -L /usr/share/zoneinfo/UTC "$STAGE/zoneinfo/Etc/"

# Every library the binaries and extension modules load, but glibc's (the device's own is newer).
GLIBC='^(libc|libm|libpthread|libdl|librt|libresolv|libutil|libanl|libmvec|libBrokenLocale|libnss_.*|ld-linux-x86-64)\.so'
{ find "$STAGE/python" "$STAGE/pg" "$STAGE/redis" -type f \( -name '*.so*' -o -perm -u+x \) -print0 |
    xargs -0 -r ldd 2>/dev/null || true; } | awk '/=> \// {print $3}' | sort -u | while read -r library; do
    name=$(basename "$library")
    case "$library" in "$STAGE"/*) continue ;; esac
    if [[ ! $name =~ $GLIBC ]] && [ ! -e "$STAGE/python/lib/$name" ]; then cp -L "$library" "$STAGE/lib/$name"; fi
done

# The project as committed (the device runs from it; its own checkout may be older).
git -C "$ROOT" archive HEAD | tar -C "$STAGE/src" -xf -
git -C "$ROOT" log -1 --format='%H %s' >"$STAGE/src/COMMIT"

mkdir -p "$DEST"
rm -f "$DEST/bundle.tar.xz"
tar -C "$STAGE" -cf - . | xz -T0 -6 >"$DEST/bundle.tar.xz"
cp "$ROOT/scripts/scaleout_device.sh" "$DEST/scaleout_device.sh"
du -sh "$STAGE"/* "$DEST"/*
