#!/usr/bin/env bash
# Set up (scripts/setup.sh), then every check CI runs: ruff, mypy, import-linter
# and the pytest suite. Extra arguments go to pytest.
#
# pytest runs on TRIBUTARY_TEST_WORKERS workers (pytest-xdist; 3 unless set): most tests
# wait on brokers, ZooKeeper and Spark rather than compute (the whole suite costs about as
# many CPU-seconds as it takes seconds on three workers), so three workers keep two cores busy. Each test file runs whole on one worker (docs/testing.md).
# `bash scripts/test.sh -n 0` runs the suite serially, in one process.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

echo "== ruff";         .venv/bin/ruff check .
echo "== mypy";         .venv/bin/mypy
echo "== import-linter"; .venv/bin/lint-imports --no-cache
echo "== pytest"
status=0
.venv/bin/pytest -n "${TRIBUTARY_TEST_WORKERS:-3}" --dist loadfile --durations=30 "$@" || status=$?
# pytest exits 5 when it collected no tests: that is a failure here, not a pass.
if [ "$status" -eq 5 ]; then
    echo "pytest collected no tests" >&2
fi
exit "$status"
