"""The producer: records in, offsets out.

::

    async with Producer("host1:9092,host2:9092", acks="all", linger_ms=5) as producer:
        meta = await producer.send("clicks", b'{"page": "/"}', key=b"user-7")
        print(meta.partition, meta.offset)

        handles = [await producer.enqueue("clicks", value) for value in values]  # no waiting
        await producer.flush()
        offsets = [h.result().offset for h in handles]

Records are appended to per-partition batches (``accumulator.py``); a sender
task (``sender.py``) sends ready batches, grouped by leader, and settles the
answers, retrying what can be retried. ``send`` waits for its record's
answer; ``enqueue`` only for room in the buffer and returns a
:class:`RecordHandle` to await later; ``send_nowait`` never waits. Many
records share one batch and one Produce request, and each batch has one
event: a record's offset is its batch's base offset plus its index there.

Lifetime: the sender runs in the producer's own nursery, inside its
``async with`` block. Leaving the block closes the producer: further sends
raise ProducerClosedError, everything already sent is flushed (delivered or
failed), then the tasks stop and the connections close. If the block is left
by cancellation (or another BaseException), nothing is waited for: records not
yet acknowledged fail with ProducerClosedError.

Yielding: ``enqueue`` (and so ``send``) is a Trio checkpoint only where it
has to be: when it waits for memory or metadata, and once after each call that
opened or sealed a batch, so that the sender runs while a task produces in a
tight loop. Records are never half appended: a cancelled ``enqueue`` either
returned its handle or did not add its record.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Any

import trio

from tributary.client._tasks import background_nursery
from tributary.client.config import ClientConfig
from tributary.client.errors import (
    KafkaError,
    MessageTooLargeError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
    error_for,
)
from tributary.client.producer.accumulator import (
    HEADER_OVERHEAD,
    RECORD_OVERHEAD,
    RecordHandle,
    RecordMetadata,
    TopicQueues,
)
from tributary.client.producer.config import split_settings
from tributary.client.producer.errors import ProducerClosedError
from tributary.client.producer.idempotence import init_producer_id
from tributary.client.producer.sender import Sender
from tributary.client.wire.cluster import Cluster
from tributary.client.wire.metadata import NO_LEADER, ClusterMetadata, TopicInfo
from tributary.protocol.compression import compress
from tributary.protocol.records import Payload

log = logging.getLogger(__name__)

Headers = Sequence[tuple[str, Payload | None]]


class Producer:
    """A Kafka producer on Trio; an async context manager.

    ``bootstrap`` is ``"host:port,..."`` (the producer opens and closes its own
    :class:`~client.cluster.Cluster`) or a Cluster already open (shared, e.g.
    with a consumer; the producer uses connections of its own on it and leaves
    it open). ``settings`` are :class:`~client.producer_config.ProducerConfig`
    fields and, with a bootstrap string, :class:`~client.config.ClientConfig`
    fields (``request_timeout``, ``retry_backoff``, ``max_in_flight``, ...)."""

    def __init__(
        self, bootstrap: str | Sequence[str] | Cluster, *, client_config: ClientConfig | None = None, **settings: Any
    ) -> None:
        if isinstance(bootstrap, Cluster):
            config, client = split_settings(settings, bootstrap.config)
            if client != bootstrap.config or client_config is not None:
                raise TypeError("connection settings belong to the shared Cluster, not to the Producer")
            self._cluster = bootstrap
            self._owns_cluster = False
        else:
            config, client = split_settings(settings, client_config)
            self._cluster = Cluster(bootstrap, client)
            self._owns_cluster = True
        # A codec whose package is missing fails here, not batch by batch later.
        compress(config.codec, b"", config.compression_level)
        self.config = config
        self._buffer_memory = config.buffer_memory
        self._max_request_size = config.max_request_size
        self._size_limit = min(config.max_request_size, config.buffer_memory)
        self._sender = Sender(self._cluster, config, force=self._force_sends)
        self._accumulator = self._sender.accumulator
        self._topics: dict[str, TopicQueues] = {}
        self._metadata_seen: ClusterMetadata | None = None
        self._stack: AsyncExitStack | None = None
        self._closed = False
        self._flushing = 0
        self._memory_waiters = 0

    @property
    def cluster(self) -> Cluster:
        return self._cluster

    @property
    def idempotent(self) -> bool:
        return self.config.idempotent

    @property
    def producer_id(self) -> int:
        """The producer id new partitions start with (-1 without idempotence)."""
        return self._accumulator.producer_id

    @property
    def buffer_used(self) -> int:
        """Bytes of records held until acknowledged (see ``buffer_memory``)."""
        return self._accumulator.buffer_used

    # --- lifetime ------------------------------------------------------------------------------

    async def __aenter__(self) -> Producer:
        if self._stack is not None:
            raise RuntimeError("a Producer can be entered once")
        stack = AsyncExitStack()
        try:
            if self._owns_cluster:
                await stack.enter_async_context(self._cluster)
            if self.config.idempotent:
                await self._init_idempotence()
            nursery = await stack.enter_async_context(background_nursery())
            await nursery.start(self._sender.run)
        except BaseException as exc:
            await stack.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        self._stack = stack
        return self

    async def _init_idempotence(self) -> None:
        try:
            producer_id, epoch = await init_producer_id(self._cluster, timeout=self._cluster.config.api_timeout)
        except UnsupportedVersionError:
            if self.config.enable_idempotence:
                raise
            # Idempotence was only a default: go on without it, as Kafka's clients do.
            log.warning("the brokers do not support InitProducerId: producing without idempotence")
            self.config = dataclasses.replace(self.config, enable_idempotence=False)
            self._sender = Sender(self._cluster, self.config, force=self._force_sends)
            self._accumulator = self._sender.accumulator
            return
        except KafkaError as exc:
            if self.config.enable_idempotence is None:
                exc.add_note("idempotence is on by default with acks=all: enable_idempotence=False goes without it")
            raise
        self._accumulator.producer_id = producer_id
        self._accumulator.producer_epoch = epoch

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        assert self._stack is not None
        self._closed = True
        try:
            if exc is None or isinstance(exc, Exception):
                await self.flush()
        except BaseException as error:
            self._abort()
            await self._stack.__aexit__(type(error), error, error.__traceback__)
            raise
        self._abort()
        return await self._stack.__aexit__(exc_type, exc, tb)

    def _abort(self) -> None:
        self._accumulator.abort_all(
            lambda batch: ProducerClosedError(
                f"the producer closed before {batch.record_count} records for {batch.queue.tp} were acknowledged",
                topic=batch.topic,
                partition=batch.partition,
                broker=batch.broker,
            )
        )
        self._accumulator.memory_freed.unpark_all()

    def _force_sends(self) -> bool:
        """Whether the sender should send batches without waiting for linger_ms."""
        return self._closed or self._flushing > 0 or self._memory_waiters > 0

    # --- sending -------------------------------------------------------------------------------

    async def send(
        self,
        topic: str,
        value: Payload | None = None,
        *,
        key: Payload | None = None,
        headers: Headers = (),
        partition: int | None = None,
        timestamp: int | None = None,
    ) -> RecordMetadata:
        """Send a record and wait until it is acknowledged (with acks=0: written);
        its partition and offset. Raises the error it failed with."""
        handle = await self.enqueue(topic, value, key=key, headers=headers, partition=partition, timestamp=timestamp)
        return await handle.wait()

    async def enqueue(
        self,
        topic: str,
        value: Payload | None = None,
        *,
        key: Payload | None = None,
        headers: Headers = (),
        partition: int | None = None,
        timestamp: int | None = None,
    ) -> RecordHandle:
        """Add a record to its partition's batch and return its handle without
        waiting for the answer. Waits while the buffer is full (backpressure) or
        the topic is not yet in the metadata (up to ``max_block_ms``).

        ``partition`` None chooses one (murmur2 of the key, or the sticky
        partition for a null key); ``timestamp`` is in ms since the epoch, now
        by default. Records larger than ``max_request_size`` raise MessageTooLargeError."""
        accumulator = self._accumulator
        if accumulator.changed:
            accumulator.changed = False
            await trio.lowlevel.checkpoint()
        size = RECORD_OVERHEAD + len(value) if value is not None else RECORD_OVERHEAD
        if key is not None:
            size += len(key)
        if headers:
            size += _headers_size(headers)
        if self._closed or size > self._size_limit or accumulator.buffer_used + size > self._buffer_memory:
            await self._make_room(size, topic, partition)
        queues = self._topics.get(topic)
        if (
            queues is None
            or self._cluster.metadata is not self._metadata_seen
            or (partition is not None and not 0 <= partition < len(queues.partitions))
        ):
            queues = await self._resolve(topic, partition)
        return accumulator.append(queues, partition, key, value, headers, timestamp, size)

    def send_nowait(
        self,
        topic: str,
        value: Payload | None = None,
        *,
        key: Payload | None = None,
        headers: Headers = (),
        partition: int | None = None,
        timestamp: int | None = None,
    ) -> RecordHandle:
        """:meth:`enqueue` without ever waiting: raises trio.WouldBlock when it
        would have to (the buffer is full, or the topic's metadata is not known
        yet: a refresh is then requested). It is no checkpoint, so a task looping
        on it alone never lets the sender run: await something now and then."""
        if self._closed:
            raise self._closed_error(topic, partition)
        size = RECORD_OVERHEAD + (len(value) if value is not None else 0) + (len(key) if key is not None else 0)
        if headers:
            size += _headers_size(headers)
        self._check_size(size, topic, partition)
        if self._accumulator.buffer_used + size > self._buffer_memory:
            raise trio.WouldBlock
        queues = self._topic_queues(topic)
        if queues is None:
            self._cluster.request_metadata_refresh()
            raise trio.WouldBlock
        if partition is not None:
            _check_partition(queues, partition)
        return self._accumulator.append(queues, partition, key, value, headers, timestamp, size)

    async def flush(self) -> None:
        """Send every batch now (without waiting out linger_ms) and wait until
        every record sent before the call is acknowledged or failed. Failures
        are not raised here: each record's handle (or ``send``) raises its own."""
        pending = list(self._accumulator.incomplete)
        if not pending:
            await trio.lowlevel.checkpoint()
            return
        self._flushing += 1
        self._sender.wake()
        try:
            for batch in pending:
                await batch.done.wait()
        finally:
            self._flushing -= 1

    async def partitions_for(self, topic: str) -> list[int]:
        """The topic's partition ids (waiting for it to appear, up to ``max_block_ms``)."""
        queues = self._topic_queues(topic) or await self._wait_for_topic(topic)
        return list(range(len(queues.partitions)))

    # --- helpers -------------------------------------------------------------------------------

    async def _make_room(self, size: int, topic: str, partition: int | None) -> None:
        """Raise if the producer is closed or the record too large; wait for memory."""
        if self._closed:
            raise self._closed_error(topic, partition)
        self._check_size(size, topic, partition)
        if self._accumulator.buffer_used + size > self._buffer_memory:
            await self._wait_for_memory(size, topic, partition)

    async def _resolve(self, topic: str, partition: int | None) -> TopicQueues:
        """The topic's queues (waiting for its metadata if need be), with ``partition``
        checked against them (after one refresh, in case the topic grew)."""
        queues = self._topic_queues(topic) or await self._wait_for_topic(topic)
        if partition is not None and not 0 <= partition < len(queues.partitions):
            await self._cluster.refresh_metadata()
            queues = self._topic_queues(topic) or queues
            _check_partition(queues, partition)
        return queues

    def _check_size(self, size: int, topic: str, partition: int | None) -> None:
        if size > self._size_limit:
            raise MessageTooLargeError(
                f"a record of about {size} bytes is larger than max_request_size ({self._max_request_size}) "
                f"or buffer_memory ({self._buffer_memory}) allows (topic {topic!r})",
                topic=topic,
                partition=partition,
            )

    def _closed_error(self, topic: str, partition: int | None) -> ProducerClosedError:
        message = f"send to topic {topic!r} after the producer closed"
        return ProducerClosedError(message, topic=topic, partition=partition)

    async def _wait_for_memory(self, size: int, topic: str, partition: int | None) -> None:
        self._memory_waiters += 1
        self._sender.wake()  # it sends lingering batches at once while someone waits
        try:
            while self._accumulator.buffer_used + size > self._buffer_memory:
                await self._accumulator.memory_freed.park()
                if self._closed:
                    raise self._closed_error(topic, partition)
        finally:
            self._memory_waiters -= 1

    def _topic_queues(self, topic: str) -> TopicQueues | None:
        """The topic's queues as the current metadata describes it; None while unknown."""
        metadata = self._cluster.metadata
        if metadata is not self._metadata_seen:
            self._metadata_seen = metadata
            for name in list(self._topics):
                info = metadata.topics.get(name)
                if info is None:
                    del self._topics[name]  # deleted, or missing from this answer: wait for it again
                else:
                    self._accumulator.topic(name, info.partition_count, _available(info))
        queues = self._topics.get(topic)
        if queues is None:
            info = metadata.topics.get(topic)
            if info is None:
                return None
            queues = self._topics[topic] = self._accumulator.topic(topic, info.partition_count, _available(info))
        return queues

    async def _wait_for_topic(self, topic: str) -> TopicQueues:
        code = self._cluster.metadata.topic_errors.get(topic)
        if code:
            error = error_for(code, topic=topic, context="metadata")
            if not error.retriable:
                raise error
        timeout = self.config.max_block_ms / 1000
        try:
            await self._cluster.wait_for_metadata(lambda m: topic in m.topics, what=f"topic {topic!r}", timeout=timeout)
        except RequestTimedOutError:
            raise UnknownTopicOrPartitionError(
                f"topic {topic!r} is not in the cluster metadata after {timeout:g} s (max_block_ms)", topic=topic
            ) from None
        except KafkaError as exc:
            exc.topic = exc.topic or topic
            raise
        queues = self._topic_queues(topic)
        assert queues is not None
        return queues


def _headers_size(headers: Headers) -> int:
    size = 0
    for name, value in headers:
        size += HEADER_OVERHEAD + len(name) + (len(value) if value is not None else 0)
    return size


def _available(info: TopicInfo) -> list[int]:
    return sorted(p for p, partition in info.partitions.items() if partition.leader != NO_LEADER)


def _check_partition(queues: TopicQueues, partition: int) -> None:
    if not 0 <= partition < len(queues.partitions):
        raise UnknownTopicOrPartitionError(
            f"topic {queues.name!r} has no partition {partition} (it has {len(queues.partitions)})",
            topic=queues.name,
            partition=partition,
        )


__all__ = ["Producer", "RecordHandle", "RecordMetadata"]
