"""Mirror cost: the shallow mirror against two decompress-and-recompress copiers, in one run.

One ZooKeeper and two Tributary brokers (a source and an aggregate, ``tributary
broker`` in chroots of their own, see ``processes.py``) run as child processes
on loopback. confluent-kafka first loads one source topic per batch size
(``events-64k``, ``events-1024k``; 4 partitions each) with 1 KiB JSON activity
events (``bench_records.make_corpus``), keyed by user, zstd, linger 20 ms,
batch.size 64 KiB (a tuned Java producer) or 1 MiB (librdkafka's default):
batches of about 11 kB and 130 kB compressed. The shallow mirror's work is per
batch and the recompressing copiers' per record, so the batch size decides the
ratio. Then, round after round (rotating who goes first), each copier copies each
topic whole into a fresh aggregate topic (``bench_mirror_peers.py``):

* **shallow**: ``tributary mirror`` (a child process, default settings): raw
  batches, never decompressed (``<alias>.<topic>``);
* **confluent**: the copier users run, a consume-and-produce loop on confluent-kafka
  (librdkafka decompresses and recompresses in C, as MirrorMaker does in Java), its
  queues and backoff set so that the copier is measured, not a timer;
* **recompress**: the same loop with this project's pure-Python client
  (``client.Consumer`` + ``client.Producer``, zstd, acks=all, the source's batch
  size, linger 5 ms): the first peer measured, kept for continuity.

Every copy is watched the same way from outside (``bench_mirror_peers.watch_copy``):
the aggregate's end offsets every 50 ms, and the copier process's CPU time (all its
threads, in nanoseconds) from ``/proc`` at the same instants, from the last sample before
the first record landed to the first after the last did (start-up, group join and topic
creation excluded). MB/s and CPU-seconds per GB count the source's compressed batch bytes
(the same data for every copier). "sustained" is the CPU per GB while the middle eight
tenths of the records landed (between the samples that saw a tenth and nine tenths): what
a mirror that runs for days pays per GB, without the first fetches' ramp and the tail. The
goals: at most 5 CPU-s/GB sustained for the shallow mirror with 64 KiB batches and 1.5 with
1 MiB batches, and at least 3x less CPU per GB than the confluent-kafka loop.

Last, end-to-end latency: a shallow mirror copies a fresh topic while
confluent-kafka produces 2,000 records/s into it for 10 s (linger 5 ms, zstd,
acks=all), each value carrying its send time; confluent-kafka consumers read
the aggregate copy and, as the peer, the source topic itself, and take per
record the time they got it minus the send time: p50/p99/max.

The machine is shared: the load average at the start and end is printed with
the results. Run from the repository root (about 3 minutes; ``--quick`` under
a minute)::

    .venv/bin/python -m bench.bench_mirror [--quick] [--megabytes N] [--batch-kib 64,1024] [--rounds N]
        [--copiers shallow,confluent,recompress,baseline] [--mirror-flags FLAGS] [--baseline-checkout DIR]
        [--json] [--from-json FILE] [--keep] [--py-spy DIR]

Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import functools
import importlib.metadata
import json
import math
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import trio
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tributary.client.blocking import BlockingFetcher
from tributary.client.consumer.consumer import Consumer as OurConsumer
from tributary.client.producer.producer import Producer as OurProducer
from tributary.client.wire.metadata import TopicPartition

from . import common
from .bench_mirror_peers import COPY_TIMEOUT, ConfluentCopy, MirrorDaemon, Watched, watch_copy
from .bench_records import make_corpus
from .common import log
from .processes import ROOT, Server, Tributary, ZooKeeper
from .profiles import PySpy, collapsed_summary

LATENCY_TOPIC = "ticks"
PARTITIONS = 4
VALUE_SIZE = 1024
SOURCE_PRODUCER = {"compression.type": "zstd", "linger.ms": 20, "acks": 1}
LATENCY_PRODUCER = {"compression.type": "zstd", "linger.ms": 5, "acks": "all"}
#: CPU-seconds per GB the shallow mirror may spend, by the source producer's batch.size (KiB).
CPU_GOALS = {64: 5.0, 1024: 1.5}
#: How much cheaper per GB than the confluent-kafka loop the shallow mirror must be.
PEER_GOAL = 3.0
COPIERS = ("shallow", "confluent", "recompress", "baseline")
#: The copiers that run unless told otherwise ("baseline" needs --baseline-checkout).
DEFAULT_COPIERS = ("shallow", "confluent", "recompress")


@dataclass(frozen=True)
class Sizes:
    megabytes: int  # uncompressed values loaded into each source topic
    batch_kib: tuple[int, ...]  # one source topic per source producer batch.size (KiB, uncompressed)
    rounds: int
    latency_rate: int  # records per second
    latency_seconds: float
    copiers: tuple[str, ...] = DEFAULT_COPIERS
    #: Extra command-line flags for the shallow mirror (``--mirror-flags``), as given.
    mirror_flags: tuple[str, ...] = ()
    #: Another checkout whose mirror runs as the "baseline" copier (``--baseline-checkout``).
    baseline_checkout: str = ""

    @staticmethod
    def pick(args: argparse.Namespace) -> Sizes:
        quick = Sizes(megabytes=5, batch_kib=(64, 1024), rounds=1, latency_rate=1000, latency_seconds=2)
        full = Sizes(megabytes=200, batch_kib=(64, 1024), rounds=2, latency_rate=2000, latency_seconds=10)
        base = quick if args.quick else full
        return Sizes(
            megabytes=args.megabytes or base.megabytes,
            batch_kib=args.batch_kib or base.batch_kib,
            rounds=args.rounds or base.rounds,
            latency_rate=base.latency_rate,
            latency_seconds=base.latency_seconds,
            copiers=args.copiers or (*DEFAULT_COPIERS, *(("baseline",) if args.baseline_checkout else ())),
            mirror_flags=tuple(shlex.split(args.mirror_flags)),
            baseline_checkout=str(args.baseline_checkout or ""),
        )


@dataclass(frozen=True)
class SourceTopic:
    """A loaded source topic: its producer's batch size and what it holds."""

    topic: str
    batch_kib: int
    records: int
    compressed_bytes: int
    batches: int

    @property
    def batch_bytes(self) -> int:
        return self.batch_kib * 1024


@dataclass(frozen=True)
class Copy:
    """One contender's copy of a source topic."""

    who: str
    topic: str
    seconds: float
    records: int
    source_bytes: int  # compressed batch bytes of the source data copied
    cpu: float  # CPU seconds of the copying process over ``seconds``
    #: CPU seconds while the middle of the copy landed, and that middle's share of the records
    #: (``Watched.sustained_cpu``; 0 in results saved before it was measured).
    sustained_cpu: float = 0.0
    sustained_share: float = 0.0

    @property
    def sustained_cpu_per_gb(self) -> float:
        """CPU per GB while the copy ran at its sustained rate: no start-up, ramp or tail."""
        if self.sustained_share <= 0:
            return float("nan")
        return self.sustained_cpu / (self.source_bytes * self.sustained_share) * 1e9

    @property
    def mb_per_s(self) -> float:
        return self.source_bytes / self.seconds / 1e6

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds

    @property
    def cpu_per_gb(self) -> float:
        return self.cpu / self.source_bytes * 1e9

    @property
    def cpu_us_per_record(self) -> float:
        return self.cpu / self.records * 1e6


# --- the source data ----------------------------------------------------------------------------


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=30).values():
        future.result(timeout=60)


def load_source(bootstrap: str, topic: str, megabytes: int, batch_bytes: int) -> int:
    """Produce ``megabytes`` of 1 KiB JSON events into ``topic``; the record count."""
    records = [(key, value) for batch in make_corpus(VALUE_SIZE, 64, 64) for key, value, _ in batch]
    count = megabytes * 1_000_000 // VALUE_SIZE
    producer = Producer({
        "bootstrap.servers": bootstrap, "queue.buffering.max.kbytes": 1_048_576,
        "queue.buffering.max.messages": 1_000_000, "enable.idempotence": False, "batch.size": batch_bytes,
        **SOURCE_PRODUCER,
    })  # fmt: skip
    for i in range(count):
        key, value = records[i % len(records)]
        while True:
            try:
                producer.produce(topic, value, key)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(300):
        raise RuntimeError("the source load left records unsent")
    return count


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    with BlockingFetcher(bootstrap) as fetcher:
        return {p: end for p, (_, end) in fetcher.offset_bounds(topic).items()}


def compressed_bytes(bootstrap: str, topic: str) -> tuple[int, int]:
    """The bytes and the number of the batches in ``topic``: what a shallow copy carries."""
    total = count = 0
    with BlockingFetcher(bootstrap) as fetcher:
        for partition, (start, end) in fetcher.offset_bounds(topic).items():
            seen = start
            for fetched in fetcher.fetch_range(topic, partition, start, end):
                for header, data in fetched.batch_bytes():
                    if header.next_offset > seen:
                        total += len(data)
                        count += 1
                        seen = header.next_offset
    return total, count


# --- the shallow mirror -------------------------------------------------------------------------


def shallow_copy(  # noqa: PLR0917 (call sites in _copy)
    root: Path,
    source: str,
    target: str,
    src: SourceTopic,
    alias: str,
    flags: Sequence[str],
    *,
    spy: Path | None,
    checkout: Path = ROOT,
    who: str = "shallow",
) -> Copy:
    """``tributary mirror`` (with ``flags``, from ``checkout``) copies ``src`` whole into ``<alias>.<topic>``."""
    mirror = MirrorDaemon(
        root / f"mirror-{alias}", source, target, alias, src.topic, extra=flags, checkout=checkout
    ).start()
    sampler = PySpy(mirror.pid, spy) if spy is not None else None
    dest = f"{alias}.{src.topic}"
    try:
        watched = watch_copy(mirror, target, dest, src.records)
    finally:
        if sampler is not None:
            sampler.stop()
        mirror.stop()
    if end_offsets(target, dest) != end_offsets(source, src.topic):
        raise RuntimeError("the shallow copy's partitions do not end where the source's do")
    return _copied(who, src, watched)


def confluent_copy(root: Path, source: str, target: str, src: SourceTopic, dest: str, *, spy: Path | None) -> Copy:
    """The confluent-kafka consume-and-produce loop copies ``src`` whole into ``dest``."""
    create_topic(target, dest)
    loop = ConfluentCopy(root / f"confluent-{dest}")
    loop.start(source, target, src.topic, dest, src.batch_bytes, end_offsets(source, src.topic))
    sampler = PySpy(loop.pid, spy) if spy is not None else None
    try:
        watched = watch_copy(loop, target, dest, src.records)
        loop.wait()
    finally:
        if sampler is not None:
            sampler.stop()
        loop.stop()
    if end_offsets(target, dest) != end_offsets(source, src.topic):
        raise RuntimeError("the confluent copy's partitions do not end where the source's do")
    return _copied("confluent", src, watched)


def _copied(who: str, src: SourceTopic, watched: Watched) -> Copy:
    return Copy(
        who, src.topic, watched.seconds, src.records, src.compressed_bytes, watched.cpu,
        watched.sustained_cpu, watched.sustained_share,
    )  # fmt: skip


# --- the MirrorMaker way: decompress, recompress ------------------------------------------------


async def _copy_loop(
    source: str, target: str, topic: str, dest: str, *, batch_bytes: int, ends: dict[int, int]
) -> None:
    remaining = {p for p, end in ends.items() if end > 0}
    async with (
        OurConsumer(source, auto_offset_reset="earliest", fetch_max_bytes=16 << 20,
                    max_partition_fetch_bytes=2 << 20, max_poll_records=5000) as consumer,
        OurProducer(target, acks="all", compression="zstd", batch_bytes=batch_bytes, linger_ms=5) as producer,
    ):  # fmt: skip
        consumer.assign([TopicPartition(topic, p) for p in sorted(ends)])
        while remaining:
            for record in await consumer.poll(timeout=1.0):
                await producer.enqueue(
                    dest, record.value, key=record.key, partition=record.partition, timestamp=record.timestamp
                )
                if record.offset + 1 >= ends[record.partition]:
                    remaining.discard(record.partition)
        await producer.flush()


def copy_loop_main(argv: Sequence[str]) -> int:
    """The pure-Python recompressing copier's process: ``copy-loop SOURCE TARGET TOPIC DEST BATCH_BYTES``."""
    source, target, topic, dest, batch_bytes = argv
    ends = end_offsets(source, topic)
    trio.run(functools.partial(_copy_loop, batch_bytes=int(batch_bytes), ends=ends), source, target, topic, dest)
    return 0


class CopyLoop(Server):
    name = "copy loop"


def recompress_copy(root: Path, source: str, target: str, src: SourceTopic, dest: str, *, spy: Path | None) -> Copy:
    create_topic(target, dest)
    loop = CopyLoop(root / f"copy-{dest}")
    loop._spawn(
        [
            sys.executable,
            "-m",
            "bench.bench_mirror",
            "copy-loop",
            source,
            target,
            src.topic,
            dest,
            str(src.batch_bytes),
        ],
        dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert loop.proc is not None
    sampler = PySpy(loop.pid, spy) if spy is not None else None
    try:
        watched = watch_copy(loop, target, dest, src.records)
        code = loop.proc.wait(COPY_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise TimeoutError("the copy loop did not finish") from None
    finally:
        if sampler is not None:
            sampler.stop()
        loop.stop()
    if code != 0:
        raise RuntimeError(f"the copy loop failed ({code}):\n{loop.log_tail()}")
    if end_offsets(target, dest) != end_offsets(source, src.topic):
        raise RuntimeError("the recompressed copy's partitions do not end where the source's do")
    return _copied("recompress", src, watched)


# --- end-to-end latency -------------------------------------------------------------------------


def percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


class LatencyReader:
    """A confluent-kafka consumer in a thread: for each record read, now minus the send
    time its value starts with (records sent with 0 are counted but not measured)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": f"bench-latency-{topic}", "enable.auto.commit": False,
            "fetch.wait.max.ms": 10, "fetch.queue.backoff.ms": 1,
        })  # fmt: skip
        self.consumer.assign([KafkaTopicPartition(topic, p, 0) for p in range(partitions)])
        self.delays: list[float] = []
        self.received = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="latency-reader", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for message in self.consumer.consume(1000, 0.05):
                now = time.time()
                value = message.value()
                if message.error() is not None or value is None:
                    continue
                self.received += 1
                sent = float(value[len(b'{"sent":') : value.index(b",")])
                if sent > 0:
                    self.delays.append(now - sent)

    def wait_for(self, what: str, count: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while (self.received if what == "received" else len(self.delays)) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the aggregate copy holds {self.received:,} records, {count:,} expected")
            time.sleep(0.1)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()


def paced_produce(producer: Producer, values: Sequence[bytes], rate: int, seconds: float, *, stamped: bool) -> int:
    """``rate`` records per second for ``seconds``, each value prefixed with its send time
    (or 0); the number sent, all acknowledged."""
    start, sent = time.monotonic(), 0
    while time.monotonic() < start + seconds:
        ahead = start + sent / rate - time.monotonic()
        if ahead > 0:
            time.sleep(min(0.002, ahead))
            continue
        stamp = f"{time.time():.6f}" if stamped else "0"
        producer.produce(LATENCY_TOPIC, b'{"sent":' + stamp.encode() + b"," + values[sent % len(values)][1:])
        producer.poll(0)
        sent += 1
    if producer.flush(30):
        raise RuntimeError("latency records left unsent")
    return sent


def measure_latency(root: Path, source: str, target: str, sizes: Sizes) -> dict[str, dict[str, float]]:
    """Produce at a steady rate into a mirrored topic; the produce-to-readable delays (ms)
    at the aggregate, and at the source itself (the peer: what the mirror adds is the difference)."""
    alias = "lat"
    copy = f"{alias}.{LATENCY_TOPIC}"
    create_topic(source, LATENCY_TOPIC)
    create_topic(target, copy)
    values = [value for batch in make_corpus(VALUE_SIZE, 64, 4) for _, value, _ in batch]
    producer = Producer({"bootstrap.servers": source, **LATENCY_PRODUCER})
    mirror = MirrorDaemon(root / "mirror-latency", source, target, alias, LATENCY_TOPIC).start()
    readers = {"aggregate": LatencyReader(target, copy), "source": LatencyReader(source, LATENCY_TOPIC)}
    try:
        # Unmeasured until the mirror copies: its start-up (group join) is not latency.
        warm = paced_produce(producer, values, sizes.latency_rate, 1.0, stamped=False)
        readers["aggregate"].wait_for("received", warm)
        sent = paced_produce(producer, values, sizes.latency_rate, sizes.latency_seconds, stamped=True)
        for reader in readers.values():
            reader.wait_for("measured", sent)
    finally:
        for reader in readers.values():
            reader.close()
        mirror.stop()
    result: dict[str, dict[str, float]] = {}
    for where, reader in readers.items():
        ms = [d * 1000 for d in reader.delays]
        if len(ms) != sent:
            raise RuntimeError(f"{sent} records sent, {len(ms)} read from the {where}")
        result[where] = {
            "records": len(ms), "rate": sizes.latency_rate, "p50_ms": percentile(ms, 0.5),
            "p99_ms": percentile(ms, 0.99), "max_ms": max(ms), "mean_ms": statistics.fmean(ms),
        }  # fmt: skip
    return result


# --- the run and its report ---------------------------------------------------------------------


def load(bootstrap: str, megabytes: int, batch_kib: int) -> SourceTopic:
    topic = f"events-{batch_kib}k"
    create_topic(bootstrap, topic)
    log(f"loading {topic}: {megabytes} MB of {VALUE_SIZE} B JSON events, zstd, batch.size {batch_kib} KiB")
    started = time.perf_counter()
    records = load_source(bootstrap, topic, megabytes, batch_kib * 1024)
    loaded = time.perf_counter() - started
    size, batches = compressed_bytes(bootstrap, topic)
    log(f"loaded {records:,} records in {loaded:.1f} s: {size / 1e6:.1f} MB in {batches:,} zstd batches")
    return SourceTopic(topic, batch_kib, records, size, batches)


def run(sizes: Sizes, root: Path, spy: Path | None) -> dict[str, Any]:
    """Everything, in one set of servers; with ``spy``, the first round's copiers are sampled by py-spy."""
    zookeeper = ZooKeeper(root / "zookeeper")
    source = Tributary(root / "source", zookeeper, label="source")
    target = Tributary(root / "aggregate", zookeeper, label="aggregate")
    with zookeeper, source, target:
        zookeeper.start()
        source.start()
        target.start()
        sources = [load(source.bootstrap, sizes.megabytes, kib) for kib in sizes.batch_kib]
        copies: list[Copy] = []
        hot_spots: dict[str, str] = {}
        for round_no in range(1, sizes.rounds + 1):
            shift = (round_no - 1) % len(sizes.copiers)
            order = [*sizes.copiers[shift:], *sizes.copiers[:shift]]  # who goes first rotates
            for src in sources:
                for who in order:
                    log(f"round {round_no}, {src.topic}: {who} copy")
                    output = spy / f"{who}-{src.topic}.txt" if spy is not None and round_no == 1 else None
                    copy = _copy(who, root, source.bootstrap, target.bootstrap, src, round_no, output, sizes)
                    if output is not None:
                        hot_spots[f"{who} copier, {src.topic}"] = collapsed_summary(output)
                    log(f"  {copy.mb_per_s:.1f} MB/s, {copy.records_per_s:,.0f} records/s, "
                        f"{copy.cpu_per_gb:.1f} CPU-s/GB")  # fmt: skip
                    copies.append(copy)
        log(f"latency: {sizes.latency_rate:,} records/s for {sizes.latency_seconds:g} s")
        latency = measure_latency(root, source.bootstrap, target.bootstrap, sizes)
    return {
        "sources": [asdict(src) for src in sources],
        "copies": [asdict(c) for c in copies],
        "latency": latency,
        "hot_spots": hot_spots,
    }


def _copy(  # noqa: PLR0917 (one call site, in run)
    who: str, root: Path, source: str, target: str, src: SourceTopic, round_no: int, spy: Path | None, sizes: Sizes
) -> Copy:
    if who == "shallow":
        alias = f"r{round_no}-{src.batch_kib}k"
        return shallow_copy(root, source, target, src, alias, sizes.mirror_flags, spy=spy)
    if who == "baseline":
        alias = f"b{round_no}-{src.batch_kib}k"
        checkout = Path(sizes.baseline_checkout)
        return shallow_copy(root, source, target, src, alias, sizes.mirror_flags, spy=spy, checkout=checkout, who=who)
    if who == "confluent":
        return confluent_copy(root, source, target, src, f"cf{round_no}.{src.topic}", spy=spy)
    return recompress_copy(root, source, target, src, f"mm{round_no}.{src.topic}", spy=spy)


def _median(copies: Sequence[Copy], attr: str) -> float:
    return float(statistics.median(getattr(c, attr) for c in copies))


def render(result: dict[str, Any]) -> str:
    copies = [Copy(**c) for c in result["copies"]]
    sources = [SourceTopic(**src) for src in result["sources"]]
    present = [who for who in COPIERS if any(c.who == who for c in copies)]
    rows, goals = [], []
    for src in sources:
        by_who = {who: [c for c in copies if c.who == who and c.topic == src.topic] for who in present}
        for who, mine in by_who.items():
            per_batch = _median(mine, "cpu_per_gb") * src.compressed_bytes / src.batches / 1e3
            rows.append([
                f"{src.batch_kib} KiB", who, f"{_median(mine, 'mb_per_s'):,.1f}",
                f"{_median(mine, 'records_per_s'):,.0f}", f"{_median(mine, 'cpu_per_gb'):,.2f}",
                _figure(_median(mine, "sustained_cpu_per_gb")),
                f"{_median(mine, 'cpu_us_per_record'):,.2f}", f"{per_batch:,.0f}", str(len(mine)),
                "" if who == "shallow" or "shallow" not in by_who else f"{_ratio(by_who, who):.1f}x",
            ])  # fmt: skip
        if "shallow" in by_who:
            cost = _median(by_who["shallow"], "cpu_per_gb")
            sustained = _median(by_who["shallow"], "sustained_cpu_per_gb")
            goal = CPU_GOALS.get(src.batch_kib)
            if goal is not None and math.isnan(sustained):
                goals.append(
                    f"{src.batch_kib} KiB batches: shallow {cost:.2f} CPU-s/GB over the whole copy; the copy was too "
                    f"short to tell its sustained cost (goal at most {goal:g} sustained): not judged"
                )
            elif goal is not None:
                goals.append(
                    f"{src.batch_kib} KiB batches: shallow {sustained:.2f} CPU-s/GB sustained (per round: "
                    f"{', '.join(_figure(c.sustained_cpu_per_gb) for c in by_who['shallow'])}), {cost:.2f} over the "
                    f"whole copy, goal at most {goal:g} sustained: {'met' if sustained <= goal else 'NOT met'}"
                )
            if "confluent" in by_who:
                ratio = _ratio(by_who, "confluent")
                goals.append(
                    f"{src.batch_kib} KiB batches: confluent / shallow CPU per GB {ratio:.1f}x (per round: "
                    f"{', '.join(f'{r:.1f}x' for r in _ratios(by_who, 'confluent'))}), goal at least "
                    f"{PEER_GOAL:g}x: {'met' if ratio >= PEER_GOAL else 'NOT met'}"
                )
            if "baseline" in by_who:
                base = [c.sustained_cpu_per_gb / s.sustained_cpu_per_gb
                        for s, c in zip(by_who["shallow"], by_who["baseline"], strict=True)]  # fmt: skip
                goals.append(
                    f"{src.batch_kib} KiB batches: baseline / shallow sustained CPU per GB "
                    f"{_figure(statistics.median(base))}x (per round: {', '.join(_figure(r) + 'x' for r in base)})"
                )
    latency = result["latency"]
    measured = latency["aggregate"]
    lines = [
        "Mirror: shallow (tributary mirror) vs decompress-and-recompress copiers (confluent-kafka; this client)",
        _machine_line(result["machine"]),
        *(
            [f"shallow mirror flags: {' '.join(result['sizes']['mirror_flags'])}"]
            if result.get("sizes", {}).get("mirror_flags")
            else []
        ),
        *(
            [f"baseline: the mirror of {result['sizes']['baseline_checkout']} (ratio: its CPU per GB / shallow's)"]
            if result.get("sizes", {}).get("baseline_checkout")
            else []
        ),
        *(
            f"{src.topic}: {src.records:,} records, {src.records * VALUE_SIZE / 1e6:,.0f} MB of 1 KiB JSON values in "
            f"{src.batches:,} zstd batches of {src.compressed_bytes / src.batches / 1e3:,.1f} kB, "
            f"{src.compressed_bytes / 1e6:,.1f} MB ({src.records * VALUE_SIZE / src.compressed_bytes:.1f}x smaller)"
            for src in sources
        ),
        f"{PARTITIONS} partitions; MB/s and CPU-s/GB count the source's compressed batch bytes; CPU: the copier "
        "process's user+system time, all threads; sustained: CPU-s/GB while the middle 80% of the records "
        "landed; medians over rounds; ratio: CPU per GB, copier / shallow",
        "",
        common.table(
            [
                "batch.size",
                "copier",
                "MB/s",
                "records/s",
                "CPU-s/GB",
                "sustained",
                "CPU us/record",
                "CPU us/batch",
                "rounds",
                "ratio",
            ],
            rows,
            left=2,
        ),
        "",
        *goals,
        "",
        f"end-to-end latency at {measured['rate']:,} records/s ({measured['records']:,} records): produce at the "
        "source to readable at the aggregate, and (the peer) readable at the source itself:",
        common.table(
            ["readable at", "p50 ms", "p99 ms", "max ms", "mean ms"],
            [
                [where, *(f"{latency[where][k]:.1f}" for k in ("p50_ms", "p99_ms", "max_ms", "mean_ms"))]
                for where in ("aggregate", "source")
            ],
        ),
    ]
    for what, text in result.get("hot_spots", {}).items():
        lines += ["", f"py-spy, {what} (round 1):", text]
    return "\n".join(lines)


def _figure(value: float) -> str:
    """Two decimals, or "-" for a figure the copy was too short to give (NaN)."""
    return "-" if math.isnan(value) else f"{value:,.2f}"


def _ratios(by_who: dict[str, list[Copy]], peer: str) -> list[float]:
    return [p.cpu_per_gb / s.cpu_per_gb for s, p in zip(by_who["shallow"], by_who[peer], strict=True)]


def _ratio(by_who: dict[str, list[Copy]], peer: str) -> float:
    return float(statistics.median(_ratios(by_who, peer)))


def _machine_line(m: dict[str, str]) -> str:
    line = f"{m['date']}; {m['cpus']} CPUs ({m['cpu']}); {m['python']}; {m['os']}"
    return f"{line}; {m['load']}" if "load" in m else line


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["copy-loop"]:
        return copy_loop_main(argv[1:])
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="5 MB, one round, 2 s of latency: a smoke run")
    parser.add_argument("--megabytes", type=int, default=None, help="MB of values in each source topic (default 200)")
    parser.add_argument("--rounds", type=int, default=None, help="copies per contender (default 2)")
    parser.add_argument(
        "--batch-kib",
        type=lambda text: tuple(int(v) for v in text.split(",")),
        default=None,
        help="the source producers' batch.size in KiB, one source topic each (default 64,1024)",
    )
    parser.add_argument(
        "--copiers",
        type=lambda text: tuple(text.split(",")),
        default=None,
        help=f"which copiers run (default {','.join(COPIERS)})",
    )
    parser.add_argument(
        "--mirror-flags",
        default="",
        help="extra flags for the shallow mirror, e.g. '--max-inflight-batches-per-partition 5'",
    )
    parser.add_argument(
        "--baseline-checkout",
        type=Path,
        default=None,
        help="another checkout (its compiled module built) whose mirror runs as the 'baseline' copier, "
        "alternating with this one's against the same servers and topics: an A/B of two commits",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    common.add_process_arguments(parser, "sample the first round's copiers")
    args = parser.parse_args(argv)
    if common.replayed(args, render):
        return 0
    if any(value is not None and value < 1 for value in (args.megabytes, args.rounds, *(args.batch_kib or ()))):
        parser.error("--megabytes, --rounds and --batch-kib must be at least 1")
    if args.copiers is not None and not set(args.copiers) <= set(COPIERS):
        parser.error(f"--copiers takes some of {', '.join(COPIERS)}")
    if args.baseline_checkout is not None and not (args.baseline_checkout / "tributary").is_dir():
        parser.error(f"--baseline-checkout {args.baseline_checkout}: no tributary package there")
    if "baseline" in (args.copiers or ()) and args.baseline_checkout is None:
        parser.error("the baseline copier needs --baseline-checkout")
    sizes = Sizes.pick(args)
    root = Path(tempfile.mkdtemp(prefix="bench-mirror-"))
    machine = common.machine()
    load_before = os.getloadavg()[0]  # the machine is shared: say how busy it was
    started = time.monotonic()
    try:
        if args.py_spy is not None:
            args.py_spy.mkdir(parents=True, exist_ok=True)
        result = run(sizes, root, args.py_spy.resolve() if args.py_spy is not None else None)
    except (KafkaException, RuntimeError, TimeoutError, OSError, urllib.error.URLError) as exc:
        log(f"failed: {exc!r}; scratch directory kept: {root}")
        return 1
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    log(f"done in {time.monotonic() - started:.0f} s")
    machine["load"] = f"load average {load_before:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
    result = {"machine": machine, "versions": versions(), "sizes": asdict(sizes), **result}
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


def versions() -> dict[str, str]:
    return {name: importlib.metadata.version(name) for name in ("confluent-kafka", "zstandard", "trio")}


if __name__ == "__main__":
    sys.exit(main())
