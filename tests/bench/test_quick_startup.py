"""bench_startup's smoke run: the CPU of a process's start-up against a bare interpreter's (one
ZooKeeper, a broker started once; one round)."""

from __future__ import annotations

from .quick import run_quick


def test_quick_run() -> None:
    run_quick("bench_startup", r"^broker start\s+[\d.]+\s+[\d.]+\s+[\d.]+x$", "--repeat", "1")
