"""Client throughput: Tributary's Trio client (ours) against confluent-kafka (librdkafka, theirs),
on the same Tributary broker, in the same run.

One ZooKeeper and one Tributary broker (``tributary broker``, see ``processes.py``) run as
child processes on loopback; both clients live in this process and take turns, round after
round (rotating who goes first), so drift on the shared machine hits both. Figures are
medians over rounds (one untimed warm-up before); the ratio is the median of the
per-round ratios ours/theirs. Client CPU is this process's user+system time per message
(librdkafka's own threads included); broker CPU comes from ``/proc/<pid>/stat``.

Shapes (``--shapes`` picks; each is a function in :data:`SHAPES` that returns the jobs of
its contenders, so the consumer's shapes plug in next to the producer's):

* ``produce-200B``: 200-byte JSON values, no compression, acks=1, one partition,
  16 KiB batches, linger 5 ms, no idempotence (librdkafka's default): ours sends with
  ``await producer.enqueue(...)`` in a loop and ``flush()``es at the end; theirs calls
  ``produce()`` (``poll(0)`` when its queue is full) and ``flush()``.
* ``produce-1KiB-zstd``: 1 KiB JSON values, zstd, 64 KiB batches, linger 20 ms, acks=1.

Consumer shapes (contenders: ours with ``poll()``, ours with ``async for``, theirs):

* ``consume-200B``, ``consume-1KiB-zstd``: the produce shapes' values and batches, preloaded
  once (untimed) into one partition and read from offset 0 with default fetch settings:
  ours ``assign`` + ``poll()`` (or ``async for``); theirs ``assign`` + ``consume(10000)``
  with ``fetch.queue.backoff.ms=10`` (its 1 s default idles a consumer that falls behind
  its prefetch queue). Each contender touches every value (``len``).
* ``rebalance-8-range``, ``rebalance-8-cooperative``: eight members of a fresh group share
  24 partitions; one closes; the time from its LeaveGroup (right after its revoke
  callback) to the other seven owning every partition again, from their assign callbacks.
  heartbeat.interval.ms is 1000 for both (the others hear of the rebalance at their next
  heartbeat, so that bounds the figure from below on average). Reported apart, in ms.

The goal (checked at the end): ours/theirs >= 0.5 on every produce and consume shape
(``poll()``). Run from the repository root (about 2 minutes; ``--quick`` about 15 s)::

    .venv/bin/python -m bench.bench_client [--quick] [--shapes S,...] [--repeat N] [--json]
        [--profile]        # run our side under cProfile, print its hot spots

Progress goes to stderr.
"""

from __future__ import annotations

import argparse
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
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import KafkaException
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

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
GOAL = 0.5


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
#: A shape: sets up its topics, warms up, returns (reference contender, jobs).
ShapeFunction = Callable[[Context], tuple[str, list[Job]]]


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


def produce_theirs(bootstrap: str, topic: str, values: Sequence[bytes], count: int, config: dict[str, Any]) -> Sample:
    seconds = common.confluent_produce(bootstrap, topic, values, count, config, label="confluent-kafka")
    return Sample(seconds, count, count * len(values[0]))


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
    name: str, values: Callable[[Context], Sequence[bytes]], counts: tuple[int, int], ours: dict[str, Any],
    theirs: dict[str, Any],
) -> ShapeFunction:  # fmt: skip
    """A produce shape: the same settings for both clients, one topic each."""

    def shape(ctx: Context) -> tuple[str, list[Job]]:
        data = values(ctx)
        count = counts[0] if ctx.quick else counts[1]
        ours_topic, theirs_topic = f"{name}-ours", f"{name}-theirs"
        create_topic(ctx.bootstrap, ours_topic)
        create_topic(ctx.bootstrap, theirs_topic)
        return "confluent-kafka", [
            ("tributary", lambda: produce_ours(ctx, ours_topic, data, count, ours)),
            ("confluent-kafka", lambda: produce_theirs(ctx.bootstrap, theirs_topic, data, count, theirs)),
        ]

    return shape


def same_producers(codec: str, batch_bytes: int, linger_ms: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Tributary's producer settings and librdkafka's for the same producer: acks=1, no
    idempotence, the same codec, batch size and linger."""
    ours = {"acks": 1, "compression": codec, "batch_bytes": batch_bytes, "linger_ms": linger_ms}
    theirs = {
        "acks": 1, "enable.idempotence": False, "compression.type": codec, "batch.size": batch_bytes,
        "linger.ms": linger_ms,
    }  # fmt: skip
    return ours, theirs


SHAPES: dict[str, ShapeFunction] = {
    "produce-200B": produce_shape(
        "produce-200B", lambda ctx: ctx.small, (20_000, 300_000), *same_producers("none", 16384, 5)
    ),
    "produce-1KiB-zstd": produce_shape(
        "produce-1KiB-zstd", lambda ctx: ctx.large, (5_000, 100_000), *same_producers("zstd", 65536, 20)
    ),
}
#: The least ours/reference ratio each shape should reach.
GOALS: dict[str, float] = {"produce-200B": GOAL, "produce-1KiB-zstd": GOAL}


# --- consuming (the consumer's shapes) ----------------------------------------------------


def preload(bootstrap: str, topic: str, values: Sequence[bytes], count: int, config: dict[str, Any]) -> None:
    """Fill ``topic`` (partition 0) with ``count`` values through confluent-kafka, untimed."""
    produce_theirs(bootstrap, topic, values, count, {"acks": 1, "enable.idempotence": False, **config})


def consume_theirs(bootstrap: str, topic: str, count: int, config: dict[str, Any]) -> Sample:
    """confluent-kafka's Consumer: assign partition 0 from offset 0, ``consume()`` batches
    until ``count`` messages, touching each value."""
    consumer = ConfluentConsumer({
        "bootstrap.servers": bootstrap, "group.id": "bench-unused", "enable.auto.commit": False,
        "enable.partition.eof": False, **config,
    })  # fmt: skip
    consumer.list_topics(topic, timeout=10)  # connected, metadata known: not timed
    got = nbytes = 0
    start = time.perf_counter()
    consumer.assign([ConfluentTopicPartition(topic, 0, 0)])
    while got < count:
        # Never more than what is left: consume() waits for the whole batch or the timeout.
        for message in consumer.consume(min(10_000, count - got), 1.0):
            if message.error() is not None:
                raise RuntimeError(f"confluent-kafka: {message.error()}")
            got += 1
            nbytes += len(message.value() or b"")
    seconds = time.perf_counter() - start
    consumer.close()
    return Sample(seconds, got, nbytes)


async def _consume_ours(  # noqa: PLR0917 (trio.run passes arguments by position)
    bootstrap: str, topic: str, count: int, settings: dict[str, Any], iterate: bool,
    profile: cProfile.Profile | None,
) -> Sample:  # fmt: skip
    async with Consumer(bootstrap, auto_offset_reset="earliest", **settings) as consumer:
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


def consume_ours(ctx: Context, topic: str, count: int, settings: dict[str, Any], iterate: bool) -> Sample:
    return trio.run(_consume_ours, ctx.bootstrap, topic, count, settings, iterate, ctx.profile)


def consume_shape(
    name: str, values: Callable[[Context], Sequence[bytes]], counts: tuple[int, int], load: dict[str, Any],
) -> ShapeFunction:  # fmt: skip
    """A consume shape: one topic, preloaded once, read from offset 0 by each contender."""

    def shape(ctx: Context) -> tuple[str, list[Job]]:
        count = counts[0] if ctx.quick else counts[1]
        topic = f"{name}-data"
        create_topic(ctx.bootstrap, topic)
        log(f"shape {name}: preloading {count:,} messages")
        preload(ctx.bootstrap, topic, values(ctx), count, load)
        # librdkafka's default fetch.queue.backoff.ms (1 s) idles it whenever the
        # application falls behind its prefetch queue; 10 ms as in bench_broker.
        theirs = {"fetch.queue.backoff.ms": 10}
        return "confluent-kafka", [
            ("tributary", lambda: consume_ours(ctx, topic, count, {}, iterate=False)),
            ("tributary async-for", lambda: consume_ours(ctx, topic, count, {}, iterate=True)),
            ("confluent-kafka", lambda: consume_theirs(ctx.bootstrap, topic, count, theirs)),
        ]

    return shape


SHAPES.update({
    "consume-200B": consume_shape(
        "consume-200B", lambda ctx: ctx.small, (20_000, 300_000),
        {"compression.type": "none", "batch.size": 16384, "linger.ms": 5},
    ),
    "consume-1KiB-zstd": consume_shape(
        "consume-1KiB-zstd", lambda ctx: ctx.large, (5_000, 100_000),
        {"compression.type": "zstd", "batch.size": 65536, "linger.ms": 20},
    ),
})  # fmt: skip
GOALS.update({"consume-200B": GOAL, "consume-1KiB-zstd": GOAL})


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
    reference: str
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


def run_shape(ctx: Context, name: str, rounds: int) -> Result:
    reference, jobs = SHAPES[name](ctx)
    result = Result(reference)
    log(f"shape {name}: warm-up")
    for _, job in jobs:
        job()
    for r in range(rounds):
        for i in range(len(jobs)):
            who, job = jobs[(r + i) % len(jobs)]
            sample = timed(job, ctx.broker)
            result.samples.setdefault(who, []).append(sample)
            log(f"  round {r + 1}/{rounds} {name:<18} {who:<16} {sample.messages / sample.seconds:>10,.0f} msgs/s"
                f" ({sample.seconds:.2f} s)")  # fmt: skip
    return result


def summary(results: dict[str, Result]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, result in results.items():
        ref = result.samples[result.reference]
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
            if who != result.reference:
                row["ratio"] = statistics.median(
                    (t.seconds / t.messages) / (o.seconds / o.messages) for o, t in zip(samples, ref, strict=True)
                )
            rows[who] = row
        ratio = rows["tributary"].get("ratio")
        goal = GOALS.get(name)
        out[name] = {
            "reference": result.reference,
            "contenders": rows,
            "goal": goal,
            "met": None if goal is None or ratio is None else ratio >= goal,
        }
    return out


def render(document: dict[str, Any]) -> str:
    info = document["versions"]
    lines = [
        "Client throughput: Tributary's client (ours) vs confluent-kafka (theirs), same broker, same run",
        common.machine_line(),
        f"theirs: confluent-kafka {info['confluent-kafka']}; broker: tributary {info['tributary']} (one, loopback)",
        "figures are medians over rounds; ours/theirs is the median of per-round ratios;",
        "MB/s = 10^6 B of values per second; CPU = microseconds per message (client: this process)",
        "",
    ]
    rows = []
    for name, shape in document["shapes"].items():
        for i, (who, row) in enumerate(shape["contenders"].items()):
            ratio = row.get("ratio")
            rows.append([
                name if i == 0 else "", who, f"{row['msgs_per_s']:,.0f}", f"{row['MB_per_s']:,.1f}",
                f"{ratio:.2f}x" if ratio is not None else "-", f"{row['client_cpu_us_per_msg']:.1f}",
                f"{row['broker_cpu_us_per_msg']:.1f}", str(row["rounds"]),
            ])  # fmt: skip
    header = ["shape", "client", "msgs/s", "MB/s", "ours/theirs", "client CPU", "broker CPU", "rounds"]
    lines.append(common.table(header, rows, left=2))
    goals = [(n, s) for n, s in document["shapes"].items() if s["goal"] is not None]
    if goals:
        lines.append("")
        for name, shape in goals:
            ratio = shape["contenders"]["tributary"].get("ratio", 0.0)
            verdict = "met" if shape["met"] else "NOT met"
            lines.append(f"goal {name}: ours/theirs {ratio:.2f}x >= {shape['goal']:.2f}x: {verdict}")
    if document.get("rebalances"):
        lines += ["", render_rebalances(document["rebalances"])]
    if document.get("profile"):
        lines += ["", "cProfile of our side (cumulative, top entries):", document["profile"]]
    return "\n".join(lines)


def profile_summary(profile: cProfile.Profile, limit: int = 25) -> str:
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(limit)
    return out.getvalue()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small counts, one round: a smoke run")
    known = [*SHAPES, *REBALANCES]
    parser.add_argument("--shapes", default=",".join(known), help=f"comma-separated, any of: {', '.join(known)}")
    parser.add_argument("--repeat", type=int, default=None, help="rounds per shape (default 5; 1 with --quick)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--profile", action="store_true", help="profile our side with cProfile and print hot spots")
    args = parser.parse_args(argv)
    selected = [s.strip() for s in args.shapes.split(",") if s.strip()]
    unknown = set(selected) - set(known)
    if unknown or not selected:
        parser.error(f"unknown or no shape(s): {', '.join(sorted(unknown))} (known: {', '.join(known)})")
    rounds = args.repeat if args.repeat is not None else 1 if args.quick else 5
    if rounds < 1:
        parser.error("--repeat must be at least 1")

    log("building message values")
    small = [value for batch in make_corpus(SMALL, 320, 8) for _, value, _ in batch]
    large = [value for batch in make_corpus(LARGE, 64, 64) for _, value, _ in batch]
    root = Path(tempfile.mkdtemp(prefix="bench-client-"))
    profile = cProfile.Profile() if args.profile else None
    started = time.monotonic()
    try:
        with ZooKeeper(root / "zookeeper") as zookeeper:
            zookeeper.start()
            with Tributary(root / "tributary", zookeeper) as broker:
                broker.start()
                ctx = Context(broker.bootstrap, broker, args.quick, small, large, profile)
                results = {name: run_shape(ctx, name, rounds) for name in selected if name in SHAPES}
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
