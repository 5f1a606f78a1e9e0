"""The coordinator's records in the ``__consumer_offsets`` logs this broker leads:
appended as record batches like any producer's, and read back whole when the
broker takes over a partition.

The topic is compacted (docs/compaction.md): the log cleaner keeps the latest record
of each key, so loading reads about one record per group, topic and partition plus
what arrived since the last clean, however many commits were made. A compacted
log has offset gaps and, for a while, tombstones; a load reads past the first and
applies the second. Its retention is infinite, so nothing a group still needs is
ever deleted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Protocol

import trio

from tributary.broker.cluster.model import ClusterSnapshot
from tributary.broker.group.messages import Loaded, TxnEnd, TxnRecord
from tributary.broker.group.placement import OFFSETS_TOPIC
from tributary.broker.log.errors import LogError
from tributary.broker.log.log import PartitionLog
from tributary.broker.log.reads import ReadResult
from tributary.broker.partitions import Partition, PartitionManager
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.errors import ProtocolError
from tributary.protocol.records import ControlType, build_batch, iter_batches, iter_records, read_marker

log = logging.getLogger(__name__)

Records = list[Loaded]

#: Bytes read per step while loading a partition.
LOAD_CHUNK_BYTES = 4 * 1024 * 1024
#: How long a write waits for the partition's in-sync replicas before it fails with
#: REQUEST_TIMED_OUT (Kafka's offsets.commit.timeout.ms).
REPLICATION_TIMEOUT_S = 5.0


class StorageError(Exception):
    """The partition cannot be read (not led here, gone, closed)."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error


class Storage(Protocol):
    """What the driver needs of the offsets logs (tests substitute an in-memory one)."""

    def append(
        self,
        partition: int,
        records: Sequence[tuple[bytes, bytes | None]],
        now_ms: int,
        producer: tuple[int, int] | None = None,
    ) -> ErrorCode: ...

    async def flush(self) -> dict[int, ErrorCode]:
        """Make the records appended since the last flush as durable as the broker promises
        before answering: on disk when the flush policy says so, and on every in-sync replica.
        Per partition appended to, NONE or why its records are not (a partition left out: NONE)."""
        ...

    async def read(self, partition: int) -> Records: ...


class OffsetsLogStorage:
    def __init__(self, partitions: PartitionManager, snapshot: Callable[[], ClusterSnapshot]) -> None:
        self._partitions = partitions
        self._snapshot = snapshot
        # Partitions appended to since the last flush, and the offset their high watermark must reach.
        self._appended: dict[int, tuple[Partition, int]] = {}

    def append(
        self,
        partition: int,
        records: Sequence[tuple[bytes, bytes | None]],
        now_ms: int,
        producer: tuple[int, int] | None = None,
    ) -> ErrorCode:
        """Appends the records as one batch (so a commit of many partitions is all or
        nothing); returns the error code of a refusal. ``producer``: (id, epoch) of the
        transaction the records belong to (TxnOffsetCommit), written as its batch; the log
        fences an older epoch (INVALID_PRODUCER_EPOCH)."""
        target = self._partitions.lookup(self._snapshot(), OFFSETS_TOPIC, partition)
        if isinstance(target, ErrorCode):
            return target
        rows = ((key, value, (), now_ms) for key, value in records)
        if producer is None:
            batch = build_batch(rows)
        else:
            # As Kafka: the coordinator's own sequence (0), not checked for coordinator appends.
            batch = build_batch(
                rows, producer_id=producer[0], producer_epoch=producer[1], base_sequence=0, is_transactional=True
            )
        try:
            result = target.append(batch, now_ms, coordinator=producer is not None)
        except LogError as exc:
            log.warning("%s-%d: append refused: %s", OFFSETS_TOPIC, partition, exc)
            return exc.error_code
        self._appended[partition] = (target, result.last_offset + 1)
        return ErrorCode.NONE

    async def flush(self) -> dict[int, ErrorCode]:
        """As Kafka's coordinator appends with acks=all: a write counts once it is on every
        in-sync replica (and on disk when the flush policy says so), so that a coordinator that
        takes the partition over finds it; otherwise it fails (REQUEST_TIMED_OUT past the
        timeout, NOT_LEADER_OR_FOLLOWER once leadership moved: the new leader may not hold it)."""
        appended, self._appended = self._appended, {}
        outcomes: dict[int, ErrorCode] = {}
        flushed: dict[PartitionLog, ErrorCode] = {}
        deadline = trio.current_time() + REPLICATION_TIMEOUT_S
        for partition, (target, offset) in appended.items():
            plog = target.log
            if plog not in flushed:
                flushed[plog] = ErrorCode.NONE
                if plog.needs_flush(int(time.time() * 1000)):
                    try:
                        await trio.to_thread.run_sync(plog.flush)
                    except LogError as exc:
                        flushed[plog] = exc.error_code
            outcome = flushed[plog]
            settled = outcome != ErrorCode.NONE or not target.replicated  # failed, or no replicas to wait for
            if not settled and not await target.wait_for_high_watermark(offset, deadline):
                outcome = ErrorCode.REQUEST_TIMED_OUT if target.is_leader else ErrorCode.NOT_LEADER_OR_FOLLOWER
                log.warning("%s-%d: a write was not replicated: %s", OFFSETS_TOPIC, partition, outcome.name)
            outcomes[partition] = outcome
        return outcomes

    async def read(self, partition: int) -> Records:
        """Every (key, value) of the partition, in log order."""
        target = self._partitions.lookup(self._snapshot(), OFFSETS_TOPIC, partition)
        if isinstance(target, ErrorCode):
            raise StorageError(target, f"{OFFSETS_TOPIC}-{partition}: {target.name}")
        plog = target.log
        offset, end = plog.log_start_offset, plog.log_end_offset
        records: Records = []
        while offset < end:
            try:
                result = plog.read(offset, LOAD_CHUNK_BYTES, max_offset=end)
            except LogError as exc:
                raise StorageError(exc.error_code, f"{OFFSETS_TOPIC}-{partition}: {exc}") from exc
            try:
                if not result.size:
                    break
                # Disk reads and decoding off the event loop: a partition may hold a lot.
                records += await trio.to_thread.run_sync(_decode, result)
                offset = result.next_offset
            finally:
                result.close()
        return records


def _decode(result: ReadResult) -> Records:
    """The records in log order; those of transactional batches and the markers say whose."""
    data = result.read_bytes()
    out: Records = []
    for pos, header in iter_batches(data):
        try:
            if header.is_control:
                marker = read_marker(data, pos)
                if marker is not None:
                    out.append(TxnEnd(header.producer_id, marker.control_type is ControlType.COMMIT))
            elif header.is_transactional:
                out += [TxnRecord(header.producer_id, r.key, r.value) for r in iter_records(data, pos) if r.key]
            else:
                out += [(r.key, r.value) for r in iter_records(data, pos) if r.key is not None]
        except ProtocolError as exc:
            log.warning("%s: skipping a batch at offset %d: %s", OFFSETS_TOPIC, header.base_offset, exc)
    return out
