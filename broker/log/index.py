"""Kafka's sparse segment indexes, ``.index`` and ``.timeindex``.

On disk both are Kafka's format: fixed-size big-endian entries, appended in
order. ``.index`` maps (offset relative to the segment's base, int32) to the
file position (int32) of the batch whose last offset it is; ``.timeindex``
maps (timestamp int64) to the relative offset (int32) of the batch that first
reached that maximum timestamp. Both columns grow strictly in both files.

An index is *loaded* (its columns in two compact arrays) only for the active
segment, which appends to it and serves the tail reads. Sealed segments keep
nothing in memory: a lookup binary-searches the file with a handful of
``pread``s from the page cache. Memory therefore does not grow with the log.
"""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from typing import ClassVar, Protocol

from tributary.broker.log.files import OPEN_FLAGS, write_all


class Column(Protocol):
    """One column of an index, in memory or on disk: what bisect needs."""

    def __len__(self) -> int: ...
    def __getitem__(self, i: int, /) -> int: ...


class _FileColumn:
    """A column read entry by entry with pread, for indexes not in memory."""

    __slots__ = ("_count", "_entry", "_fd", "_field")

    def __init__(self, fd: int, entry: struct.Struct, field: int, count: int) -> None:
        self._fd = fd
        self._entry = entry
        self._field = field
        self._count = count

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, i: int) -> int:
        if not 0 <= i < self._count:
            raise IndexError(i)
        size = self._entry.size
        value: int = self._entry.unpack(os.pread(self._fd, size, i * size))[self._field]
        return value


class SegmentIndex:
    """One index file; subclasses fix the entry layout."""

    ENTRY: ClassVar[struct.Struct]
    KEY_TYPE: ClassVar[str]
    VALUE_TYPE: ClassVar[str]

    __slots__ = ("_count", "_fd", "_keys", "_values", "path")

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | OPEN_FLAGS, 0o644)
        size = os.fstat(self._fd).st_size
        self._count = size // self.ENTRY.size
        if size % self.ENTRY.size:
            # A crash mid-append tore the last entry; the index is sparse, so
            # dropping it loses nothing.
            os.ftruncate(self._fd, self._count * self.ENTRY.size)
        self._keys: array[int] | None = None
        self._values: array[int] | None = None

    def __len__(self) -> int:
        return self._count

    @property
    def loaded(self) -> bool:
        return self._keys is not None

    @property
    def fd(self) -> int:
        return self._fd

    def load(self) -> None:
        if self._keys is not None:
            return
        data = os.pread(self._fd, self._count * self.ENTRY.size, 0)
        keys, values = array(self.KEY_TYPE), array(self.VALUE_TYPE)
        for key, value in self.ENTRY.iter_unpack(data):
            keys.append(key)
            values.append(value)
        self._keys, self._values = keys, values

    def unload(self) -> None:
        self._keys = self._values = None

    def keys(self) -> Column:
        return self._keys if self._keys is not None else _FileColumn(self._fd, self.ENTRY, 0, self._count)

    def values(self) -> Column:
        return self._values if self._values is not None else _FileColumn(self._fd, self.ENTRY, 1, self._count)

    def last(self) -> tuple[int, int] | None:
        if not self._count:
            return None
        return self.keys()[self._count - 1], self.values()[self._count - 1]

    def floor_key(self, key: int) -> int:
        """Index of the last entry whose key is <= ``key``; -1 if none."""
        return bisect_right(self.keys(), key) - 1

    def floor_value(self, value: int) -> int:
        """Index of the last entry whose value is <= ``value``; -1 if none."""
        return bisect_right(self.values(), value) - 1

    def count_values_below(self, value: int) -> int:
        return bisect_left(self.values(), value)

    def append(self, entries: Iterable[tuple[int, int]]) -> None:
        """Writes entries to the file, then (if loaded) to memory; after a
        failed write the file is cut back so file and memory agree."""
        packed = bytearray()
        pack = self.ENTRY.pack
        added = 0
        for key, value in entries:
            packed += pack(key, value)
            added += 1
        if not added:
            return
        try:
            write_all(self._fd, packed)
        except OSError:
            os.ftruncate(self._fd, self._count * self.ENTRY.size)
            raise
        if self._keys is not None and self._values is not None:
            for key, value in self.ENTRY.iter_unpack(packed):
                self._keys.append(key)
                self._values.append(value)
        self._count += added

    def truncate(self, count: int) -> None:
        """Keeps the first ``count`` entries."""
        if count >= self._count:
            return
        os.ftruncate(self._fd, count * self.ENTRY.size)
        if self._keys is not None and self._values is not None:
            del self._keys[count:]
            del self._values[count:]
        self._count = count

    def replace(self, entries: Iterable[tuple[int, int]]) -> None:
        self.truncate(0)
        self.append(entries)

    def fsync(self) -> None:
        os.fsync(self._fd)

    def close(self) -> None:
        self.unload()
        os.close(self._fd)


class OffsetIndex(SegmentIndex):
    """``.index``: (relative offset int32, position int32)."""

    ENTRY = struct.Struct(">ii")
    KEY_TYPE = "i"
    VALUE_TYPE = "i"
    __slots__ = ()


class TimeIndex(SegmentIndex):
    """``.timeindex``: (timestamp int64, relative offset int32)."""

    ENTRY = struct.Struct(">qi")
    KEY_TYPE = "q"
    VALUE_TYPE = "i"
    __slots__ = ()
