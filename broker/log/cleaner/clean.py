"""One clean of one log, on its files: what the cleaner's worker runs, off the broker's event loop.

The broker hands a :class:`CleanRequest` (the log's directory, its segments as they stand, the
clean and dirty extent, the settings, the active producers): everything it needs is in files or
in the request, so it runs in a worker process (or thread) that shares nothing with the broker.
Kafka's ``Cleaner.doClean``, step by step:

1. the transactions: a scan of every batch header (and marker) of the log, for the aborted
   transactions and the first open one (:mod:`.transactions`); nothing from the segment holding
   an open transaction on is cleaned;
2. the key map over the dirty part (:mod:`.offset_map`), until the map is full: the offsets up
   to the last one mapped are compacted this time, the new first dirty offset is the next;
3. the segments from the log start to there, in groups (:func:`.plan.group_segments`), each group
   rewritten batch by batch (:class:`.filter.BatchFilter`) into one segment under temporary
   names: ``<base>.log.cleaned``, its indexes rebuilt, its gaps written (offsets are never
   reassigned: where batches went, the sequence skips), all fsynced.

The broker then puts each cleaned segment in place (:func:`tributary.broker.log.swap.install`)
and records the new first dirty offset. Reads and writes go through a :class:`.throttle.
Throttle` (``log.cleaner.io.max.bytes.per.second``).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tributary.broker.log.cleaner import hooks
from tributary.broker.log.cleaner.filter import BatchFilter
from tributary.broker.log.cleaner.offset_map import OffsetMap
from tributary.broker.log.cleaner.plan import SegmentInfo, group_segments
from tributary.broker.log.cleaner.throttle import Throttle
from tributary.broker.log.cleaner.transactions import CleanedTransactions, TxnScan, scan_transactions
from tributary.broker.log.files import OPEN_FLAGS, write_all
from tributary.broker.log.gaps import GAPS_SUFFIX, encode_gaps
from tributary.broker.log.index import OffsetIndex, TimeIndex
from tributary.broker.log.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, Indexer, segment_file_name
from tributary.broker.log.swap import CLEANED, discard, staged_name
from tributary.broker.log.txn_index import TXN_INDEX_SUFFIX, AbortedTxn, TransactionIndex
from tributary.protocol.crc32c import BytesLike
from tributary.protocol.errors import CorruptRecordError
from tributary.protocol.records import (
    HEADER_SIZE,
    BatchHeader,
    ControlType,
    control_type,
    iter_records,
    parse_batch_header,
)

#: Bytes read from a segment at a time, and written to a cleaned one (Kafka's
#: ``log.cleaner.io.buffer.size`` is 512 KiB).
IO_CHUNK = 1024 * 1024


class CleanStopped(Exception):
    """The broker asked the clean to stop (it is shutting down)."""


@dataclass(frozen=True, slots=True)
class CleanRequest:
    directory: str
    #: Every segment of the log, the active one last, as the broker saw them.
    segments: tuple[SegmentInfo, ...]
    first_dirty: int
    #: Nothing at or after this offset is cleaned (a segment base).
    uncleanable: int
    now_ms: int
    delete_retention_ms: int
    segment_bytes: int
    segment_index_bytes: int
    index_interval_bytes: int
    max_decompressed_bytes: int
    #: Active producer id -> the last offset of its last data batch.
    producers_last_offset: dict[int, int]
    map_capacity: int
    io_bytes_per_second: float = math.inf
    #: Active producers without a data batch -> their epoch (their last marker stays).
    producers_marker_only: dict[int, int] = field(default_factory=dict)

    def to_json(self) -> bytes:
        data = asdict(self)
        for name in ("producers_last_offset", "producers_marker_only"):
            data[name] = {str(k): v for k, v in getattr(self, name).items()}
        return json.dumps(data).encode()

    @classmethod
    def from_json(cls, data: bytes) -> CleanRequest:
        raw = json.loads(data)
        raw["segments"] = tuple(SegmentInfo(**s) for s in raw["segments"])
        for name in ("producers_last_offset", "producers_marker_only"):
            raw[name] = {int(k): v for k, v in raw.get(name, {}).items()}
        return cls(**raw)


@dataclass(frozen=True, slots=True)
class CleanedSegment:
    """A cleaned segment written under ``.cleaned`` names, to replace ``replaced``."""

    base_offset: int
    replaced: tuple[int, ...]
    #: Where its offsets end: the last replaced segment's end.
    end_offset: int
    size: int


@dataclass(slots=True)
class CleanResult:
    segments: tuple[CleanedSegment, ...] = ()
    #: The first dirty offset once these are in place.
    cleaned_to: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    map_entries: int = 0
    #: When a tombstone or marker kept now may go (see FilterStats.next_horizon_ms).
    next_horizon_ms: int | None = None
    elapsed_s: float = 0.0
    cpu_s: float = 0.0
    throttled_s: float = 0.0
    #: Where an open transaction starts, if one stopped the clean short.
    first_unstable_offset: int | None = field(default=None)

    def to_json(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def from_json(cls, data: bytes) -> CleanResult:
        raw = json.loads(data)
        raw["segments"] = tuple(CleanedSegment(**{**s, "replaced": tuple(s["replaced"])}) for s in raw["segments"])
        return cls(**raw)


Batches = Iterator[tuple[BatchHeader, BytesLike, int]]


class _Reader:
    """Batches of the log's segment files as the request saw them, read in large chunks."""

    def __init__(self, directory: Path, throttle: Throttle, should_stop: Callable[[], bool]) -> None:
        self._directory = directory
        #: Counts what is read here and what the clean writes: one budget for both.
        self.throttle = throttle
        self._should_stop = should_stop

    def batches(self, segment: SegmentInfo) -> Batches:
        """(header, buffer, position in it) for each batch of ``segment`` up to its size then."""
        path = self._directory / segment_file_name(segment.base_offset, LOG_SUFFIX)
        fd = os.open(path, os.O_RDONLY | OPEN_FLAGS)
        try:
            size = segment.size
            pos = 0
            buf = b""
            buf_start = 0
            while pos < size:
                if self._should_stop():
                    raise CleanStopped
                rel = pos - buf_start
                if rel + HEADER_SIZE > len(buf):
                    buf, buf_start, rel = self._read(fd, pos, min(IO_CHUNK, size - pos)), pos, 0
                header = parse_batch_header(buf, rel)
                if pos + header.size > size:
                    raise CorruptRecordError(f"{path}: the batch at position {pos} runs past {size}")
                if rel + header.size > len(buf):
                    buf, buf_start, rel = self._read(fd, pos, min(max(IO_CHUNK, header.size), size - pos)), pos, 0
                yield header, buf, rel
                pos += header.size
        finally:
            os.close(fd)

    def _read(self, fd: int, pos: int, count: int) -> bytes:
        data = os.pread(fd, count, pos)
        if len(data) < min(count, HEADER_SIZE):
            raise CorruptRecordError(f"segment file ends at {pos + len(data)}, before {pos + count}")
        self.throttle(len(data))
        return data


def _transactions(reader: _Reader, segments: Sequence[SegmentInfo]) -> TxnScan:
    def headers() -> Iterator[tuple[BatchHeader, ControlType | None]]:
        for segment in segments:
            for header, buf, rel in reader.batches(segment):
                marker = control_type(buf, rel) if header.is_control and header.record_count else None
                yield header, marker

    return scan_transactions(headers())


def _build_map(
    reader: _Reader, segments: Sequence[SegmentInfo], offsets: OffsetMap, aborted: TxnScan, first_dirty: int
) -> bool:
    """Maps the keys of ``segments`` from ``first_dirty`` on; True if it stopped early (full)."""
    transactions = CleanedTransactions(aborted.aborted)
    for segment in segments:
        for header, buf, rel in reader.batches(segment):
            if header.is_control:
                transactions.on_marker(header, None)
                continue
            if transactions.on_batch(header):
                continue  # aborted: its records must not hide committed ones
            if header.last_offset < first_dirty:
                continue
            for record in iter_records(buf, rel):
                if (
                    record.key is not None
                    and record.offset >= first_dirty
                    and not offsets.put(record.key, record.offset)
                ):
                    return True
            offsets.latest_offset = header.last_offset
    return False


def _carried_aborts(directory: Path, group: Sequence[SegmentInfo], markers: set[int]) -> list[AbortedTxn]:
    """The aborted-transaction index entries of the markers kept (an entry goes with its marker)."""
    entries: list[AbortedTxn] = []
    for segment in group:
        index = TransactionIndex(directory / segment_file_name(segment.base_offset, TXN_INDEX_SUFFIX))
        entries += [entry for entry in index.entries if entry.last_offset in markers]
    return entries


def _write_companions(
    directory: Path, base: int, indexer: Indexer, gaps: dict[int, int], aborts: list[AbortedTxn]
) -> None:
    """The cleaned segment's indexes, aborted-transaction index and gaps, fsynced, under
    ``.cleaned`` names."""
    index = OffsetIndex(str(directory / staged_name(base, INDEX_SUFFIX, CLEANED)))
    time_index = TimeIndex(str(directory / staged_name(base, TIME_INDEX_SUFFIX, CLEANED)))
    try:
        index.replace(indexer.offset_entries)
        time_index.replace(indexer.time_entries + indexer.final_time_entry())
        index.fsync()
        time_index.fsync()
    finally:
        index.close()
        time_index.close()
    if aborts:
        txn_index = TransactionIndex(directory / staged_name(base, TXN_INDEX_SUFFIX, CLEANED))
        txn_index.replace(aborts)
        txn_index.fsync()
        txn_index.close()
    if gaps:
        path = directory / staged_name(base, GAPS_SUFFIX, CLEANED)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | OPEN_FLAGS, 0o644)
        try:
            write_all(fd, encode_gaps(sorted(gaps.items())))
            os.fsync(fd)
        finally:
            os.close(fd)


def _write_group(
    directory: Path, group: Sequence[SegmentInfo], batch_filter: BatchFilter, reader: _Reader, request: CleanRequest
) -> CleanedSegment:
    base = group[0].base_offset
    end = group[-1].next_offset
    discard(directory, base)  # leftovers of an interrupted clean of the same base
    log_path = directory / staged_name(base, LOG_SUFFIX, CLEANED)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | OPEN_FLAGS, 0o644)
    indexer = Indexer(base)
    gaps: dict[int, int] = {}
    markers: set[int] = set()
    expected = base
    position = 0
    pending = bytearray()
    throttle = reader.throttle
    try:
        for segment in group:
            for header, buf, rel in reader.batches(segment):
                data = batch_filter.batch(buf, rel, header)
                if data is None:
                    continue
                written = parse_batch_header(data)
                if written.is_control and written.record_count:
                    markers.add(written.base_offset)
                if written.base_offset != expected:
                    gaps[expected] = written.base_offset
                indexer.add(position, written, request.index_interval_bytes)
                pending += data
                position += len(data)
                expected = written.next_offset
                if len(pending) >= IO_CHUNK:
                    write_all(fd, pending)
                    throttle(len(pending))
                    pending.clear()
        write_all(fd, pending)
        throttle(len(pending))
        os.fsync(fd)
    finally:
        os.close(fd)
    if expected < end:
        gaps[expected] = end  # the offsets emptied at its end: the segment still ends where they did
    # Retention by time falls back on the file's mtime when no batch carries a timestamp.
    mtimes = [os.stat(directory / segment_file_name(s.base_offset, LOG_SUFFIX)).st_mtime for s in group]
    os.utime(log_path, (time.time(), max(mtimes)))
    _write_companions(directory, base, indexer, gaps, _carried_aborts(directory, group, markers))
    return CleanedSegment(base, tuple(s.base_offset for s in group), end, position)


def clean(
    request: CleanRequest,
    should_stop: Callable[[], bool] = lambda: False,
    reached: Callable[[str], None] = hooks.reached,
) -> CleanResult:
    """Writes the cleaned segments of one clean (see the module doc); the broker installs them."""
    started, cpu_started = time.monotonic(), time.thread_time()
    directory = Path(request.directory)
    throttle = Throttle(request.io_bytes_per_second)
    reader = _Reader(directory, throttle, should_stop)
    segments = request.segments
    result = CleanResult(cleaned_to=request.first_dirty)

    scan = _transactions(reader, segments)
    end = request.uncleanable
    if scan.first_unstable_offset is not None and scan.first_unstable_offset < end:
        result.first_unstable_offset = scan.first_unstable_offset
        end = max(s.base_offset for s in segments if s.base_offset <= scan.first_unstable_offset)
    first_dirty = min(request.first_dirty, end)
    offsets = OffsetMap(request.map_capacity)
    offsets.latest_offset = first_dirty - 1
    dirty = [s for s in segments[:-1] if s.next_offset > first_dirty and s.base_offset < end]
    stopped_early = _build_map(reader, dirty, offsets, scan, first_dirty)
    cleaned_to = offsets.latest_offset + 1 if stopped_early else max(end, first_dirty)
    result.cleaned_to = max(cleaned_to, first_dirty)
    result.map_entries = len(offsets)
    reached("map-built")

    to_clean = [s for s in segments[:-1] if s.base_offset < result.cleaned_to and s.base_offset < end]
    batch_filter = BatchFilter(
        offsets,
        CleanedTransactions(scan.aborted),
        request.producers_last_offset,
        request.producers_marker_only,
        now_ms=request.now_ms,
        delete_retention_ms=request.delete_retention_ms,
        max_decompressed_bytes=request.max_decompressed_bytes,
    )
    written: list[CleanedSegment] = []
    groups = group_segments(to_clean, request.segment_bytes, request.segment_index_bytes)
    try:
        for group in groups:
            written.append(_write_group(directory, group, batch_filter, reader, request))
    except BaseException:
        for group in groups:
            discard(directory, group[0].base_offset)
        raise
    reached("cleaned-written")

    stats = batch_filter.stats
    result.segments = tuple(written)
    result.records_read = stats.records_read
    result.records_kept = stats.records_kept
    result.next_horizon_ms = stats.next_horizon_ms
    result.bytes_written = sum(s.size for s in written)
    result.bytes_read = throttle.total_bytes - result.bytes_written
    result.throttled_s = throttle.slept_s
    result.elapsed_s = time.monotonic() - started
    result.cpu_s = time.thread_time() - cpu_started
    return result
