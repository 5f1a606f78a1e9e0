"""An opt-in record of what each segment file had on disk after its last fsync, for power-loss
tests: with ``TRIBUTARY_TEST_FSYNC_JOURNAL=<path>`` in a broker's environment, every segment
fsync appends ``<segment path> <size>`` (the size read before the fsync, so every byte below it
is durable). A test then emulates a power cut by cutting each segment to its last recorded size
(the page cache that a killed process leaves behind is exactly what a power cut would lose).
Like the loader's TRIBUTARY_LOADER_TEST_KILL_AT, it changes nothing when the variable is unset.
"""

from __future__ import annotations

import os
import threading

JOURNAL_ENV = "TRIBUTARY_TEST_FSYNC_JOURNAL"
_PATH = os.environ.get(JOURNAL_ENV)
_LOCK = threading.Lock()


def enabled() -> bool:
    return _PATH is not None


def record(path: str, size: int) -> None:
    """Note that `path` had `size` bytes on disk (called after a successful fsync)."""
    if _PATH is None:
        return
    with _LOCK, open(_PATH, "a") as journal:
        journal.write(f"{path} {size}\n")
