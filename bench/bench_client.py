"""Client throughput: Tributary's Trio client (ours) against the Python peers kafka-python and
aiokafka, and against confluent-kafka (librdkafka, in C), on the same Tributary broker, in the
same run.

One ZooKeeper and one Tributary broker (``tributary broker``, see ``processes.py``) run as
child processes on loopback; every client lives in this process (kafka-python's sender and
librdkafka's threads included) and they take turns, round after round (rotating who goes
first), so drift on the shared machine hits all. Figures are medians over rounds (one untimed
warm-up before, none with ``--quick``); each ratio is the median of the per-round ratios
ours/peer, for throughput and for client CPU per message. Client CPU is this process's
user+system time per message; broker CPU comes from ``/proc/<pid>/stat``.

Every client gets the same settings, in its own words (:class:`ProduceSettings` and the
``consumer_settings_*`` functions): acks=1 without idempotence, the same codec, batch size and
linger, 32 MiB of buffer and 1 MiB requests, five requests in flight per broker (aiokafka has
no such setting: it keeps one); fetches of up to 50 MiB and 1 MiB per partition, long polls of
500 ms, CRCs checked (librdkafka's default is off), at most 500 records per poll. librdkafka's
consumer gets ``fetch.queue.backoff.ms=0`` and a large ``queued.min.messages``: with its
defaults it stops fetching for a second whenever its prefetch queue is full, and a benchmark
measures that timer instead of the client (FIELD-NOTES).

Shapes (``--shapes`` picks; each is a function in :data:`SHAPES` that returns the jobs of
its contenders):

* ``produce-200B``: 200-byte JSON values, no compression, one partition, 16 KiB batches,
  linger 5 ms: ours ``await producer.enqueue(...)`` in a loop then ``flush()``; kafka-python
  ``send()`` then ``flush()``; aiokafka ``await send()`` then ``flush()``; confluent-kafka
  ``produce()`` (``poll()`` while its queue is full) then ``flush()``. One topic per client.
* ``produce-1KiB-zstd``: 1 KiB JSON values, zstd, 64 KiB batches, linger 20 ms.
* ``consume-200B``, ``consume-1KiB-zstd``: the produce shapes' values and batches, preloaded
  once (untimed) into one partition and read from offset 0, each contender touching every
  value (``len``): ours ``assign`` + ``seek`` + ``poll()`` (and, as a second row, ``async
  for``); kafka-python ``assign`` + ``seek`` + ``poll()``; aiokafka ``assign`` + ``seek`` +
  ``getmany()``; confluent-kafka ``assign`` + ``consume(500)``.
* ``rebalance-8-range``, ``rebalance-8-cooperative`` (ours and confluent-kafka): eight members
  of a fresh group share 24 partitions; one closes; the time from its LeaveGroup (right after
  its revoke callback) to the other seven owning every partition again, from their assign
  callbacks. heartbeat.interval.ms is 1000 for both. Reported apart, in ms.

The goals (checked at the end, one ``ratio`` line per shape): ours at least 3x kafka-python
and aiokafka, and (the first client issue's) 0.5x librdkafka. Run from the repository root
(about 10 minutes; ``--quick``, the throughput shapes with small counts and one round, about
30 s)::

    .venv/bin/python -m bench.bench_client [--quick] [--shapes S,...] [--contenders C,...]
        [--repeat N] [--json]
        [--profile]        # run our side under cProfile (CPU time), print its hot spots

Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import importlib.metadata
import io
import json
import pstats
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import confluent_kafka
import trio
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as AIOTopicPartition
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import KafkaException
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition

from tributary.client.consumer.consumer import Consumer
from tributary.client.producer.producer import Producer, RecordHandle
from tributary.client.wire.metadata import TopicPartition as ClientTopicPartition
from tributary.testing.polling import eventually

from . import common
from .bench_records import make_corpus
from .common import client_cpu, log
from .processes import Tributary, ZooKeeper, cpu_seconds

SMALL = 200
LARGE = 1024

#: The contenders, by the names the tables use.
OURS = "tributary"
OURS_ASYNC_FOR = "tributary async-for"
KAFKA_PYTHON = "kafka-python"
AIOKAFKA = "aiokafka"
LIBRDKAFKA = "confluent-kafka"
PEERS = (KAFKA_PYTHON, AIOKAFKA, LIBRDKAFKA)
#: The least ours/peer throughput ratio on every shape: 3x the pure-Python clients (issue 19);
#: librdkafka, a C library, is the second column (0.5x was the first client issue's goal).
GOALS: dict[str, float] = {KAFKA_PYTHON: 3.0, AIOKAFKA: 3.0, LIBRDKAFKA: 0.5}


@dataclass
class Sample:
    seconds: float
    messages: int
    nbytes: int
    client_cpu: float = 0.0
    broker_cpu: float | None = None


@dataclass
class Context:
    """What a shape function gets: the broker, the run's sizes, the message values."""

    bootstrap: str
    broker: Tributary
    quick: bool
    small: Sequence[bytes]
    large: Sequence[bytes]
    profile: cProfile.Profile | None = None


#: A contender's name and its timed job.
Job = tuple[str, Callable[[], Sample]]
#: A shape: sets up its topics and returns its contenders' jobs.
ShapeFunction = Callable[[Context], list[Job]]


# --- the peers' settings ------------------------------------------------------------------


@dataclass(frozen=True)
class ProduceSettings:
    """One producer configuration, said in each client's own words by the methods below:
    acks=1, no idempotence, the same codec, batch size, linger, buffer and request sizes,
    and (where the client has the setting) five requests in flight per broker."""

    codec: str  # "none" or "zstd"
    batch_bytes: int
    linger_ms: int

    def ours(self) -> dict[str, Any]:
        return {"acks": 1, "enable_idempotence": False, "compression": self.codec, "batch_bytes": self.batch_bytes,
                "linger_ms": self.linger_ms, "buffer_memory": BUFFER_MEMORY, "max_request_size": MAX_REQUEST,
                "max_in_flight": MAX_IN_FLIGHT}  # fmt: skip

    def kafka_python(self) -> dict[str, Any]:
        # kafka-python 3 has no buffer_memory: its accumulator grows as the application sends.
        return {"acks": 1, "enable_idempotence": False, "compression_type": _codec_or_none(self.codec),
                "batch_size": self.batch_bytes, "linger_ms": self.linger_ms,
                "max_request_size": MAX_REQUEST, "max_in_flight_requests_per_connection": MAX_IN_FLIGHT}  # fmt: skip

    def aiokafka(self) -> dict[str, Any]:
        # aiokafka has no buffer or in-flight setting: it keeps one request in flight per
        # broker and one batch being filled per partition (send() waits while that one is full).
        return {"acks": 1, "enable_idempotence": False, "compression_type": _codec_or_none(self.codec),
                "max_batch_size": self.batch_bytes, "linger_ms": self.linger_ms,
                "max_request_size": MAX_REQUEST}  # fmt: skip

    def librdkafka(self) -> dict[str, Any]:
        return {"acks": 1, "enable.idempotence": False, "compression.type": self.codec,
                "batch.size": self.batch_bytes, "linger.ms": self.linger_ms,
                "queue.buffering.max.kbytes": BUFFER_MEMORY // 1024, "message.max.bytes": MAX_REQUEST,
                "max.in.flight.requests.per.connection": MAX_IN_FLIGHT}  # fmt: skip


#: What every consumer is given (Kafka's defaults, said once): fetches of up to 50 MiB and
#: 1 MiB per partition, long polls of 500 ms, CRCs checked, 500 records per poll at most.
FETCH_MAX_BYTES = 50 * 1024 * 1024
PARTITION_FETCH_BYTES = 1024 * 1024
FETCH_MAX_WAIT_MS = 500
MAX_POLL_RECORDS = 500
BUFFER_MEMORY = 32 * 1024 * 1024
MAX_REQUEST = 1024 * 1024
MAX_IN_FLIGHT = 5


def _codec_or_none(codec: str) -> str | None:
    return None if codec == "none" else codec


def consumer_settings_ours() -> dict[str, Any]:
    return {"auto_offset_reset": "earliest", "fetch_max_bytes": FETCH_MAX_BYTES,
            "max_partition_fetch_bytes": PARTITION_FETCH_BYTES, "fetch_max_wait_ms": FETCH_MAX_WAIT_MS,
            "max_poll_records": MAX_POLL_RECORDS, "check_crcs": True}  # fmt: skip


def consumer_settings_python() -> dict[str, Any]:
    """kafka-python's and aiokafka's (they share the names)."""
    return {"group_id": None, "enable_auto_commit": False, "auto_offset_reset": "earliest",
            "fetch_max_bytes": FETCH_MAX_BYTES, "max_partition_fetch_bytes": PARTITION_FETCH_BYTES,
            "fetch_max_wait_ms": FETCH_MAX_WAIT_MS, "max_poll_records": MAX_POLL_RECORDS,
            "check_crcs": True}  # fmt: skip


def consumer_settings_librdkafka() -> dict[str, Any]:
    # librdkafka stops fetching for fetch.queue.backoff.ms (default 1 s) whenever its prefetch
    # queue holds queued.min.messages: with the defaults a consumer that falls behind measures
    # that timer, not the client (FIELD-NOTES). check.crcs is off by default there: on, as the others.
    return {"group.id": "bench-unused", "enable.auto.commit": False, "enable.partition.eof": False,
            "fetch.max.bytes": FETCH_MAX_BYTES, "max.partition.fetch.bytes": PARTITION_FETCH_BYTES,
            "fetch.wait.max.ms": FETCH_MAX_WAIT_MS, "check.crcs": True, "fetch.queue.backoff.ms": 0,
            "queued.min.messages": 1_000_000}  # fmt: skip


# --- producing ---------------------------------------------------------------------------


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=30).values():
        future.result(timeout=60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # until every partition has a leader
        found = admin.list_topics(topic, timeout=10).topics[topic].partitions
        if len(found) == partitions and all(p.leader >= 0 and p.error is None for p in found.values()):
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {topic} has no leader")


def produce_librdkafka(
    bootstrap: str, topic: str, values: Sequence[bytes], count: int, config: dict[str, Any]
) -> Sample:
    seconds = common.confluent_produce(bootstrap, topic, values, count, config, label="confluent-kafka")
    return Sample(seconds, count, count * len(values[0]))


def produce_kafka_python(
    bootstrap: str, topic: str, values: Sequence[bytes], count: int, config: dict[str, Any]
) -> Sample:
    """kafka-python's KafkaProducer: ``send()`` in a loop (its sender is a thread of this
    process, so its CPU counts), then ``flush()``; one future in 1000 checked afterwards."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, **config)
    producer.partitions_for(topic)  # connected, metadata known: not timed
    send, n = producer.send, len(values)
    kept = []
    start = time.perf_counter()
    for i in range(count):
        future = send(topic, values[i % n])
        if not i % 1000:
            kept.append(future)
    producer.flush()
    seconds = time.perf_counter() - start
    for each in (*kept, future):
        each.get(timeout=30)  # raises the error of a failed batch
    producer.close()
    return Sample(seconds, count, count * len(values[0]))


async def _produce_aiokafka(
    bootstrap: str, topic: str, values: Sequence[bytes], count: int, config: dict[str, Any]
) -> Sample:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **config)
    await producer.start()
    try:
        await producer.partitions_for(topic)  # connected, metadata known: not timed
        send, n = producer.send, len(values)
        kept = []
        start = time.perf_counter()
        for i in range(count):
            future = await send(topic, values[i % n])
            if not i % 1000:
                kept.append(future)
        await producer.flush()
        seconds = time.perf_counter() - start
        for each in (*kept, future):
            await each  # raises the error of a failed batch
    finally:
        await producer.stop()
    return Sample(seconds, count, count * len(values[0]))


def produce_aiokafka(bootstrap: str, topic: str, values: Sequence[bytes], count: int, config: dict[str, Any]) -> Sample:
    return asyncio.run(_produce_aiokafka(bootstrap, topic, values, count, config))


async def _produce_ours(  # noqa: PLR0917 (trio.run passes arguments by position)
    bootstrap: str,
    topic: str,
    values: Sequence[bytes],
    count: int,
    settings: dict[str, Any],
    profile: cProfile.Profile | None,
) -> Sample:
    async with Producer(bootstrap, **settings) as producer:
        await producer.send(topic, values[0])  # connected, metadata known: not timed
        enqueue, n = producer.enqueue, len(values)
        # One handle in 1000 is kept to check for errors after the timing.
        kept: list[RecordHandle] = []
        if profile is not None:
            profile.enable()
        start = time.perf_counter()
        for i in range(count):
            handle = await enqueue(topic, values[i % n])
            if not i % 1000:
                kept.append(handle)
        await producer.flush()
        seconds = time.perf_counter() - start
        if profile is not None:
            profile.disable()
        for each in (*kept, handle):
            each.result()  # raises the error of a failed batch
    return Sample(seconds, count, count * len(values[0]))


def produce_ours(ctx: Context, topic: str, values: Sequence[bytes], count: int, settings: dict[str, Any]) -> Sample:
    return trio.run(_produce_ours, ctx.bootstrap, topic, values, count, settings, ctx.profile)


def produce_shape(
    name: str, values: Callable[[Context], Sequence[bytes]], counts: tuple[int, int], settings: ProduceSettings
) -> ShapeFunction:
    """A produce shape: the same settings for every client, one topic each."""

    def shape(ctx: Context) -> list[Job]:
        data = values(ctx)
        count = counts[0] if ctx.quick else counts[1]
        topics = {who: f"{name}-{who}" for who in (OURS, *PEERS)}
        for topic in topics.values():
            create_topic(ctx.bootstrap, topic)
        b = ctx.bootstrap
        return [
            (OURS, lambda: produce_ours(ctx, topics[OURS], data, count, settings.ours())),
            (KAFKA_PYTHON, lambda: produce_kafka_python(b, topics[KAFKA_PYTHON], data, count, settings.kafka_python())),
            (AIOKAFKA, lambda: produce_aiokafka(b, topics[AIOKAFKA], data, count, settings.aiokafka())),
            (LIBRDKAFKA, lambda: produce_librdkafka(b, topics[LIBRDKAFKA], data, count, settings.librdkafka())),
        ]

    return shape


SHAPES: dict[str, ShapeFunction] = {
    "produce-200B": produce_shape(
        "produce-200B", lambda ctx: ctx.small, (10_000, 300_000), ProduceSettings("none", 16384, 5)
    ),
    "produce-1KiB-zstd": produce_shape(
        "produce-1KiB-zstd", lambda ctx: ctx.large, (3_000, 100_000), ProduceSettings("zstd", 65536, 20)
    ),
}


# --- consuming (the consumer's shapes) ----------------------------------------------------


def preload(bootstrap: str, topic: str, values: Sequence[bytes], count: int, settings: ProduceSettings) -> None:
    """Fill ``topic`` (partition 0) with ``count`` values through confluent-kafka, untimed."""
    produce_librdkafka(bootstrap, topic, values, count, settings.librdkafka())


def consume_librdkafka(bootstrap: str, topic: str, count: int) -> Sample:
    """confluent-kafka's Consumer: assign partition 0 from offset 0, ``consume()`` batches
    until ``count`` messages, touching each value."""
    consumer = ConfluentConsumer({"bootstrap.servers": bootstrap, **consumer_settings_librdkafka()})
    consumer.list_topics(topic, timeout=10)  # connected, metadata known: not timed
    got = nbytes = 0
    start = time.perf_counter()
    consumer.assign([ConfluentTopicPartition(topic, 0, 0)])
    while got < count:
        # Never more than what is left: consume() waits for the whole batch or the timeout.
        for message in consumer.consume(min(MAX_POLL_RECORDS, count - got), 1.0):
            if message.error() is not None:
                raise RuntimeError(f"confluent-kafka: {message.error()}")
            got += 1
            nbytes += len(message.value() or b"")
    seconds = time.perf_counter() - start
    consumer.close()
    return Sample(seconds, got, nbytes)


def consume_kafka_python(bootstrap: str, topic: str, count: int) -> Sample:
    """kafka-python's KafkaConsumer: assign and seek to 0, ``poll()`` until ``count``."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, **consumer_settings_python())
    consumer.partitions_for_topic(topic)  # connected, metadata known: not timed
    tp = KafkaTopicPartition(topic, 0)
    got = nbytes = 0
    start = time.perf_counter()
    consumer.assign([tp])
    consumer.seek(tp, 0)
    while got < count:
        for records in consumer.poll(timeout_ms=1000).values():
            for record in records:
                got += 1
                nbytes += len(record.value or b"")
    seconds = time.perf_counter() - start
    consumer.close()
    return Sample(seconds, got, nbytes)


async def _consume_aiokafka(bootstrap: str, topic: str, count: int) -> Sample:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, **consumer_settings_python())
    await consumer.start()
    try:
        await consumer.topics()  # connected, metadata known: not timed
        tp = AIOTopicPartition(topic, 0)
        got = nbytes = 0
        start = time.perf_counter()
        consumer.assign([tp])
        consumer.seek(tp, 0)
        while got < count:
            for records in (await consumer.getmany(timeout_ms=1000)).values():
                for record in records:
                    got += 1
                    nbytes += len(record.value or b"")
        seconds = time.perf_counter() - start
    finally:
        await consumer.stop()
    return Sample(seconds, got, nbytes)


def consume_aiokafka(bootstrap: str, topic: str, count: int) -> Sample:
    """aiokafka's AIOKafkaConsumer: assign and seek to 0, ``getmany()`` until ``count``."""
    return asyncio.run(_consume_aiokafka(bootstrap, topic, count))


async def _consume_ours(
    bootstrap: str, topic: str, count: int, iterate: bool, profile: cProfile.Profile | None,
) -> Sample:  # fmt: skip
    async with Consumer(bootstrap, **consumer_settings_ours()) as consumer:
        got = nbytes = 0
        if profile is not None:
            profile.enable()
        start = time.perf_counter()
        consumer.assign([ClientTopicPartition(topic, 0)])
        consumer.seek(ClientTopicPartition(topic, 0), 0)  # as theirs: no ListOffsets first
        if iterate:
            async for record in consumer:
                got += 1
                nbytes += len(record.value or b"")
                if got >= count:
                    break
        else:
            while got < count:
                for record in await consumer.poll(1.0):
                    got += 1
                    nbytes += len(record.value or b"")
        seconds = time.perf_counter() - start
        if profile is not None:
            profile.disable()
    return Sample(seconds, got, nbytes)


def consume_ours(ctx: Context, topic: str, count: int, iterate: bool) -> Sample:
    return trio.run(_consume_ours, ctx.bootstrap, topic, count, iterate, ctx.profile)


def consume_shape(
    name: str, values: Callable[[Context], Sequence[bytes]], counts: tuple[int, int], load: ProduceSettings
) -> ShapeFunction:
    """A consume shape: one topic, preloaded once, read from offset 0 by each contender."""

    def shape(ctx: Context) -> list[Job]:
        count = counts[0] if ctx.quick else counts[1]
        topic = f"{name}-data"
        create_topic(ctx.bootstrap, topic)
        log(f"shape {name}: preloading {count:,} messages")
        preload(ctx.bootstrap, topic, values(ctx), count, load)
        b = ctx.bootstrap
        return [
            (OURS, lambda: consume_ours(ctx, topic, count, iterate=False)),
            (OURS_ASYNC_FOR, lambda: consume_ours(ctx, topic, count, iterate=True)),
            (KAFKA_PYTHON, lambda: consume_kafka_python(b, topic, count)),
            (AIOKAFKA, lambda: consume_aiokafka(b, topic, count)),
            (LIBRDKAFKA, lambda: consume_librdkafka(b, topic, count)),
        ]

    return shape


SHAPES.update({
    "consume-200B": consume_shape(
        "consume-200B", lambda ctx: ctx.small, (10_000, 300_000), ProduceSettings("none", 16384, 5)
    ),
    "consume-1KiB-zstd": consume_shape(
        "consume-1KiB-zstd", lambda ctx: ctx.large, (3_000, 100_000), ProduceSettings("zstd", 65536, 20)
    ),
})  # fmt: skip


# --- rebalancing (the consumer's group shape) -----------------------------------------------

GROUP_SIZE = 8
GROUP_PARTITIONS = 24
HEARTBEAT_MS = 1000


class _Settle:
    """Partition owners and the times of on_assign calls, from every member's callbacks
    (threads for librdkafka, tasks for ours); ``settled`` when every partition has one
    owner among ``members``."""

    def __init__(self, partitions: int) -> None:
        self.lock = threading.Lock()
        self.partitions = partitions
        self.owner: dict[int, int] = {}
        self.assigned_at: list[float] = []
        self.left_at: float | None = None
        self.double_owned = 0

    def assign(self, member: int, partitions: Sequence[int]) -> None:
        with self.lock:
            for p in partitions:
                if self.owner.get(p, member) != member:
                    self.double_owned += 1
                self.owner[p] = member
            self.assigned_at.append(time.perf_counter())

    def revoke(self, member: int, partitions: Sequence[int], leaving: bool) -> None:
        with self.lock:
            if leaving and self.left_at is None:
                self.left_at = time.perf_counter()  # LeaveGroup goes out right after this callback
            for p in partitions:
                if self.owner.get(p) == member:
                    del self.owner[p]

    def settled(self, members: set[int]) -> bool:
        with self.lock:
            return len(self.owner) == self.partitions and set(self.owner.values()) <= members

    def rebalance_seconds(self) -> float:
        with self.lock:
            assert self.left_at is not None
            return max(t for t in self.assigned_at if t >= self.left_at) - self.left_at


def _wait(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    eventually(condition, timeout, what, interval=0.002)


def rebalance_theirs(bootstrap: str, topic: str, group: str, strategy: str) -> float:
    """Eight confluent-kafka consumers in threads; the first closes; seconds until the
    others own every partition again."""
    settle = _Settle(GROUP_PARTITIONS)
    stops = [threading.Event() for _ in range(GROUP_SIZE)]
    errors: list[BaseException] = []

    def member(i: int) -> None:
        try:
            consumer = ConfluentConsumer({
                "bootstrap.servers": bootstrap, "group.id": group, "partition.assignment.strategy": strategy,
                "heartbeat.interval.ms": HEARTBEAT_MS, "session.timeout.ms": 30_000, "enable.auto.commit": False,
            })  # fmt: skip
            consumer.subscribe(
                [topic],
                on_assign=lambda _, tps: settle.assign(i, [tp.partition for tp in tps]),
                on_revoke=lambda _, tps: settle.revoke(i, [tp.partition for tp in tps], stops[i].is_set()),
                on_lost=lambda _, tps: settle.revoke(i, [tp.partition for tp in tps], False),
            )
            while not stops[i].is_set():
                consumer.poll(0.05)
            consumer.close()
        except BaseException as exc:  # surfaced by the caller
            errors.append(exc)

    threads = [threading.Thread(target=member, args=(i,), daemon=True) for i in range(GROUP_SIZE)]
    for thread in threads:
        thread.start()
    try:
        _wait(lambda: settle.settled(set(range(GROUP_SIZE))) or bool(errors), "the group forming")
        time.sleep(2 * HEARTBEAT_MS / 1000)  # let a straggling second rebalance finish
        _wait(lambda: settle.settled(set(range(GROUP_SIZE))), "the group settling")
        stops[0].set()
        threads[0].join(30)
        _wait(lambda: settle.settled(set(range(1, GROUP_SIZE))) or bool(errors), "the group rebalancing")
    finally:
        for stop in stops:
            stop.set()
        for thread in threads:
            thread.join(30)
    if errors:
        raise RuntimeError(f"confluent-kafka member failed: {errors[0]!r}")
    return settle.rebalance_seconds()


async def _rebalance_ours(bootstrap: str, topic: str, group: str, strategy: str) -> float:
    settle = _Settle(GROUP_PARTITIONS)
    stops = [trio.Event() for _ in range(GROUP_SIZE)]
    settings: dict[str, Any] = {
        "partition_assignment_strategy": (strategy,), "heartbeat_interval_ms": HEARTBEAT_MS,
        "session_timeout_ms": 30_000, "enable_auto_commit": False,
    }  # fmt: skip

    async def member(i: int) -> None:
        async with Consumer(bootstrap, group, **settings) as consumer:
            consumer.subscribe(
                [topic],
                on_assign=lambda tps: settle.assign(i, [tp.partition for tp in tps]),
                on_revoke=lambda tps: settle.revoke(i, [tp.partition for tp in tps], stops[i].is_set()),
            )
            while not stops[i].is_set():
                await consumer.poll(0.05)

    async def wait(condition: Callable[[], bool], what: str) -> None:
        with trio.fail_after(60):
            while not condition():
                await trio.sleep(0.002)

    async with trio.open_nursery() as nursery:
        for i in range(GROUP_SIZE):
            nursery.start_soon(member, i)
        await wait(lambda: settle.settled(set(range(GROUP_SIZE))), "the group forming")
        await trio.sleep(2 * HEARTBEAT_MS / 1000)  # let a straggling second rebalance finish
        await wait(lambda: settle.settled(set(range(GROUP_SIZE))), "the group settling")
        stops[0].set()
        await wait(lambda: settle.settled(set(range(1, GROUP_SIZE))), "the group rebalancing")
        for stop in stops:
            stop.set()
    return settle.rebalance_seconds()


def rebalance_ours(bootstrap: str, topic: str, group: str, strategy: str) -> float:
    return trio.run(_rebalance_ours, bootstrap, topic, group, strategy)


#: Rebalance shapes: name -> (our assignor, librdkafka's partition.assignment.strategy).
REBALANCES: dict[str, tuple[str, str]] = {
    "rebalance-8-range": ("range", "range"),
    "rebalance-8-cooperative": ("cooperative-sticky", "cooperative-sticky"),
}


def run_rebalance(ctx: Context, name: str, rounds: int) -> dict[str, list[float]]:
    """Seconds from the leaving member's LeaveGroup until the other seven own every
    partition again, per contender and round (a fresh group each time)."""
    ours, theirs = REBALANCES[name]
    topic = f"{name}-topic"
    create_topic(ctx.bootstrap, topic, GROUP_PARTITIONS)
    jobs: list[tuple[str, Callable[[str], float]]] = [
        ("tributary", lambda group: rebalance_ours(ctx.bootstrap, topic, group, ours)),
        ("confluent-kafka", lambda group: rebalance_theirs(ctx.bootstrap, topic, group, theirs)),
    ]
    times: dict[str, list[float]] = {}
    for r in range(rounds):
        for i in range(len(jobs)):
            who, job = jobs[(r + i) % len(jobs)]
            seconds = job(f"{name}-{who}-{r}")
            times.setdefault(who, []).append(seconds)
            log(f"  round {r + 1}/{rounds} {name:<24} {who:<16} {seconds * 1000:>8.0f} ms")
    return times


def render_rebalances(rebalances: dict[str, dict[str, list[float]]]) -> str:
    rows = []
    for name, times in rebalances.items():
        for i, (who, seconds) in enumerate(times.items()):
            rows.append([name if i == 0 else "", who, f"{statistics.median(seconds) * 1000:,.0f}",
                         f"{min(seconds) * 1000:,.0f}", f"{max(seconds) * 1000:,.0f}", str(len(seconds))])  # fmt: skip
    header = ["group of 8, one leaves", "client", "median ms", "min ms", "max ms", "rounds"]
    note = (f"rebalance time: from the leaving member's LeaveGroup to the other seven owning every one of "
            f"{GROUP_PARTITIONS} partitions; heartbeat.interval.ms={HEARTBEAT_MS} for both")  # fmt: skip
    return "\n".join([note, common.table(header, rows, left=2)])


# --- rounds and the report -----------------------------------------------------------------


@dataclass
class Result:
    samples: dict[str, list[Sample]] = field(default_factory=dict)


def timed(job: Callable[[], Sample], broker: Tributary) -> Sample:
    gc.collect()
    broker_before = cpu_seconds(broker.pid)
    before = client_cpu()
    sample = job()
    sample.client_cpu = client_cpu() - before
    after = cpu_seconds(broker.pid)
    if broker_before is not None and after is not None:
        sample.broker_cpu = after - broker_before
    return sample


def run_shape(ctx: Context, name: str, rounds: int, contenders: Sequence[str]) -> Result:
    jobs = [(who, job) for who, job in SHAPES[name](ctx) if who in contenders]
    result = Result()
    if not ctx.quick:
        log(f"shape {name}: warm-up")
        for _, job in jobs:
            job()
    for r in range(rounds):
        for i in range(len(jobs)):
            who, job = jobs[(r + i) % len(jobs)]
            sample = timed(job, ctx.broker)
            result.samples.setdefault(who, []).append(sample)
            log(f"  round {r + 1}/{rounds} {name:<18} {who:<20} {sample.messages / sample.seconds:>10,.0f} msgs/s"
                f" ({sample.seconds:.2f} s)")  # fmt: skip
    return result


def paired(ours: Sequence[Sample], theirs: Sequence[Sample]) -> float:
    """Our throughput over theirs: the median of the per-round ratios."""
    return statistics.median(
        (t.seconds / t.messages) / (o.seconds / o.messages) for o, t in zip(ours, theirs, strict=True)
    )


def summary(results: dict[str, Result]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, result in results.items():
        ours = result.samples.get(OURS)
        rows: dict[str, Any] = {}
        for who, samples in result.samples.items():
            row: dict[str, Any] = {
                "rounds": len(samples),
                "msgs_per_s": statistics.median(s.messages / s.seconds for s in samples),
                "MB_per_s": statistics.median(s.nbytes / s.seconds for s in samples) / 1e6,
                "client_cpu_us_per_msg": statistics.median(s.client_cpu / s.messages * 1e6 for s in samples),
                "broker_cpu_us_per_msg": statistics.median(
                    s.broker_cpu / s.messages * 1e6 for s in samples if s.broker_cpu is not None
                ),
            }
            if ours is not None and who in PEERS:
                # Throughput and CPU per message, ours against this peer's, round by round.
                row["ours_over"] = paired(ours, samples)
                row["cpu_over"] = statistics.median(
                    (t.client_cpu / t.messages) / (o.client_cpu / o.messages)
                    for o, t in zip(ours, samples, strict=True)
                    if o.client_cpu > 0
                ) if any(o.client_cpu > 0 for o in ours) else None  # fmt: skip
            rows[who] = row
        goals = {
            peer: {"goal": goal, "ratio": rows[peer]["ours_over"], "met": rows[peer]["ours_over"] >= goal}
            for peer, goal in GOALS.items()
            if peer in rows and "ours_over" in rows[peer]
        }
        out[name] = {"contenders": rows, "goals": goals}
    return out


def render(document: dict[str, Any]) -> str:
    info = document["versions"]
    lines = [
        "Client throughput: Tributary's client (ours) vs kafka-python, aiokafka and confluent-kafka, "
        "same broker, same run",
        common.machine_line(),
        f"peers: kafka-python {info['kafka-python']}, aiokafka {info['aiokafka']}, confluent-kafka "
        f"{info['confluent-kafka']}; broker: tributary {info['tributary']} (one, loopback)",
        "figures are medians over rounds; ours/peer is the median of per-round throughput ratios "
        f"(ours: {OURS}, poll()),",
        "CPU ours/peer the same for client CPU per message (above 1: ours costs less);",
        "MB/s = 10^6 B of values per second; CPU = microseconds per message (client: this process, all threads)",
        "",
    ]
    rows = []
    for name, shape in document["shapes"].items():
        for i, (who, row) in enumerate(shape["contenders"].items()):
            ratio, cpu = row.get("ours_over"), row.get("cpu_over")
            rows.append([
                name if i == 0 else "", who, f"{row['msgs_per_s']:,.0f}", f"{row['MB_per_s']:,.1f}",
                f"{ratio:.2f}x" if ratio is not None else "-", f"{cpu:.2f}x" if cpu is not None else "-",
                f"{row['client_cpu_us_per_msg']:.1f}", f"{row['broker_cpu_us_per_msg']:.1f}", str(row["rounds"]),
            ])  # fmt: skip
    header = ["shape", "client", "msgs/s", "MB/s", "ours/peer", "CPU ours/peer", "client CPU", "broker CPU", "rounds"]
    lines.append(common.table(header, rows, left=2))
    lines += ["", render_ratios(document["shapes"])]
    if document.get("rebalances"):
        lines += ["", render_rebalances(document["rebalances"])]
    if document.get("profile"):
        lines += ["", "cProfile of our side (cumulative, top entries):", document["profile"]]
    return "\n".join(lines)


def render_ratios(shapes: dict[str, Any]) -> str:
    """One line per shape: ours over each peer, and whether the goals are met."""
    lines = []
    for name, shape in shapes.items():
        cells = [
            f"vs {peer} {g['ratio']:.2f}x (goal {g['goal']:.1f}x {'met' if g['met'] else 'NOT met'})"
            for peer, g in shape["goals"].items()
        ]
        if cells:
            lines.append(f"ratio {name}: " + "; ".join(cells))
    return "\n".join(lines)


def profile_summary(profile: cProfile.Profile, limit: int = 25) -> str:
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(limit)
    return out.getvalue()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small counts, one round, no warm-up: a smoke run")
    known = [*SHAPES, *REBALANCES]
    parser.add_argument("--shapes", default=None, help=f"comma-separated, any of: {', '.join(known)} "
                        "(default: all; with --quick the throughput shapes)")  # fmt: skip
    everyone = [OURS, OURS_ASYNC_FOR, *PEERS]
    parser.add_argument(
        "--contenders", default=",".join(everyone), help=f"comma-separated, any of: {', '.join(everyone)}"
    )
    parser.add_argument("--repeat", type=int, default=None, help="rounds per shape (default 5; 1 with --quick)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--profile", action="store_true", help="profile our side with cProfile and print hot spots")
    args = parser.parse_args(argv)
    default_shapes = list(SHAPES) if args.quick else known
    selected = [s.strip() for s in args.shapes.split(",") if s.strip()] if args.shapes else default_shapes
    unknown = set(selected) - set(known)
    if unknown or not selected:
        parser.error(f"unknown or no shape(s): {', '.join(sorted(unknown))} (known: {', '.join(known)})")
    contenders = [c.strip() for c in args.contenders.split(",") if c.strip()]
    if set(contenders) - set(everyone) or not contenders:
        parser.error(f"unknown or no contender(s) in {args.contenders!r} (known: {', '.join(everyone)})")
    rounds = args.repeat if args.repeat is not None else 1 if args.quick else 5
    if rounds < 1:
        parser.error("--repeat must be at least 1")

    log("building message values")
    # Values sent in turn; a smoke run needs few (the full run's are 2,560 and 4,096).
    small = [value for batch in make_corpus(SMALL, 320, 1 if args.quick else 8) for _, value, _ in batch]
    large = [value for batch in make_corpus(LARGE, 64, 4 if args.quick else 64) for _, value, _ in batch]
    root = Path(tempfile.mkdtemp(prefix="bench-client-"))
    profile = cProfile.Profile(time.thread_time) if args.profile else None
    started = time.monotonic()
    try:
        with ZooKeeper(root / "zookeeper") as zookeeper:
            zookeeper.start()
            with Tributary(root / "tributary", zookeeper) as broker:
                broker.start()
                ctx = Context(broker.bootstrap, broker, args.quick, small, large, profile)
                results = {name: run_shape(ctx, name, rounds, contenders) for name in selected if name in SHAPES}
                rebalances = {name: run_rebalance(ctx, name, rounds) for name in selected if name in REBALANCES}
    except (KafkaException, RuntimeError, TimeoutError, AssertionError, OSError) as exc:
        log(f"failed: {exc!r}; scratch directory kept: {root}")
        return 1
    shutil.rmtree(root, ignore_errors=True)
    log(f"done in {time.monotonic() - started:.0f} s")
    document: dict[str, Any] = {
        "machine": common.machine(),
        "versions": {
            "confluent-kafka": f"{confluent_kafka.version()} (librdkafka {confluent_kafka.libversion()[0]})",
            "kafka-python": importlib.metadata.version("kafka-python"),
            "aiokafka": importlib.metadata.version("aiokafka"),
            "tributary": importlib.metadata.version("tributary"),
        },
        "rounds": rounds,
        "shapes": summary(results),
        "rebalances": rebalances,
    }
    if profile is not None:
        document["profile"] = profile_summary(profile)
    print(json.dumps(document, indent=2) if args.json else render(document))
    return 0


if __name__ == "__main__":
    sys.exit(main())
