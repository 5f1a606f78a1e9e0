"""What compaction costs and what it buys, three ways, each against a peer measured in the same run.

**throughput**: a log of N records over K keys (zstd batches of 500 records, ~100-byte JSON
values; N = 1,000,000 and K = 1,000 by default) is compacted by the cleaner, in this process, and
compared with a model: the latest value of each key must be what the log ends with, each key once
below the cleaned point, every record at the offset it was appended at. Figures are per core (the
cleaning thread's CPU time, since the machine is shared): MB/s of the log as stored, MB/s of
uncompressed keys and values, records/s. The peer is the plainest pass over the same bytes:
every batch decoded (CRC, decompress, records), as a consumer does; the ratio says what the
cleaner adds (key map, filtering, rewriting) to that floor. The same clean is also run through
the broker's worker process, to show what the isolation costs (start-up, JSON, a second read).

**latency**: three brokers: one cleaning in worker processes (``log.cleaner.isolation =
"process"``, the default), one the same throttled (``log.cleaner.io.max.bytes.per.second =
1000000``), one in threads (``"thread"``). Each has a probe topic and compacted topics filled with
dirt the cleaner may not touch yet (``min.compaction.lag.ms`` huge). In rotating rounds, each
broker gets an idle window and a busy one (the lag lifted on one dirty topic just before: the
cleaner works through the window); a producer sends to the probe topic at a fixed rate (acks=1,
linger 0) and a consumer reads it: p50/p99 of produce latency (delivery report) and of
end-to-end latency (produce to consume, the fetch path). The busy/idle p99 ratios per variant
are the figures; the busy share says how much of the window the cleaner was cleaning.

**coordinator**: ``__consumer_offsets`` with one partition and 1 MiB segments on two brokers
(replication factor 2), once with the cleaner, once without (``log.cleaner.enable = false``).
A group commits offsets of 100 partitions per request, up to 10,000, 100,000 and 1,000,000
records in all; after each step the leader of ``__consumer_offsets-0`` is stopped (a controlled
shutdown: the other broker becomes the group's coordinator and loads the partition) and started
again. Load time (the new coordinator's own log line) and the time until a client's OffsetFetch
is answered again, per step: with compaction it stays flat, without it grows with the commits.

Run from the repository root (the full run takes about 25 minutes on the shared 2-core machine;
``--quick`` about 2 minutes)::

    .venv/bin/python -m bench.bench_cleaner [--quick] [--parts throughput,latency,coordinator]
        [--json] [--from-json F] [--keep]

Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import array
import json
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CKTopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from tributary.broker.log.cleaner.clean import CleanRequest, CleanResult, clean
from tributary.broker.log.cleaner.config import CleanerConfig
from tributary.broker.log.cleaner.cycle import install, plan_clean
from tributary.broker.log.config import LogConfig
from tributary.broker.log.log import PartitionLog
from tributary.protocol.compression import Compression
from tributary.protocol.records import BatchBuilder, iter_batches, iter_records
from tributary.testing.cluster import BrokerProcess, Cluster
from tributary.testing.zookeeper import new_chroot

from . import common
from .common import log
from .processes import Tributary, ZooKeeper

PARTS = ("throughput", "latency", "coordinator")


@dataclass(frozen=True)
class Sizes:
    records: int
    keys: int
    rounds: int
    dirt_records: int
    window_s: float
    latency_rounds: int
    rate: int
    commit_steps: tuple[int, ...]
    segment_bytes: int

    @staticmethod
    def pick(quick: bool) -> Sizes:
        if quick:
            return Sizes(50_000, 500, 1, 60_000, 2.0, 1, 300, (5_000, 20_000), 64 << 10)
        return Sizes(1_000_000, 1_000, 3, 400_000, 5.0, 5, 500, (10_000, 100_000, 1_000_000), 1 << 20)


def percentile(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


# --- throughput ------------------------------------------------------------------------------


def value_of(offset: int) -> bytes:
    return b'{"user": %07d, "page": "/products/%02d", "seq": %09d, "agent": "Mozilla/5.0 (X11)"}' % (
        offset * 7919 % 10_000_000,
        offset % 97,
        offset,
    )


def log_config(sizes: Sizes) -> LogConfig:
    return LogConfig(cleanup_policy="compact", segment_bytes=sizes.segment_bytes, retention_ms=-1)


def build_log(path: Path, sizes: Sizes) -> tuple[array.array[int], int]:
    """The log to clean: record i has key ``key-<keys_of[i]>`` and value :func:`value_of`."""
    records, keys = sizes.records, sizes.keys
    rng = random.Random(20261126)
    keys_of = array.array("H", (rng.randrange(keys) for _ in range(records)))
    config = log_config(sizes)
    plog = PartitionLog.open(path, config)
    now = int(time.time() * 1000) - 3_600_000
    raw = 0
    for start in range(0, records, 500):
        builder = BatchBuilder(Compression.ZSTD)
        for offset in range(start, min(start + 500, records)):
            key, value = b"key-%05d" % keys_of[offset], value_of(offset)
            builder.append(key, value, (), now)
            raw += len(key) + len(value)
        plog.append(builder.build(), 0, now)
    plog.close()
    return keys_of, raw


def decode_pass(path: Path) -> tuple[float, int]:
    """CPU seconds of this thread to read and decode every record of the log; the records."""
    started, count = time.thread_time(), 0
    for segment in sorted(path.glob("*.log")):
        data = segment.read_bytes()
        for pos, _ in iter_batches(data):
            for _record in iter_records(data, pos):
                count += 1
    return time.thread_time() - started, count


def verify(plog: PartitionLog, keys_of: array.array[int], cleaned_to: int) -> None:
    """Against the model: the latest value of each key, each key once below ``cleaned_to``, every
    record the one appended at its offset."""
    latest: dict[int, int] = {}
    for offset, key in enumerate(keys_of):
        latest[key] = offset
    seen: dict[bytes, int] = {}
    below: set[bytes] = set()
    with plog.read(plog.log_start_offset, 1 << 40) as result:
        data = result.read_bytes()
    for pos, _ in iter_batches(data):
        for record in iter_records(data, pos):
            assert record.key == b"key-%05d" % keys_of[record.offset], record.offset
            assert record.value == value_of(record.offset), record.offset
            if record.offset < cleaned_to:
                assert record.key not in below, f"{record.key!r} twice below {cleaned_to}"
                below.add(record.key)
            seen[record.key] = record.offset
    assert {int(k[4:]): o for k, o in seen.items()} == latest, "the log's latest values differ from the model's"


def clean_in_worker(request: CleanRequest) -> tuple[CleanResult, float]:
    """The clean as the broker runs it: in its worker process, stdin held open meanwhile."""
    started = time.perf_counter()
    command = [sys.executable, "-m", "tributary.broker.log.cleaner.worker"]
    with subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as worker:
        assert worker.stdin is not None and worker.stdout is not None
        worker.stdin.write(request.to_json() + b"\n")
        worker.stdin.flush()
        output = worker.stdout.read()
        if worker.wait() != 0:
            raise RuntimeError(f"the cleaner's worker exited with {worker.returncode}")
    return CleanResult.from_json(output), time.perf_counter() - started


def part_throughput(sizes: Sizes, root: Path) -> dict[str, Any]:
    source = root / "model" / "t-0"
    log(f"throughput: building a log of {sizes.records:,} records over {sizes.keys:,} keys")
    keys_of, raw = build_log(source, sizes)
    stored = sum(p.stat().st_size for p in source.glob("*.log"))
    rounds: list[dict[str, Any]] = []
    for i in range(sizes.rounds):
        decode_cpu, decoded = decode_pass(source)
        work = root / f"round-{i}" / "t-0"
        shutil.copytree(source, work)
        plog = PartitionLog.open(work, log_config(sizes))
        planned = plan_clean(plog, None, int(time.time() * 1000), CleanerConfig(), force=True)
        assert planned is not None
        started = time.perf_counter()
        result = clean(planned.request)
        wall = time.perf_counter() - started
        assert install(plog, planned, result, int(time.time() * 1000))
        verify(plog, keys_of, result.cleaned_to)
        plog.close()
        again = root / f"worker-{i}" / "t-0"
        shutil.copytree(source, again)
        other = PartitionLog.open(again, log_config(sizes))
        worker_planned = plan_clean(other, None, int(time.time() * 1000), CleanerConfig(), force=True)
        assert worker_planned is not None
        worker, worker_wall = clean_in_worker(worker_planned.request)
        assert install(other, worker_planned, worker, int(time.time() * 1000))
        verify(other, keys_of, worker.cleaned_to)
        other.close()
        shutil.rmtree(work.parent)
        shutil.rmtree(again.parent)
        rounds.append(
            {
                "clean_cpu_s": result.cpu_s,
                "clean_wall_s": wall,
                "decode_cpu_s": decode_cpu,
                "decoded": decoded,
                "bytes_read": result.bytes_read,
                "records_read": result.records_read,
                "records_kept": result.records_kept,
                "bytes_written": result.bytes_written,
                "worker_cpu_s": worker.cpu_s,
                "worker_wall_s": worker_wall,
            }
        )
        log(f"throughput round {i + 1}: clean {result.cpu_s:.2f} s CPU, decode {decode_cpu:.2f} s CPU; verified")
    cpu = statistics.median(r["clean_cpu_s"] for r in rounds)
    return {
        "records": sizes.records,
        "keys": sizes.keys,
        "stored_bytes": stored,
        "raw_bytes": raw,
        "rounds": rounds,
        "verified": True,
        "MB_per_s_per_core_stored": stored / cpu / 1e6,
        "MB_per_s_per_core_raw": raw / cpu / 1e6,
        "records_per_s_per_core": sizes.records / cpu,
        "decode_MB_per_s_per_core_raw": raw / statistics.median(r["decode_cpu_s"] for r in rounds) / 1e6,
        "clean_over_decode": statistics.median(r["decode_cpu_s"] / r["clean_cpu_s"] for r in rounds),
        "worker_cpu_over_thread_cpu": statistics.median(r["worker_cpu_s"] / r["clean_cpu_s"] for r in rounds),
    }


# --- latency ---------------------------------------------------------------------------------

LAG_NEVER = str(2**62)


def fill(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.type": "zstd",
            "linger.ms": 20,
            "batch.size": 262144,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    for i in range(count):
        while True:
            try:
                producer.produce(topic, key=b"key-%04d" % (i % 1000), value=value_of(i))
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(120) == 0


def probe(bootstrap: str, topic: str, rate: int, seconds: float) -> tuple[list[float], list[float]]:
    """(produce latencies, end-to-end latencies) in seconds, at ``rate`` messages a second."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"probe-{time.monotonic_ns()}",
            "auto.offset.reset": "latest",
            "fetch.wait.max.ms": 10,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([CKTopicPartition(topic, 0, -1)])  # the end: only what this round sends
    consumer.poll(0.5)
    e2e: list[float] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            message = consumer.poll(0.05)
            if message is not None and message.error() is None:
                e2e.append(time.perf_counter() - float(message.value()))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": 1})
    producer.list_topics(topic, timeout=10)
    produced: list[float] = []
    lock = threading.Lock()

    def delivered(err: Any, message: Any) -> None:
        if err is None:
            with lock:
                produced.append(time.perf_counter() - float(message.value()))

    interval, start = 1 / rate, time.perf_counter()
    for i in range(int(seconds * rate)):
        due = start + i * interval
        while (now := time.perf_counter()) < due:
            producer.poll(min(due - now, 0.001))
        producer.produce(topic, b"%.9f" % time.perf_counter(), on_delivery=delivered)
        producer.poll(0)
    producer.flush(30)
    deadline = time.monotonic() + 10
    while len(e2e) < len(produced) and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    reader.join()
    consumer.close()
    return produced, e2e


def cleaned_at(broker: Tributary, topic: str) -> float | None:
    """When the broker logged the end of a clean of ``topic`` (epoch seconds), if it did."""
    for line in broker.log_path.read_text(errors="replace").splitlines():
        if f"cleaned {topic}-0 " in line:
            stamp = time.strptime(line[:19], "%Y-%m-%d %H:%M:%S")
            return time.mktime(stamp) + int(line[20:23]) / 1000
    return None


def latency_summary(rounds: dict[str, Any]) -> dict[str, Any]:
    """p50/p99 of the pooled rounds per state and path, and the median per-round p99 ratio."""
    entry: dict[str, Any] = {"busy_share": rounds["busy_share"]}
    for which, index in (("produce", 0), ("e2e", 1)):
        for state in ("idle", "busy"):
            pooled = [x for sample in rounds[state] for x in sample[index]]
            entry[f"{state}_{which}_p50_ms"] = percentile(pooled, 0.5) * 1e3
            entry[f"{state}_{which}_p99_ms"] = percentile(pooled, 0.99) * 1e3
        entry[f"{which}_p99_busy_over_idle"] = statistics.median(
            percentile(busy[index], 0.99) / percentile(idle[index], 0.99)
            for idle, busy in zip(rounds["idle"], rounds["busy"], strict=True)
        )
        for state in ("idle", "busy"):
            entry[f"{state}_{which}_p99_ms_by_round"] = [
                round(percentile(sample[index], 0.99) * 1e3, 1) for sample in rounds[state]
            ]
    return entry


#: The brokers compared: the default (worker processes), the same throttled, and threads.
VARIANTS: dict[str, dict[str, object]] = {
    "process": {"log.cleaner.isolation": "process"},
    "process, 1 MB/s": {"log.cleaner.isolation": "process", "log.cleaner.io.max.bytes.per.second": 1_000_000},
    "thread": {"log.cleaner.isolation": "thread"},
}


def part_latency(sizes: Sizes, root: Path, zookeeper: ZooKeeper) -> dict[str, Any]:
    isolations = tuple(VARIANTS)
    brokers = {
        iso: Tributary(
            root / f"latency-{i}",
            zookeeper,
            label=iso,
            settings={**VARIANTS[iso], "log.cleaner.backoff.ms": 200, "log.segment.bytes": 4 << 20},
        ).start()
        for i, iso in enumerate(isolations)
    }
    try:
        rounds = sizes.latency_rounds
        for iso, broker in brokers.items():
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            topics = [NewTopic("probe", 1, 1)] + [
                NewTopic(
                    f"dirt-{r}",
                    1,
                    1,
                    config={
                        "cleanup.policy": "compact",
                        "min.compaction.lag.ms": LAG_NEVER,
                        "segment.bytes": str(sizes.segment_bytes),
                    },
                )
                for r in range(rounds)
            ]
            for future in admin.create_topics(topics).values():
                future.result(30)
            for r in range(rounds):
                log(f"latency: filling dirt-{r} on the {iso} broker with {sizes.dirt_records:,} records")
                fill(broker.bootstrap, f"dirt-{r}", sizes.dirt_records)
        out: dict[str, Any] = {iso: {"idle": [], "busy": [], "busy_share": []} for iso in isolations}
        for r in range(rounds):
            for iso in isolations[r % len(isolations) :] + isolations[: r % len(isolations)]:
                broker = brokers[iso]
                log(f"latency round {r + 1}: {iso} idle")
                out[iso]["idle"].append(probe(broker.bootstrap, "probe", sizes.rate, sizes.window_s))
                admin = AdminClient({"bootstrap.servers": broker.bootstrap})
                resource = ConfigResource(
                    ConfigResource.Type.TOPIC,
                    f"dirt-{r}",
                    incremental_configs=[
                        ConfigEntry("min.compaction.lag.ms", "0", incremental_operation=AlterConfigOpType.SET)
                    ],
                )
                admin.incremental_alter_configs([resource])[resource].result(30)
                time.sleep(0.5)  # the cleaner's next look (backoff 200 ms)
                started = time.time()
                log(f"latency round {r + 1}: {iso} busy")
                out[iso]["busy"].append(probe(broker.bootstrap, "probe", sizes.rate, sizes.window_s))
                deadline = time.monotonic() + 300
                while (done := cleaned_at(broker, f"dirt-{r}")) is None and time.monotonic() < deadline:
                    time.sleep(0.5)
                if done is None:
                    log(f"latency round {r + 1}: the {iso} broker did not clean dirt-{r}:\n{broker.log_tail()}")
                share = 0.0 if done is None else min(1.0, max(0.0, (done - started) / sizes.window_s))
                out[iso]["busy_share"].append(share)
        summary = {iso: latency_summary(out[iso]) for iso in isolations}
        return {
            "rate": sizes.rate,
            "window_s": sizes.window_s,
            "rounds": rounds,
            "dirt_records": sizes.dirt_records,
            "isolations": summary,
        }
    finally:
        for broker in brokers.values():
            broker.stop()


# --- coordinator -----------------------------------------------------------------------------

OFFSETS = "__consumer_offsets"
OFFSETS_SEGMENT_BYTES = 1 << 20
#: What a caught-up compacted __consumer_offsets-0 holds at most: the active segment, one rolled
#: segment not yet due, and the compacted rest (a few KB: 100 partitions of one group).
CAUGHT_UP_BYTES = 5 * OFFSETS_SEGMENT_BYTES // 2
COORDINATOR_SETTINGS = {
    "offsets.topic.num.partitions": "1",
    "offsets.topic.replication.factor": "2",
    "offsets.topic.segment.bytes": str(OFFSETS_SEGMENT_BYTES),
    "log.cleaner.backoff.ms": "200",
    "zookeeper.session.timeout.ms": "6000",
}


def offsets_leader(cluster: Cluster) -> BrokerProcess:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    leader = admin.list_topics(OFFSETS, timeout=10).topics[OFFSETS].partitions[0].leader
    return cluster.broker(leader)


def offsets_bytes(broker: BrokerProcess) -> int:
    return sum(p.stat().st_size for p in (broker.data_dir / f"{OFFSETS}-0").glob("*.log"))


def commit(cluster: Cluster, count: int, done: int) -> None:
    """Commits offsets of 100 partitions per request until ``count`` records were written."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "billing", "enable.auto.commit": False})
    i = done // 100
    while i * 100 < count:
        consumer.commit(offsets=[CKTopicPartition("orders", p, i) for p in range(100)], asynchronous=False)
        i += 1
    consumer.close()


def loaded_seconds(broker: BrokerProcess, after: int) -> float:
    """The load time the broker logged for __consumer_offsets-0 after byte ``after`` of its log."""
    text = broker.log_path.read_text(errors="replace")[after:]
    found = re.findall(rf"loaded {OFFSETS}-0 in ([0-9.]+) s", text)
    if not found:
        raise RuntimeError(f"broker {broker.broker_id} logged no load:\n{broker.log_tail()}")
    return float(found[-1])


def move(cluster: Cluster, group_offsets: int) -> tuple[float, float]:
    """Stops the coordinator (its leadership moves to the other broker, which loads the offsets),
    times the load and the first OffsetFetch answered, starts it again."""
    old = offsets_leader(cluster)
    new = next(b for b in cluster.brokers if b is not old)
    mark = new.log_path.stat().st_size
    started = time.perf_counter()
    old.stop()
    consumer = Consumer({"bootstrap.servers": new.bootstrap, "group.id": "billing"})
    while True:
        try:
            got = consumer.committed([CKTopicPartition("orders", 0)], timeout=5)
            if got and got[0].offset == group_offsets:
                break
        except Exception:
            time.sleep(0.05)
    answered = time.perf_counter() - started
    consumer.close()
    load = loaded_seconds(new, mark)
    old.start()
    old.wait_ready(2)
    return load, answered


def part_coordinator(sizes: Sizes, root: Path, zookeeper: ZooKeeper) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode, extra in (("compacted", {}), ("uncompacted", {"log.cleaner.enable": "false"})):
        chroot = new_chroot(zookeeper.bootstrap)
        with Cluster(chroot, root / f"coordinator-{mode}", 2, {**COORDINATOR_SETTINGS, **extra}) as cluster:
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
            admin.create_topics([NewTopic("orders", 100, 1)])["orders"].result(60)
            steps: list[dict[str, Any]] = []
            done = 0
            for count in sizes.commit_steps:
                log(f"coordinator ({mode}): committing up to {count:,} records")
                commit(cluster, count, done)
                done = count
                follower = next(b for b in cluster.brokers if b is not offsets_leader(cluster))
                if mode == "compacted":
                    # Until the future coordinator's cleaner has caught up: its active segment, at
                    # most one rolled segment waiting for min.cleanable.dirty.ratio, and the rest.
                    deadline = time.monotonic() + 600
                    while offsets_bytes(follower) > CAUGHT_UP_BYTES and time.monotonic() < deadline:
                        time.sleep(0.5)
                size = offsets_bytes(follower)
                load, answered = move(cluster, count // 100 - 1)
                steps.append({"commits": count, "log_bytes": size, "load_s": load, "answered_s": answered})
                log(f"coordinator ({mode}) at {count:,}: {size / 1e6:.1f} MB, loaded in {load:.3f} s")
            out[mode] = steps
    return out


# --- the run ---------------------------------------------------------------------------------


def render(result: dict[str, Any]) -> str:
    lines = [f"Log compaction (bench/bench_cleaner.py); {result['machine']}"]
    if "throughput" in result:
        t = result["throughput"]
        lines += [
            "",
            f"Cleaner throughput: {t['records']:,} records over {t['keys']:,} keys, "
            f"{t['stored_bytes'] / 1e6:.1f} MB stored (zstd), {t['raw_bytes'] / 1e6:.1f} MB of keys and values; "
            f"verified against the model: {t['verified']}",
            common.table(
                [
                    "per core",
                    "MB/s stored",
                    "MB/s raw",
                    "records/s",
                    "decode-only MB/s raw",
                    "clean/decode",
                    "worker CPU/thread CPU",
                ],
                [
                    [
                        "cleaner",
                        f"{t['MB_per_s_per_core_stored']:.1f}",
                        f"{t['MB_per_s_per_core_raw']:.1f}",
                        f"{t['records_per_s_per_core']:,.0f}",
                        f"{t['decode_MB_per_s_per_core_raw']:.1f}",
                        f"{t['clean_over_decode']:.2f}x",
                        f"{t['worker_cpu_over_thread_cpu']:.2f}x",
                    ]
                ],
            ),
        ]
    if "latency" in result:
        lat = result["latency"]
        rows = []
        for iso, e in lat["isolations"].items():
            rows.append(
                [
                    iso,
                    f"{e['idle_produce_p50_ms']:.1f}/{e['idle_produce_p99_ms']:.1f}",
                    f"{e['busy_produce_p50_ms']:.1f}/{e['busy_produce_p99_ms']:.1f}",
                    f"{e['produce_p99_busy_over_idle']:.2f}x",
                    f"{e['idle_e2e_p50_ms']:.1f}/{e['idle_e2e_p99_ms']:.1f}",
                    f"{e['busy_e2e_p50_ms']:.1f}/{e['busy_e2e_p99_ms']:.1f}",
                    f"{e['e2e_p99_busy_over_idle']:.2f}x",
                    "/".join(f"{s:.0%}" for s in e["busy_share"]),
                ]
            )
        lines += [
            "",
            f"Latency with the cleaner idle and busy: {lat['rate']} msgs/s for {lat['window_s']} s per window, "
            f"{lat['rounds']} rounds, {lat['dirt_records']:,} records of dirt per busy window (p50/p99 ms)",
            common.table(
                [
                    "isolation",
                    "produce idle",
                    "produce busy",
                    "p99 busy/idle",
                    "e2e idle",
                    "e2e busy",
                    "p99 busy/idle",
                    "busy share",
                ],
                rows,
            ),
        ]
    if "coordinator" in result:
        c = result["coordinator"]
        rows = []
        for i, step in enumerate(c["compacted"]):
            other = c["uncompacted"][i]
            rows.append(
                [
                    f"{step['commits']:,}",
                    f"{step['log_bytes'] / 1e6:.1f}",
                    f"{step['load_s']:.3f}",
                    f"{step['answered_s']:.2f}",
                    f"{other['log_bytes'] / 1e6:.1f}",
                    f"{other['load_s']:.3f}",
                    f"{other['answered_s']:.2f}",
                    f"{other['load_s'] / max(step['load_s'], 1e-6):.1f}x",
                ]
            )
        lines += [
            "",
            "Coordinator move: __consumer_offsets-0 loaded by the new coordinator (1 MiB segments)",
            common.table(
                [
                    "commits",
                    "compacted MB",
                    "load s",
                    "answered s",
                    "uncompacted MB",
                    "load s",
                    "answered s",
                    "uncompacted/compacted load",
                ],
                rows,
            ),
        ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run (about 2 minutes)")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"which of {', '.join(PARTS)} to run")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    common.add_process_arguments(parser, "unused")
    args = parser.parse_args(argv)
    if common.replayed(args, render):
        return
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = set(parts) - set(PARTS)
    if unknown:
        raise SystemExit(f"unknown parts: {sorted(unknown)}")
    sizes = Sizes.pick(args.quick)
    root = Path(tempfile.mkdtemp(prefix="bench-cleaner-"))
    result: dict[str, Any] = {"machine": common.machine_line(), "quick": args.quick}
    try:
        if "throughput" in parts:
            result["throughput"] = part_throughput(sizes, root / "throughput")
        if "latency" in parts or "coordinator" in parts:
            with ZooKeeper(root / "zookeeper").start() as zookeeper:
                if "latency" in parts:
                    result["latency"] = part_latency(sizes, root, zookeeper)
                if "coordinator" in parts:
                    result["coordinator"] = part_coordinator(sizes, root, zookeeper)
    finally:
        if args.keep:
            log(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(result, indent=2) if args.json else render(result))


if __name__ == "__main__":
    main()
