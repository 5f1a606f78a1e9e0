"""bench_transactions' smoke run: three brokers, transactional producers against an idempotent
one."""

from __future__ import annotations

from .quick import run_quick


def test_quick_run() -> None:
    run_quick("bench_transactions", r"^transactional, 100/txn\s+[\d,]+\s+\d+\.\d\dx")
