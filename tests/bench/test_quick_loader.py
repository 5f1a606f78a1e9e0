"""bench_loader's smoke run, with ``--long`` only: it starts Spark (quick.LONG_ONLY). A file of
its own, in the suite's ``spark`` group (tests/fixtures/xdist.py), so that it never runs beside
another Spark JVM."""

from __future__ import annotations

from .quick import run_quick, skip_unless_long


def test_quick_run(long_run: bool) -> None:
    skip_unless_long("bench_loader", long_run)
    run_quick("bench_loader", r"^ratio 200 B: local\[2\] per core vs baseline \d+\.\d\dx")
