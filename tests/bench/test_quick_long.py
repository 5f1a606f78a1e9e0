"""The smoke runs that need long set-ups (several clusters, consumer groups settling): with
``--long`` only (quick.LONG_ONLY says why for each). bench_mirror's and bench_mirror_link's are
in tests/bench/test_bench_mirror.py, which checks their JSON too."""

from __future__ import annotations

import pytest

from .quick import run_quick, skip_unless_long

#: bench module -> a regular expression (multi-line) that one of its ratio lines matches.
RATIO_LINES = {
    # classic eager against KIP-848, per change
    "bench_groups": r"^join\s+.*\d+\.\dx\s+\d+\.\dx$",
    "bench_replication": r"^acks=all, RF 3\s+[\d,]+\s+[\d.]+\s+\d+\.\d\dx",
}


@pytest.mark.parametrize("bench", sorted(RATIO_LINES))
def test_quick_run(bench: str, long_run: bool) -> None:
    skip_unless_long(bench, long_run)
    run_quick(bench, RATIO_LINES[bench])
