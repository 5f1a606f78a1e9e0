"""A test hook: ``TRIBUTARY_LOADER_TEST_KILL_AT=<phase>`` makes the driver kill itself
with SIGKILL (and its process group, JVM included, when it leads one) on reaching
that phase, so tests can cut a run at an exact point while the real code path runs.

Phases: ``planned`` (plan persisted), ``read:<task>`` (in the executor, see
read.py), ``staged`` (Parquet staged, publish list not yet written),
``publish:<n>`` (after n files were published), ``commit`` (manifest written,
commit not yet created), ``committed`` (commit created, staging not cleaned).
"""

from __future__ import annotations

import os
import signal

KILL_ENV = "TRIBUTARY_LOADER_TEST_KILL_AT"
DRIVER_PID_ENV = "TRIBUTARY_LOADER_DRIVER_PID"


def kill_process_tree(pid: int) -> None:
    """SIGKILL ``pid``'s process group if ``pid`` leads it, else ``pid`` alone."""
    if os.getpgid(pid) == pid:
        os.killpg(pid, signal.SIGKILL)
    os.kill(pid, signal.SIGKILL)


def reached(phase: str) -> None:
    if os.environ.get(KILL_ENV) == phase:
        kill_process_tree(os.getpid())
