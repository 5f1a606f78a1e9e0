"""A test hook: ``TRIBUTARY_CLEANER_TEST_KILL_AT=<phase>`` kills the broker with SIGKILL when a
clean reaches that phase, so that a test cuts a clean at an exact point while the real code runs.

Phases, in order: ``map-built`` (the key map of the dirty part is built), ``cleaned-written``
(the cleaned segments are written and fsynced under ``.cleaned`` names), ``swap-committed``
(the first cleaned segment's ``.log.swap`` exists: the commit point), ``old-deleted`` (the
segments it replaces are removed), ``log-renamed`` (its ``.log`` has its final name, its
companions not yet), ``swapped`` (every cleaned segment is in place, the checkpoint not yet
written), ``checkpointed``.

The first two are reached in the cleaner's worker process (or thread): there the hook kills the
broker (its parent) and then itself, as a broker killed mid-clean loses both.

``TRIBUTARY_CLEANER_TEST_KILL_AT=@<path>`` arms the hook with the phase the file holds, read
each time a phase is reached (an empty or missing file: disarmed), so that a test can arm and
disarm a running broker without restarting it.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

KILL_ENV = "TRIBUTARY_CLEANER_TEST_KILL_AT"
#: Set by the broker for its worker processes: the pid the hook kills first.
BROKER_PID_ENV = "TRIBUTARY_CLEANER_BROKER_PID"

PHASES = ("map-built", "cleaned-written", "swap-committed", "old-deleted", "log-renamed", "swapped", "checkpointed")


def armed() -> str | None:
    """The phase the hook kills at, if any."""
    value = os.environ.get(KILL_ENV)
    if value is None or not value.startswith("@"):
        return value
    try:
        return Path(value[1:]).read_text().strip() or None
    except OSError:
        return None


def reached(phase: str) -> None:
    if armed() != phase:
        return
    broker = os.environ.get(BROKER_PID_ENV)
    if broker is not None and int(broker) != os.getpid():
        os.kill(int(broker), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
