"""The aborted-transaction index of one segment: ``<base offset>.txnindex``, Kafka's format.

Each entry is 34 bytes::

    version int16 (0), producerId int64, firstOffset int64, lastOffset int64, lastStableOffset int64

one per transaction whose ABORT marker lies in the segment: its data is in
[firstOffset, lastOffset) and the marker at lastOffset. ``lastStableOffset`` is the first
offset of the earliest transaction still open when the marker was written (or
lastOffset + 1): an entry at or past a fetch's upper bound proves that every aborted
transaction overlapping the fetch has been seen, so the search stops there.

A read_committed fetch is answered with the entries overlapping the offsets it returns
(:func:`collect_aborted`), so that the client drops those producers' batches itself; the
broker never reads the batches again to do it.

The file is written when a marker is appended (page cache) and fsynced with its segment.
Entries are also kept in memory (aborts are rare and entries small). A segment that recovery
re-reads has its index rebuilt from the log (the log replays its markers); a torn entry at
the end of a trusted file is dropped. The log cleaner, when it rewrites segments, must carry
the entries of the transactions whose markers it keeps into the new segment's index, and drop
an entry together with its marker.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from tributary.broker.log.files import OPEN_FLAGS, unlink_quietly, write_all

log = logging.getLogger(__name__)

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size
_VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    """One segment's aborted transactions, in marker order; the file is opened on first write."""

    __slots__ = ("_dirty", "_fd", "_needs_rewrite", "entries", "path")

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.entries: list[AbortedTxn] = []
        self._fd: int | None = None
        self._dirty = False
        # A write failed: the file is rewritten whole at the next fsync.
        self._needs_rewrite = False
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        whole = len(data) - len(data) % ENTRY_SIZE
        if whole != len(data):
            log.warning("%s: dropping a torn entry at its end", self.path)
        for pos in range(0, whole, ENTRY_SIZE):
            version, *fields = _ENTRY.unpack_from(data, pos)
            if version != _VERSION:
                log.warning("%s: entry at %d has version %d; ignoring the rest", self.path, pos, version)
                break
            self.entries.append(AbortedTxn(*fields))

    def __len__(self) -> int:
        return len(self.entries)

    def append(self, entry: AbortedTxn) -> None:
        """Adds an entry (to the page cache; :meth:`fsync` makes it durable). The entry counts
        at once, even if the disk refuses it: its marker is in the log already, and readers
        must drop the aborted data. The file is then rewritten at the next fsync."""
        self.entries.append(entry)
        self._dirty = True
        try:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | OPEN_FLAGS, 0o644)
            write_all(self._fd, _ENTRY.pack(_VERSION, *entry))
        except OSError as exc:
            log.warning("%s: cannot write an entry (%s); the index is rewritten at the next flush", self.path, exc)
            self._needs_rewrite = True

    def replace(self, entries: Iterable[AbortedTxn]) -> None:
        """The index becomes ``entries`` (recovery rebuilt it, or a truncation cut it)."""
        self.close()
        self.entries = list(entries)
        if not self.entries:
            unlink_quietly(self.path)
            return
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | OPEN_FLAGS, 0o644)
        try:
            write_all(fd, b"".join(_ENTRY.pack(_VERSION, *e) for e in self.entries))
        finally:
            os.close(fd)
        self._dirty = True

    def truncate_to(self, offset: int) -> None:
        """Drops the entries of markers at or after ``offset``."""
        kept = [e for e in self.entries if e.last_offset < offset]
        if len(kept) != len(self.entries):
            self.replace(kept)

    def fsync(self) -> None:
        """May run in a flushing thread while the log's thread appends: it opens a descriptor
        of its own (an fsync through any descriptor syncs the file), so a concurrent
        :meth:`replace` cannot close the one it uses. Cleared first: a racing append sets it again."""
        if not self._dirty:
            return
        self._dirty = False
        if self._needs_rewrite:
            self._needs_rewrite = False
            try:
                self.replace(list(self.entries))
            except OSError:
                self._needs_rewrite = self._dirty = True
                raise
        try:
            fd = os.open(self.path, os.O_RDONLY | OPEN_FLAGS)
        except FileNotFoundError:
            return  # emptied by a truncation meanwhile
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def delete(self) -> None:
        self.close()
        unlink_quietly(self.path)


def collect_aborted(
    indexes: Sequence[TransactionIndex], fetch_offset: int, upper_bound: int
) -> tuple[list[AbortedTxn], bool]:
    """The aborted transactions overlapping [fetch_offset, upper_bound), from the indexes of
    the segments from the one holding ``fetch_offset`` on, in order; and whether the search
    was complete (an entry's last stable offset reached the upper bound) before the last."""
    found: list[AbortedTxn] = []
    for index in indexes:
        for entry in index.entries:
            if entry.last_offset >= fetch_offset and entry.first_offset < upper_bound:
                found.append(entry)
            if entry.last_stable_offset >= upper_bound:
                return found, True
    return found, False
