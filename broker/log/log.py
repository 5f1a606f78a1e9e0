"""One partition's log: a directory ``<topic>-<partition>/`` of segments.

Appends go to the last (active) segment; reads find a segment by binary
search over base offsets, a position by its sparse index, and hand out file
regions for ``sendfile``. The segment list is an immutable tuple replaced on
roll, retention and truncation (copy-on-write), so a reader's view never
changes under it.

Threads: every method runs on one thread (the broker's Trio thread), except
:meth:`PartitionLog.flush`, which may run in a worker thread at the same time
as the others (``trio.to_thread.run_sync(log.flush)``): it takes a snapshot
under a lock, pins the segments it fsyncs, and holds no lock while it waits
on the disk. :meth:`close` may run in a worker thread once nothing else uses
the log.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import threading
import time
from bisect import bisect_right
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

from tributary.broker.log import swap
from tributary.broker.log.config import FULL, LogConfig
from tributary.broker.log.epochs import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from tributary.broker.log.errors import (
    InvalidRecordError,
    LogClosedError,
    LogError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    StorageError,
)
from tributary.broker.log.files import fsync_dir, unlink_quietly
from tributary.broker.log.producer_snapshots import (
    LEGACY_SNAPSHOT_FILE,
    delete_snapshots,
    load_latest,
    sync_snapshot,
    write_snapshot,
)
from tributary.broker.log.producer_state import CompletedTxn, ProducerStateManager
from tributary.broker.log.reads import READ_UNCOMMITTED, FileRegion, Isolation, ReadResult
from tributary.broker.log.segment import (
    INT32_MAX,
    LOG_SUFFIX,
    SEGMENT_SUFFIXES,
    Segment,
    parse_segment_file_name,
    scan_batches,
)
from tributary.broker.log.txn_index import AbortedTxn, collect_aborted
from tributary.protocol.compression import Compression
from tributary.protocol.crc32c import BytesLike
from tributary.protocol.errors import CorruptRecordError, ProtocolError
from tributary.protocol.records import (
    CONTROL_BIT,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    BatchHeader,
    ControlType,
    Marker,
    assign_offset_and_epoch,
    build_marker_batch,
    check_records,
    iter_records,
    parse_batch_header,
    read_marker,
    recompress_batch,
    set_base_offset,
    stamp_log_append_time,
    verify_crc,
)

__all__ = ["AppendResult", "FileRegion", "PartitionLog", "ReadResult", "SwapRefusedError"]


class SwapRefusedError(Exception):
    """Cleaned segments that no longer fit the log (it changed while they were written)."""


def _first_record_at(segment: Segment, header: BatchHeader, timestamp: int, min_offset: int = 0) -> tuple[int, int]:
    """(offset, timestamp) of the batch's first record at or after ``min_offset`` (the log start)
    stamped at or after ``timestamp``.

    A batch stamped with the log's append time gives every record its maximum
    timestamp, and a control batch holds one marker: both answer with their
    first offset. A batch that cannot be read whole answers the same way (the
    answer is then up to a batch early, as before; it is never past a record)."""
    first = max(header.base_offset, min_offset)
    if header.timestamp_type == LOG_APPEND_TIME or header.is_control:
        return first, header.max_timestamp
    found = segment.locate(header.base_offset)
    if found is None:
        return first, header.max_timestamp
    try:
        data = os.pread(segment.fd, header.size, found[0])
        for record in iter_records(data, check_crc=False):
            if record.offset >= min_offset and record.timestamp >= timestamp:
                return record.offset, record.timestamp
    except (OSError, ProtocolError) as exc:
        log.warning("offset for timestamp %d: batch at offset %d unreadable (%s)", timestamp, header.base_offset, exc)
    return first, header.max_timestamp


log = logging.getLogger(__name__)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class AppendResult(NamedTuple):
    base_offset: int
    last_offset: int
    #: The timestamp stamped on the batches under LogAppendTime, else -1.
    log_append_time: int
    record_count: int
    log_start_offset: int
    #: A retried batch of an idempotent producer: nothing was written, the
    #: offsets are those of the original append.
    duplicate: bool = False


class PartitionLog:
    """Create with :meth:`open`."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: Sequence[Segment],
        recovery_point: int,
        producers: ProducerStateManager,
        *,
        epochs: LeaderEpochCache | None = None,
        log_start_offset: int = 0,
    ) -> None:
        self._dir = directory
        #: May be replaced at any time (topic config changes); read at each use.
        self.config = config
        self._segments: tuple[Segment, ...] = tuple(segments)
        self._bases = [s.base_offset for s in self._segments]
        # The first offset a consumer may read (DeleteRecords moves it into a segment, KIP-107);
        # never below the first segment's base offset, never past the log end.
        self._log_start_offset = min(
            max(log_start_offset, self._segments[0].base_offset), self._segments[-1].next_offset
        )
        self._recovery_point = recovery_point
        self._producers = producers
        #: Where each leader epoch starts here (KIP-101), kept with the log's every change.
        self.epochs = epochs if epochs is not None else LeaderEpochCache(directory / LEADER_EPOCH_CHECKPOINT)
        # The high watermark (replication): consumers read below it. A log with no followers
        # (a partition of one replica, as before replication) has its log end as high watermark.
        self.hw_follows_log_end = True
        self._high_watermark = 0
        # Guards what flush() shares with the log's own thread: the counters
        # below, the recovery point and the swap of the segment tuple.
        self._lock = threading.Lock()
        # One flush at a time: a second must not advance the recovery point
        # while the first still waits on fsync.
        self._flush_lock = threading.Lock()
        self._unflushed_messages = 0
        self._first_unflushed_ms: int | None = None
        self._rolled_unflushed = False
        # Producer state snapshots taken at rolls and not yet fsynced.
        self._unsynced_snapshots: list[Path] = []
        # Opening may have created or deleted segment files.
        self._dir_dirty = True
        self._truncations = 0
        #: The lowest offset this log was truncated to since the log cleaner last looked: what it
        #: had cleaned from there on is gone, so its first dirty offset must not lie beyond it.
        self.lowest_truncation: int | None = None
        #: Why the disk under this log last failed, until an append or flush succeeds again.
        self.storage_error: str | None = None
        #: Appends and flushes the disk failed, since the log was opened.
        self.storage_errors = 0
        self._closed = False
        #: Told how long each flush that synced anything spent in fsync (seconds),
        #: on the flushing thread: the broker's flush latency metric.
        self.on_flush: Callable[[float], None] | None = None

    # --- opening ------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        config: LogConfig,
        recovery_point: int = 0,
        *,
        clean_shutdown: bool = False,
        now_ms: int | None = None,
        log_start_offset: int = 0,
    ) -> PartitionLog:
        """Opens (or creates) the log in ``directory``; ``log_start_offset`` is where the log
        start offset checkpoint says it starts (DeleteRecords), if later than its first segment.

        The active (last) segment is always validated batch by batch and
        re-indexed: it is where torn writes land, and a corrupt batch must never
        be served, even after a clean shutdown (the scan costs one CRC pass over
        at most ``segment.bytes``). After a crash (``clean_shutdown`` false) so
        is every segment holding offsets at or after ``recovery_point``. A torn
        or corrupt batch past what was flushed (everything after a clean
        shutdown, ``recovery_point`` after a crash) is cut off with what follows
        it; one below it is corruption of acknowledged data and raises
        :class:`CorruptLogError`, changing nothing. Other segments are trusted:
        only the headers after their last index entry are read."""
        now_ms = _now_ms() if now_ms is None else now_ms
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        bases = _discover(path)
        segments: list[Segment] = []
        # What was on disk before this start: everything after a clean shutdown, up to the
        # checkpointed recovery point after a crash. Only what lies past it may be torn.
        flushed_until = sys.maxsize if clean_shutdown else recovery_point
        # The first segment whose aborted-transaction index cannot be trusted: it is rebuilt, with
        # every later one's, from the markers the producer state replay meets.
        rebuild_from: int | None = None
        try:
            if not bases:
                segments.append(Segment.create(path, 0, now_ms))
            cut = False
            for i, base in enumerate(bases):
                segment = Segment(path, base, now_ms)
                if cut:
                    log.warning("%s: deleting segment %d, which follows a corrupt one", path, base)
                    segment.delete_files()
                    continue
                segments.append(segment)
                last = i == len(bases) - 1
                unflushed = not clean_shutdown and (last or bases[i + 1] > recovery_point)
                recover = last or not segment.had_index_files or unflushed
                if not recover:
                    try:
                        segment.load_tail()
                    except CorruptRecordError as exc:
                        log.warning("%s: segment %d is inconsistent (%s): recovering it", path, base, exc)
                        recover = True
                removed = 0
                if recover:
                    removed = segment.recover(config.index_interval_bytes, flushed_until)
                    if removed:
                        log.warning("%s: cut %d bytes of torn or corrupt data from segment %d", path, removed, base)
                        cut = not last
                if rebuild_from is None and (unflushed or removed or (recover and not segment.had_index_files)):
                    rebuild_from = base
            for segment in segments[:-1]:
                segment.seal()  # restores the final time entry a crash after a roll may have lost
            segments[-1].activate()
            producers = _recover_producer_state(path, segments, rebuild_from, now_ms)
            epochs = _load_epochs(path, segments, log_start_offset)
        except BaseException:
            for segment in segments:
                segment.retire()
            raise
        log_end = segments[-1].next_offset
        recovery_point = log_end if clean_shutdown else min(recovery_point, log_end)
        return cls(path, config, segments, recovery_point, producers, epochs=epochs, log_start_offset=log_start_offset)

    # --- the log's extent -------------------------------------------------------

    @property
    def directory(self) -> Path:
        return self._dir

    @property
    def log_start_offset(self) -> int:
        """The first offset consumers may read: the first segment's base offset, or later once
        DeleteRecords (or the leader's, on a follower) moved it into that segment."""
        return max(self._log_start_offset, self._segments[0].base_offset)

    def advance_log_start_offset(self, offset: int) -> int:
        """DeleteRecords (KIP-107): nothing below ``offset`` is served any more, and the segments
        wholly below it are deleted now (never the active one). ``offset`` may not pass the high
        watermark (OffsetOutOfRangeError, nothing changes); one at or below the current start
        changes nothing. Returns the log start offset. The log manager's checkpoint
        (``log-start-offset-checkpoint``) keeps it across restarts."""
        self._check_open()
        if offset > self.high_watermark:
            raise OffsetOutOfRangeError(offset, self.log_start_offset, self.high_watermark)
        if offset <= self.log_start_offset:
            return self.log_start_offset
        return self._move_log_start(offset)

    def follow_log_start_offset(self, leader_start: int) -> None:
        """A follower takes its leader's log start offset (from a fetch response), as far as its
        own log reaches: what the leader deleted is deleted here too."""
        if not self._closed and leader_start > self.log_start_offset:
            self._move_log_start(min(leader_start, self.log_end_offset))

    def _move_log_start(self, offset: int) -> int:
        segments = self._segments
        doomed = 0
        while doomed < len(segments) - 1 and segments[doomed + 1].base_offset <= offset:
            doomed += 1
        with self._lock:
            self._log_start_offset = offset
            if doomed:
                self._segments = segments[doomed:]
                self._bases = self._bases[doomed:]
                self._dir_dirty = True
        for segment in segments[:doomed]:
            segment.delete_files()
        delete_snapshots(self._dir, below=self.log_start_offset)
        self._producers.truncate_head(offset)
        self.epochs.truncate_from_start(offset)
        self._write_epochs()
        return offset

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    def visible_end_offset(self, isolation: Isolation = READ_UNCOMMITTED) -> int:
        """The end of what consumers may read: the high watermark, or for a reader of
        committed data (read_committed) the last stable offset. Every consumer-facing bound
        goes through here."""
        if isolation == Isolation.READ_COMMITTED:
            return self.last_stable_offset
        return self.high_watermark

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the earliest transaction not yet decided for every replica
        (open, or closed by a marker at or above the high watermark), or the high watermark:
        below it every transaction's fate is known."""
        high_watermark = self.high_watermark
        first = self._producers.first_unstable_offset(high_watermark)
        if first is None or first >= high_watermark:
            return high_watermark
        return max(first, self.log_start_offset)

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions whose data overlaps [fetch_offset, upper_bound): what a
        read_committed fetch returning those offsets tells its client to drop."""
        segments = self._segments
        first = max(bisect_right(self._bases, fetch_offset) - 1, 0)
        found, _ = collect_aborted([s.txn_index for s in segments[first:]], fetch_offset, upper_bound)
        return found

    @property
    def high_watermark(self) -> int:
        """Offsets below it are on every in-sync replica (committed)."""
        end = self.log_end_offset
        if self.hw_follows_log_end:
            return end
        return max(min(self._high_watermark, end), self.log_start_offset)

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        self._high_watermark = max(min(offset, self.log_end_offset), self.log_start_offset)

    @property
    def latest_epoch(self) -> int | None:
        return self.epochs.latest_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch, see LeaderEpochCache.end_offset_for."""
        return self.epochs.end_offset_for(epoch, self.log_end_offset)

    def assign_leader_epoch(self, epoch: int) -> None:
        """This replica leads from now on in `epoch`: it starts at the log end (as Kafka does
        when a broker becomes leader, before it has appended anything)."""
        self.epochs.assign(epoch, self.log_end_offset)
        self._write_epochs()

    def _write_epochs(self) -> None:
        try:
            self.epochs.write()
        except OSError as exc:
            raise self._storage_failure("writing the leader-epoch checkpoint", exc) from exc

    @property
    def recovery_point(self) -> int:
        """Every offset below this is on disk (fsynced)."""
        return self._recovery_point

    @property
    def size_in_bytes(self) -> int:
        return sum(segment.size for segment in self._segments)

    @property
    def segments(self) -> tuple[Segment, ...]:
        return self._segments

    @property
    def producer_state(self) -> ProducerStateManager:
        return self._producers

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"log {self._dir} is closed")

    # --- appending ------------------------------------------------------------

    def append(self, records: BytesLike, leader_epoch: int, now_ms: int, *, coordinator: bool = False) -> AppendResult:
        """Validates every batch of ``records``, then assigns offsets and
        writes them; raises (writing nothing) if any batch is refused.

        ``coordinator``: the batches come from this broker's group coordinator (transactional
        offset commits), as Kafka's AppendOrigin.COORDINATOR: their sequence numbers are not
        the producer's and are not checked, but epochs fence as for a client."""
        self._check_open()
        buf, batches = self._validated(records, recompress=not coordinator)
        if not coordinator:
            return self._append_validated(buf, batches, leader_epoch, now_ms)
        self._producers.check_coordinator_batches(header for _, header in batches)
        return self._append_checked([(buf, batches)], leader_epoch, now_ms)[0]

    def append_many(
        self, parts: Sequence[BytesLike], leader_epoch: int, now_ms: int
    ) -> list[AppendResult | LogError | ProtocolError]:
        """What :meth:`append` does to each of ``parts`` in turn (the records of a connection's
        pipelined Produce requests to this partition, in the order they came), each part's
        outcome apart: its result, or the error that refused it, in which case nothing of that
        part is written and the parts after it fare as they would after a refused append.

        The parts that pass are written together: one write and one pass over the bookkeeping
        per segment they land in, instead of one per part. They land where separate appends
        would have put them (a part that would have rolled the segment starts a new write in
        a new segment). A retried batch or a refused sequence among them sends every part
        through :meth:`append`'s path on its own instead, so duplicates and producer errors are
        answered exactly as separate appends answer them. A failed write fails the parts of
        that write and every part after it (the client retries them)."""
        self._check_open()
        outcomes: list[AppendResult | LogError | ProtocolError | None] = []
        valid: list[tuple[int, bytearray, list[tuple[int, BatchHeader]]]] = []
        for records in parts:
            try:
                buf, batches = self._validated(records)
            except (LogError, ProtocolError) as exc:
                # Kept without its traceback, whose frames would hold what the check held (a
                # decompressor, its window), through a cycle, until the collector runs.
                outcomes.append(exc.with_traceback(None))
                continue
            valid.append((len(outcomes), buf, batches))
            outcomes.append(None)
        try:
            together = self._producers.check(h for _, _, batches in valid for _, h in batches) is None
        except LogError:
            together = False
        if not together:
            for i, buf, batches in valid:
                try:
                    outcomes[i] = self._append_validated(buf, batches, leader_epoch, now_ms)
                except LogError as exc:
                    outcomes[i] = exc.with_traceback(None)
        else:
            prepared = [(buf, batches) for _, buf, batches in valid]
            start = 0
            while start < len(valid):
                end = start + self._fitting(prepared[start:], now_ms)
                try:
                    results = self._append_checked(prepared[start:end], leader_epoch, now_ms)
                except StorageError as exc:
                    for i, _, _ in valid[start:]:
                        outcomes[i] = exc.with_traceback(None)
                    break
                for (i, _, _), result in zip(valid[start:end], results, strict=True):
                    outcomes[i] = result
                start = end
        done = [outcome for outcome in outcomes if outcome is not None]
        assert len(done) == len(parts)
        return done

    def _validated(
        self, records: BytesLike, *, recompress: bool = True
    ) -> tuple[bytearray, list[tuple[int, BatchHeader]]]:
        """The records copied into a buffer of their own, and their batches, all checked (and
        recompressed when the topic's compression.type names a codec, unless a coordinator
        wrote them)."""
        config = self.config
        buf = bytearray(records)
        batches = _validate(buf, config)
        if recompress and config.stored_codec is not None:
            # compression.type names a codec: the one place an append decompresses.
            buf, batches = _recompressed(buf, batches, config.stored_codec, config)
        return buf, batches

    def _append_validated(
        self, buf: bytearray, batches: list[tuple[int, BatchHeader]], leader_epoch: int, now_ms: int
    ) -> AppendResult:
        """One client append whose batches passed :meth:`_validated`: the producers' check, then
        the write (nothing, for a retry of batches already in the log)."""
        duplicate = self._producers.check(header for _, header in batches)
        if duplicate is not None:
            return AppendResult(
                duplicate.first_offset,
                duplicate.last_offset,
                duplicate.timestamp if self.config.log_append_time else -1,
                duplicate.last_offset - duplicate.first_offset + 1,
                self.log_start_offset,
                duplicate=True,
            )
        return self._append_checked([(buf, batches)], leader_epoch, now_ms)[0]

    def _append_checked(
        self, parts: list[tuple[bytearray, list[tuple[int, BatchHeader]]]], leader_epoch: int, now_ms: int
    ) -> list[AppendResult]:
        """Offsets, this leader's epoch (and the append time, under LogAppendTime) stamped on the
        batches of ``parts``, which are written with one write; each part's result."""
        append_time = now_ms if self.config.log_append_time else -1
        offset = self.log_end_offset
        buf = parts[0][0] if len(parts) == 1 else bytearray().join(part for part, _ in parts)
        assigned: list[tuple[int, BatchHeader]] = []
        spans: list[tuple[int, int, int]] = []  # each part's first offset, last offset and records
        shift = 0
        for part, part_batches in parts:
            first, count = offset, 0
            for relative, received in part_batches:
                pos = relative + shift
                header = assign_offset_and_epoch(buf, pos, received, offset, leader_epoch)
                if append_time >= 0:
                    header = stamp_log_append_time(buf, pos, header, append_time)
                assigned.append((pos, header))
                offset += header.last_offset_delta + 1
                count += header.record_count
            shift += len(part)
            spans.append((first, offset - 1, count))
        self._write(buf, assigned, now_ms)
        log_start_offset = self.log_start_offset
        return [AppendResult(first, last, append_time, count, log_start_offset) for first, last, count in spans]

    def _fitting(self, parts: list[tuple[bytearray, list[tuple[int, BatchHeader]]]], now_ms: int) -> int:
        """How many of ``parts`` (the first always) one write takes: those that separate appends
        would have put in the same segment as the first (:meth:`_maybe_roll`'s rules, the
        index's fullness aside: it is looked at before each write)."""
        if len(parts) == 1:
            return 1
        segment = self._segments[-1]
        size, base, first_timestamp, created = segment.size, segment.base_offset, -1, segment.created_ms
        if size:
            first_timestamp = segment.first_timestamp()
        offset = self.log_end_offset
        for n, (buf, batches) in enumerate(parts):
            last_offset, max_timestamp = offset - 1, -1
            for _, header in batches:
                last_offset += header.last_offset_delta + 1
                max_timestamp = max(max_timestamp, header.max_timestamp)
            if self._rolls(size, first_timestamp, created, base, len(buf), max_timestamp, last_offset, now_ms):
                if n:
                    return n
                size, base, first_timestamp, created = 0, offset, -1, now_ms  # the first part rolls
            if not size:
                first_timestamp = batches[0][1].max_timestamp
            size += len(buf)
            offset = last_offset + 1
        return len(parts)

    def _rolls(  # noqa: PLR0917 (the segment's figures and the append's, side by side)
        self,
        segment_size: int,
        first_timestamp: int,
        created_ms: int,
        base_offset: int,
        size: int,
        max_timestamp: int,
        last_offset: int,
        now_ms: int,
    ) -> bool:
        """Whether an append of ``size`` bytes rolls a segment holding ``segment_size`` (as Kafka:
        segment.bytes, segment.ms (or, compacted, max.compaction.lag.ms if shorter) measured in
        record time from the segment's first batch, in broker time only when batches carry no
        timestamps, and the offsets a segment's index can hold). An empty segment never rolls."""
        if not segment_size:
            return False
        config = self.config
        waited = max_timestamp - first_timestamp if first_timestamp >= 0 else now_ms - created_ms
        return (
            segment_size + size > config.segment_bytes
            or waited > config.roll_ms
            or last_offset - base_offset > INT32_MAX
        )

    def append_marker(
        self,
        marker: ControlType,
        *,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        leader_epoch: int,
        now_ms: int,
    ) -> AppendResult:
        """Appends the end-transaction marker a transaction coordinator asked for (the only
        control batch a log takes from its leader's side); refused, writing nothing, from an
        older producer epoch or an older coordinator than the producer's last marker."""
        self._check_open()
        self._producers.check_marker(producer_id, producer_epoch, coordinator_epoch)
        buf = bytearray(
            build_marker_batch(
                marker, producer_id, producer_epoch, coordinator_epoch, now_ms, partition_leader_epoch=leader_epoch
            )
        )
        offset = self.log_end_offset
        set_base_offset(buf, 0, offset)
        header = parse_batch_header(buf)
        count = self._write(buf, [(0, header)], now_ms)
        return AppendResult(offset, offset, -1, count, self.log_start_offset)

    def append_as_follower(self, records: BytesLike, now_ms: int) -> AppendResult:
        """Appends batches copied from the leader as they are: their offsets, leader epochs and
        timestamps stay, and so does every byte. Each batch's header and CRC are checked; the
        first must start at or after this log's end and each after the one before (Kafka's
        UnexpectedAppendOffsetException otherwise). Raises, writing nothing, on any refusal."""
        self._check_open()
        buf = bytearray(records)
        batches: list[tuple[int, BatchHeader]] = []
        expected = self.log_end_offset
        pos = 0
        while pos < len(buf):
            header = parse_batch_header(buf, pos)
            if pos + header.size > len(buf):
                break  # a fetch may end in a partial batch (KIP-74): the next fetch brings it
            verify_crc(buf, pos, header)
            if header.base_offset < expected or header.record_count < 0:
                raise InvalidRecordError(
                    f"batch at offset {header.base_offset} does not follow this replica's end {expected}"
                )
            batches.append((pos, header))
            expected = header.next_offset
            pos += header.size
        if not batches:
            return AppendResult(-1, -1, -1, 0, self.log_start_offset)
        del buf[pos:]
        count = self._write(buf, batches, now_ms)
        first, last = batches[0][1], batches[-1][1]
        return AppendResult(first.base_offset, last.last_offset, -1, count, self.log_start_offset)

    def _write(self, buf: bytearray, assigned: list[tuple[int, BatchHeader]], now_ms: int) -> int:
        """Write batches whose headers are final; returns the number of records."""
        config = self.config
        last = assigned[-1][1]
        max_timestamp = max(header.max_timestamp for _, header in assigned)
        try:
            if self.storage_error is not None:
                # The last append or flush failed half-way: it was cut back, but the disk that
                # failed it is not trusted until the tail reads back whole.
                try:
                    self._segments[-1].verify_tail()
                except CorruptRecordError as exc:
                    raise self._storage_failure("checking the tail after a failed write", str(exc)) from exc
            segment = self._maybe_roll(len(buf), max_timestamp, last.last_offset, now_ms)
            segment.append(buf, assigned, config.index_interval_bytes)
        except OSError as exc:
            raise self._storage_failure("appending", exc) from exc
        self._storage_recovered()
        count = 0
        for pos, header in assigned:
            marker = _marker(buf, pos, header, self._dir) if header.is_control else None
            completed = self._producers.record(header, now_ms, marker)
            if completed is not None and completed.aborted:
                segment.txn_index.append(_aborted_entry(self._producers, completed))
            self.epochs.assign(header.partition_leader_epoch, header.base_offset)
            count += header.record_count
        with self._lock:
            self._unflushed_messages += count
            if self._first_unflushed_ms is None:
                self._first_unflushed_ms = now_ms
        if self.epochs.dirty:
            self._write_epochs()
        return count

    def _maybe_roll(self, size: int, max_timestamp: int, last_offset: int, now_ms: int) -> Segment:
        segment = self._segments[-1]
        if not segment.size:
            return segment
        if self._rolls(
            segment.size, segment.first_timestamp(), segment.created_ms, segment.base_offset,
            size, max_timestamp, last_offset, now_ms,
        ) or segment.index_full(self.config.segment_index_bytes):  # fmt: skip
            return self._roll(now_ms)
        return segment

    def _roll(self, now_ms: int) -> Segment:
        old = self._segments[-1]
        new = Segment.create(self._dir, old.next_offset, now_ms)
        try:
            # As Kafka: the producer state as of the roll, so that a recovery replays at most the
            # segments after the last roll (synced with the rolled segment, soon: see flush).
            snapshot = write_snapshot(self._dir, self._producers, new.base_offset, durable=False)
            new.activate()
            old.seal()
        except OSError:
            # No half-made segment is left behind for the next open to trip over.
            new.delete_files()
            raise
        with self._lock:
            self._segments = (*self._segments, new)
            self._bases = [*self._bases, new.base_offset]
            # As Kafka: a rolled segment is flushed soon whatever the flush policy.
            self._rolled_unflushed = True
            self._dir_dirty = True
            self._unsynced_snapshots.append(snapshot)
        return new

    # --- reading --------------------------------------------------------------

    def read(
        self, offset: int, max_bytes: int, max_offset: int | None = None, *, min_one_batch: bool = True
    ) -> ReadResult:
        """Whole batches from the one containing ``offset``: up to
        ``max_bytes``, but at least the first batch when ``min_one_batch``,
        and nothing at or beyond ``max_offset`` (default: the visible end).

        Raises :class:`OffsetOutOfRangeError` below the log start or above the
        log end; at the log end (or the visible end) the result is empty. The
        result pins its segments until closed: use it in a ``with`` block."""
        self._check_open()
        segments, bases = self._segments, self._bases
        start, end = self.log_start_offset, segments[-1].next_offset
        if not start <= offset <= end:
            raise OffsetOutOfRangeError(offset, start, end)
        visible = self.visible_end_offset()
        limit = min(visible if max_offset is None else max_offset, end)
        regions: list[FileRegion] = []
        pinned: list[Segment] = []
        remaining = max_bytes
        next_offset = offset
        i = max(bisect_right(bases, offset) - 1, 0)
        try:
            while i < len(segments) and next_offset < limit:
                segment = segments[i]
                piece = segment.read_slice(next_offset, remaining, limit, min_one_batch and not regions)
                if piece.size:
                    _pin(segment)
                    pinned.append(segment)
                    regions.append(FileRegion(segment.fd, piece.position, piece.size))
                    remaining -= piece.size
                next_offset = piece.next_offset
                if not piece.at_end:
                    break
                i += 1
        except BaseException:
            for segment in pinned:
                segment.unpin()
            raise
        return ReadResult(
            regions,
            pinned,
            next_offset=next_offset,
            log_start_offset=start,
            log_end_offset=end,
            visible_end_offset=visible,
        )

    def offset_for_timestamp(self, timestamp: int, isolation: Isolation = READ_UNCOMMITTED) -> tuple[int, int] | None:
        """(offset, timestamp) of the first visible record stamped at or after
        ``timestamp``; None if there is none.

        The time index finds the first batch whose maximum timestamp reaches it;
        the record inside it is found by reading that one batch's records, as
        Kafka does. ListOffsets is off the produce and fetch paths, which never
        decompress; without this, every hour boundary of an audit (and every
        seek by time) would land on a batch's first record, up to a batch early."""
        self._check_open()
        start = self.log_start_offset
        for segment in self._segments:
            if segment.max_timestamp < timestamp:
                continue
            header = segment.find_timestamp(timestamp)
            if header is not None and header.last_offset < start:
                # Below what DeleteRecords left: the first later batch that reaches the time.
                header = next(
                    (h for h in segment.iter_headers() if h.last_offset >= start and h.max_timestamp >= timestamp),
                    None,
                )
            if header is None:
                continue
            if header.base_offset >= self.visible_end_offset(isolation):
                return None
            return _first_record_at(segment, header, timestamp, start)
        return None

    def offset_of_max_timestamp(self, isolation: Isolation = READ_UNCOMMITTED) -> tuple[int, int] | None:
        """(offset, timestamp) of the first visible record stamped with the largest timestamp in
        the log (ListOffsets' MAX_TIMESTAMP, KIP-734); None for an empty log, or when that
        record is not visible yet (Kafka's answer then is "unknown" too)."""
        self._check_open()
        largest = max((segment.max_timestamp for segment in self._segments), default=-1)
        return None if largest < 0 else self.offset_for_timestamp(largest, isolation)

    # --- flushing ---------------------------------------------------------------

    def needs_flush(self, now_ms: int) -> bool:
        """The flush policy: ``flush.messages`` messages or data older than
        ``flush.ms`` not yet on disk. (Rolled segments are due regardless:
        see :attr:`rolled_unflushed`.)"""
        config = self.config
        first = self._first_unflushed_ms
        return self._unflushed_messages >= config.flush_messages or (
            first is not None and now_ms - first >= config.flush_ms
        )

    @property
    def rolled_unflushed(self) -> bool:
        """A segment was rolled since the last flush: flush in the background."""
        return self._rolled_unflushed

    def flush(self) -> None:
        """fsyncs every segment written since the last flush (data and
        indexes) and the directory, then advances the recovery point to the
        log end as of the start. Safe in a worker thread (see the module doc);
        a no-op on a closed log."""
        with self._flush_lock:
            with self._lock:
                if self._closed:
                    return
                segments = self._segments
                end = segments[-1].next_offset
                truncations = self._truncations
                messages, self._unflushed_messages = self._unflushed_messages, 0
                first, self._first_unflushed_ms = self._first_unflushed_ms, None
                rolled, self._rolled_unflushed = self._rolled_unflushed, False
                sync_dir, self._dir_dirty = self._dir_dirty, False
                snapshots, self._unsynced_snapshots = self._unsynced_snapshots, []
            pinned = [s for s in segments if s.dirty and s.try_pin()]
            # Cleared before the fsync: a write racing it sets the flag again.
            for segment in pinned:
                segment.dirty = False
            done = False
            started = time.perf_counter()
            try:
                for segment in pinned:
                    segment.fsync()
                _sync_snapshots(snapshots)
                if sync_dir:
                    fsync_dir(self._dir)
                done = True
                self._report_flush(started, bool(pinned) or sync_dir)
            except OSError as exc:
                if not self._closed:
                    raise self._storage_failure("flushing", exc) from exc
            finally:
                for segment in pinned:
                    if not done:
                        segment.dirty = True
                    segment.unpin()
                with self._lock:
                    if done and self._truncations == truncations:
                        self._recovery_point = max(self._recovery_point, min(end, self.log_end_offset))
                    elif not done:
                        self._unflushed_messages += messages
                        if first is not None and self._first_unflushed_ms is None:
                            self._first_unflushed_ms = first
                        self._rolled_unflushed |= rolled
                        self._dir_dirty |= sync_dir
                        self._unsynced_snapshots[:0] = snapshots

    def _storage_failure(self, action: str, cause: OSError | str) -> StorageError:
        """Counts a failure of the disk and logs it once per incident (not once per request:
        a full disk fails every produce until it is freed)."""
        error = StorageError(self._dir, action, cause)
        self.storage_errors += 1
        if self.storage_error is None:
            log.warning("%s (KAFKA_STORAGE_ERROR until it works again)", error)
        self.storage_error = str(error)
        return error

    def _storage_recovered(self) -> None:
        if self.storage_error is not None:
            log.warning("%s: storage works again after %d failures", self._dir, self.storage_errors)
            self.storage_error = None

    def _report_flush(self, started: float, synced: bool) -> None:
        if synced and self.on_flush is not None:
            self.on_flush(time.perf_counter() - started)

    # --- retention --------------------------------------------------------------

    def delete_old_segments(self, now_ms: int) -> int:
        """Deletes the oldest segments while their largest timestamp is older
        than ``retention.ms``, then while the log stays at least
        ``retention.bytes`` without them (Kafka's rule); never the active
        segment, never beyond the visible end. Returns how many went."""
        self._check_open()
        config = self.config
        if not config.deletes_old_segments:
            return 0
        segments = self._segments
        candidates = segments[:-1]
        visible = self.visible_end_offset()
        doomed = 0
        if config.retention_ms >= 0:
            while (
                doomed < len(candidates)
                and candidates[doomed].next_offset <= visible
                and now_ms - candidates[doomed].largest_timestamp() > config.retention_ms
            ):
                doomed += 1
        if config.retention_bytes >= 0:
            excess = sum(s.size for s in segments[doomed:]) - config.retention_bytes
            while (
                doomed < len(candidates)
                and candidates[doomed].next_offset <= visible
                and excess - candidates[doomed].size >= 0
            ):
                excess -= candidates[doomed].size
                doomed += 1
        if not doomed:
            return 0
        with self._lock:
            self._segments = segments[doomed:]
            self._bases = self._bases[doomed:]
        for segment in segments[:doomed]:
            segment.delete_files()
        delete_snapshots(self._dir, below=self.log_start_offset)
        self._producers.truncate_head(self.log_start_offset)
        self.epochs.truncate_from_start(self.log_start_offset)
        self._write_epochs()
        return doomed

    def expire_producers(self, now_ms: int) -> int:
        return self._producers.expire(now_ms, self.config.producer_id_expiration_ms)

    # --- truncation and lifetime -----------------------------------------------

    def truncate_to(self, offset: int, now_ms: int | None = None) -> None:
        """Removes every batch from ``offset`` on; ``offset`` must be a batch
        boundary (a batch's base offset or the log end) or lie in a gap compaction
        left. For a follower that diverged from its leader."""
        self._check_open()
        segments = self._segments
        if offset >= segments[-1].next_offset:
            return
        if offset < self.log_start_offset:
            if offset < segments[0].base_offset:
                raise OffsetOutOfRangeError(offset, segments[0].base_offset, segments[-1].next_offset)
            # Below what DeleteRecords left (Kafka's rule): nothing the log still serves is kept.
            self.truncate_fully_and_start_at(offset, now_ms)
            return
        i = bisect_right(self._bases, offset) - 1
        if offset == segments[i].base_offset and i > 0:
            i -= 1  # the whole segment goes; the one before becomes active
        elif not segments[i].is_truncation_point(offset):
            raise ValueError(f"offset {offset} is not a batch boundary")
        keep, doomed = segments[: i + 1], segments[i + 1 :]
        with self._lock:
            self._segments = keep
            self._bases = self._bases[: i + 1]
            self._truncations += 1
            self._recovery_point = min(self._recovery_point, offset)
            self._dir_dirty = True
        for segment in doomed:
            segment.delete_files()
        self._note_truncation(offset)
        active = keep[-1]
        active.truncate_to(offset)
        active.activate()
        # The state as of the new end: from the newest snapshot at or below it, replayed.
        delete_snapshots(self._dir, above=offset)
        self._producers = _recover_producer_state(self._dir, keep, None, _now_ms() if now_ms is None else now_ms)
        self.epochs.truncate_from_end(offset)
        self._write_epochs()
        self._high_watermark = min(self._high_watermark, offset)

    # --- compaction ---------------------------------------------------------------

    def replace_segments(
        self, old: Sequence[Segment], base: int, now_ms: int, reached: Callable[[str], None] = lambda _p: None
    ) -> Segment:
        """Puts the cleaned segment ``base`` (its ``.cleaned`` files written and fsynced by the
        log cleaner) in place of ``old``, consecutive closed segments of this log, atomically
        (:func:`swap.install`). Raises :class:`SwapRefusedError`, changing nothing, when ``old``
        is no longer what the log holds there (retention, truncation or a close came between);
        the caller then discards the cleaned files. Readers holding the old segments keep them
        until they let go."""
        self._check_open()
        segments = self._segments
        first = next((i for i, s in enumerate(segments) if s is old[0]), None)
        if (
            first is None
            or tuple(segments[first : first + len(old)]) != tuple(old)
            or first + len(old) >= len(segments)  # the active segment is never cleaned
            or old[0].base_offset != base
        ):
            raise SwapRefusedError(f"{self._dir}: the segments cleaned from {base} changed meanwhile")
        swap.install(self._dir, base, [s.base_offset for s in old], reached)
        new = Segment(self._dir, base, now_ms)
        try:
            try:
                new.load_tail()
            except CorruptRecordError as exc:
                log.warning("%s: cleaned segment %d is inconsistent (%s): recovering it", self._dir, base, exc)
                new.recover(self.config.index_interval_bytes, sys.maxsize)
            new.seal()
        except BaseException:
            new.retire()
            raise
        with self._lock:
            self._segments = (*segments[:first], new, *segments[first + len(old) :])
            self._bases = [s.base_offset for s in self._segments]
            # The renames become durable with the directory's fsync in the next flush, soon.
            self._dir_dirty = True
            self._rolled_unflushed = True
        for segment in old:
            segment.retire()  # its files are gone already; readers keep the descriptors they pinned
        return new

    def truncate_fully_and_start_at(self, offset: int, now_ms: int | None = None) -> None:
        """Empties the log and starts it again at ``offset``: a follower whose leader deleted
        (retention) everything this replica still lacks."""
        self._check_open()
        now = _now_ms() if now_ms is None else now_ms
        new = Segment.create(self._dir, offset, now)
        new.activate()
        old = self._segments
        with self._lock:
            self._segments = (new,)
            self._bases = [offset]
            self._log_start_offset = offset
            self._truncations += 1
            self._recovery_point = offset
            self._dir_dirty = True
        for segment in old:
            segment.delete_files()
        self._note_truncation(0)
        delete_snapshots(self._dir)
        self._producers = ProducerStateManager()
        self.epochs.truncate_from_end(-1)
        self._write_epochs()
        self._high_watermark = offset

    def _note_truncation(self, offset: int) -> None:
        low = self.lowest_truncation
        self.lowest_truncation = offset if low is None else min(low, offset)

    def close(self) -> None:
        """Flushes, saves the producer state for the next open, closes the
        files (those pinned by reads close when released)."""
        if self._closed:
            return
        self.flush()
        write_snapshot(self._dir, self._producers, self.log_end_offset, durable=True)
        with self._lock:
            self._closed = True
        for segment in self._segments:
            segment.retire()

    def delete(self) -> None:
        """Removes the log and its directory (topic deletion). Pinned regions
        stay readable until released."""
        with self._lock:
            self._closed = True
        for segment in self._segments:
            segment.delete_files()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __repr__(self) -> str:
        return f"PartitionLog({str(self._dir)!r}, [{self.log_start_offset}, {self.log_end_offset}))"


def _pin(segment: Segment) -> None:
    if not segment.try_pin():
        raise LogClosedError(f"{segment.log_path} was closed during a read")


def _validate(buf: bytearray, config: LogConfig) -> list[tuple[int, BatchHeader]]:
    """(position, header) of each batch, all checked before any is written: the header,
    the CRC, and (``record.validation = full``, the default) that the records agree with
    the header, walked without building them and, when compressed, decompressed in pieces
    up to ``max.decompression.ratio`` times ``max.message.bytes``; a compacted log refuses
    records without a key then."""
    max_message_bytes = config.max_message_bytes
    check_all = config.record_validation == FULL
    batches: list[tuple[int, BatchHeader]] = []
    pos, end = 0, len(buf)
    while pos < end:
        header = parse_batch_header(buf, pos)
        size = header.batch_length + LOG_OVERHEAD
        if pos + size > end:
            raise CorruptRecordError(f"record batch at {pos} is truncated: {end - pos} of {size} bytes")
        # Before the CRC: no point checksumming a batch refused for its size.
        if size > max_message_bytes:
            raise RecordTooLargeError(size, max_message_bytes)
        verify_crc(buf, pos, header)
        count = header.record_count
        if header.attributes & CONTROL_BIT:
            raise InvalidRecordError("clients may not write control batches")
        if count <= 0 or header.last_offset_delta != count - 1:
            raise InvalidRecordError(f"batch holds {count} records but spans {header.last_offset_delta + 1} offsets")
        if header.producer_id >= 0 and header.base_sequence < 0:
            raise InvalidRecordError(f"batch of producer {header.producer_id} has no sequence number")
        if check_all:
            keyless = check_records(buf, pos, header, max_size=config.max_decompressed_bytes)
            if keyless and config.compacts:
                # Kafka's LogValidator: compaction keeps one record per key, and these have none.
                raise InvalidRecordError(f"compacted topic cannot accept {keyless} records without a key")
        batches.append((pos, header))
        pos += size
    if not batches:
        raise InvalidRecordError("no record batches to append")
    return batches


def _recompressed(
    buf: bytearray, batches: list[tuple[int, BatchHeader]], codec: Compression, config: LogConfig
) -> tuple[bytearray, list[tuple[int, BatchHeader]]]:
    """The batches with their records in ``codec`` (those in it already copied as they are),
    each held to ``max.message.bytes`` again (Kafka's rule: the stored size counts)."""
    if all(header.compression == codec for _, header in batches):
        return buf, batches
    out = bytearray()
    placed: list[tuple[int, BatchHeader]] = []
    for pos, header in batches:
        batch = recompress_batch(buf, pos, header, codec, max_size=config.max_decompressed_bytes)
        if len(batch) > config.max_message_bytes:
            raise RecordTooLargeError(len(batch), config.max_message_bytes)
        placed.append((len(out), parse_batch_header(batch)))
        out += batch
    return out, placed


def _discover(path: Path) -> list[int]:
    """Base offsets of the segments in ``path``; finishes or undoes a swap of cleaned
    segments a crash interrupted (:func:`swap.recover`), removes index files without
    a segment and temporary files a crash left."""
    swap.recover(path)
    bases: set[int] = set()
    indexes: list[tuple[int, str]] = []
    for entry in os.scandir(path):
        name = entry.name
        if name.endswith(".tmp"):
            unlink_quietly(entry.path)
            continue
        base = parse_segment_file_name(name, LOG_SUFFIX)
        if base is not None:
            bases.add(base)
            continue
        for suffix in SEGMENT_SUFFIXES[1:]:
            base = parse_segment_file_name(name, suffix)
            if base is not None:
                indexes.append((base, entry.path))
    for base, index_path in indexes:
        if base not in bases:
            unlink_quietly(index_path)
    return sorted(bases)


def _sync_snapshots(paths: Sequence[Path]) -> None:
    for path in paths:
        sync_snapshot(path)


def _marker(buf: BytesLike, pos: int, header: BatchHeader, where: Path) -> Marker | None:
    """The end-transaction marker of a control batch; None (logged) for one that does not
    read, which then closes no transaction, as an unknown control type would not."""
    try:
        return read_marker(buf, pos)
    except (CorruptRecordError, ProtocolError) as exc:
        log.warning("%s: control batch at offset %d does not read: %s", where, header.base_offset, exc)
        return None


def _aborted_entry(producers: ProducerStateManager, completed: CompletedTxn) -> AbortedTxn:
    """The index entry of an aborted transaction, its marker just recorded in ``producers``."""
    open_first = producers.first_open_offset()
    last_stable = completed.last_offset + 1 if open_first is None else open_first
    return AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset, last_stable)


def _legacy_snapshot(path: Path, log_end: int, now_ms: int) -> tuple[int, ProducerStateManager] | None:
    """The state a broker from before transactions saved at its clean close, if it matches the
    log end (``-1``: this open must replay anyway); the file is removed either way, so that a
    later crash never reads it."""
    legacy = path / LEGACY_SNAPSHOT_FILE
    try:
        data = legacy.read_bytes()
    except FileNotFoundError:
        return None
    found: tuple[int, ProducerStateManager] | None = None
    try:
        offset, state = ProducerStateManager.from_bytes(data, now_ms)
    except ValueError as exc:
        log.warning("%s: ignoring producer state snapshot: %s", legacy, exc)
    else:
        if offset == log_end:
            found = offset, state
    unlink_quietly(legacy)
    fsync_dir(path)
    return found


def _recover_producer_state(
    path: Path, segments: Sequence[Segment], rebuild_from: int | None, now_ms: int
) -> ProducerStateManager:
    """The producer state as of the log end: the newest snapshot at or below where the replay
    must start, then every batch header (and marker) after it. Segments from ``rebuild_from``
    on get their aborted-transaction index rebuilt on the way (their files are not trusted).
    Without a usable snapshot the replay starts at the log start."""
    log_end = segments[-1].next_offset
    log_start = segments[0].base_offset
    delete_snapshots(path, above=log_end)
    start_at = log_end if rebuild_from is None else rebuild_from
    loaded = _legacy_snapshot(path, log_end if rebuild_from is None else -1, now_ms) or load_latest(
        path, start_at, now_ms
    )
    if loaded is not None and loaded[0] >= log_start:
        start, state = loaded
    else:
        start, state = log_start, ProducerStateManager()
    for segment in segments:
        rebuild = rebuild_from is not None and segment.base_offset >= rebuild_from
        if segment.next_offset <= start and not rebuild:
            continue
        entries: list[AbortedTxn] = []
        found = segment.locate(start) if start > segment.base_offset else None
        position = found[0] if found is not None else 0
        try:
            for pos, header in scan_batches(segment.fd, position, segment.size, verify=False):
                if header.base_offset < start:
                    continue
                marker = None
                if header.is_control:
                    marker = _marker(os.pread(segment.fd, header.size, pos), 0, header, path)
                completed = state.record(header, now_ms, marker)
                if completed is not None and completed.aborted and rebuild:
                    entries.append(_aborted_entry(state, completed))
        except CorruptRecordError as exc:
            # Only a trusted segment can be corrupt here; reads will hit it too.
            log.warning("%s: corrupt batch while rebuilding producer state: %s", segment.log_path, exc)
        if rebuild:
            segment.txn_index.replace(entries)
    return state


def _load_epochs(path: Path, segments: Sequence[Segment], log_start_offset: int = 0) -> LeaderEpochCache:
    """The leader-epoch checkpoint, cut to the log as recovery left it; rebuilt from the batch
    headers when it is missing or unreadable (a log from before replication, a lost file)."""
    checkpoint = path / LEADER_EPOCH_CHECKPOINT
    cache = LeaderEpochCache.load(checkpoint)
    if cache is None:
        cache = LeaderEpochCache(checkpoint)
        for segment in segments:
            try:
                for header in segment.iter_headers():
                    cache.assign(header.partition_leader_epoch, header.base_offset)
            except CorruptRecordError as exc:
                log.warning("%s: corrupt batch while rebuilding the leader-epoch cache: %s", segment.log_path, exc)
                break
    cache.truncate_from_end(segments[-1].next_offset)
    cache.truncate_from_start(min(max(segments[0].base_offset, log_start_offset), segments[-1].next_offset))
    cache.write()
    return cache
