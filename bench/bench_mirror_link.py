"""The mirror across a long link: throughput under a cap and latency, beside peers, in one run.

Servers (child processes, loopback): ZooKeeper, a source and an aggregate Tributary broker,
and in front of the source the fault proxy of ``tributary.testing`` (a thread of this
process). The source advertises the proxy's address, so every connection to it crosses the
proxy; the copiers' connections (their client ids start ``tributary-mirror-``) cross the far
link: ``--rtt-ms`` of round trip (half each way, plus up to ``--jitter-ms`` of jitter each
way) and ``--rate-mb`` MB/s each way, the proxy's token bucket shared by every connection.
The loading and latency producers and the readers pass straight through.

Two source topics, 1 and 16 partitions, each hold ``--megabytes`` MB of zstd batches written
by confluent-kafka with librdkafka's default batch.size (1 MiB) and linger 20 ms: 1 KiB JSON
records carrying an opaque random blob, so zstd shrinks them little (about 1.3x) and the
bytes crossing the link, not the producer's compression, are what is measured. Round after
round (rotating who goes first) each copier copies each topic whole into a fresh aggregate
topic, watched from outside as in ``bench_mirror.py`` (``bench_mirror_peers.watch_copy``):

* **shallow**: ``tributary mirror --fetch-windows 8`` (the default, spelled out): up to eight
  fetches of a partition in flight at estimated offsets (``mirror/windows.py``), four fetch
  requests per connection;
* **one fetch**: ``tributary mirror --fetch-windows 1 --fetch-sessions 2``: a partition in
  one fetch at a time, as the mirror read before (and as a consumer does);
* **confluent**: the consume-and-produce loop on confluent-kafka of ``bench_mirror_peers``,
  decompressing and recompressing, with the same fetch sizes and long poll.

Reported per copy: MB/s of the source's compressed bytes from the first record copied to
the last, that as a share of the cap, the copier's CPU-s/GB, and the CPU share of a core
that the copier, the proxy thread, the source and the aggregate broker used meanwhile (so
that what limits the figure shows: the link, or a core). Then end-to-end latency: for each
copier in turn, confluent-kafka produces 2,000 records/s (linger 5 ms, zstd, acks=all) into
a fresh 4-partition topic for ``--latency-seconds``, each value carrying its send time; a
consumer of the aggregate copy takes per record the time it got it minus the send time:
p50/p99/max against three round trips plus the linger.

Run from the repository root (about 4 minutes; ``--quick`` under a minute)::

    .venv/bin/python -m bench.bench_mirror_link [--quick] [--megabytes N] [--rounds N] [--rtt-ms 100]
        [--jitter-ms 0] [--rate-mb 50] [--json] [--from-json FILE] [--keep]

Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import urllib.error
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException, Producer

from tributary.testing.fault_proxy import LinkMode, ProxyThread

from . import common
from .bench_mirror import LatencyReader, create_topic, end_offsets, percentile, versions
from .bench_mirror_peers import (
    COPIER_CLIENT_PREFIX,
    ConfluentCopy,
    MirrorDaemon,
    Watched,
    thread_cpu_seconds,
    watch_copy,
)
from .common import log
from .processes import Server, Tributary, ZooKeeper, cpu_seconds

#: The shallow mirror reads each partition ahead of itself: 8 fetches in flight (its default).
READ_AHEAD = ["--fetch-windows", "8"]

TOPICS = (("far-1p", 1), ("far-16p", 16))
COPIERS = ("shallow", "one fetch", "confluent")
BATCH_BYTES = 1024 * 1024  # librdkafka's default batch.size
SOURCE_PRODUCER = {"compression.type": "zstd", "linger.ms": 20, "acks": 1, "batch.size": BATCH_BYTES}
LATENCY_PRODUCER = {"compression.type": "zstd", "linger.ms": 5, "acks": "all"}
LATENCY_PARTITIONS = 4
LATENCY_RATE = 2000  # records per second
VALUE_SIZE = 1024
THROUGHPUT_GOAL = 0.9  # of the cap
LATENCY_GOAL_ROUND_TRIPS = 3


@dataclass(frozen=True)
class Setup:
    megabytes: int  # compressed bytes per source topic, roughly
    rounds: int
    rtt: float  # seconds
    jitter: float  # seconds, each way at most
    rate: float  # bytes per second, each way
    latency_seconds: float

    @staticmethod
    def pick(args: argparse.Namespace) -> Setup:
        quick = args.quick
        return Setup(
            megabytes=args.megabytes or (5 if quick else 250),
            rounds=args.rounds or 1,
            rtt=args.rtt_ms / 1000,
            jitter=args.jitter_ms / 1000,
            rate=args.rate_mb * 1e6,
            latency_seconds=args.latency_seconds or (1.5 if quick else 10),
        )


@dataclass(frozen=True)
class Source:
    topic: str
    partitions: int
    records: int
    compressed_bytes: int


@dataclass(frozen=True)
class LinkCopy:
    who: str
    topic: str
    seconds: float
    source_bytes: int
    cpu: float
    link_bytes: int  # bytes that crossed the far link towards the copier meanwhile
    #: CPU seconds over the copy of the proxy thread and each broker.
    proxy_cpu: float
    source_cpu: float
    aggregate_cpu: float
    #: How long the middle eight tenths of the records took (no ramp-up, no tail).
    sustained_seconds: float

    @property
    def mb_per_s(self) -> float:
        return self.source_bytes / self.seconds / 1e6

    @property
    def sustained_mb_per_s(self) -> float:
        return 0.8 * self.source_bytes / self.sustained_seconds / 1e6 if self.sustained_seconds > 0 else 0.0

    @property
    def cpu_per_gb(self) -> float:
        return self.cpu / self.source_bytes * 1e9


# --- the source data ----------------------------------------------------------------------------


def blob_values(count: int, seed: int = 7) -> list[bytes]:
    """1 KiB JSON values around an opaque random blob: zstd makes them about 1.3x smaller."""
    rng = random.Random(seed)
    values = []
    for i in range(count):
        head = b'{"sent":0,"user":%d,"blob":"' % rng.randrange(10**6)
        blob = base64.b64encode(rng.randbytes(VALUE_SIZE)).rstrip(b"=")
        values.append((head + blob)[: VALUE_SIZE - 2] + b'"}')
        assert len(values[-1]) == VALUE_SIZE, i
    return values


def load(bootstrap: str, topic: str, partitions: int, megabytes: int, values: Sequence[bytes]) -> Source:
    create_topic(bootstrap, topic, partitions)
    count = int(megabytes * 1_000_000 * 1.3) // VALUE_SIZE  # about megabytes once compressed
    log(f"loading {topic} ({partitions} partitions): {count:,} records of {VALUE_SIZE} B, zstd, 1 MiB batches")
    producer = Producer({
        "bootstrap.servers": bootstrap, "queue.buffering.max.kbytes": 1_048_576,
        "queue.buffering.max.messages": 1_000_000, "enable.idempotence": False, **SOURCE_PRODUCER,
    })  # fmt: skip
    for i in range(count):
        while True:
            try:
                producer.produce(topic, values[i % len(values)], partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(300):
        raise RuntimeError(f"loading {topic} left records unsent")
    size = _compressed_bytes(bootstrap, topic)
    log(f"  {size / 1e6:,.1f} MB of batches ({count * VALUE_SIZE / size:.2f}x smaller)")
    return Source(topic, partitions, count, size)


def _compressed_bytes(bootstrap: str, topic: str) -> int:
    from tributary.client.blocking import BlockingFetcher  # noqa: PLC0415

    total = 0
    with BlockingFetcher(bootstrap) as fetcher:
        for partition, (start, end) in fetcher.offset_bounds(topic).items():
            seen = start
            for fetched in fetcher.fetch_range(topic, partition, start, end):
                for header, data in fetched.batch_bytes():
                    if header.next_offset > seen:
                        total += len(data)
                        seen = header.next_offset
    return total


# --- the copies ---------------------------------------------------------------------------------


@dataclass
class Far:
    """The servers of a run, and what every watch also samples."""

    root: Path
    proxy: ProxyThread
    source: Tributary
    target: Tributary

    def others(self) -> dict[str, Callable[[], float | None]]:
        tid = self.proxy.native_id
        assert tid is not None
        return {
            "proxy": lambda: thread_cpu_seconds(tid),
            "source": lambda: cpu_seconds(self.source.pid),
            "aggregate": lambda: cpu_seconds(self.target.pid),
        }

    def copier(self, who: str, src: Source, round_no: int) -> tuple[Server, str]:
        """Start ``who`` copying ``src``: the copier and its destination topic."""
        tag = f"r{round_no}-{src.partitions}p-{who.replace(' ', '')}"
        if who == "confluent":
            dest = f"cf.{tag}"
            create_topic(self.target.bootstrap, dest, src.partitions)
            loop = ConfluentCopy(self.root / dest)
            loop.start(
                self.source.bootstrap, self.target.bootstrap, src.topic, dest, BATCH_BYTES,
                end_offsets(self.source.bootstrap, src.topic),
            )  # fmt: skip
            return loop, dest
        extra = ["--fetch-windows", "1", "--fetch-sessions", "2"] if who == "one fetch" else READ_AHEAD
        mirror = MirrorDaemon(
            self.root / f"mirror-{tag}", self.source.bootstrap, self.target.bootstrap, tag, src.topic, extra
        ).start()
        return mirror, f"{tag}.{src.topic}"


def copy_once(far: Far, who: str, src: Source, round_no: int) -> LinkCopy:
    copier, dest = far.copier(who, src, round_no)
    before = far.proxy.stats()
    try:
        watched: Watched = watch_copy(copier, far.target.bootstrap, dest, src.records, others=far.others())
        if isinstance(copier, ConfluentCopy):
            copier.wait()
    finally:
        copier.stop()
    after = far.proxy.stats()
    if end_offsets(far.target.bootstrap, dest) != end_offsets(far.source.bootstrap, src.topic):
        raise RuntimeError(f"the {who} copy of {src.topic} does not end where the source does")
    return LinkCopy(
        who, src.topic, watched.seconds, src.compressed_bytes, watched.cpu,
        after.faulted_bytes_down - before.faulted_bytes_down,
        watched.others["proxy"], watched.others["source"], watched.others["aggregate"], watched.sustained_seconds,
    )  # fmt: skip


# --- latency ------------------------------------------------------------------------------------


def measure_latency(far: Far, who: str, setup: Setup, values: Sequence[bytes]) -> dict[str, float]:
    """``who`` copies a fresh topic while records are produced at a steady rate; the delays
    (ms) from each send to readable at the aggregate. Records sent before the copier copies
    (its start-up, group join, first fetches) carry no send time and are not measured."""
    tag = f"lat-{who.replace(' ', '')}"
    topic = f"ticks-{tag}"
    create_topic(far.source.bootstrap, topic, LATENCY_PARTITIONS)
    copier: Server
    if who == "confluent":
        dest = f"cf.{tag}"
        create_topic(far.target.bootstrap, dest, LATENCY_PARTITIONS)
        loop = ConfluentCopy(far.root / dest)
        never = dict.fromkeys(range(LATENCY_PARTITIONS), 2**62)  # copies until stopped
        loop.start(far.source.bootstrap, far.target.bootstrap, topic, dest, BATCH_BYTES, never)
        copier = loop
    else:
        dest = f"{tag}.{topic}"
        create_topic(far.target.bootstrap, dest, LATENCY_PARTITIONS)  # (the mirror finds it there)
        extra = ["--fetch-windows", "1", "--fetch-sessions", "2"] if who == "one fetch" else READ_AHEAD
        copier = MirrorDaemon(
            far.root / f"mirror-{tag}", far.source.bootstrap, far.target.bootstrap, tag, topic, extra
        ).start()
    producer = Producer({"bootstrap.servers": far.source.bootstrap, **LATENCY_PRODUCER})
    reader = LatencyReader(far.target.bootstrap, dest, LATENCY_PARTITIONS)
    count = int(LATENCY_RATE * setup.latency_seconds)
    try:
        warm = _paced(producer, topic, values, seconds=None, stamped=False, until=lambda: reader.received > 0)
        warm += _paced(producer, topic, values, seconds=1.0, stamped=False)  # past the first fetches
        sent = _paced(producer, topic, values, seconds=count / LATENCY_RATE, stamped=True)
        reader.wait_for("measured", sent, timeout=120)
    finally:
        reader.close()
        copier.stop()
    ms = sorted(d * 1000 for d in reader.delays)
    return {
        "records": len(ms), "warm_up_records": warm, "p50_ms": percentile(ms, 0.5),
        "p99_ms": percentile(ms, 0.99), "max_ms": ms[-1], "mean_ms": statistics.fmean(ms),
    }  # fmt: skip


def _paced(
    producer: Producer,
    topic: str,
    values: Sequence[bytes],
    *,
    seconds: float | None,
    stamped: bool,
    until: Callable[[], bool] = lambda: False,
) -> int:
    """``LATENCY_RATE`` records per second, spread over the partitions, for ``seconds`` (or until
    ``until()`` holds, at most a minute), each value starting with its send time (or 0); the
    number sent, all acknowledged."""
    start, sent = time.monotonic(), 0
    limit = 60.0 if seconds is None else seconds
    while time.monotonic() < start + limit and not (seconds is None and until()):
        ahead = start + sent / LATENCY_RATE - time.monotonic()
        if ahead > 0:
            time.sleep(min(0.002, ahead))
            continue
        stamp = f"{time.time():.6f}".encode() if stamped else b"0"
        value = b'{"sent":' + stamp + b"," + values[sent % len(values)][len(b'{"sent":0,') :]
        producer.produce(topic, value, partition=sent % LATENCY_PARTITIONS)
        producer.poll(0)
        sent += 1
    if producer.flush(30):
        raise RuntimeError("latency records left unsent")
    return sent


# --- the run and its report ---------------------------------------------------------------------


def run(setup: Setup, root: Path) -> dict[str, Any]:
    zookeeper = ZooKeeper(root / "zookeeper")
    target = Tributary(root / "aggregate", zookeeper, label="aggregate")
    with zookeeper, target:
        zookeeper.start()
        target.start()
        source = Tributary(root / "source", zookeeper, label="source")
        with ProxyThread(
            [("127.0.0.1", source.port)],
            faulted=lambda client_id: client_id is not None and client_id.startswith(COPIER_CLIENT_PREFIX),
            seed=19,
        ) as proxy:
            source.advertise = f"127.0.0.1:{proxy.ports[0]}"
            with source:
                source.start()
                far = Far(root, proxy, source, target)
                values = blob_values(32768)
                sources = [load(source.bootstrap, topic, n, setup.megabytes, values) for topic, n in TOPICS]
                proxy.set_link(LinkMode.UP, rate=setup.rate, latency=setup.rtt / 2, jitter=setup.jitter / 2)
                copies: list[LinkCopy] = []
                for round_no in range(1, setup.rounds + 1):
                    for index, src in enumerate(sources):
                        shift = (round_no - 1 + index) % len(COPIERS)
                        for who in [*COPIERS[shift:], *COPIERS[:shift]]:
                            log(f"round {round_no}, {src.topic}: {who}")
                            copy = copy_once(far, who, src, round_no)
                            log(f"  {copy.mb_per_s:.1f} MB/s, sustained {copy.sustained_mb_per_s:.1f} MB/s "
                                f"({copy.sustained_mb_per_s * 1e6 / setup.rate:.0%} of the cap), "
                                f"{copy.cpu_per_gb:.1f} CPU-s/GB")  # fmt: skip
                            copies.append(copy)
                latency = {}
                for who in COPIERS:
                    log(f"latency: {who}, {LATENCY_RATE:,} records/s for {setup.latency_seconds:g} s")
                    latency[who] = measure_latency(far, who, setup, values)
                    log(f"  p50 {latency[who]['p50_ms']:.0f} ms, p99 {latency[who]['p99_ms']:.0f} ms")
    return {"sources": [asdict(s) for s in sources], "copies": [asdict(c) for c in copies], "latency": latency}


def render(result: dict[str, Any]) -> str:
    setup = result["setup"]
    rate, rtt_ms = setup["rate"], setup["rtt"] * 1000
    copies = [LinkCopy(**c) for c in result["copies"]]
    sources = [Source(**s) for s in result["sources"]]
    rows, goals = [], []
    for src in sources:
        for who in COPIERS:
            mine = [c for c in copies if c.who == who and c.topic == src.topic]
            if not mine:
                continue
            seconds = statistics.median(c.seconds for c in mine)

            def share(attr: str, mine: list[LinkCopy] = mine, seconds: float = seconds) -> str:
                return f"{statistics.median(getattr(c, attr) for c in mine) / seconds:.0%}"

            mb = statistics.median(c.mb_per_s for c in mine)
            sustained = statistics.median(c.sustained_mb_per_s for c in mine)
            link = statistics.median(c.link_bytes / c.seconds for c in mine) / 1e6
            rows.append([
                f"{src.partitions}", who, f"{mb:,.1f}", f"{sustained:,.1f}", f"{sustained * 1e6 / rate:.0%}",
                f"{link:,.1f}",
                f"{statistics.median(c.cpu_per_gb for c in mine):,.1f}", share("cpu"), share("proxy_cpu"),
                share("source_cpu"), share("aggregate_cpu"), str(len(mine)),
            ])  # fmt: skip
            if who == "shallow":
                met = sustained * 1e6 >= THROUGHPUT_GOAL * rate
                goals.append(
                    f"{src.partitions} partition(s): the shallow mirror sustains {sustained * 1e6 / rate:.0%} of the "
                    f"cap, goal at least {THROUGHPUT_GOAL:.0%}: {'met' if met else 'NOT met'}"
                )
    latency = result.get("latency", {})
    bound = LATENCY_GOAL_ROUND_TRIPS * rtt_ms + LATENCY_PRODUCER["linger.ms"]
    if "shallow" in latency:
        p99 = latency["shallow"]["p99_ms"]
        goals.append(
            f"latency: the shallow mirror's p99 {p99:.0f} ms, goal under {LATENCY_GOAL_ROUND_TRIPS} round trips "
            f"plus the linger ({bound:.0f} ms): {'met' if p99 < bound else 'NOT met'}"
        )
    m = result["machine"]
    lines = [
        f"Mirror across a far link: {rtt_ms:.0f} ms round trip"
        + (f" (+ up to {setup['jitter'] * 1000:.0f} ms jitter)" if setup["jitter"] else "")
        + f", {rate / 1e6:g} MB/s each way (the fault proxy); shallow mirror vs one fetch per partition vs "
        "confluent-kafka recompressing",
        f"{m['date']}; {m['cpus']} CPUs ({m['cpu']}); {m['python']}; {m['os']}; {m.get('load', '')}",
        *(
            f"{s.topic}: {s.partitions} partition(s), {s.records:,} records of {VALUE_SIZE} B, "
            f"{s.compressed_bytes / 1e6:,.1f} MB of zstd batches (1 MiB batch.size)"
            for s in sources
        ),
        "MB/s: the source's compressed bytes copied per second, first record to last; sustained: while the middle "
        "eight tenths of the records landed (no ramp-up, no tail), and that as a share of the cap; link MB/s: what "
        "crossed the far link towards the copier, first record to last; CPU columns: share of one core used during "
        "the copy by the copier, the proxy thread, each broker",
        "",
        common.table(
            [
                "partitions",
                "copier",
                "MB/s",
                "sustained",
                "of cap",
                "link MB/s",
                "CPU-s/GB",
                "copier CPU",
                "proxy CPU",
                "source CPU",
                "aggregate CPU",
                "rounds",
            ],
            rows,
            left=2,
        ),
        "",
        *goals,
    ]
    if latency:
        lines += [
            "",
            f"end-to-end latency at {LATENCY_RATE:,} records/s ({LATENCY_PARTITIONS} partitions, linger "
            f"{LATENCY_PRODUCER['linger.ms']} ms): produce at the source to readable at the aggregate",
            common.table(
                ["copier", "p50 ms", "p99 ms", "max ms", "mean ms"],
                [
                    [who, *(f"{latency[who][k]:,.0f}" for k in ("p50_ms", "p99_ms", "max_ms", "mean_ms"))]
                    for who in COPIERS
                    if who in latency
                ],
                left=1,
            ),
        ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="5 MB per topic, 1.5 s of latency: a smoke run")
    parser.add_argument("--megabytes", type=int, default=None, help="MB of zstd batches per topic (default 250)")
    parser.add_argument("--rounds", type=int, default=None, help="copies per copier and topic (default 1)")
    parser.add_argument("--rtt-ms", type=float, default=100.0, help="round trip of the far link (default 100)")
    parser.add_argument("--jitter-ms", type=float, default=0.0, help="jitter each way, at most (default 0)")
    parser.add_argument("--rate-mb", type=float, default=50.0, help="MB/s each way (default 50)")
    parser.add_argument("--latency-seconds", type=float, default=None, help="of steady producing (default 10)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    common.add_process_arguments(parser, "(unused here)")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if common.replayed(args, render):
        return 0
    if any(v is not None and v < 1 for v in (args.megabytes, args.rounds)) or args.rate_mb <= 0 or args.rtt_ms < 0:
        parser.error("--megabytes and --rounds must be at least 1, --rate-mb positive, --rtt-ms not negative")
    setup = Setup.pick(args)
    root = Path(tempfile.mkdtemp(prefix="bench-mirror-link-"))
    machine = common.machine()
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    try:
        result = run(setup, root)
    except (KafkaException, RuntimeError, TimeoutError, OSError, urllib.error.URLError) as exc:
        log(f"failed: {exc!r}; scratch directory kept: {root}")
        return 1
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    log(f"done in {time.monotonic() - started:.0f} s")
    machine["load"] = f"load average {load_before:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
    result = {"machine": machine, "versions": versions(), "setup": asdict(setup), **result}
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


__all__ = ["blob_values", "main"]

if __name__ == "__main__":
    sys.exit(main())
