"""What a read of the log hands out: file regions to send with ``os.sendfile``.

A :class:`ReadResult` holds pins on the segments its regions belong to, so
their descriptors stay open (and their bytes readable, even once retention
unlinked the files) until it is closed. Use it as a context manager, or
close it once the response is on the wire; the regions are valid until then
and not after.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import NamedTuple, Protocol


class FileRegion(NamedTuple):
    """``size`` bytes at ``position`` of the file open as ``fd``: whole batches."""

    fd: int
    position: int
    size: int


class _Pinned(Protocol):
    def unpin(self) -> None: ...


class ReadResult:
    """Batches read from a partition: regions plus the log's bounds at read time."""

    __slots__ = (
        "_pinned",
        "log_end_offset",
        "log_start_offset",
        "next_offset",
        "regions",
        "size",
        "visible_end_offset",
    )

    def __init__(
        self,
        regions: Sequence[FileRegion],
        pinned: Sequence[_Pinned],
        *,
        next_offset: int,
        log_start_offset: int,
        log_end_offset: int,
        visible_end_offset: int,
    ) -> None:
        self.regions = tuple(regions)
        self.size = sum(region.size for region in self.regions)
        #: Where the next read continues: the offset after the last batch returned.
        self.next_offset = next_offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset
        #: The high watermark a fetch response reports.
        self.visible_end_offset = visible_end_offset
        self._pinned: list[_Pinned] | None = list(pinned)

    def close(self) -> None:
        """Releases the pins; the regions' descriptors may close after this."""
        pinned, self._pinned = self._pinned, None
        for segment in pinned or ():
            segment.unpin()

    @property
    def closed(self) -> bool:
        return self._pinned is None

    def __enter__(self) -> ReadResult:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def iter_chunks(self, chunk_size: int = 64 * 1024) -> Iterator[bytes]:
        """The bytes, read with pread: for streams sendfile cannot reach (TLS)."""
        if self._pinned is None:
            raise ValueError("read result used after close")
        for fd, start, size in self.regions:
            position, end = start, start + size
            while position < end:
                chunk = os.pread(fd, min(chunk_size, end - position), position)
                if not chunk:
                    raise OSError(f"file of fd {fd} ends before position {end}: truncated under a read")
                position += len(chunk)
                yield chunk

    def read_bytes(self) -> bytes:
        """All the bytes at once (tests, small reads)."""
        return b"".join(self.iter_chunks())


class Isolation(enum.IntEnum):
    """Fetch's and ListOffsets' isolation level: how far a reader sees."""

    #: Up to the high watermark: every record every in-sync replica has.
    READ_UNCOMMITTED = 0
    #: Up to the last stable offset: only transactions already decided (the client drops the
    #: aborted ones, from the list a fetch returns).
    READ_COMMITTED = 1


READ_UNCOMMITTED = Isolation.READ_UNCOMMITTED
READ_COMMITTED = Isolation.READ_COMMITTED
