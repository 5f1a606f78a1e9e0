#!/usr/bin/env bash
# Sets up a fresh Debian machine for Tributary: the Debian packages the tests and
# the appliance need, then a virtualenv in .venv with the package and its extras.
# Idempotent: a second run installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages: ZooKeeper (coordination), kcat (interop tests), a JRE for
# ZooKeeper and Spark, and venv support for the system Python.
APT_PACKAGES=(zookeeper kcat default-jre-headless python3-venv chromium)

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
# A JDK already on the machine (Java 17 here) serves ZooKeeper and Spark as well.
if command -v java >/dev/null 2>&1; then
    missing=("${missing[@]/default-jre-headless}")
fi
# A C compiler and Python's headers build the compiled record loops (protocol/records/_speedups.c,
# optional: without them the pure-Python loops run, several times slower per record).
command -v cc >/dev/null 2>&1 || missing+=(gcc)
if [ ! -f "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h" ] \
    && [ "$(command -v python3)" = /usr/bin/python3 ]; then
    missing+=(python3-dev)  # Debian's Python keeps its headers in a package of their own
fi
# python3-venv matters only when the venv module is missing.
if python3 -c "import ensurepip, venv" 2>/dev/null; then
    missing=("${missing[@]/python3-venv}")
fi
read -r -a missing <<<"${missing[*]}"
if ((${#missing[@]})); then
    echo "setup: apt-get install ${missing[*]}"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
    echo "setup: Python >= 3.11 is required, found $(python3 --version)" >&2
    exit 1
}
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test,fast,codecs]'
.venv/bin/python -c 'from tributary.protocol.records.codec import IMPLEMENTATION as i; print(f"setup: record loops: {i}")'
# The package is installed editable, so pip compiled none of its modules; where the environment
# sets PYTHONDONTWRITEBYTECODE (this image does) no process would ever write them either, and
# every broker, mirror and CLI process would compile the whole project again as it starts
# (bench/bench_startup.py says whether the bytecode was cached). Compile it once here.
.venv/bin/python -m compileall -q -j 0 protocol client broker mirror loader deploy testing >/dev/null
