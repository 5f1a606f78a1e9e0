"""What replication costs: acks=all to three replicas against acks=1 to one, in one run.

One ZooKeeper and three Tributary brokers (``min.insync.replicas = 2``) on loopback; two topics
of one partition each, led by the same broker: ``rf1`` (one replica) and ``rf3`` (three). The
same confluent-kafka producer settings (linger.ms 5, no compression, 200-byte JSON values, the
client's queues large enough never to be what is measured: bench.common.confluent_produce) send
N messages to each, alternating in rounds:

* throughput: acks=1 to rf1, acks=all to rf3; the ratio is the median of per-round ratios;
* latency: messages sent at a fixed rate (well below either throughput), the time from produce()
  to the delivery report, p50 and p99, for the same two;
* CPU: each broker's CPU-seconds (``/proc/<pid>/stat``) during the rf3 rounds, per GB of values:
  the leader's, and the followers' (their replica fetches and appends);
* the price of ``high.watermark.fsync``: a second cluster of three with it on, acks=all to its
  rf3, in the same alternating rounds (every acknowledged record fsynced on every in-sync
  replica; the disk's fsync latency is what it costs).

Run from the repository root::

    .venv/bin/python -m bench.bench_replication [--quick] [--messages N] [--rounds R]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tributary.testing.cluster import Cluster

from . import common
from .processes import ZooKeeper, cpu_seconds

VALUE_SIZE = 200
LATENCY_RATE = 2_000  # messages a second: far below either path's throughput here
SETTINGS = {"min.insync.replicas": "2", "replica.lag.time.max.ms": "10000"}
PRODUCER = {"linger.ms": 5, "compression.type": "none"}


def values(count: int = 64) -> list[bytes]:
    out = []
    for i in range(count):
        body = json.dumps({"event": "pageview", "user": i, "page": f"/products/{i % 97}", "pad": ""})
        out.append(body.encode().ljust(VALUE_SIZE, b" ")[:VALUE_SIZE])
    return out


def create_topics(bootstrap: str, leader: int) -> None:
    """rf1 on the leader alone, rf3 on all three with the same leader: only replication differs."""
    others = [b for b in (1, 2, 3) if b != leader]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [
        NewTopic("rf1", num_partitions=1, replica_assignment=[[leader]]),
        NewTopic("rf3", num_partitions=1, replica_assignment=[[leader, *others]]),
    ]
    for future in admin.create_topics(topics, operation_timeout=30).values():
        future.result(timeout=30)


def latencies(bootstrap: str, topic: str, acks: str, payload: Sequence[bytes], seconds: float) -> list[float]:
    """Per-message produce-to-delivery-report latency at LATENCY_RATE messages a second."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, **PRODUCER})
    producer.list_topics(topic, timeout=10)
    found: list[float] = []
    lock = threading.Lock()

    def delivered(err: Any, _msg: Any, *, sent: float) -> None:
        if err is None:
            with lock:
                found.append(time.perf_counter() - sent)

    interval = 1 / LATENCY_RATE
    start = time.perf_counter()
    for i in range(int(seconds * LATENCY_RATE)):
        due = start + i * interval
        while (now := time.perf_counter()) < due:
            producer.poll(max(0.0, min(due - now, 0.001)))
        producer.produce(topic, payload[i % len(payload)], on_delivery=partial(delivered, sent=now))
        producer.poll(0)
    producer.flush(30)
    return found


def percentile(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer and smaller rounds (a smoke run)")
    parser.add_argument("--messages", type=int, help="messages per round (default 200,000; quick 20,000)")
    parser.add_argument("--rounds", type=int, help="timed rounds (default 7; quick 3)")
    args = parser.parse_args(argv)
    messages = args.messages or (20_000 if args.quick else 200_000)
    rounds = args.rounds or (3 if args.quick else 7)
    payload = values()
    print(common.machine_line())
    with tempfile.TemporaryDirectory(prefix="bench-replication-") as scratch:
        root = Path(scratch)
        zookeeper = ZooKeeper(root / "zookeeper").start()
        durable_settings = {**SETTINGS, "high.watermark.fsync": "true"}
        try:
            with (
                Cluster(f"{zookeeper.bootstrap}/bench", root / "cluster", 3, SETTINGS) as cluster,
                Cluster(f"{zookeeper.bootstrap}/fsync", root / "fsync", 3, durable_settings) as durable,
            ):
                return run(cluster, durable, payload, messages, rounds, quick=args.quick)
        finally:
            zookeeper.stop()


def run(
    cluster: Cluster, durable: Cluster, payload: Sequence[bytes], messages: int, rounds: int, *, quick: bool
) -> int:
    leader = 1
    create_topics(cluster.bootstrap, leader)
    create_topics(durable.bootstrap, leader)
    pids = {b.broker_id: b.proc.pid for b in cluster.brokers if b.proc is not None}
    bootstraps = {"rf1": cluster.bootstrap, "rf3": cluster.bootstrap, "rf3-fsync": durable.bootstrap}

    def produce(topic: str, acks: str) -> float:
        bootstrap, name = bootstraps[topic], topic.removesuffix("-fsync")
        return common.confluent_produce(bootstrap, name, payload, messages, {"acks": acks, **PRODUCER},
                                        label=f"{topic} acks={acks}")  # fmt: skip

    jobs = [
        ("acks=1, RF 1", "rf1", "1"),
        ("acks=all, RF 3", "rf3", "all"),
        ("acks=all, RF 3, high.watermark.fsync", "rf3-fsync", "all"),
    ]
    times: dict[str, list[float]] = {name: [] for name, _, _ in jobs}
    cpu: dict[int, float] = dict.fromkeys(pids, 0.0)
    for name, topic, acks in jobs:  # warm-up, untimed
        common.log(f"warm-up {name}")
        produce(topic, acks)
    for r in range(rounds):
        for name, topic, acks in jobs[r % len(jobs):] + jobs[: r % len(jobs)]:
            before = {b: cpu_seconds(p) or 0.0 for b, p in pids.items()}
            times[name].append(produce(topic, acks))
            if topic == "rf3":
                for b, p in pids.items():
                    cpu[b] += (cpu_seconds(p) or 0.0) - before[b]
        common.log(f"round {r + 1}/{rounds}: " + ", ".join(f"{n} {times[n][-1]:.2f} s" for n, _, _ in jobs))
    lat = {
        name: latencies(bootstraps[topic], topic.removesuffix("-fsync"), acks, payload, 1.0 if quick else 5.0)
        for name, topic, acks in jobs
    }

    megabytes = messages * VALUE_SIZE / 1e6
    rows = []
    for name, _, _ in jobs:
        seconds = statistics.median(times[name])
        rows.append([
            name, f"{messages / seconds:,.0f}", f"{megabytes / seconds:.1f}",
            f"{percentile(lat[name], 0.5) * 1000:.1f}", f"{percentile(lat[name], 0.99) * 1000:.1f}",
        ])  # fmt: skip
    print(f"{messages:,} x {VALUE_SIZE} B per round, {rounds} rounds, linger.ms 5, no compression")
    print(common.table(["path", "msgs/s", "MB/s", "p50 ms", "p99 ms"], rows))
    ratio = statistics.median(a / b for a, b in zip(times["acks=1, RF 1"], times["acks=all, RF 3"], strict=True))
    p99_ratio = percentile(lat["acks=all, RF 3"], 0.99) / percentile(lat["acks=1, RF 1"], 0.99)
    print(f"throughput acks=all RF 3 / acks=1 RF 1: {ratio:.2f}x (median of per-round ratios)")
    print(f"p99 latency acks=all RF 3 / acks=1 RF 1 at {LATENCY_RATE} msgs/s: {p99_ratio:.2f}x")
    fsync_ratio = statistics.median(
        a / b for a, b in zip(times["acks=all, RF 3"], times["acks=all, RF 3, high.watermark.fsync"], strict=True)
    )
    fsync_p99 = percentile(lat["acks=all, RF 3, high.watermark.fsync"], 0.99) / percentile(lat["acks=all, RF 3"], 0.99)
    print(f"high.watermark.fsync: throughput {fsync_ratio:.2f}x, p99 latency {fsync_p99:.2f}x of acks=all RF 3 without")
    gigabytes = rounds * messages * VALUE_SIZE / 1e9
    followers = [b for b in pids if b != leader]
    print(
        f"CPU per GB of values during the RF 3 rounds: leader {cpu[leader] / gigabytes:.1f} s/GB, "
        f"each follower {statistics.mean(cpu[b] for b in followers) / gigabytes:.1f} s/GB (replica fetch and append)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
