#!/usr/bin/env bash
# The README's main command: from a fresh clone on a fresh Debian machine, set up
# (scripts/setup.sh: Debian packages and .venv), then run the whole job end to end on
# this machine: three datacenters on loopback addresses (deploy/examples/local.toml),
# an activity stream into east and west, mirrors into the aggregate, the Spark load
# into ./warehouse, and a summary whose counts must agree at every stage (the exit
# status is 1 when they do not). Extra arguments go to `tributary demo`, e.g.
#   bash scripts/demo.sh --events 500000
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/tributary demo --topology deploy/examples/local.toml --warehouse ./warehouse "$@"
