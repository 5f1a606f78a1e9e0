"""One load at a time per warehouse: a lease in the state directory, not a local lock file.

Two schedulers (two cron hosts, a cron job and an operator) must never load the same
warehouse at once: they would plan the same offsets. The commit itself is already
exclusive (``offsets/<run>.json`` is created once), so a second loader could never commit a
run twice; the lease makes it stop before it reads anything, and says who holds the warehouse.

The lease is ``_tributary/lease``, created exclusively (the NameNode's atomic create on
HDFS, ``O_EXCL`` on ``file://``), holding who took it. Its holder renews it by setting the
file's modification time every ``ttl / 4``; a lease not renewed for ``ttl`` is stale. A
lease is also stale at once when it names a process of this very host that is gone (a
loader killed with -9 and started again does not wait out the TTL); the process's start
time guards against a recycled pid. Taking over a stale lease renames it aside first:
renames are atomic, so of two loaders that both found it stale only one moves it.
Before the commit the holder checks the lease is still its own.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tributary.loader.errors import LoadError
from tributary.loader.hadoop import FileExists, HadoopFS

log = logging.getLogger("tributary.load")

LEASE_FILE = "_tributary/lease"
#: A holder that stops renewing loses the lease after this long (the ``lease-timeout`` setting).
DEFAULT_TTL_S = 120.0


class LeaseHeldError(LoadError):
    """Another loader holds the warehouse."""


@dataclass(frozen=True, slots=True)
class Holder:
    id: str
    host: str
    pid: int
    #: The process's start time in clock ticks since boot (/proc/PID/stat), against pid reuse.
    started: int | None
    acquired_at: float

    def to_json(self) -> bytes:
        fields = {
            "id": self.id,
            "host": self.host,
            "pid": self.pid,
            "started": self.started,
            "acquired_at": self.acquired_at,
        }
        return (json.dumps(fields, sort_keys=True) + "\n").encode()

    @staticmethod
    def from_json(data: bytes) -> Holder | None:
        try:
            fields: dict[str, Any] = json.loads(data)
            return Holder(
                str(fields["id"]),
                str(fields["host"]),
                int(fields["pid"]),
                None if fields.get("started") is None else int(fields["started"]),
                float(fields["acquired_at"]),
            )
        except (ValueError, KeyError, TypeError):
            return None  # cut short by a crash between create and close: nobody's

    def describe(self) -> str:
        since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.acquired_at))
        return f"pid {self.pid} on {self.host}, since {since}"


def process_start(pid: int) -> int | None:
    """The start time of ``pid`` (clock ticks since boot), or None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: fields after its last ')'.
    return int(stat.rsplit(")", 1)[1].split()[19])


def myself() -> Holder:
    return Holder(uuid.uuid4().hex, socket.gethostname(), os.getpid(), process_start(os.getpid()), time.time())


def is_stale(holder: Holder | None, renewed_at: float, now: float, ttl: float, host: str) -> bool:
    """Whether a lease may be taken over: unreadable, not renewed within ``ttl``, or held by
    a process of this host that no longer runs."""
    if holder is None or now - renewed_at >= ttl:
        return True
    if holder.host == host:
        return holder.started is None or process_start(holder.pid) != holder.started
    return False


class Lease:
    """The warehouse's lease, held from :meth:`acquire` to :meth:`release`, renewed meanwhile."""

    def __init__(self, fs: HadoopFS, ttl: float = DEFAULT_TTL_S) -> None:
        self.fs = fs
        self.ttl = ttl
        self.uri = fs.uri(LEASE_FILE)
        self.holder = myself()
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def acquire(self) -> None:
        """Take the lease, or raise LeaseHeldError naming the loader that holds it."""
        for _ in range(2):
            try:
                self._create()
            except FileExists:
                pass
            else:
                return
            current = Holder.from_json(self.fs.read_bytes(self.uri)) if self.fs.exists(self.uri) else None
            renewed = self.fs.modification_time(self.uri) if self.fs.exists(self.uri) else 0.0
            if not is_stale(current, renewed, time.time(), self.ttl, self.holder.host):
                assert current is not None
                raise LeaseHeldError(
                    f"another load holds the warehouse {self.fs.root} ({current.describe()}); "
                    f"its lease expires {self.ttl:.0f} s after its last renewal"
                )
            # Move the stale lease aside; of two loaders racing here only one rename succeeds,
            # and the loser finds the winner's fresh lease on its next turn.
            aside = f"{self.uri}.stale-{self.holder.id}"
            try:
                self.fs.rename(self.uri, aside)
            except OSError:
                continue
            log.info("took over a stale lease (%s)", current.describe() if current else "unreadable")
            self.fs.delete(aside)
        raise LeaseHeldError(f"another load took the warehouse {self.fs.root} at the same moment")

    def _create(self) -> None:
        self.fs.create_exclusive(self.uri, self.holder.to_json())
        self.fs.set_modification_time(self.uri, time.time())
        self._stop.clear()
        self._renewer = threading.Thread(target=self._renew, name="tributary-lease", daemon=True)
        self._renewer.start()

    def _renew(self) -> None:
        while not self._stop.wait(self.ttl / 4):
            try:
                self.fs.set_modification_time(self.uri, time.time())
            except Exception as exc:  # py4j: the JVM's IOException; the check before commit decides
                log.warning("cannot renew the lease %s: %s", self.uri, str(exc).splitlines()[0])

    def check(self) -> None:
        """Before the commit: the lease must still be ours (it was not taken over while we stalled)."""
        current = Holder.from_json(self.fs.read_bytes(self.uri)) if self.fs.exists(self.uri) else None
        if current is None or current.id != self.holder.id:
            taken = f" by {current.describe()}" if current else ""
            raise LoadError(f"lost the lease on {self.fs.root}{taken}: not committing")

    def release(self) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
            self._renewer = None
        try:
            current = Holder.from_json(self.fs.read_bytes(self.uri)) if self.fs.exists(self.uri) else None
            if current is not None and current.id == self.holder.id:
                self.fs.delete(self.uri)
        except Exception as exc:  # the lease will go stale by itself; say so, do not fail the run
            log.warning("cannot release the lease %s: %s", self.uri, str(exc).splitlines()[0])
