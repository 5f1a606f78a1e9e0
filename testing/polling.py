"""Waiting for a condition a test cannot be told about: another process's state, a broker's view."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def eventually(
    probe: Callable[[], T | None],
    timeout: float,
    what: str,
    *,
    interval: float = 0.05,
    detail: Callable[[], str] | None = None,
) -> T:
    """The first value of ``probe`` that is neither None nor False, asked every ``interval``
    seconds; after ``timeout`` seconds an AssertionError naming ``what``, the last value and
    ``detail()`` (a log tail, say)."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value is not None and value is not False:
            return value
        if time.monotonic() > deadline:
            more = f"\n{detail()}" if detail is not None else ""
            raise AssertionError(f"{what}: not within {timeout:g} s (last: {value!r}){more}")
        time.sleep(interval)
