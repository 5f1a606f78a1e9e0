"""The producer's sender: takes ready batches to their leaders and settles the answers.

A *drain* groups the partitions with a ready batch by leader and starts
Produce requests of one batch per partition (what Kafka accepts), up to
``max_request_size`` bytes and ``max_in_flight`` requests per broker. Drains
run where the news is, without a task switch: in the appending task when a
batch seals and its leader has room, in a request's task when its answer is
settled. The sender task (:meth:`Sender.run`) keeps the timers (linger, retry
backoff, waiting for a leader) and drains when one is due or something
else wakes it (a retry round ending, a flush, a new batch lingering).

Order: a partition's batches must reach the broker in the order they were
numbered, and their answers must be settled in that order too (an
OUT_OF_ORDER_SEQUENCE_NUMBER only makes sense after the failure in front of
it). Requests to one broker form a chain: each is queued on the connection
only after the previous one was, and settled only after the previous one was;
the broker answers a connection's requests in order. Usually a request is
started where the drain runs (:meth:`BrokerConnection.start`, no task switch)
and settled by callback from the connection's reader, which meets the answers
in order. A request that cannot start so (no open connection yet, no free
slot, acks=0) runs in a task of its own; Trio runs tasks in no fixed order, so
such a task waits for the previous request to be queued (``on_queued``) and
settled before it queues and settles its own. A partition's batches in flight all go to one broker: after a leader
change, the next batch waits until those in flight are answered.

Failures: a batch that fails with a retriable error (a lost connection,
NOT_LEADER_OR_FOLLOWER, ...) *blocks* its partition: nothing more is sent
until every batch in flight there is answered; then the failed batches go
back to the front of the queue, in order and with their sequence numbers, and
are sent again after ``retry_backoff`` to the then-current leader (errors
that invalidate metadata have asked the cluster for a refresh). With
idempotence, the broker recognises a batch it already wrote and answers with
its first offsets, so a retry after a lost answer does not duplicate; an
OUT_OF_ORDER_SEQUENCE_NUMBER behind a failed batch is expected and retried
too. A final error fails the batch's records with that error; a numbered
batch failing for good makes the partition take a new producer id (see
``idempotence.py``). Batches that wait past ``delivery_timeout_ms`` (no
leader, broker unreachable) fail with DeliveryTimeoutError.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable
from typing import NamedTuple

import trio

from tributary.client.errors import KafkaError
from tributary.client.producer.accumulator import PartitionQueue, ProducerBatch, RecordAccumulator
from tributary.client.producer.config import ACKS_NONE, ProducerConfig
from tributary.client.producer.errors import DeliveryTimeoutError
from tributary.client.producer.idempotence import SEQUENCE_MODULUS, init_producer_id, restamp
from tributary.client.raw.batches import ProduceResult, parse_produce_response
from tributary.client.raw.client import start_produce
from tributary.client.wire.cluster import Cluster
from tributary.client.wire.connection import BrokerConnection
from tributary.client.wire.metadata import TopicPartition
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import ProduceRequest, ProduceResponse

log = logging.getLogger(__name__)

#: The producer's connections: its own, so that a consumer's long-polling
#: fetches on a shared Cluster never hold up produce answers behind them.
PRODUCER = "producer"

_INF = math.inf

#: A Produce answer: each partition's result or error.
_Results = dict[TopicPartition, ProduceResult | KafkaError]


class _Turn(NamedTuple):
    """A request's place in its broker's chain: set once queued, once settled."""

    queued: trio.Event
    settled: trio.Event


def _done() -> _Turn:
    turn = _Turn(trio.Event(), trio.Event())
    turn.queued.set()
    turn.settled.set()
    return turn


class Sender:
    """Sends an accumulator's batches through a cluster; :meth:`run` in a nursery."""

    def __init__(self, cluster: Cluster, config: ProducerConfig, *, force: Callable[[], bool]) -> None:
        self.cluster = cluster
        self.config = config
        self.accumulator = RecordAccumulator(config, on_open=self.batch_opened, on_seal=self.batch_sealed)
        self._force = force
        self._acks = config.required_acks
        self._idempotent = config.idempotent
        self._retries = config.retries
        self._max_request_size = config.max_request_size
        self._linger = config.linger_ms / 1000
        client = cluster.config
        self._request_timeout = client.request_timeout
        self._timeout_ms = int(client.request_timeout * 1000)
        self._max_in_flight = client.max_in_flight
        self._retry_backoff = client.retry_backoff
        self._wakeup = trio.Event()
        #: Requests started and not yet settled, per broker.
        self._requests: dict[int, int] = {}
        #: The producer's connection to each broker, while it stays open (the
        #: cluster's pool is asked again once it closes).
        self._connections: dict[int, BrokerConnection] = {}
        #: The latest request to each broker: the next one queues and settles after it.
        self._last: dict[int, _Turn] = {}
        self._nursery: trio.Nursery | None = None
        #: When the sender task means to look again unless woken (its timer).
        self._sleep_until = -_INF

    def wake(self) -> None:
        wakeup = self._wakeup
        if not wakeup.is_set():
            wakeup.set()

    def batch_opened(self, batch: ProducerBatch) -> None:
        """A batch opened: the sender must time its linger, unless it means to look
        before that anyway (the usual case: an older batch's linger comes first)."""
        if batch.created + self._linger < self._sleep_until:
            self.wake()

    def batch_sealed(self, queue: PartitionQueue) -> None:
        """A batch is ready. If its leader has room for another request, send it from
        here and now (in the appending task: no task switch); otherwise an answer
        from that broker will make room and send it."""
        leader = self.cluster.metadata.leader(queue.tp.topic, queue.tp.partition)
        if leader is None or self._requests.get(leader, 0) < self._max_in_flight:
            self._drain_now()

    # --- the loop ------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            while True:
                # A fresh event before draining: a wake during the drain is kept.
                self._wakeup = trio.Event()
                wake_at = self._sleep_until = self._drain(trio.current_time())
                if wake_at == _INF:  # no timer: spare the cancel scope, the common case under load
                    await self._wakeup.wait()
                else:
                    with trio.move_on_at(wake_at):
                        await self._wakeup.wait()

    def _drain(self, now: float) -> float:
        """Send what is ready; return when to look again (if nothing wakes the sender first)."""
        accumulator = self.accumulator
        force = self._force()
        metadata = self.cluster.metadata
        wake_at = _INF
        ready: dict[int, list[PartitionQueue]] = {}
        for queue in list(accumulator.active):
            if queue.idle:
                accumulator.active.discard(queue)
                continue
            if not queue.in_flight:
                expired = accumulator.expire(queue, now)
                if expired:
                    self._expire(queue, expired)
            if queue.blocked or (not queue.queue and queue.open is None):
                continue
            if queue.retry_at > now:
                wake_at = min(wake_at, queue.retry_at)
                continue
            if not queue.queue and not force:
                linger_at = accumulator.linger_deadline(queue)
                if linger_at > now:
                    wake_at = min(wake_at, linger_at)
                    continue
            leader = metadata.leader(queue.tp.topic, queue.tp.partition)
            if leader is None:
                # Wait for a leader (until the batches expire), asking for fresh metadata.
                self.cluster.request_metadata_refresh()
                wake_at = min(wake_at, now + self._retry_backoff)
                continue
            if queue.in_flight and queue.broker != leader:
                continue  # the leader moved: wait for the answers from the old one
            ready.setdefault(leader, []).append(queue)
        for broker, queues in ready.items():
            self._send_to(broker, queues, now, force)
        return wake_at

    def _send_to(self, broker: int, queues: list[PartitionQueue], now: float, force: bool) -> None:
        """Requests to ``broker`` of one batch per partition, while it has room in flight."""
        accumulator = self.accumulator
        in_flight = self._requests.get(broker, 0)
        while in_flight < self._max_in_flight and queues:
            batches: list[ProducerBatch] = []
            size = 0
            more: list[PartitionQueue] = []
            for queue in queues:
                batch = accumulator.take(queue, now, force)
                if batch is None:
                    continue
                assert batch.data is not None
                if batches and size + len(batch.data) > self._max_request_size:
                    queue.queue.appendleft(batch)  # built and numbered: it goes first next time
                    more.append(queue)
                    continue
                size += len(batch.data)
                batch.attempts += 1
                batch.broker = broker
                queue.in_flight.append(batch)
                queue.broker = broker
                batches.append(batch)
                more.append(queue)
            if not batches:
                break
            queues = more
            self._dispatch(broker, batches)
            in_flight += 1
        self._requests[broker] = in_flight

    # --- requests ------------------------------------------------------------------------------

    def _dispatch(self, broker: int, batches: list[ProducerBatch]) -> None:
        assert self._nursery is not None
        previous = self._last.get(broker)
        mine = self._last[broker] = _Turn(trio.Event(), trio.Event())
        conn = self._connections.get(broker)
        # Started from here and settled by callback from the connection's reader, no task
        # of its own (see _answered); unless it cannot start at once (acks=0, the connection
        # closed or without a free slot): then a task of its own waits for one or reconnects.
        if (
            conn is not None
            and (previous is None or previous.queued.is_set())
            and start_produce(
                conn, _batch_data(batches), functools.partial(self._answered, broker, batches, previous, mine),
                acks=self._acks, timeout_ms=self._timeout_ms, timeout=self._request_timeout,
            )
        ):  # fmt: skip
            mine.queued.set()
            return
        self._nursery.start_soon(self._request, broker, batches, previous or _done(), mine)

    def _answered(
        self,
        broker: int,
        batches: list[ProducerBatch],
        previous: _Turn | None,
        mine: _Turn,
        outcome: _Results | KafkaError,
    ) -> None:
        """A request started by :meth:`_dispatch` is answered (in the connection's reader)."""
        if isinstance(outcome, KafkaError):
            self.cluster.note_error(outcome)
        if previous is None or previous.settled.is_set():
            try:
                self._settle(broker, batches, outcome)
            finally:
                mine.settled.set()
        else:  # the previous request is still being settled in its task: after it
            assert self._nursery is not None
            self._nursery.start_soon(self._settle_after, broker, batches, outcome, (previous, mine))

    async def _settle_after(
        self,
        broker: int,
        batches: list[ProducerBatch],
        outcome: _Results | KafkaError,
        turns: tuple[_Turn, _Turn],
    ) -> None:
        previous, mine = turns
        try:
            await previous.settled.wait()
            self._settle(broker, batches, outcome)
        finally:
            mine.settled.set()

    async def _request(self, broker: int, batches: list[ProducerBatch], previous: _Turn, mine: _Turn) -> None:
        """One Produce request: queued on the connection after the previous request to
        the same broker, settled after the previous one was settled."""
        outcome: _Results | KafkaError | None
        try:
            if not previous.queued.is_set():
                await previous.queued.wait()
            try:
                conn = self._connections.get(broker)
                if conn is None or conn.closed:
                    conn = self._connections[broker] = await self.cluster.connection(broker, purpose=PRODUCER)
            except KafkaError as exc:
                outcome = exc
            else:
                try:
                    response: ProduceResponse | None = await conn.request(
                        self._produce_request(batches),
                        timeout=self._request_timeout,
                        expect_response=self._acks != ACKS_NONE,
                        on_queued=mine.queued.set,
                    )
                    if response is not None:
                        outcome = parse_produce_response(response, _batch_data(batches), broker)
                    else:
                        outcome = None
                except KafkaError as exc:
                    self.cluster.note_error(exc)
                    outcome = exc
        finally:
            mine.queued.set()
        try:
            if not previous.settled.is_set():
                await previous.settled.wait()
            self._settle(broker, batches, outcome)
        finally:
            mine.settled.set()

    def _produce_request(self, batches: list[ProducerBatch]) -> ProduceRequest:
        topics: dict[str, ProduceRequest.TopicProduceData] = {}
        for batch in batches:
            tp = batch.queue.tp
            topic = topics.get(tp.topic)
            if topic is None:
                topic = topics[tp.topic] = ProduceRequest.TopicProduceData(name=tp.topic)
            topic.partition_data.append(ProduceRequest.PartitionProduceData(index=tp.partition, records=batch.data))
        return ProduceRequest(
            transactional_id=None, acks=self._acks, timeout_ms=self._timeout_ms, topic_data=list(topics.values())
        )

    # --- answers -------------------------------------------------------------------------------

    def _settle(self, broker: int, batches: list[ProducerBatch], outcome: _Results | KafkaError | None) -> None:
        self._requests[broker] -= 1
        if outcome is None:  # acks=0: written, and that is all anyone will know
            for batch in batches:
                self._succeeded(batch, -1, -1)
        elif isinstance(outcome, KafkaError):
            for batch in batches:
                self._failed(batch, outcome)
        else:
            for batch in batches:
                result = outcome[batch.queue.tp]
                if isinstance(result, KafkaError):
                    self.cluster.note_error(result)
                    self._failed(batch, result)
                else:
                    self._succeeded(batch, result.base_offset, result.log_append_time_ms)
        self._drain_now()

    def _drain_now(self) -> None:
        """Send what is ready from here and now rather than wake the sender task for
        it (one task switch less per answer); wake it only for an earlier timer."""
        if self._nursery is None:
            return
        if self._drain(trio.current_time()) < self._sleep_until:
            self.wake()

    def _succeeded(self, batch: ProducerBatch, base_offset: int, log_append_time: int) -> None:
        queue = batch.queue
        _remove(queue, batch)
        batch.base_offset = base_offset
        batch.log_append_time = log_append_time
        self.accumulator.complete(batch)
        self._end_round(queue)

    def _failed(self, batch: ProducerBatch, error: KafkaError) -> None:
        queue = batch.queue
        _remove(queue, batch)
        if batch.done.is_set():
            return  # aborted meanwhile
        code = error.error_code
        if code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
            # An older broker's way to say "already written" (offsets unknown).
            self._succeeded(batch, -1, -1)
            return
        batch.last_error = error
        # Behind a failed batch, the broker refuses the later sequences: expected, retried.
        retriable = error.retriable or (code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and queue.blocked)
        now = trio.current_time()
        if retriable and batch.attempts <= self._retries and now + self._retry_backoff < batch.deadline:
            queue.failed.append(batch)
            queue.blocked = True
            log.debug("%s: batch of %d records will be retried: %s", queue.tp, batch.record_count, error)
        else:
            final: BaseException = error
            if retriable and batch.attempts <= self._retries:
                final = self._timeout_error(batch)
            self.accumulator.complete(batch, final)
            if batch.base_sequence >= 0:
                queue.new_producer_id = True
                queue.blocked = True
        self._end_round(queue)

    def _end_round(self, queue: PartitionQueue) -> None:
        """Once a blocked partition has nothing in flight: failed batches back to the
        front, a new producer id if a numbered batch failed for good, then go on."""
        if not queue.blocked or queue.in_flight:
            return
        if queue.failed:
            self.accumulator.requeue(queue, queue.failed)
            queue.failed = []
            queue.retry_at = trio.current_time() + self._retry_backoff
        if queue.new_producer_id and self._idempotent:
            queue.new_producer_id = False
            assert self._nursery is not None
            self._nursery.start_soon(self._renumber, queue)
        else:
            queue.blocked = False
            self.wake()

    def _expire(self, queue: PartitionQueue, expired: list[ProducerBatch]) -> None:
        numbered = False
        for batch in expired:
            numbered = numbered or batch.base_sequence >= 0
            self.accumulator.complete(batch, self._timeout_error(batch))
        # A blocked partition with nothing in flight is being renumbered already.
        if numbered and self._idempotent and not queue.blocked:
            queue.new_producer_id = True
            queue.blocked = True
            self._end_round(queue)

    async def _renumber(self, queue: PartitionQueue) -> None:
        """Give the partition a new producer id and renumber its numbered batches from 0."""
        while True:
            try:
                producer_id, epoch = await init_producer_id(self.cluster, timeout=self.cluster.config.api_timeout)
                break
            except KafkaError as exc:
                log.warning("%s: no new producer id yet: %s", queue.tp, exc)
                await trio.sleep(self._retry_backoff)
        log.info("%s: renumbering from 0 under producer id %d after a failed batch", queue.tp, producer_id)
        queue.producer_id, queue.producer_epoch, queue.next_sequence = producer_id, epoch, 0
        for batch in queue.queue:
            if batch.data is None:
                break  # not built yet: numbered when taken
            batch.base_sequence = queue.next_sequence
            batch.data = restamp(batch.data, producer_id, epoch, batch.base_sequence)
            queue.next_sequence = (queue.next_sequence + batch.record_count) % SEQUENCE_MODULUS
        queue.blocked = False
        self.wake()

    def _timeout_error(self, batch: ProducerBatch) -> DeliveryTimeoutError:
        tp = batch.queue.tp
        timeout = self.config.delivery_timeout_ms / 1000
        if batch.last_error is not None:
            why = f"last attempt (broker {batch.broker}): {batch.last_error}"
        elif self.cluster.metadata.leader(tp.topic, tp.partition) is None:
            why = "the partition had no leader"
        else:
            why = "it was never sent (the leader's connection was busy or unreachable)"
        error = DeliveryTimeoutError(
            f"{batch.record_count} records for {tp} not delivered within {timeout:g} s (delivery_timeout_ms): {why}",
            last_error=batch.last_error,
            topic=tp.topic,
            partition=tp.partition,
            broker=batch.broker,
        )
        error.__cause__ = batch.last_error
        return error


def _batch_data(batches: list[ProducerBatch]) -> dict[TopicPartition, bytes]:
    return {batch.queue.tp: batch.data or b"" for batch in batches}


def _remove(queue: PartitionQueue, batch: ProducerBatch) -> None:
    in_flight = queue.in_flight
    if in_flight and in_flight[0] is batch:
        in_flight.popleft()
    elif batch in in_flight:
        in_flight.remove(batch)


__all__ = ["PRODUCER", "Sender"]
