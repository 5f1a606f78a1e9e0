"""A Jepsen-style run: a seeded schedule of faults against a replicated cluster under load.

Three brokers, replication factor 3, min.insync.replicas 2. Every broker is reached (by
clients and by the other brokers' followers alike) through a fault proxy of its own, so a
"cut" isolates it from everyone but ZooKeeper: a leader that still believes it leads. The
schedule, drawn from a seed, mixes:

- ``kill``: kill -9 of a partition's leader, restarted at once;
- ``pause``: SIGSTOP of a partition's leader, then SIGCONT, sometimes for longer than the
  ZooKeeper session (a zombie leader that wakes up deposed);
- ``cut``: every connection to a partition's leader reset, and new ones refused, for a while.

Meanwhile two confluent-kafka producers (acks=all, idempotent) send numbered records and a
consumer reads everything it is served. The checker then reads the whole log and requires:
every acknowledged record present, none twice, each partition in send order per producer, and
every record the consumer was ever served still at the offset it was served at (nothing a
consumer saw was later truncated away). The schedule and the verdict are printed.

CI runs a short schedule (one fault of each kind); ``--long`` (or TRIBUTARY_JEPSEN_FAULTS=N) a
long seeded one of 40.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.fixtures.zookeeper import ZooKeeperHandle
from tributary.protocol.messages import MetadataRequest
from tributary.testing.cluster import METADATA_VERSION, Cluster
from tributary.testing.fault_proxy import ProxyThread
from tributary.testing.history import History, read_partitions, sequence_of, wait_until_served
from tributary.testing.wire import request

TOPIC = "jepsen"
PARTITIONS = 3
SEED = 20261125
LONG_FAULTS = 40
SESSION_TIMEOUT_S = 4.0
SETTINGS = {
    "zookeeper.session.timeout.ms": str(int(SESSION_TIMEOUT_S * 1000)),
    "min.insync.replicas": "2",
    "replica.lag.time.max.ms": "3000",
    "default.replication.factor": "3",
    "leader.imbalance.check.interval.seconds": "5",
}


@dataclass
class Proxied:
    cluster: Cluster
    proxies: dict[int, ProxyThread]


@pytest.fixture
def proxied(zookeeper: ZooKeeperHandle, tmp_path: Path) -> Iterator[Proxied]:
    cluster = Cluster(zookeeper.hosts, tmp_path, 3, SETTINGS)
    proxies = {}
    for broker in cluster.brokers:
        proxy = ProxyThread([("127.0.0.1", broker.port)]).start()
        proxies[broker.broker_id] = proxy
        broker.advertise = f"127.0.0.1:{proxy.ports[0]}"
    try:
        with cluster:
            yield Proxied(cluster, proxies)
    finally:
        for proxy in proxies.values():
            proxy.stop()


def fault_kinds(long_run: bool) -> list[str | None]:
    """The short schedule: one fault of each kind, in a fixed order; the long one (--long, or
    TRIBUTARY_JEPSEN_FAULTS=N faults): kinds drawn from the seed too."""
    if (env := os.environ.get("TRIBUTARY_JEPSEN_FAULTS")) is not None:
        return [None] * int(env)
    return [None] * LONG_FAULTS if long_run else ["pause", "kill", "cut"]


def leaders(cluster: Cluster) -> dict[int, int]:
    metadata = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)], allow_auto_topic_creation=False
    )
    for broker in cluster.brokers:
        if broker.proc is None or broker.proc.poll() is not None:
            continue
        try:
            (found,) = request(broker.address, metadata, METADATA_VERSION, timeout=2).topics
        except OSError:
            continue
        return {p.partition_index: p.leader_id for p in found.partitions}
    return {}


class Load:
    """Two sequenced producers and a consumer that remembers everything it was served."""

    def __init__(self, bootstrap: str) -> None:
        self.histories = [History(), History()]
        self.served: dict[tuple[int, int], bytes] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._produce, args=(bootstrap, i)) for i in range(2)]
        self._threads.append(threading.Thread(target=self._consume, args=(bootstrap,)))
        self.errors: list[BaseException] = []

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=180)

    def acknowledged(self) -> int:
        with self._lock:
            return sum(len(h.acknowledged) for h in self.histories)

    def _produce(self, bootstrap: str, index: int) -> None:
        history = self.histories[index]
        producer = Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
            "message.timeout.ms": 120_000, "topic.metadata.refresh.interval.ms": 1000,
        })  # fmt: skip
        try:
            while not self._stop.is_set():
                with self._lock:
                    sequence, value = history.next_value()

                def delivered(err: KafkaError | None, msg: object, sequence: int = sequence) -> None:
                    with self._lock:
                        if err is None:
                            history.acknowledge(sequence, msg.partition(), msg.offset())  # type: ignore[attr-defined]
                        else:
                            history.fail(sequence, str(err))

                while True:
                    try:
                        producer.produce(TOPIC, value + b"-p%d" % index, on_delivery=delivered)
                        break
                    except BufferError:
                        producer.poll(0.05)
                producer.poll(0)
                time.sleep(0.002)
            producer.flush(150)
        except BaseException as exc:
            self.errors.append(exc)

    def _consume(self, bootstrap: str) -> None:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "jepsen-reader", "enable.auto.commit": False,
                             "topic.metadata.refresh.interval.ms": 1000})  # fmt: skip
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        try:
            while not self._stop.is_set():
                message = consumer.poll(0.2)
                if message is None or message.error():
                    continue
                with self._lock:
                    self.served[message.partition(), message.offset()] = message.value()
        except BaseException as exc:
            self.errors.append(exc)
        finally:
            consumer.close()


def inject(rng: random.Random, proxied: Proxied, log: list[str], kind: str | None) -> None:
    cluster = proxied.cluster
    kind = kind or rng.choice(["kill", "pause", "cut"])
    partition = rng.randrange(PARTITIONS)
    leader = leaders(cluster).get(partition, -1)
    if leader < 0:
        log.append(f"{time.strftime('%H:%M:%S')} skip: {TOPIC}-{partition} has no leader")
        return
    broker = cluster.broker(leader)
    assert broker.proc is not None
    if kind == "kill":
        log.append(f"{time.strftime('%H:%M:%S')} kill -9 broker {leader} (leader of {partition}), restart")
        broker.kill()
        broker.start()
        broker.wait_ready(expected_brokers=3)
    elif kind == "pause":
        seconds = rng.choice([1.0, 2.5, SESSION_TIMEOUT_S + 2.0])
        log.append(f"{time.strftime('%H:%M:%S')} SIGSTOP broker {leader} (leader of {partition}) for {seconds} s")
        os.kill(broker.proc.pid, signal.SIGSTOP)
        time.sleep(seconds)
        os.kill(broker.proc.pid, signal.SIGCONT)
    else:
        seconds = rng.choice([2.0, 5.0])
        log.append(f"{time.strftime('%H:%M:%S')} cut all links to broker {leader} (leader of {partition}), {seconds} s")
        proxy = proxied.proxies[leader]
        proxy.cut()
        time.sleep(seconds)
        proxy.restore()


def test_seeded_faults_lose_nothing_acknowledged(proxied: Proxied, long_run: bool) -> None:
    cluster = proxied.cluster
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)], operation_timeout=30)[TOPIC].result(timeout=30)
    rng = random.Random(SEED)
    kinds = fault_kinds(long_run)
    faults = len(kinds)
    schedule: list[str] = []
    with Load(cluster.bootstrap) as load:
        for kind in kinds:
            time.sleep(rng.uniform(1.0, 2.5))
            before = load.acknowledged()
            inject(rng, proxied, schedule, kind)
            schedule.append(f"    acknowledged so far: {before}")
        # Healed: everything in sync again before the load stops, so the producers finish.
        deadline = time.monotonic() + 60
        while any(leader < 0 for leader in leaders(cluster).values()) and time.monotonic() < deadline:
            time.sleep(0.2)
    print(f"seed {SEED}, {faults} faults:")
    print("\n".join(schedule))
    assert not load.errors, load.errors
    for history in load.histories:
        wait_until_served(cluster.bootstrap, TOPIC, history)
    final = read_partitions(cluster.bootstrap, TOPIC)
    at = {(p, offset): value for p, records in final.items() for offset, value in records}
    for index, history in enumerate(load.histories):
        mine = {
            p: [(o, v[: -len(b"-p0")]) for o, v in records if v is not None and v.endswith(b"-p%d" % index)]
            for p, records in final.items()
        }
        verdict = history.check(mine)
        print(f"producer {index}: {verdict}; {len(history.failed)} failed")
        assert verdict.ok, verdict
    vanished = [(key, value) for key, value in load.served.items() if at.get(key) != value]
    print(f"consumer: {len(load.served)} records served, {len(vanished)} later gone or changed")
    assert not vanished, vanished[:5]
    assert load.acknowledged() > 0
    assert all(sequence_of(v[: -len(b"-p0")]) is not None for v in at.values() if v is not None)
