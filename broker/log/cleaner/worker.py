"""The cleaner's worker process: ``python -m tributary.broker.log.cleaner.worker``.

It reads one :class:`~.clean.CleanRequest` (JSON, one line) from stdin, runs :func:`~.clean.clean`
and writes the :class:`~.clean.CleanResult` (JSON) to stdout. Decoding, filtering and
recompressing records is CPU work; in a process of its own it never holds the broker's
interpreter lock, so the broker's requests never wait for it (in a thread they would, for up to
the interpreter's switch interval each time). It runs in Linux's SCHED_IDLE class, or at the
lowest priority where that is refused, for the same reason: on a machine with few cores a clean
at nice 19 still doubled produce p99 (bench_cleaner), and SCHED_IDLE weighs a fifth of nice 19.
The broker keeps stdin open: when it closes (the broker stopped or died) the worker exits at
once, leaving only ``.cleaned`` files, which the log removes when it next opens.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading

from tributary.broker.log.cleaner.clean import CleanRequest, clean

#: Added to the worker's niceness: the broker's own threads come first.
NICENESS = 19


def _yield_to_the_broker() -> None:
    """Run only on what the broker leaves of the CPU."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        with contextlib.suppress(OSError):
            os.nice(NICENESS)


def _read_line(fd: int) -> bytes:
    """One line from ``fd``, read unbuffered (a buffered stdin would be shared with the watcher)."""
    line = bytearray()
    while not line.endswith(b"\n"):
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        line += chunk
    return bytes(line)


def _exit_when_orphaned(fd: int) -> None:
    while os.read(fd, 1 << 16):  # b"" at EOF: the broker is gone
        pass
    os._exit(3)


def main() -> int:
    stdin = sys.stdin.fileno()
    line = _read_line(stdin)
    if not line.strip():
        return 2
    request = CleanRequest.from_json(line)
    threading.Thread(target=_exit_when_orphaned, args=(stdin,), name="orphan-watch", daemon=True).start()
    _yield_to_the_broker()
    result = clean(request)
    sys.stdout.buffer.write(result.to_json() + b"\n")
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stderr.flush()
    os._exit(code)  # not through interpreter shutdown, where the watcher still blocks in read
