"""The producer's record accumulator: per-partition batches waiting to be sent.

Each partition has at most one *open* batch, a :class:`~protocol.records.BatchBuilder`
that records are encoded into as they are sent, and a queue of *sealed*
batches waiting for the sender. A batch is sealed when the next record of the
same size would take it past ``batch_bytes``; the sender also takes an open
batch once it has lingered ``linger_ms`` (or at once while the producer
flushes, closes, or has senders waiting for buffer memory). Batches are
compressed and numbered only when taken (:meth:`RecordAccumulator.take`), so
appending a record costs one encode into a buffer and no per-record object
but the caller's handle: a record's offset is its batch's base offset plus its
index in the batch.

Memory: every record reserves its size (key, value, headers, plus a small
overhead, uncompressed) until its batch is acknowledged or failed; the
producer makes senders wait while ``buffer_memory`` is reserved.

Everything here is synchronous and never yields: the producer and its sender
task call in, and appending stays as cheap as it can be.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator, Iterable, Sequence
from time import time_ns as _time_ns
from typing import Any, NamedTuple

import trio

from tributary.client.producer.config import ProducerConfig
from tributary.client.producer.partitioner import KeyedPartitioner, StickyPartitioner
from tributary.client.wire.metadata import TopicPartition
from tributary.protocol.compression import Compression
from tributary.protocol.records import (
    HEADER_SIZE,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    Payload,
    append_record,
    append_record_at,
    finish_batch,
)

#: Bytes counted per record on top of its key, value and headers: its length,
#: attributes, timestamp and offset deltas, key and value lengths and header
#: count, as varints; 9 to 12 bytes for records of usual sizes in a batch of
#: usual length (Kafka's worst case is 21). Batches fill to ``batch_bytes`` by
#: this estimate, which saves asking the builder for its size on every record.
RECORD_OVERHEAD = 10
#: Bytes counted per header on top of its name and value (their lengths).
HEADER_OVERHEAD = 3
_SEQUENCE_MODULUS = 2**31
_append_at = append_record_at


class ProducerBatch:
    """One batch of one partition, from its first record to its answer.

    Its records are encoded by :meth:`RecordAccumulator.append` straight into ``records`` (no
    builder object in between: the per-record path is the producer's hot one), and the batch is
    finished (compressed, numbered, its header put in front) when taken for sending."""

    __slots__ = (
        "attempts",
        "base_offset",
        "base_sequence",
        "base_timestamp",
        "broker",
        "created",
        "data",
        "deadline",
        "done",
        "error",
        "fill",
        "last_error",
        "log_append_time",
        "max_timestamp",
        "queue",
        "record_count",
        "records",
    )

    def __init__(self, queue: PartitionQueue, created: float, deadline: float) -> None:
        self.queue = queue
        #: The encoded records, back to back, until the batch is built (then None).
        self.records: bytearray | None = bytearray()
        self.record_count = 0
        #: The first record's timestamp (the others' are deltas from it) and the latest.
        self.base_timestamp = 0
        self.max_timestamp = 0
        self.created = created
        self.deadline = deadline
        #: The batch's estimated size: its header plus its records' reserved
        #: bytes (what it holds of the buffer is ``fill - HEADER_SIZE``).
        self.fill = HEADER_SIZE
        #: The built (compressed, numbered) batch, once taken for sending.
        self.data: bytes | None = None
        self.base_sequence = -1
        self.attempts = 0
        #: The broker of the latest attempt, for errors.
        self.broker: int | None = None
        self.last_error: BaseException | None = None
        self.done = trio.Event()
        self.base_offset = -1
        self.log_append_time = -1
        self.error: BaseException | None = None

    @property
    def reserved(self) -> int:
        return self.fill - HEADER_SIZE

    @property
    def topic(self) -> str:
        return self.queue.tp.topic

    @property
    def partition(self) -> int:
        return self.queue.tp.partition

    @property
    def last_sequence(self) -> int:
        return (self.base_sequence + self.record_count - 1) % _SEQUENCE_MODULUS

    def build(self, codec: Compression, level: int | None, producer_id: int, epoch: int, base_sequence: int) -> None:
        """Compress and finish the batch (numbered, if ``producer_id`` is not -1); its
        uncompressed records are let go."""
        records = self.records
        assert records is not None
        self.data = finish_batch(
            records, self.record_count, self.base_timestamp, self.max_timestamp,
            compression=codec, compression_level=level,
            producer_id=producer_id, producer_epoch=epoch, base_sequence=base_sequence,
        )  # fmt: skip
        self.records = None

    def __repr__(self) -> str:
        return f"<ProducerBatch {self.queue.tp} records={self.record_count} seq={self.base_sequence}>"


class RecordMetadata(NamedTuple):
    """Where a record was written. ``offset`` is -1 with acks=0 (nobody answers)
    and for a retry an older broker reported as a duplicate; ``timestamp`` is the
    record's (create time), or the broker's append time for topics that use it."""

    topic: str
    partition: int
    offset: int
    timestamp: int


class RecordHandle:
    """A record that was sent: ``await handle`` (or ``handle.wait()``) for its
    :class:`RecordMetadata`; ``done()`` and ``result()`` look without waiting.
    A failed record raises its batch's error. Handles are made by the producer, one per record
    (:meth:`RecordAccumulator.append`): the class has no ``__init__``, so that making one is a
    bare ``RecordHandle()`` and three slots set."""

    __slots__ = ("_batch", "_index", "_timestamp")

    _batch: ProducerBatch
    _index: int
    _timestamp: int

    @property
    def topic(self) -> str:
        return self._batch.topic

    @property
    def partition(self) -> int:
        return self._batch.partition

    def done(self) -> bool:
        return self._batch.done.is_set()

    def result(self) -> RecordMetadata:
        """The record's metadata; raises its error, or RuntimeError if not yet done."""
        batch = self._batch
        if not batch.done.is_set():
            raise RuntimeError("the record has not been acknowledged yet (await the handle)")
        if batch.error is not None:
            # One error object serves a whole batch: start its traceback afresh
            # each time rather than let it grow with every record raising it.
            raise batch.error.with_traceback(None)
        base = batch.base_offset
        timestamp = batch.log_append_time if batch.log_append_time >= 0 else self._timestamp
        return RecordMetadata(batch.topic, batch.partition, base + self._index if base >= 0 else -1, timestamp)

    async def wait(self) -> RecordMetadata:
        await self._batch.done.wait()
        return self.result()

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        return self.wait().__await__()

    def __repr__(self) -> str:
        state = "done" if self.done() else "pending"
        return f"<RecordHandle {self.topic}-{self.partition} #{self._index} {state}>"


class PartitionQueue:
    """A partition's batches: the open one, the sealed ones, the ones in flight;
    and its idempotence state (producer id, next sequence)."""

    __slots__ = (
        "blocked",
        "broker",
        "failed",
        "in_flight",
        "new_producer_id",
        "next_sequence",
        "open",
        "producer_epoch",
        "producer_id",
        "queue",
        "retry_at",
        "tp",
    )

    def __init__(self, tp: TopicPartition, producer_id: int, producer_epoch: int) -> None:
        self.tp = tp
        self.open: ProducerBatch | None = None
        #: Sealed batches in send order; batches to retry go back to the front.
        self.queue: deque[ProducerBatch] = deque()
        #: Batches sent and not answered, in send order, all to ``broker``.
        self.in_flight: deque[ProducerBatch] = deque()
        self.broker: int | None = None
        #: A batch failed: nothing more is sent until every batch in flight is
        #: answered and the failed ones are back at the front of the queue, so
        #: that retries keep the partition's order.
        self.blocked = False
        #: The failed batches of the current round, in send order.
        self.failed: list[ProducerBatch] = []
        #: A numbered batch failed for good: take a new producer id at the end
        #: of the round (see ``idempotence.py``).
        self.new_producer_id = False
        self.retry_at = float("-inf")
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.next_sequence = 0

    @property
    def idle(self) -> bool:
        return self.open is None and not self.queue and not self.in_flight and not self.blocked

    def __repr__(self) -> str:
        return (
            f"<PartitionQueue {self.tp} queued={len(self.queue)} in_flight={len(self.in_flight)} "
            f"open={self.open is not None} blocked={self.blocked}>"
        )


class TopicQueues:
    """A topic's partition queues and null-key stickiness."""

    __slots__ = ("available", "keyed", "name", "partitions", "sticky", "sticky_queue")

    def __init__(self, name: str) -> None:
        self.name = name
        self.partitions: list[PartitionQueue] = []
        #: Partitions with a known leader, for the sticky partitioner.
        self.available: Sequence[int] = ()
        self.sticky = StickyPartitioner()
        #: The sticky partition's queue (None before the first null-key record).
        self.sticky_queue: PartitionQueue | None = None
        self.keyed = KeyedPartitioner(0)


class RecordAccumulator:
    """Every partition's batches, the reserved buffer memory, and the batches not yet complete."""

    def __init__(
        self,
        config: ProducerConfig,
        *,
        on_open: Callable[[ProducerBatch], None],
        on_seal: Callable[[PartitionQueue], None],
    ) -> None:
        self.config = config
        self._batch_bytes = config.batch_bytes
        self._linger = config.linger_ms / 1000
        self._delivery_timeout = config.delivery_timeout_ms / 1000
        self._codec = Compression(config.codec)
        self._level = config.compression_level
        #: Told of each new batch (its linger starts) and each sealed one (it is ready).
        self._on_open = on_open
        self._on_seal = on_seal
        self.topics: dict[str, TopicQueues] = {}
        #: Partitions with batches open, queued, in flight or waiting to be retried.
        self.active: set[PartitionQueue] = set()
        #: Every batch created and not yet complete (what a flush waits for).
        self.incomplete: set[ProducerBatch] = set()
        self.buffer_used = 0
        #: Set whenever a batch opens or seals: the producer then yields once
        #: before its next append so the sender gets to run.
        self.changed = False
        self.producer_id = -1
        self.producer_epoch = -1
        #: Where senders wait for buffer memory; woken whenever a batch completes.
        self.memory_freed = trio.lowlevel.ParkingLot()

    # --- topics ------------------------------------------------------------------------------

    def topic(self, name: str, partition_count: int, available: Sequence[int]) -> TopicQueues:
        """The topic's queues, grown to ``partition_count`` partitions (a topic can
        gain partitions, never lose them)."""
        topic = self.topics.get(name)
        if topic is None:
            topic = self.topics[name] = TopicQueues(name)
        partitions = topic.partitions
        while len(partitions) < partition_count:
            tp = TopicPartition(name, len(partitions))
            partitions.append(PartitionQueue(tp, self.producer_id, self.producer_epoch))
        topic.keyed.resize(len(partitions))
        topic.available = available
        return topic

    # --- appending ---------------------------------------------------------------------------

    def append(  # noqa: PLR0912, PLR0915, PLR0917 (the hot path: one function, positional arguments)
        self,
        topic: TopicQueues,
        partition: int | None,
        key: Payload | None,
        value: Payload | None,
        headers: Sequence[tuple[str, Payload | None]],
        timestamp: int | None,
        size: int,
    ) -> RecordHandle:
        """Add a record of ``size`` reserved bytes; its handle. ``partition`` must be
        valid for the topic, or None to choose."""
        batch_bytes = self._batch_bytes
        queue: PartitionQueue | None
        batch: ProducerBatch | None
        if partition is None and key is None:
            # KIP-480: stay on the sticky partition while its batch has room, else move on.
            queue = topic.sticky_queue
            batch = queue.open if queue is not None else None
            if queue is None or batch is None or batch.fill + size > batch_bytes:
                partitions = topic.partitions
                queue = topic.sticky_queue = partitions[topic.sticky.next(len(partitions), topic.available)]
                batch = queue.open
                if batch is None or batch.fill + size > batch_bytes:
                    batch = self._open(queue)
        else:
            if partition is None:
                assert key is not None
                partition = topic.keyed.partition(key)
            queue = topic.partitions[partition]
            batch = queue.open
            if batch is None or batch.fill + size > batch_bytes:
                batch = self._open(queue)
        # The record is encoded here, into the batch's buffer (what BatchBuilder.append does,
        # without a call and an object in between): its offset delta is its index in the
        # batch, its timestamp (now, unless given) a delta from the first record's.
        index = batch.record_count
        records = batch.records
        assert records is not None
        try:
            if headers or _append_at is None:
                if timestamp is None:
                    timestamp = _time_ns() // 1_000_000
                append_record(records, key, value, headers, timestamp - batch.base_timestamp if index else 0, index)
            else:
                try:
                    timestamp = _append_at(records, key, value, timestamp, batch.base_timestamp, index)
                except OverflowError:  # beyond 64 bits: the Python encoder says what is wrong
                    assert timestamp is not None
                    append_record(records, key, value, headers, timestamp - batch.base_timestamp if index else 0, index)
        except TypeError:
            if not index:
                self._discard(queue, batch)
            raise TypeError(
                "keys, values and header values must be bytes, bytearray, memoryview or None; "
                f"header names str: got key {type(key).__name__}, value {type(value).__name__}"
            ) from None
        # Only once the record is in: a refused one leaves the batch as it was.
        batch.record_count = index + 1
        if not index:
            batch.base_timestamp = batch.max_timestamp = timestamp
        elif timestamp > batch.max_timestamp:
            batch.max_timestamp = timestamp
        fill = batch.fill = batch.fill + size
        self.buffer_used += size
        if fill + size > batch_bytes:
            self._seal(queue)  # full: the next record like this one would not fit
        # The handle's slots set here: RecordHandle has no __init__ to call.
        handle = RecordHandle()
        handle._batch = batch
        handle._index = index
        handle._timestamp = timestamp
        return handle

    def _open(self, queue: PartitionQueue) -> ProducerBatch:
        """A new open batch for the partition, sealing the one it had."""
        if queue.open is not None:
            self._seal(queue)
        now = trio.current_time()
        batch = ProducerBatch(queue, now, now + self._delivery_timeout)
        queue.open = batch
        self.incomplete.add(batch)
        self.active.add(queue)
        self.changed = True
        self._on_open(batch)
        return batch

    def _seal(self, queue: PartitionQueue) -> None:
        batch = queue.open
        assert batch is not None
        queue.open = None
        queue.queue.append(batch)
        self.changed = True
        self._on_seal(queue)

    def _discard(self, queue: PartitionQueue, batch: ProducerBatch) -> None:
        queue.open = None
        self.incomplete.discard(batch)
        batch.done.set()

    # --- the sender's side ---------------------------------------------------------------------

    def linger_deadline(self, queue: PartitionQueue) -> float:
        """When the partition's next batch may be sent without being full."""
        if queue.queue:
            return float("-inf")
        if queue.open is not None:
            return queue.open.created + self._linger
        return float("inf")

    def take(self, queue: PartitionQueue, now: float, force: bool) -> ProducerBatch | None:
        """The partition's next batch to send, if one is ready: sealed, or open and
        lingered (or ``force``d); numbered and built. Its memory stays reserved.
        A batch that cannot be built (its codec failed) fails with that error."""
        while True:
            if queue.queue:
                batch = queue.queue.popleft()
            else:
                lingering = queue.open
                if lingering is None or not (force or lingering.created + self._linger <= now):
                    return None
                batch = lingering
                queue.open = None
            if batch.records is None:
                return batch  # built and numbered before: a retry
            numbered = queue.producer_id >= 0
            try:
                if numbered:
                    batch.build(self._codec, self._level, queue.producer_id, queue.producer_epoch, queue.next_sequence)
                else:
                    batch.build(self._codec, self._level, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE)
            except Exception as exc:
                self.complete(batch, exc)
                continue
            if numbered:  # only once built: a batch that failed to build leaves no gap
                batch.base_sequence = queue.next_sequence
                queue.next_sequence = (queue.next_sequence + batch.record_count) % _SEQUENCE_MODULUS
            return batch

    def complete(self, batch: ProducerBatch, error: BaseException | None = None) -> None:
        """Finish a batch (acknowledged, or failed with ``error``): wake its waiters
        and free its memory."""
        if batch.done.is_set():
            return
        batch.error = error
        self.buffer_used -= batch.fill - HEADER_SIZE
        self.incomplete.discard(batch)
        batch.done.set()
        if self.memory_freed:
            self.memory_freed.unpark_all()

    def expire(self, queue: PartitionQueue, now: float) -> list[ProducerBatch]:
        """Remove and return the partition's unsent batches whose delivery timeout
        has passed (oldest first; a retry waiting in the queue counts as unsent)."""
        expired: list[ProducerBatch] = []
        while queue.queue and queue.queue[0].deadline <= now:
            expired.append(queue.queue.popleft())
        if not queue.queue and queue.open is not None and queue.open.deadline <= now:
            expired.append(queue.open)
            queue.open = None
        return expired

    def requeue(self, queue: PartitionQueue, batches: Iterable[ProducerBatch]) -> None:
        """Put failed batches back at the front of the queue, in their order."""
        queue.queue.extendleft(reversed(list(batches)))

    def abort_all(self, make_error: Callable[[ProducerBatch], BaseException]) -> None:
        """Fail every incomplete batch (the producer is closing without a flush)."""
        for batch in list(self.incomplete):
            self.complete(batch, make_error(batch))
        for queue in self.active:
            queue.open = None
            queue.queue.clear()
            queue.in_flight.clear()
            queue.failed.clear()
        self.active.clear()


__all__ = [
    "HEADER_OVERHEAD",
    "RECORD_OVERHEAD",
    "PartitionQueue",
    "ProducerBatch",
    "RecordAccumulator",
    "RecordHandle",
    "RecordMetadata",
    "TopicQueues",
]
