"""Producing to the aggregate: runs of batches, one Produce request per leader for many partitions.

A copier hands :class:`ProduceMux` a *run*: the stamped batches of one fetch of its
partition, in order (:meth:`ProduceMux.produce_run`), and is woken once, when the run is
settled, rather than once per batch. Each aggregate leader has a send loop that packs the
next batch of every run it leads into one Produce request (Kafka takes one batch per
partition per request) and keeps up to ``max_in_flight`` such requests in flight on the
leader's connection. Request overhead (encoding, the broker's per-request work, the answer)
is thus paid once per round of partitions, and a partition's batches follow each other
without a round trip through its copier. A request is started from the send loop itself
(:meth:`RawClient.start_produce`) and its answer settled by callback in the connection's
reader, so it costs no task of its own; a task per request is the fallback while the
leader's connection is being opened or has no free slot.

At most ``depth`` batches of one partition are in flight at once, in order: with 1 the next
leaves when the previous was acknowledged; above 1 they are pipelined as an idempotent
producer's are (Kafka allows five: a leader keeps the last five batches of each producer,
so a batch sent again after a lost answer is recognised, and refuses a batch whose
predecessor is missing with OUT_OF_ORDER_SEQUENCE_NUMBER). To keep them in order on the
wire, the loop starts a request only once the previous one holding the partition has its
place in the connection's send order.

A run settles when every batch sent was answered and nothing more will be sent: all
acknowledged, or a batch failed (the rest are not sent), or ``may_send`` said no before a
batch (the copier lost its group membership, or is stopping). Its outcome is the
acknowledged prefix and the error of the first batch that was not acknowledged; answers
to later batches of the run are then disregarded (they failed because of it, or were
appended and are recognised when sent again).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import trio

from tributary.client.errors import KafkaError
from tributary.client.raw.batches import ProduceResult
from tributary.client.raw.client import RawClient
from tributary.client.wire.cluster import Cluster
from tributary.client.wire.connection import BrokerConnection
from tributary.client.wire.metadata import TopicPartition
from tributary.protocol.crc32c import BytesLike

#: Kafka's bound on an idempotent producer's batches in flight per partition.
MAX_DEPTH = 5


@dataclass(eq=False)
class _Run:
    tp: TopicPartition
    payloads: Sequence[BytesLike]
    may_send: Callable[[], bool]
    #: Batches handed to requests so far, and those not yet answered.
    sent: int = 0
    in_flight: int = 0
    #: Answers by batch index.
    answers: dict[int, ProduceResult | KafkaError] = field(default_factory=dict)
    #: Nothing more is sent (a batch failed, may_send said no, or the copier went away).
    stopped: bool = False
    settled: trio.Event = field(default_factory=trio.Event)

    def wants_to_send(self, depth: int) -> bool:
        return not self.stopped and self.sent < len(self.payloads) and self.in_flight < depth

    def settle_if_done(self) -> None:
        if self.in_flight == 0 and (self.stopped or self.sent == len(self.payloads)):
            self.settled.set()

    def outcome(self) -> tuple[list[ProduceResult], KafkaError | None]:
        acknowledged: list[ProduceResult] = []
        for index in range(self.sent):
            answer = self.answers.get(index)
            if not isinstance(answer, ProduceResult):
                return acknowledged, answer
            acknowledged.append(answer)
        return acknowledged, None


def _next_batches(runs: dict[TopicPartition, _Run], depth: int) -> list[tuple[_Run, int]]:
    """The next batch of every run that may send one, each counted as sent."""
    batch: list[tuple[_Run, int]] = []
    for run in runs.values():
        if not run.wants_to_send(depth):
            continue
        if not run.may_send():
            run.stopped = True
            run.settle_if_done()
            continue
        batch.append((run, run.sent))
        run.sent += 1
        run.in_flight += 1
    return batch


def _worth_sending(runs: dict[TopicPartition, _Run], depth: int, *, answered: bool) -> bool:
    """Whether a request should leave now: some run may send a batch, and either nothing is in
    flight (``answered``) or every run with batches left may send one now. With ``depth`` above
    1, a request sent while some partitions wait for an answer would hold only the others, and
    they would follow in requests of their own: more requests for the same batches. Waiting for
    the answer fills the request instead."""
    ready = waiting = 0
    for run in runs.values():
        if run.wants_to_send(depth):
            ready += 1
        elif not run.stopped and run.sent < len(run.payloads):
            waiting += 1
    return ready > 0 and (answered or waiting == 0)


@dataclass(eq=False)
class _Leader:
    runs: dict[TopicPartition, _Run] = field(default_factory=dict)
    wanted: trio.Event = field(default_factory=trio.Event)


class ProduceMux:
    def __init__(self, cluster: Cluster, nursery: trio.Nursery, *, max_in_flight: int, depth: int = 1) -> None:
        if not 1 <= depth <= MAX_DEPTH:
            raise ValueError(f"depth must be between 1 and {MAX_DEPTH}, not {depth}")
        self.cluster = cluster
        self.raw = RawClient(cluster)
        self.depth = depth
        self._max_in_flight = max_in_flight
        self._nursery = nursery
        self._leaders: dict[int, _Leader] = {}

    async def produce_run(
        self, tp: TopicPartition, payloads: Sequence[BytesLike], may_send: Callable[[], bool]
    ) -> tuple[list[ProduceResult], KafkaError | None]:
        """Append ``payloads`` to ``tp`` in order (acks=all), ``may_send()`` asked before each
        batch leaves: the results of the acknowledged prefix, and the error that ended the run
        (None when every batch was acknowledged or ``may_send`` stopped it)."""
        if not payloads or not may_send():
            return [], None
        try:
            leader_id = await self.cluster.leader_for(tp.topic, tp.partition)
        except KafkaError as exc:
            return [], exc
        leader = self._leaders.get(leader_id)
        if leader is None:
            leader = self._leaders[leader_id] = _Leader()
            self._nursery.start_soon(self._send_loop, leader_id, leader)
        if tp in leader.runs:
            raise RuntimeError(f"a run for {tp} is already under way: one at a time per partition")
        run = leader.runs[tp] = _Run(tp, payloads, may_send)
        leader.wanted.set()
        try:
            await run.settled.wait()
        finally:
            run.stopped = True  # (cancelled: the batches in flight are answered to nobody)
            del leader.runs[tp]
        return run.outcome()

    async def _send_loop(self, leader_id: int, leader: _Leader) -> None:
        slots = trio.Semaphore(self._max_in_flight)
        depth = self.depth
        runs = leader.runs
        conn: BrokerConnection | None = None
        while True:
            # (Once per request: plain loops, a free slot taken without a trip through the
            # scheduler, and the request started from here; its answer comes by callback.)
            if not _worth_sending(runs, depth, answered=slots.value == self._max_in_flight):
                leader.wanted = trio.Event()
                await leader.wanted.wait()
                continue
            try:
                slots.acquire_nowait()
            except trio.WouldBlock:
                await slots.acquire()
            batch = _next_batches(runs, depth)
            if not batch:
                slots.release()
                continue
            payloads = {run.tp: run.payloads[index] for run, index in batch}
            if conn is None or conn.closed:
                try:
                    conn = await self.cluster.connection(leader_id)
                except KafkaError:
                    conn = None  # the request's own task meets the error and reports it
            # Sent from here, answered by callback from the connection's reader: no task per request.
            if conn is not None and self.raw.start_produce(
                conn, payloads, functools.partial(self._answered, leader, batch, slots)
            ):
                continue
            queued = trio.Event()
            self._nursery.start_soon(self._send, leader_id, leader, batch, payloads, (slots, queued))
            if depth > 1:
                # The next request may hold the same partitions: it leaves after this one.
                await queued.wait()

    async def _send(
        self,
        leader_id: int,
        leader: _Leader,
        batch: list[tuple[_Run, int]],
        payloads: dict[TopicPartition, BytesLike],
        slot_and_queued: tuple[trio.Semaphore, trio.Event],
    ) -> None:
        """A request that could not start at once (no connection yet, no free slot on it)."""
        slots, queued = slot_and_queued
        try:
            results = await self.raw.produce(leader_id, payloads, on_queued=queued.set)
        except BaseException:
            slots.release()
            raise
        finally:
            queued.set()
        self._answered(leader, batch, slots, results)

    def _answered(
        self,
        leader: _Leader,
        batch: list[tuple[_Run, int]],
        slots: trio.Semaphore,
        results: dict[TopicPartition, ProduceResult | KafkaError],
    ) -> None:
        slots.release()
        for run, index in batch:
            answer = run.answers[index] = results[run.tp]
            run.in_flight -= 1
            if isinstance(answer, KafkaError):
                run.stopped = True
            run.settle_if_done()
        leader.wanted.set()


__all__ = ["MAX_DEPTH", "ProduceMux"]
