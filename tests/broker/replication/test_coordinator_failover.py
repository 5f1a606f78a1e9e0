"""The group coordinator moves with the leadership of its `__consumer_offsets` partition.

Three brokers, `__consumer_offsets` with replication factor 3. Two confluent-kafka consumers
of one group consume a topic and commit synchronously after every poll, noting each commit the
coordinator acknowledged. The coordinator is killed with -9 mid-stream and restarted at once:
the group finds the new coordinator (which loads the group's offsets from its replica), every
acknowledged commit is still there, and the consumers finish the topic. A commit the old
coordinator acknowledged and the new one lost would let a member resume behind it, or (with
the committed offset gone) from the start: both are checked.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker.replication.test_failover import SETTINGS, fully_replicated, wait_for
from tests.fixtures.zookeeper import ZooKeeperHandle
from tributary.protocol.messages import FindCoordinatorRequest
from tributary.testing.cluster import Cluster
from tributary.testing.wire import request

TOPIC, GROUP, PARTITIONS, PER_PARTITION = "work", "workers", 4, 2_500


@pytest.fixture
def cluster(zookeeper: ZooKeeperHandle, tmp_path: Path) -> Iterator[Cluster]:
    settings = {**SETTINGS, "group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000"}
    with Cluster(zookeeper.hosts, tmp_path, 3, settings) as running:
        yield running


class Worker(threading.Thread):
    """Consumes and commits after every poll; notes what it consumed and what was committed."""

    def __init__(self, bootstrap: str, name: str, stop: threading.Event) -> None:
        super().__init__(name=name)
        self.bootstrap, self.stop = bootstrap, stop
        #: partition -> (offset, when) of every record consumed.
        self.consumed: dict[int, list[tuple[int, float]]] = {}
        #: partition -> the highest committed offset the coordinator acknowledged, and when.
        self.acknowledged: dict[int, tuple[int, float]] = {}
        self.errors: list[str] = []

    def run(self) -> None:
        consumer = Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": GROUP, "client.id": self.name,
            "session.timeout.ms": 6000, "heartbeat.interval.ms": 500, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "partition.assignment.strategy": "range",
        })  # fmt: skip
        try:
            consumer.subscribe([TOPIC])
            while not self.stop.is_set():
                messages = consumer.consume(50, timeout=0.2)
                positions: dict[int, int] = {}
                for message in messages:
                    if message.error() is not None:
                        continue
                    self.consumed.setdefault(message.partition(), []).append((message.offset(), time.monotonic()))
                    positions[message.partition()] = message.offset() + 1
                if not positions:
                    continue
                offsets = [TopicPartition(TOPIC, p, o) for p, o in positions.items()]
                try:
                    committed = consumer.commit(offsets=offsets, asynchronous=False)
                except KafkaException as exc:
                    # Not acknowledged (the coordinator died, or the member was fenced by a
                    # rebalance): the next owner re-reads from the last acknowledged commit.
                    self.errors.append(str(exc))
                    continue
                now = time.monotonic()
                for tp in committed or []:
                    if tp.error is None and tp.offset >= self.acknowledged.get(tp.partition, (-1, 0.0))[0]:
                        self.acknowledged[tp.partition] = (tp.offset, now)
                time.sleep(0.02)  # a steady pace: the stream lasts through the failover
        finally:
            consumer.close()


def coordinator(cluster: Cluster) -> int:
    response = request(cluster.brokers[0].address, FindCoordinatorRequest(key=GROUP, key_type=0), 2)
    assert response.error_code == 0, response
    return response.node_id


def test_committed_offsets_survive_the_coordinators_death(cluster: Cluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
    for p in range(PARTITIONS):
        for i in range(PER_PARTITION):
            producer.produce(TOPIC, b"%d-%d" % (p, i), partition=p)
    assert producer.flush(30) == 0
    stop = threading.Event()
    workers = [Worker(cluster.bootstrap, f"worker-{i}", stop) for i in range(2)]
    for worker in workers:
        worker.start()
    try:
        wait_for(lambda: sum(len(o) for w in workers for o in w.consumed.values()) > 2_000, 60, "consumption")
        wait_for(lambda: fully_replicated(cluster, "__consumer_offsets"), 30, "__consumer_offsets in sync")
        victim = cluster.broker(coordinator(cluster))
        victim.kill()
        killed_at = time.monotonic()
        # What the old coordinator acknowledged before it died.
        before = {}
        for worker in workers:
            for partition, (offset, at) in worker.acknowledged.items():
                if at < killed_at:
                    before[partition] = max(before.get(partition, -1), offset)
        victim.start()  # at once: it waits for its old registration to expire, then follows
        victim.wait_ready(expected_brokers=3)
        successor = coordinator(cluster)
        print(f"coordinator {victim.broker_id} killed with {sum(before.values())} offsets committed; {successor} now")

        def finished() -> bool:
            return all(
                max((o for w in workers for o, _ in w.consumed.get(p, [])), default=-1) == PER_PARTITION - 1
                for p in range(PARTITIONS)
            )

        wait_for(finished, 120, "the consumers to finish the topic")
    finally:
        stop.set()
        for worker in workers:
            worker.join(30)
    # Every record was consumed, and no member ever resumed behind an acknowledged commit.
    for partition in range(PARTITIONS):
        seen = sorted({o for w in workers for o, _ in w.consumed.get(partition, [])})
        assert seen == list(range(PER_PARTITION)), f"partition {partition}: gaps"
    check = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        committed = check.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=30)
    finally:
        check.close()
    final = {tp.partition: tp.offset for tp in committed}
    for partition, offset in before.items():
        assert final[partition] >= offset, (
            f"partition {partition}: commit {offset} acknowledged, {final[partition]} kept"
        )
    # The group keeps at least the last commit acknowledged for each partition, the end of the
    # topic where that commit went through. (A worker's last commit may fail as the coordinator
    # moves, and nothing retries it once the topic is read: the group then resumes from the one
    # before, which is at-least-once, not a loss.)
    for partition in range(PARTITIONS):
        last = max((w.acknowledged.get(partition, (-1, 0.0))[0] for w in workers), default=-1)
        assert last <= final[partition] <= PER_PARTITION, f"partition {partition}: {last} acknowledged last"
    # After the kill nobody read below a commit acknowledged before it: members that kept their
    # partitions read on, and a partition handed over resumed at its commit on the new coordinator.
    behind = {
        p: sorted(o for w in workers for o, at in w.consumed.get(p, []) if at > killed_at and o < committed)
        for p, committed in before.items()
    }
    assert not any(behind.values()), f"read again after the kill, below an acknowledged commit: {behind}"
