"""bench_enqueue's smoke run: the producer's record path without the network, beside the
floor of an empty coroutine's await (no broker)."""

from __future__ import annotations

from .quick import run_quick


def test_quick_run() -> None:
    run_quick("bench_enqueue", r"^ratio to an empty coroutine's await: enqueue \d+\.\d+x, append \d+\.\d+x$")
