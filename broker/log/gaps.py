"""A segment's offset gaps, ``<base offset>.gaps``: where its batches legitimately skip offsets.

A batch's baseOffset lies outside its CRC, so a flipped bit there is seen only by the batch's
place in the sequence: recovery and the scrubber require each batch to start where the one
before it ended. Two things legitimately break that sequence, and each writes down the break
it makes, so that every other break still reads as damage:

- the log cleaner removes whole batches (docs/compaction.md): a cleaned segment is written with
  this file, one entry per place its batches skip offsets, and a last entry when its batches end
  before the segment does (the offsets the cleaner emptied at its end);
- a follower copies a cleaned leader's batches as they are, gaps included: it writes each gap
  here before the batch after it.

A segment without the file has no gaps. Entries are ``(expected int64, actual int64)``: after
the batches up to offset ``expected`` (exclusive) the next batch starts at ``actual`` (or, for a
last entry, the segment ends there). Entries are fixed-size and appended in order; a torn last
entry (a crash mid-append) is dropped on reading. The file is small: one entry per gap.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Mapping

from tributary.broker.log.files import OPEN_FLAGS, unlink_quietly, write_all

GAPS_SUFFIX = ".gaps"
ENTRY = struct.Struct(">qq")


def encode_gaps(entries: Iterable[tuple[int, int]]) -> bytes:
    return b"".join(ENTRY.pack(expected, actual) for expected, actual in entries)


def decode_gaps(data: bytes) -> dict[int, int]:
    """expected -> actual; a torn last entry is left out."""
    usable = len(data) - len(data) % ENTRY.size
    return {expected: actual for expected, actual in ENTRY.iter_unpack(data[:usable])}


def follow(gaps: Mapping[int, int], offset: int) -> int:
    """Where the next batch may start once the batches up to ``offset`` are read."""
    return gaps.get(offset, offset)


class OffsetGaps:
    """One segment's gaps file, created only when it first records a gap."""

    __slots__ = ("_fd", "dirty", "path")

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None
        #: Written since the last fsync.
        self.dirty = False

    def read(self) -> dict[int, int]:
        """Every recorded gap (empty without the file)."""
        try:
            with open(self.path, "rb") as f:
                return decode_gaps(f.read())
        except FileNotFoundError:
            return {}

    def _open(self) -> int:
        if self._fd is None:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | OPEN_FLAGS, 0o644)
            size = os.fstat(fd).st_size
            if size % ENTRY.size:
                os.ftruncate(fd, size - size % ENTRY.size)  # a torn entry from before a crash
            self._fd = fd
        return self._fd

    def append(self, expected: int, actual: int) -> None:
        write_all(self._open(), ENTRY.pack(expected, actual))
        self.dirty = True

    def replace(self, gaps: Mapping[int, int]) -> None:
        """Rewrites the file with ``gaps``. The descriptor stays open once opened (a flush in
        another thread may be syncing it); with no gaps and no file, nothing is created."""
        if not gaps and self._fd is None and not os.path.exists(self.path):
            return
        fd = self._open()
        os.ftruncate(fd, 0)
        write_all(fd, encode_gaps(sorted(gaps.items())))
        self.dirty = True

    def fsync(self) -> None:
        """Safe in a flush thread while the log's thread appends: it opens the file anew
        rather than share the descriptor that thread may close."""
        if not self.dirty:
            return
        self.dirty = False
        try:
            fd = os.open(self.path, os.O_RDONLY | OPEN_FLAGS)
        except FileNotFoundError:
            return  # removed: the directory's fsync makes that durable
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
