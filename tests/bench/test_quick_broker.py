"""bench_broker's smoke run: Tributary and Tansu, one broker each, on the one produce shape
where Tansu leads (the goal table's line for it)."""

from __future__ import annotations

from .quick import run_quick


def test_quick_run() -> None:
    run_quick("bench_broker", r"^produce-batch50\s+\d+\.\d+x\s+>= \d", "--shapes", "produce-batch50")
