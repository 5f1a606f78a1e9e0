"""One segment of a partition log: ``<base offset>.log``, its two indexes, and its
aborted-transaction index (``.txnindex``, :mod:`.txn_index`) when it holds an abort marker.

The ``.log`` file holds record batches exactly as the log appended them. It is
written with ``os.write`` on a raw ``O_APPEND`` descriptor and read with
``pread``/``sendfile`` through the same descriptor, so record data lives in
the page cache, never on the heap beyond one call.

Lifetime: readers :meth:`~Segment.try_pin` a segment while they hold file
regions of it. Deleting or closing a segment only *retires* it; its
descriptors close when the last pin goes, so a region handed to ``sendfile``
stays readable (an unlinked file's bytes live while a descriptor does). Pins
may be taken and released from any thread.
"""

from __future__ import annotations

import os
import threading
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

from tributary.broker.log import fsync_journal
from tributary.broker.log.errors import CorruptLogError
from tributary.broker.log.files import OPEN_FLAGS, unlink_quietly, write_all
from tributary.broker.log.gaps import GAPS_SUFFIX, OffsetGaps, follow
from tributary.broker.log.index import OffsetIndex, TimeIndex
from tributary.broker.log.txn_index import TXN_INDEX_SUFFIX, TransactionIndex
from tributary.protocol.crc32c import BytesLike
from tributary.protocol.errors import CorruptRecordError, ProtocolError
from tributary.protocol.records import HEADER_SIZE, BatchHeader, parse_batch_header, verify_crc

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
#: Every file of a segment; the ``.log`` holds the data, the others can be rebuilt from it
#: except the gaps (see :mod:`tributary.broker.log.gaps`), which are written with it.
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, GAPS_SUFFIX)
NO_TIMESTAMP = -1
INT32_MAX = 2**31 - 1
_NAME_DIGITS = 20

# Header walks that stop within an index interval read small chunks; whole-file
# walks (recovery, producer state) read large ones to keep syscalls few.
LOOKUP_CHUNK = 16 * 1024
SCAN_CHUNK = 1024 * 1024


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:0{_NAME_DIGITS}d}{suffix}"


def parse_segment_file_name(name: str, suffix: str = LOG_SUFFIX) -> int | None:
    stem = name[: -len(suffix)] if name.endswith(suffix) else ""
    if len(stem) == _NAME_DIGITS and stem.isdigit():
        return int(stem)
    return None


def scan_batches(
    fd: int, start: int, end: int, *, verify: bool, chunk_size: int = SCAN_CHUNK
) -> Iterator[tuple[int, BatchHeader]]:
    """Yields ``(position, header)`` for each batch of the file in [start, end).

    Raises :class:`CorruptRecordError` at the first batch that is torn, runs
    past ``end``, has a bad header or (with ``verify``) a bad CRC. Reads go
    through a buffer of ``chunk_size`` (or one batch, if larger), so a batch
    length from a corrupt file never allocates more than the file holds."""
    buf: bytes = b""
    buf_start = start
    pos = start
    while pos < end:
        rel = pos - buf_start
        if rel < 0 or rel + HEADER_SIZE > len(buf):
            buf, buf_start, rel = os.pread(fd, max(chunk_size, HEADER_SIZE), pos), pos, 0
        try:
            header = parse_batch_header(buf, rel)
        except ProtocolError as exc:
            # A magic byte flipped to 0 or 1 reads as an old format, not as damage; on disk,
            # where only v2 batches were ever written, it is damage all the same.
            raise CorruptRecordError(f"at file position {pos}: {exc}") from None
        size = header.size
        if pos + size > end:
            raise CorruptRecordError(f"record batch at file position {pos} ({size} bytes) runs past {end}")
        if verify:
            if rel + size > len(buf):
                buf, buf_start, rel = os.pread(fd, max(chunk_size, size), pos), pos, 0
            try:
                verify_crc(buf, rel, header)
            except CorruptRecordError as exc:
                raise CorruptRecordError(f"at file position {pos}: {exc}") from None
        yield pos, header
        pos += size


def _check_offsets(
    position: int, header: BatchHeader, next_offset: int, base_offset: int, gaps: dict[int, int]
) -> None:
    # baseOffset lies outside the CRC: only its place in the sequence betrays a damaged one. A
    # segment's batches follow each other without a gap, except where the segment's gaps file
    # says they skip offsets (the log cleaner removed batches there, or a follower copied such
    # a gap from its leader): any other jump is damage.
    expected = follow(gaps, next_offset)
    if header.base_offset != expected or header.last_offset - base_offset > INT32_MAX:
        raise CorruptRecordError(
            f"batch at position {position} starts at offset {header.base_offset}, not at {expected}"
        )


class _Indexer:
    """When to add index entries, batch by batch, as Kafka's LogSegment does:
    an offset entry (and a time entry if the maximum timestamp grew) once more
    than ``index.interval.bytes`` were written since the last one."""

    __slots__ = (
        "base_offset",
        "bytes_since_entry",
        "last_indexed_timestamp",
        "max_timestamp",
        "offset_entries",
        "offset_of_max_timestamp",
        "time_entries",
    )

    def __init__(self, base_offset: int) -> None:
        self.base_offset = base_offset
        self.bytes_since_entry = 0
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = base_offset
        self.last_indexed_timestamp = NO_TIMESTAMP
        self.offset_entries: list[tuple[int, int]] = []
        self.time_entries: list[tuple[int, int]] = []

    def copy(self) -> _Indexer:
        twin = _Indexer(self.base_offset)
        twin.bytes_since_entry = self.bytes_since_entry
        twin.max_timestamp = self.max_timestamp
        twin.offset_of_max_timestamp = self.offset_of_max_timestamp
        twin.last_indexed_timestamp = self.last_indexed_timestamp
        return twin

    def add(self, position: int, header: BatchHeader, interval: int) -> None:
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = header.last_offset
        if self.bytes_since_entry > interval:
            self.offset_entries.append((header.last_offset - self.base_offset, position))
            self._maybe_index_time()
            self.bytes_since_entry = 0
        self.bytes_since_entry += header.size

    def _maybe_index_time(self) -> None:
        if self.max_timestamp > self.last_indexed_timestamp:
            self.time_entries.append((self.max_timestamp, self.offset_of_max_timestamp - self.base_offset))
            self.last_indexed_timestamp = self.max_timestamp

    def final_time_entry(self) -> list[tuple[int, int]]:
        """The entry that makes the time index's last timestamp the segment's maximum."""
        self._maybe_index_time()
        entries, self.time_entries = self.time_entries, []
        return entries


#: The log cleaner indexes the segments it writes with the same rules.
Indexer = _Indexer


class SegmentSlice(NamedTuple):
    """Whole batches of one segment: ``size`` bytes from ``position``.

    ``next_offset`` is where reading continues; ``at_end`` says the slice
    stopped at the segment's end rather than at a limit."""

    position: int
    size: int
    next_offset: int
    at_end: bool


class Segment:
    """A segment's files and what the log needs to know of them in memory."""

    __slots__ = (
        "_closed",
        "_fd",
        "_first_timestamp",
        "_indexer",
        "_lock",
        "_pins",
        "_retired",
        "base_offset",
        "created_ms",
        "directory",
        "dirty",
        "gaps",
        "had_index_files",
        "index",
        "next_offset",
        "size",
        "time_index",
        "txn_index",
    )

    def __init__(self, directory: Path, base_offset: int, now_ms: int) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.had_index_files = os.path.exists(self._path(INDEX_SUFFIX)) and os.path.exists(
            self._path(TIME_INDEX_SUFFIX)
        )
        self._fd = os.open(self._path(LOG_SUFFIX), os.O_RDWR | os.O_APPEND | os.O_CREAT | OPEN_FLAGS, 0o644)
        try:
            self.index = OffsetIndex(self._path(INDEX_SUFFIX))
            self.time_index = TimeIndex(self._path(TIME_INDEX_SUFFIX))
            # The transactions aborted by markers in this segment (rebuilt by the log when it
            # recovers the segment: the entries need the producer state of the time).
            self.txn_index = TransactionIndex(self._path(TXN_INDEX_SUFFIX))
        except BaseException:
            os.close(self._fd)
            raise
        self.gaps = OffsetGaps(self._path(GAPS_SUFFIX))
        self.size = os.fstat(self._fd).st_size
        self.next_offset = base_offset
        self.created_ms = now_ms
        self._indexer = _Indexer(base_offset)
        self._first_timestamp: int | None = None
        # Written since the last fsync (data, index entries or truncation).
        self.dirty = False
        self._lock = threading.Lock()
        self._pins = 0
        self._retired = False
        self._closed = False

    @classmethod
    def create(cls, directory: Path, base_offset: int, now_ms: int) -> Segment:
        """A new, empty segment; leftovers of one with the same name are removed."""
        for suffix in SEGMENT_SUFFIXES:
            unlink_quietly(directory / segment_file_name(base_offset, suffix))
        segment = cls(directory, base_offset, now_ms)
        segment.dirty = True
        return segment

    def _path(self, suffix: str) -> str:
        return str(self.directory / segment_file_name(self.base_offset, suffix))

    @property
    def log_path(self) -> str:
        return self._path(LOG_SUFFIX)

    @property
    def fd(self) -> int:
        """The ``.log`` descriptor: valid while the segment is pinned or live."""
        return self._fd

    @property
    def max_timestamp(self) -> int:
        return self._indexer.max_timestamp

    def __repr__(self) -> str:
        return f"Segment({self.base_offset}..{self.next_offset}, {self.size} bytes)"

    # --- opening ------------------------------------------------------------

    def verify_tail(self) -> None:
        """Reads the batches after the last index entry back with their CRCs, and checks they
        end where the segment thinks it ends. Raises :class:`CorruptRecordError` otherwise."""
        last_entry = self.index.last()
        start = last_entry[1] if last_entry is not None else 0
        end = start
        for pos, header in scan_batches(self._fd, start, self.size, verify=True, chunk_size=LOOKUP_CHUNK):
            end = pos + header.size
        if end != self.size:
            raise CorruptRecordError(f"{self.log_path}: batches after position {start} end at {end}, not {self.size}")

    def load_tail(self) -> None:
        """Trusts the indexes and walks the headers after their last entry to
        learn the next offset and maximum timestamp (no CRC checks).

        Raises :class:`CorruptRecordError` if the files disagree; the log then
        recovers the segment."""
        base = self.base_offset
        last_entry = self.index.last()
        start = last_entry[1] if last_entry is not None else 0
        if last_entry is not None and not 0 <= start < self.size:
            raise CorruptRecordError(f"{self.log_path}: last index entry points at {start}, file has {self.size} bytes")
        indexer = _Indexer(base)
        last_time = self.time_index.last()
        if last_time is not None:
            indexer.max_timestamp = indexer.last_indexed_timestamp = last_time[0]
            indexer.offset_of_max_timestamp = base + last_time[1]
        next_offset = base
        gaps = self.gaps.read()
        for pos, header in scan_batches(self._fd, start, self.size, verify=False, chunk_size=LOOKUP_CHUNK):
            if last_entry is not None and pos == start and header.last_offset != base + last_entry[0]:
                raise CorruptRecordError(f"{self.log_path}: index entry {last_entry} does not match its batch")
            if (pos != start or last_entry is None) and header.base_offset != follow(gaps, next_offset):
                raise CorruptRecordError(f"{self.log_path}: offsets do not follow on at position {pos}")
            if header.max_timestamp > indexer.max_timestamp:
                indexer.max_timestamp = header.max_timestamp
                indexer.offset_of_max_timestamp = header.last_offset
            next_offset = header.next_offset
        if last_time is not None and base + last_time[1] >= next_offset:
            raise CorruptRecordError(f"{self.log_path}: time index points past the segment's last offset")
        indexer.bytes_since_entry = self.size - start
        self._indexer = indexer
        # A cleaned segment may end in offsets whose batches the cleaner removed.
        self.next_offset = follow(gaps, next_offset)

    def recover(self, index_interval_bytes: int, flushed_until: int = 0) -> int:
        """Validates every batch (length, magic, CRC, offsets), cuts the file
        at the first bad one and rebuilds both indexes. Returns the bytes cut.

        Only data at offsets from ``flushed_until`` on may be cut: that is what a crash can
        leave torn. A bad batch below it was on disk already, so it is corruption, and
        :class:`CorruptLogError` is raised with nothing changed."""
        base = self.base_offset
        indexer = _Indexer(base)
        valid_end = 0
        next_offset = base
        gaps = self.gaps.read()
        try:
            for pos, header in scan_batches(self._fd, 0, self.size, verify=True):
                _check_offsets(pos, header, next_offset, base, gaps)
                indexer.add(pos, header, index_interval_bytes)
                valid_end = pos + header.size
                next_offset = header.next_offset
        except CorruptRecordError as exc:
            if next_offset < flushed_until:
                raise CorruptLogError(self.log_path, valid_end, next_offset, str(exc)) from None
            # everything from valid_end on goes
        cut = self.size - valid_end
        if cut:
            os.ftruncate(self._fd, valid_end)
            self.size = valid_end
        else:
            # The offsets a cleaner emptied at the segment's end (a cut tail is not trusted to
            # have been followed by them: a follower's gap before a torn batch goes with it).
            next_offset = follow(gaps, next_offset)
        kept = {expected: actual for expected, actual in gaps.items() if actual <= next_offset}
        if kept != gaps:
            self.gaps.replace(kept)
        self.index.replace(indexer.offset_entries)
        self.time_index.replace(indexer.time_entries)
        indexer.offset_entries, indexer.time_entries = [], []
        self._indexer = indexer
        self.next_offset = next_offset
        self._first_timestamp = None
        self.dirty = True
        return cut

    # --- appending ------------------------------------------------------------

    def append(self, data: BytesLike, batches: Sequence[tuple[int, BatchHeader]], index_interval_bytes: int) -> None:
        """Writes ``data``, whose batches (position within ``data``, header with
        final offsets) are ``batches``, and indexes them. On an OSError the
        files are cut back to where they were and the segment is unchanged."""
        position = self.size
        indexer = self._indexer.copy()
        expected = self.next_offset
        skips: list[tuple[int, int]] = []
        for rel, header in batches:
            indexer.add(position + rel, header, index_interval_bytes)
            if header.base_offset != expected:
                skips.append((expected, header.base_offset))  # a follower copying a cleaned leader
            expected = header.next_offset
        entries, time_entries = len(self.index), len(self.time_index)
        try:
            # The gaps first: on disk, a batch after a gap is never without its entry.
            for skip in skips:
                self.gaps.append(*skip)
            write_all(self._fd, data)
            self.index.append(indexer.offset_entries)
            self.time_index.append(indexer.time_entries)
        except OSError:
            os.ftruncate(self._fd, position)
            self.index.truncate(entries)
            self.time_index.truncate(time_entries)
            if skips:
                self.gaps.replace({e: a for e, a in self.gaps.read().items() if a <= self.next_offset})
            raise
        indexer.offset_entries, indexer.time_entries = [], []
        self._indexer = indexer
        self.size = position + len(data)
        self.next_offset = batches[-1][1].next_offset
        if position == 0:
            self._first_timestamp = batches[0][1].max_timestamp
        self.dirty = True

    def index_full(self, segment_index_bytes: int) -> bool:
        return (
            len(self.index) >= segment_index_bytes // OffsetIndex.ENTRY.size
            or len(self.time_index) >= segment_index_bytes // TimeIndex.ENTRY.size
        )

    def first_timestamp(self) -> int:
        """The first batch's maximum timestamp (Kafka rolls on it), or NO_TIMESTAMP."""
        if self._first_timestamp is None:
            if not self.size:
                return NO_TIMESTAMP
            self._first_timestamp = parse_batch_header(os.pread(self._fd, HEADER_SIZE, 0)).max_timestamp
        return self._first_timestamp

    def largest_timestamp(self) -> int:
        """What retention.ms compares with: the largest batch timestamp, or the
        file's modification time when no batch carries one."""
        if self._indexer.max_timestamp >= 0:
            return self._indexer.max_timestamp
        return int(os.fstat(self._fd).st_mtime * 1000)

    def seal(self) -> None:
        """Makes this segment inactive: final time entry, indexes out of memory."""
        final = self._indexer.final_time_entry()
        if final:
            self.time_index.append(final)
            self.dirty = True
        self.index.unload()
        self.time_index.unload()

    def activate(self) -> None:
        """Makes this the active segment: indexes in memory for appends and tail reads."""
        self.index.load()
        self.time_index.load()

    # --- reading -------------------------------------------------------------

    def locate(self, offset: int) -> tuple[int, BatchHeader] | None:
        """The first batch whose last offset is >= ``offset`` (the batch that
        contains it, if any), as (position, header); None if there is none."""
        if offset >= self.next_offset:
            return None
        entry = self.index.floor_key(offset - self.base_offset)
        start = self.index.values()[entry] if entry >= 0 else 0
        for pos, header in scan_batches(self._fd, start, self.size, verify=False, chunk_size=LOOKUP_CHUNK):
            if header.last_offset >= offset:
                return pos, header
        return None

    def is_batch_boundary(self, offset: int) -> bool:
        if offset >= self.next_offset:
            return offset == self.next_offset
        found = self.locate(offset)
        return found is not None and found[1].base_offset == offset

    def read_slice(self, offset: int, max_bytes: int, max_offset: int, min_one: bool) -> SegmentSlice:
        """Whole batches from the one containing ``offset``: at most
        ``max_bytes`` (but the first batch regardless when ``min_one``), none
        with an offset at or beyond ``max_offset``."""
        found = self.locate(offset)
        if found is None:
            return SegmentSlice(self.size, 0, offset, True)
        start, first = found
        if first.next_offset > max_offset or (first.size > max_bytes and not min_one):
            return SegmentSlice(start, 0, offset, False)
        byte_limit = start + max_bytes
        end = start + first.size
        # Skip the walk over batches the index already proves fit both limits:
        # every batch before an entry's position ends by it, below its offset.
        entry = min(self.index.floor_value(byte_limit), self.index.floor_key(max_offset - 1 - self.base_offset))
        if entry >= 0:
            end = max(end, self.index.values()[entry])
        for pos, header in scan_batches(self._fd, end, self.size, verify=False, chunk_size=LOOKUP_CHUNK):
            if pos + header.size > byte_limit or header.next_offset > max_offset:
                return SegmentSlice(start, pos - start, header.base_offset, False)
        return SegmentSlice(start, self.size - start, self.next_offset, True)

    def find_timestamp(self, timestamp: int) -> BatchHeader | None:
        """The first batch whose maximum timestamp is >= ``timestamp``."""
        if self._indexer.max_timestamp < timestamp:
            return None
        # Entries before this one reached only smaller maxima, so the answer
        # lies after the offset the entry names.
        entry = bisect_left(self.time_index.keys(), timestamp) - 1
        start_offset = self.base_offset + self.time_index.values()[entry] + 1 if entry >= 0 else self.base_offset
        found = self.locate(start_offset)
        if found is None:
            return None
        for _, header in scan_batches(self._fd, found[0], self.size, verify=False, chunk_size=LOOKUP_CHUNK):
            if header.max_timestamp >= timestamp:
                return header
        return None

    def iter_headers(self) -> Iterator[BatchHeader]:
        for _, header in scan_batches(self._fd, 0, self.size, verify=False):
            yield header

    # --- truncation, durability, lifetime --------------------------------------

    def is_truncation_point(self, offset: int) -> bool:
        """Whether the segment can be cut at ``offset``: a batch boundary, or an offset in a gap
        the cleaner left (the cut then falls before the next batch)."""
        if offset >= self.next_offset:
            return offset == self.next_offset
        found = self.locate(offset)
        return found is None or found[1].base_offset >= offset

    def truncate_to(self, offset: int) -> None:
        """Cuts the segment before the batch starting at ``offset`` (or, for an offset in a
        gap, before the first batch after it)."""
        if offset >= self.next_offset:
            return
        found = self.locate(offset)
        if found is not None and found[1].base_offset < offset:
            raise ValueError(f"offset {offset} is not at a batch boundary of {self!r}")
        position = self.size if found is None else found[0]
        gaps = self.gaps.read()
        if any(actual > offset for actual in gaps.values()):
            self.gaps.replace({e: a for e, a in gaps.items() if a <= offset})
        os.ftruncate(self._fd, position)
        self.size = position
        self.index.truncate(self.index.count_values_below(position))
        self.time_index.truncate(bisect_left(self.time_index.values(), offset - self.base_offset))
        self.txn_index.truncate_to(offset)
        self._first_timestamp = None
        self.dirty = True
        self.load_tail()

    def fsync(self) -> None:
        size = os.fstat(self._fd).st_size if fsync_journal.enabled() else 0
        self.gaps.fsync()  # before the data: a batch after a gap is never durable without its entry
        os.fsync(self._fd)
        self.index.fsync()
        self.time_index.fsync()
        self.txn_index.fsync()
        fsync_journal.record(self.log_path, size)

    def try_pin(self) -> bool:
        """Keeps the descriptors open until :meth:`unpin`; False if already closed."""
        with self._lock:
            if self._closed:
                return False
            self._pins += 1
            return True

    def unpin(self) -> None:
        with self._lock:
            self._pins -= 1
            close = self._retired and not self._pins and not self._closed
            if close:
                self._closed = True
        if close:
            self._close_files()

    def retire(self) -> None:
        """No longer part of the log: close now, or when the last pin goes."""
        with self._lock:
            self._retired = True
            close = not self._pins and not self._closed
            if close:
                self._closed = True
        if close:
            self._close_files()

    def delete_files(self) -> None:
        for suffix in SEGMENT_SUFFIXES:
            unlink_quietly(self._path(suffix))
        self.retire()

    @property
    def closed(self) -> bool:
        return self._closed

    def _close_files(self) -> None:
        os.close(self._fd)
        self.index.close()
        self.time_index.close()
        self.gaps.close()
        self.txn_index.close()
