"""What replication costs: acks=all to three replicas against acks=1 to one, in one run.

One ZooKeeper and two clusters of three Tributary brokers on loopback, every broker with
``default.replication.factor = 3`` and ``min.insync.replicas = 2`` (the second cluster also
with ``high.watermark.fsync = true``). Each shape gets topics of one partition, all led by
broker 1 (explicit replica assignments, so that the leader's and the followers' CPU can be told
apart): ``<shape>-rf1`` (one replica) and ``<shape>-rf3`` (three). The paths:

* ``acks=1, RF 1``: the baseline;
* ``acks=all, RF 3``: the same cluster, the same leader; only replication differs;
* ``acks=all, RF 3, hw.fsync``: the second cluster (every acknowledged record fsynced on every
  in-sync replica).

confluent-kafka sends the same values to each with the same settings (linger.ms 5, default
batch size; ``200B``: 200-byte JSON events, no compression; ``1KiB-zstd``: 1 KiB events, zstd).
Per shape, every round runs each path once, rotating which goes first:

* throughput: N messages as fast as librdkafka takes them, its queues large enough never to be
  what is measured (``bench.common.confluent_produce``); ratios against ``acks=1, RF 1`` are the
  median of per-round ratios. The leader's request metrics (``/metrics``) give the Produce
  requests it handled and the time it spent on them (for acks=all, until the high watermark
  passed), so the size and time of one request show what bounds the path;
* latency: separate rate-limited runs at each of LATENCY_RATES messages a second, the time from
  produce() to each message's delivery report (not the throughput run, where the time is that
  of the producer's own queue);
* CPU: each broker's CPU-seconds (``/proc/<pid>/stat``) over each throughput job, until every
  replica holds what the leader holds, per GB by which that broker's log of the topic grew
  (record batches as stored: compressed for zstd), and the client's (this process).

Dirty pages are written out (``sync``) before every timed job. The 1-minute load average is
recorded every round: the machine is shared, so only ratios taken in the same rounds mean
anything. Run from the repository root (about 6.5 minutes; ``--quick`` about 20-30 s)::

    .venv/bin/python -m bench.bench_replication [--quick] [--repeat N] [--json] [--from-json F] [--keep]

Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import shlex
import shutil
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from tributary.testing.cluster import BrokerProcess, Cluster, wait_for_leaders
from tributary.testing.zookeeper import new_chroot

from . import common
from .bench_records import make_corpus
from .common import log
from .processes import ZooKeeper, cpu_seconds

LEADER = 1
FOLLOWERS = (2, 3)
BROKERS = (LEADER, *FOLLOWERS)
#: Broker settings (TOML values), Kafka's names; replica.lag.time.max.ms stays at Kafka's 30 s.
SETTINGS = {"default.replication.factor": "3", "min.insync.replicas": "2"}
CLUSTERS = {"plain": SETTINGS, "fsync": {**SETTINGS, "high.watermark.fsync": "true"}}
LATENCY_RATES = (500, 2_000)  # messages a second
CATCH_UP_TIMEOUT = 30.0


@dataclass(frozen=True)
class Shape:
    name: str
    value_size: int
    compression: str
    messages: int  # per throughput round
    quick_messages: int

    def producer(self) -> dict[str, Any]:
        return {"linger.ms": 5, "compression.type": self.compression}


@dataclass(frozen=True)
class Path_:
    label: str
    cluster: str  # a key of CLUSTERS
    replicas: int
    acks: str

    def topic(self, shape: Shape) -> str:
        return f"{shape.name}-rf{self.replicas}"

    def replica_ids(self) -> tuple[int, ...]:
        return BROKERS[: self.replicas]


SHAPES = (
    Shape("200B", 200, "none", messages=500_000, quick_messages=10_000),
    Shape("1KiB-zstd", 1024, "zstd", messages=250_000, quick_messages=5_000),
)
PATHS = (
    Path_("acks=1, RF 1", "plain", 1, "1"),
    Path_("acks=all, RF 3", "plain", 3, "all"),
    Path_("acks=all, RF 3, hw.fsync", "fsync", 3, "all"),
)
BASELINE = PATHS[0].label


@dataclass(frozen=True)
class Sizes:
    rounds: int
    latency_seconds: float
    quick: bool

    @staticmethod
    def pick(quick: bool, repeat: int | None) -> Sizes:
        rounds = repeat if repeat is not None else 1 if quick else 7
        return Sizes(rounds=rounds, latency_seconds=0.5 if quick else 2.0, quick=quick)

    def messages(self, shape: Shape) -> int:
        return shape.quick_messages if self.quick else shape.messages


# --- what the brokers say about themselves ------------------------------------------------------


def log_size(broker: BrokerProcess, topic: str) -> int:
    """Bytes of record batches a broker holds for partition 0 of ``topic`` (its segment files)."""
    return sum(p.stat().st_size for p in (broker.data_dir / f"{topic}-0").glob("*.log"))


def broker_cpu(broker: BrokerProcess) -> float:
    seconds = cpu_seconds(broker.proc.pid) if broker.proc is not None else None
    if seconds is None:
        raise RuntimeError(f"broker {broker.broker_id} is not running")
    return seconds


def scrape(broker: BrokerProcess) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics_port}/metrics", timeout=10) as response:
        return str(response.read().decode())


def metric(text: str, name: str, labels: str = "") -> float:
    """One sample of a Prometheus text page (0 when absent); ``labels`` as written, e.g. ``api="Fetch"``."""
    selector = re.escape(f"{name}{{{labels}}}" if labels else name)
    found = re.search(rf"^{selector} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


@dataclass(frozen=True)
class LeaderRequests:
    """The leader's request counters (cumulative): Produce requests, the seconds it spent handling
    them, and Fetch requests (only the followers fetch in this benchmark)."""

    produce: float
    produce_seconds: float
    fetch: float

    @staticmethod
    def read(broker: BrokerProcess) -> LeaderRequests:
        text = scrape(broker)
        duration = "tributary_broker_request_duration_seconds"
        return LeaderRequests(
            produce=metric(text, f"{duration}_count", 'api="Produce"'),
            produce_seconds=metric(text, f"{duration}_sum", 'api="Produce"'),
            fetch=metric(text, f"{duration}_count", 'api="Fetch"'),
        )

    def __sub__(self, other: LeaderRequests) -> LeaderRequests:
        return LeaderRequests(
            self.produce - other.produce, self.produce_seconds - other.produce_seconds, self.fetch - other.fetch
        )


def isr_changes(cluster: Cluster) -> dict[str, int]:
    """ISR shrinks and expansions the cluster's brokers wrote as leaders."""
    pages = [scrape(b) for b in cluster.brokers]
    return {k: int(sum(metric(t, f"tributary_broker_isr_{k}_total") for t in pages)) for k in ("shrinks", "expands")}


# --- one throughput job, one latency job ------------------------------------------------------


@dataclass
class Sample:
    """One throughput job: wall time; per broker (by id) CPU-seconds and log growth; the leader's
    request counters over the job; the client's CPU-seconds."""

    seconds: float
    messages: int
    value_bytes: int
    client_cpu: float
    cpu: dict[int, float]
    log_bytes: dict[int, int]
    requests: LeaderRequests


def settle() -> None:
    """Before a timed job: the dirty pages of earlier jobs written out (on ext4 an fsync also waits
    for other files' dirty data, so hw.fsync would pay for whatever ran before it), garbage
    collected."""
    os.sync()
    gc.collect()


def wait_caught_up(cluster: Cluster, topic: str, replicas: Sequence[int]) -> None:
    """Until every replica's log of ``topic`` is as long as the leader's."""
    deadline = time.monotonic() + CATCH_UP_TIMEOUT
    while len({log_size(cluster.broker(b), topic) for b in replicas}) > 1:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic}: the followers did not catch up in {CATCH_UP_TIMEOUT} s")
        time.sleep(0.005)


def produce(cluster: Cluster, shape: Shape, path: Path_, values: Sequence[bytes], count: int) -> Sample:
    """Sends ``count`` values as fast as librdkafka takes them; the brokers' CPU is read before
    and after, the latter once the followers have everything (their share of the job)."""
    topic, brokers, leader = path.topic(shape), cluster.brokers, cluster.broker(LEADER)
    settle()
    requests_before = LeaderRequests.read(leader)
    size_before = {b.broker_id: log_size(b, topic) for b in brokers}
    cpu_before = {b.broker_id: broker_cpu(b) for b in brokers}
    client_before = common.client_cpu()
    config = {"acks": path.acks, **shape.producer()}
    seconds = common.confluent_produce(cluster.bootstrap, topic, values, count, config, label=path.label)
    client = common.client_cpu() - client_before
    wait_caught_up(cluster, topic, path.replica_ids())
    cpu = {b.broker_id: broker_cpu(b) - cpu_before[b.broker_id] for b in brokers}
    return Sample(
        seconds=seconds,
        messages=count,
        value_bytes=count * shape.value_size,
        client_cpu=client,
        cpu=cpu,
        log_bytes={b.broker_id: log_size(b, topic) - size_before[b.broker_id] for b in brokers},
        requests=LeaderRequests.read(leader) - requests_before,
    )


def latencies(
    bootstrap: str, topic: str, config: dict[str, Any], values: Sequence[bytes], *, rate: int, seconds: float
) -> list[float]:
    """Seconds from produce() to the delivery report of each message, sent at ``rate`` a second."""
    producer = Producer({"bootstrap.servers": bootstrap, **config})
    producer.list_topics(topic, timeout=10)
    found: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()

    def delivered(err: Any, _msg: Any, *, sent: float) -> None:
        with lock:
            if err is None:
                found.append(time.perf_counter() - sent)
            else:
                errors.append(str(err))

    interval, start = 1 / rate, time.perf_counter()
    for i in range(int(seconds * rate)):
        due = start + i * interval
        while (now := time.perf_counter()) < due:
            producer.poll(min(due - now, 0.001))
        producer.produce(topic, values[i % len(values)], on_delivery=partial(delivered, sent=time.perf_counter()))
        producer.poll(0)
    left = producer.flush(60)
    if left or errors:
        raise RuntimeError(f"{topic}: {left} messages undelivered; errors: {errors[:5]}")
    return found


# --- the run ------------------------------------------------------------------------------


@dataclass
class Results:
    """Per (shape, path): the throughput samples; per (shape, path, rate): each round's latencies;
    per shape: the 1-minute load average after each round."""

    samples: dict[tuple[str, str], list[Sample]] = field(default_factory=dict)
    latency: dict[tuple[str, str, int], list[list[float]]] = field(default_factory=dict)
    load: dict[str, list[float]] = field(default_factory=dict)


def create_topics(cluster: Cluster, shape: Shape) -> None:
    """``<shape>-rf1`` on broker 1 alone, ``<shape>-rf3`` on all three, led by broker 1."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topics = [
        NewTopic(f"{shape.name}-rf1", num_partitions=1, replica_assignment=[[LEADER]]),
        NewTopic(f"{shape.name}-rf3", num_partitions=1, replica_assignment=[list(BROKERS)]),
    ]
    for future in admin.create_topics(topics, operation_timeout=30).values():
        future.result(timeout=60)
    for topic in topics:
        leaders = wait_for_leaders(cluster.brokers, topic.topic, 1)
        if leaders[0] != LEADER:
            raise RuntimeError(f"{topic.topic} is led by broker {leaders[0]}, not {LEADER}")


def rotated(r: int) -> tuple[Path_, ...]:
    return PATHS[r % len(PATHS) :] + PATHS[: r % len(PATHS)]


def run_shape(clusters: dict[str, Cluster], shape: Shape, values: Sequence[bytes], sizes: Sizes, out: Results) -> None:
    count = sizes.messages(shape)
    log(f"shape {shape.name}: {count:,} x {shape.value_size} B per round, {sizes.rounds} rounds")
    for cluster in clusters.values():
        create_topics(cluster, shape)
    for path in PATHS:  # warm-up, untimed
        produce(clusters[path.cluster], shape, path, values, max(1_000, count // 4))
    for r in range(sizes.rounds):
        for path in rotated(r):
            sample = produce(clusters[path.cluster], shape, path, values, count)
            out.samples.setdefault((shape.name, path.label), []).append(sample)
        for rate in LATENCY_RATES:
            for path in rotated(r):
                bootstrap, config = clusters[path.cluster].bootstrap, {"acks": path.acks, **shape.producer()}
                settle()
                found = latencies(
                    bootstrap, path.topic(shape), config, values, rate=rate, seconds=sizes.latency_seconds
                )
                out.latency.setdefault((shape.name, path.label, rate), []).append(found)
        out.load.setdefault(shape.name, []).append(os.getloadavg()[0])
        log(f"  round {r + 1}/{sizes.rounds} (load {os.getloadavg()[0]:.1f}): {round_note(out, shape)}")


def round_note(out: Results, shape: Shape) -> str:
    notes = []
    for path in PATHS:
        sample = out.samples[shape.name, path.label][-1]
        p99 = [percentile(out.latency[shape.name, path.label, rate][-1], 0.99) * 1e3 for rate in LATENCY_RATES]
        notes.append(
            f"{path.label} {sample.messages / sample.seconds:,.0f} msgs/s, p99 " + "/".join(f"{x:.0f}" for x in p99)
        )
    return "; ".join(notes) + " ms"


# --- the summary (what --json prints) and its tables -----------------------------------------


def percentile(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def per_gb(cpu: float, nbytes: int) -> float | None:
    return cpu / nbytes * 1e9 if nbytes else None


def throughput_summary(samples: Sequence[Sample], base: Sequence[Sample]) -> dict[str, Any]:
    seconds = statistics.median(s.seconds for s in samples)
    wall = sum(s.seconds for s in samples)
    produce = sum(s.requests.produce for s in samples)
    leader_bytes = sum(s.log_bytes[LEADER] for s in samples)
    busy = sum(sum(s.cpu.values()) + s.client_cpu for s in samples)
    return {
        "rounds": len(samples),
        "seconds": [round(s.seconds, 4) for s in samples],
        "msgs_per_s": samples[0].messages / seconds,
        "MB_per_s": samples[0].value_bytes / seconds / 1e6,
        "ratio": statistics.median(b.seconds / s.seconds for s, b in zip(samples, base, strict=True)),
        "cores_busy": busy / wall,
        "produce_requests": produce,
        "ms_per_produce_request": sum(s.requests.produce_seconds for s in samples) / produce * 1e3,
        "KB_per_produce_request": leader_bytes / produce / 1e3,
        "leader_handling_produce": sum(s.requests.produce_seconds for s in samples) / wall,
        "follower_fetches_per_s": sum(s.requests.fetch for s in samples) / wall,
    }


def latency_summary(rounds: Sequence[Sequence[float]], base: Sequence[Sequence[float]]) -> dict[str, Any]:
    pooled = [x for r in rounds for x in r]
    return {
        "samples": len(pooled),
        **{name: percentile(pooled, q) * 1e3 for name, q in (("p50_ms", 0.5), ("p99_ms", 0.99), ("max_ms", 1.0))},
        "p99_ratio": statistics.median(
            percentile(r, 0.99) / percentile(b, 0.99) for r, b in zip(rounds, base, strict=True)
        ),
    }


def cpu_summary(samples: Sequence[Sample]) -> dict[str, Any]:
    cpu = {b: sum(s.cpu[b] for s in samples) for b in BROKERS}
    logged = {b: sum(s.log_bytes[b] for s in samples) for b in BROKERS}
    client = sum(s.client_cpu for s in samples)
    return {
        "GB_logged": {str(b): logged[b] / 1e9 for b in BROKERS},
        "batch_bytes_per_value_byte": logged[LEADER] / sum(s.value_bytes for s in samples),
        "s_per_GB_logged": {str(b): per_gb(cpu[b], logged[b]) for b in BROKERS},
        "client_s_per_GB": per_gb(client, logged[LEADER]),
        "all_s_per_GB": per_gb(sum(cpu.values()) + client, logged[LEADER]),
    }


def summary(out: Results, sizes: Sizes) -> dict[str, Any]:
    shapes: dict[str, Any] = {}
    for shape in SHAPES:
        paths: dict[str, Any] = {}
        for path in PATHS:
            samples = out.samples[shape.name, path.label]
            paths[path.label] = {
                "throughput": throughput_summary(samples, out.samples[shape.name, BASELINE]),
                "latency": {
                    str(rate): latency_summary(
                        out.latency[shape.name, path.label, rate], out.latency[shape.name, BASELINE, rate]
                    )
                    for rate in LATENCY_RATES
                },
                "cpu": cpu_summary(samples),
            }
        shapes[shape.name] = {
            "shape": asdict(shape),
            "messages": sizes.messages(shape),
            "load_average": out.load[shape.name],
            "paths": paths,
        }
    return shapes


def _f(value: float | None, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def throughput_table(shape: dict[str, Any]) -> str:
    header = ["path", "msgs/s", "MB/s", "vs acks=1", "cores busy", "produce reqs", "ms/req", "KB/req", "leader in reqs"]
    rows = []
    for label, path in shape["paths"].items():
        t = path["throughput"]
        rows.append([
            label, f"{t['msgs_per_s']:,.0f}", f"{t['MB_per_s']:.1f}", f"{t['ratio']:.2f}x", f"{t['cores_busy']:.2f}",
            f"{t['produce_requests']:,.0f}", f"{t['ms_per_produce_request']:.2f}", f"{t['KB_per_produce_request']:.0f}",
            f"{t['leader_handling_produce']:.0%}",
        ])  # fmt: skip
    return common.table(header, rows)


def latency_table(shape: dict[str, Any]) -> str:
    header = ["path"]
    for rate in shape["paths"][BASELINE]["latency"]:
        header += [f"p50 @{int(rate):,}/s", f"p99 @{int(rate):,}/s", "p99 vs acks=1", "max"]
    rows = []
    for label, path in shape["paths"].items():
        row = [label]
        for lat in path["latency"].values():
            row += [f"{lat['p50_ms']:.1f}", f"{lat['p99_ms']:.1f}", f"{lat['p99_ratio']:.2f}x", f"{lat['max_ms']:.0f}"]
        rows.append(row)
    return common.table(header, rows)


def cpu_table(shape: dict[str, Any]) -> str:
    header = ["path", "GB logged", "leader s/GB", "follower 2", "follower 3", "client", "all s/GB"]
    rows = []
    for label, path in shape["paths"].items():
        c = path["cpu"]
        own = c["s_per_GB_logged"]
        rows.append([
            label, f"{c['GB_logged']['1']:.2f}", _f(own["1"]), _f(own["2"]), _f(own["3"]), _f(c["client_s_per_GB"]),
            _f(c["all_s_per_GB"]),
        ])  # fmt: skip
    return common.table(header, rows)


HEADER = """\
Replication: acks=all to RF 3 (min.insync.replicas 2) against acks=1 to RF 1, same brokers, same run
{machine}
command: {command}
client: confluent-kafka {client}; linger.ms 5, default batch size
{rounds} rounds per shape, the paths alternating (rotating who goes first)
throughput: messages as fast as the producer takes them, its queues never full; msgs/s and MB/s (10^6 B of
  values) are medians over rounds, 'vs acks=1' the median of per-round ratios; cores busy: CPU-seconds of the
  three brokers and the client per second (2 = the machine); produce reqs, ms/req, KB/req: the Produce requests
  the leader handled, the time it spent on each (acks=all: until the high watermark passed it) and the batch
  bytes each carried; leader in reqs: the share of the run the leader was handling a Produce request
latency: separate rate-limited runs, {latency_seconds:g} s per rate, path and round: produce() to delivery
  report; p50/p99/max pooled over rounds (ms), 'p99 vs acks=1' the median of per-round ratios
CPU: CPU-seconds per GB of record batches appended to that broker's log of the topic (leader: as produced,
  followers: as replicated); client and 'all' (three brokers and client) per GB of the leader's log"""


def render(document: dict[str, Any]) -> str:
    """The tables of a result document (what --json prints)."""
    m, s = document["machine"], document["sizes"]
    lines = [
        HEADER.format(
            machine=f"{m['date']}; {m['cpus']} CPUs ({m['cpu']}); {m['python']}; {m['os']}",
            command=document["command"],
            client=document["confluent_kafka"],
            rounds=s["rounds"],
            latency_seconds=s["latency_seconds"],
        )
    ]
    for name, shape in document["shapes"].items():
        sh, load = shape["shape"], shape["load_average"]
        lines += [
            "",
            f"== {name}: {shape['messages']:,} x {sh['value_size']} B per round, compression {sh['compression']};"
            f" load average {min(load):.1f}-{max(load):.1f} over the rounds",
            throughput_table(shape),
            "",
            latency_table(shape),
            "",
            cpu_table(shape),
        ]
    isr = "; ".join(f"{c}: {v['shrinks']} shrinks, {v['expands']} expands" for c, v in document["isr_changes"].items())
    lines += ["", f"ISR changes during the run: {isr}"]
    return "\n".join(lines)


# --- main ----------------------------------------------------------------------------------


def corpus(shape: Shape) -> list[bytes]:
    return [value for batch in make_corpus(shape.value_size, 64, 64) for _, value, _ in batch]


def measure(root: Path, sizes: Sizes) -> tuple[Results, dict[str, dict[str, int]]]:
    """Starts ZooKeeper and both clusters under ``root``, runs every shape, stops them."""
    out = Results()
    zookeeper = ZooKeeper(root / "zookeeper").start()
    try:
        with (
            Cluster(new_chroot(zookeeper.bootstrap, "plain"), root / "plain", 3, CLUSTERS["plain"], metrics=True) as a,
            Cluster(new_chroot(zookeeper.bootstrap, "fsync"), root / "fsync", 3, CLUSTERS["fsync"], metrics=True) as b,
        ):
            clusters = {"plain": a, "fsync": b}
            for shape in SHAPES:
                run_shape(clusters, shape, corpus(shape), sizes, out)
            return out, {name: isr_changes(c) for name, c in clusters.items()}
    finally:
        zookeeper.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small counts, 1 round: a smoke run")
    parser.add_argument("--repeat", type=int, default=None, help="rounds per shape (default 7; 1 with --quick)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory (logs, data)")
    parser.add_argument("--from-json", type=Path, default=None, metavar="F", help="print the tables of a --json file")
    args = parser.parse_args(argv)
    if common.replayed(args, render):
        return 0
    if args.repeat is not None and args.repeat < 1:
        parser.error("--repeat must be at least 1")
    sizes = Sizes.pick(args.quick, args.repeat)
    command = shlex.join([sys.executable, "-m", "bench.bench_replication", *(sys.argv[1:] if argv is None else argv)])
    machine = common.machine()
    root = Path(tempfile.mkdtemp(prefix="bench-replication-"))
    started = time.monotonic()
    try:
        out, isr = measure(root, sizes)
    except (KafkaException, RuntimeError, TimeoutError, OSError) as exc:
        log(f"failed: {exc!r}; scratch directory kept: {root}")
        return 1
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    log(f"done in {time.monotonic() - started:.0f} s")
    document = {
        "machine": machine,
        "command": command,
        "confluent_kafka": f"{confluent_kafka.version()} (librdkafka {confluent_kafka.libversion()[0]})",
        "sizes": asdict(sizes),
        "latency_rates": LATENCY_RATES,
        "broker_settings": CLUSTERS,
        "shapes": summary(out, sizes),
        "isr_changes": isr,
    }
    print(json.dumps(document, indent=2) if args.json else render(document))
    return 0


if __name__ == "__main__":
    sys.exit(main())
