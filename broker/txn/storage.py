"""The coordinator's records in the ``__transaction_state`` partitions this broker leads.

A state change counts only once every in-sync replica has it (Kafka writes these records with
acks=all): a coordinator that takes over must read back every decision a client was told of, or
a transaction could be committed in some partitions and aborted in others. So an append is
refused while the partition has fewer in-sync replicas than its ``min.insync.replicas``, and a
write is done only when the high watermark has passed it (and it is on disk, when the flush
policy says so); past the write timeout it is reported REQUEST_TIMED_OUT.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

import trio

from tributary.broker.cluster.model import ClusterSnapshot
from tributary.broker.log.errors import LogError
from tributary.broker.log.reads import ReadResult
from tributary.broker.partitions import Partition, PartitionManager
from tributary.broker.txn.placement import TRANSACTION_STATE_TOPIC
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.errors import ProtocolError
from tributary.protocol.records import build_batch, iter_batches, iter_records

log = logging.getLogger(__name__)

Records = list[tuple[bytes, bytes | None]]

#: Bytes read per step while loading a partition.
LOAD_CHUNK_BYTES = 4 * 1024 * 1024


class TxnStorageError(Exception):
    """The partition cannot be read (not led here, gone, closed)."""


class TxnStorage(Protocol):
    """What the driver needs of the ``__transaction_state`` logs (tests substitute an in-memory one)."""

    def append(self, partition: int, key: bytes, value: bytes | None, now_ms: int) -> tuple[ErrorCode, Any, int]:
        """(error, a handle for :meth:`durable`, the offset the write is done at)."""
        ...

    async def durable(self, target: Any, offset: int, timeout_s: float) -> ErrorCode: ...

    async def read(self, partition: int) -> Records: ...


class TxnLogStorage:
    def __init__(self, partitions: PartitionManager, snapshot: Callable[[], ClusterSnapshot], min_isr: int) -> None:
        self._partitions = partitions
        self._snapshot = snapshot
        #: transaction.state.log.min.isr, unless the topic says otherwise.
        self._min_isr = min_isr

    def _min_insync(self) -> int:
        info = self._snapshot().topics.get(TRANSACTION_STATE_TOPIC)
        configured = None if info is None else info.config.get("min.insync.replicas")
        try:
            return int(configured) if configured is not None else self._min_isr
        except ValueError:
            return self._min_isr

    def append(
        self, partition: int, key: bytes, value: bytes | None, now_ms: int
    ) -> tuple[ErrorCode, Partition | None, int]:
        """Appends one record; (error, the partition, the offset the write is done at)."""
        target = self._partitions.lookup(self._snapshot(), TRANSACTION_STATE_TOPIC, partition)
        if isinstance(target, ErrorCode):
            return target, None, -1
        state = target.leader_state
        if target.replicated and state is not None and len(state.isr) < self._min_insync():
            return ErrorCode.NOT_ENOUGH_REPLICAS, None, -1
        batch = build_batch([(key, value, (), now_ms)])
        try:
            result = target.append(batch, now_ms)
        except LogError as exc:
            log.warning("%s-%d: append refused: %s", TRANSACTION_STATE_TOPIC, partition, exc)
            return exc.error_code, None, -1
        return ErrorCode.NONE, target, result.last_offset + 1

    async def durable(self, target: Partition, offset: int, timeout_s: float) -> ErrorCode:
        """Waits until ``offset`` is below the high watermark (and on disk when the flush policy
        says so): NONE, or why not (leadership moved, timed out, the disk failed)."""
        plog = target.log
        if plog.needs_flush(_now_ms()):
            try:
                await trio.to_thread.run_sync(plog.flush)
            except LogError as exc:
                return exc.error_code
        if not target.replicated and target.is_leader:
            return ErrorCode.NONE if plog.high_watermark >= offset else ErrorCode.NOT_LEADER_OR_FOLLOWER
        if await target.wait_for_high_watermark(offset, trio.current_time() + timeout_s):
            return ErrorCode.NONE
        return ErrorCode.REQUEST_TIMED_OUT if target.is_leader else ErrorCode.NOT_LEADER_OR_FOLLOWER

    async def read(self, partition: int) -> Records:
        """Every (key, value) of the partition, in log order."""
        target = self._partitions.lookup(self._snapshot(), TRANSACTION_STATE_TOPIC, partition)
        if isinstance(target, ErrorCode):
            raise TxnStorageError(f"{TRANSACTION_STATE_TOPIC}-{partition}: {target.name}")
        plog = target.log
        offset, end = plog.log_start_offset, plog.log_end_offset
        records: Records = []
        while offset < end:
            try:
                result = plog.read(offset, LOAD_CHUNK_BYTES, max_offset=end)
            except LogError as exc:
                raise TxnStorageError(f"{TRANSACTION_STATE_TOPIC}-{partition}: {exc}") from exc
            try:
                if not result.size:
                    break
                records += await trio.to_thread.run_sync(_decode, result)
                offset = result.next_offset
            finally:
                result.close()
        return records


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _decode(result: ReadResult) -> Records:
    data = result.read_bytes()
    out: Records = []
    for pos, header in iter_batches(data):
        if header.is_control:
            continue
        try:
            out += [(r.key, r.value) for r in iter_records(data, pos) if r.key is not None]
        except ProtocolError as exc:
            log.warning("%s: skipping a batch at offset %d: %s", TRANSACTION_STATE_TOPIC, header.base_offset, exc)
    return out
