"""Replication with real clients: three brokers, replication factor 3, leaders killed with -9.

Every acknowledged record must be read back exactly once and in order (the history checker),
whatever leader was killed while confluent-kafka produced with acks=all and idempotence.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import ElectionType, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker.replication.background import BackgroundKafkaPythonProducer, BackgroundProducer
from tests.fixtures.prometheus import scrape
from tests.fixtures.zookeeper import ZooKeeperHandle
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import FetchRequest, ListOffsetsRequest, MetadataRequest, OffsetForLeaderEpochRequest
from tributary.testing.cluster import METADATA_VERSION, BrokerProcess, Cluster
from tributary.testing.history import History, read_partitions, sequence_of, wait_until_served
from tributary.testing.wire import request

SESSION_TIMEOUT_MS = 4_000
SETTINGS = {
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "min.insync.replicas": "2",
    "replica.lag.time.max.ms": "3000",
    "default.replication.factor": "3",
    "leader.imbalance.check.interval.seconds": "2",
}


@pytest.fixture
def cluster(zookeeper: ZooKeeperHandle, tmp_path: Path) -> Iterator[Cluster]:
    with Cluster(zookeeper.hosts, tmp_path, 3, SETTINGS, metrics=True) as running:
        yield running


def create_topic(bootstrap: str, name: str, partitions: int, replication_factor: int = 3) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, replication_factor)], operation_timeout=30)
    futures[name].result(timeout=30)


def partition_states(broker: BrokerProcess, topic: str) -> dict[int, tuple[int, int, list[int], list[int]]]:
    """partition -> (leader, leader epoch, replicas (preferred first), isr) as `broker` answers Metadata."""
    response = request(
        broker.address,
        MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False),
        METADATA_VERSION,
    )
    (found,) = response.topics
    return {
        p.partition_index: (p.leader_id, p.leader_epoch, list(p.replica_nodes), sorted(p.isr_nodes))
        for p in found.partitions
    }


def wait_for(condition: object, timeout: float, what: str) -> float:
    """Poll `condition()` (a callable) until true; the seconds it took."""
    assert callable(condition)
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout:
            raise TimeoutError(what)
        time.sleep(0.05)
    return time.monotonic() - start


def fully_replicated(cluster: Cluster, topic: str) -> bool:
    for broker in cluster.brokers:
        if broker.proc is None or broker.proc.poll() is not None:
            continue
        try:
            states = partition_states(broker, topic)
        except OSError:
            return False
        if not states or any(len(isr) != 3 or leader < 0 for leader, _, _, isr in states.values()):
            return False
    return True


def segment_bytes(data_dir: Path, topic: str, partition: int) -> bytes:
    directory = data_dir / f"{topic}-{partition}"
    return b"".join(path.read_bytes() for path in sorted(directory.glob("*.log")))


def test_acks_all_replicates_batches_byte_for_byte(cluster: Cluster) -> None:
    create_topic(cluster.bootstrap, "copies", 2)
    wait_for(lambda: fully_replicated(cluster, "copies"), 30, "ISR of 3 on every partition")
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
         "compression.type": "zstd", "linger.ms": 5}
    )  # fmt: skip
    history = History()

    def on_delivery(err: KafkaError | None, msg: object) -> None:
        assert err is None, err
        history.acknowledge(sequence_of(msg.value()), msg.partition(), msg.offset())  # type: ignore[attr-defined]

    for i in range(2_000):
        _, value = history.next_value()
        # Both partitions, by hand: the sticky partitioner may put a fast burst into one.
        producer.produce("copies", value, partition=i % 2, on_delivery=on_delivery)
    assert producer.flush(30) == 0
    assert len(history.acknowledged) == 2_000
    # acks=all answered: every in-sync replica holds the batches, and holds them as the leader
    # wrote them (offsets, epochs, zstd compression, CRCs: the same bytes).
    for partition in (0, 1):
        copies = {b.broker_id: segment_bytes(b.data_dir, "copies", partition) for b in cluster.brokers}
        leader_copy = copies[partition_states(cluster.brokers[0], "copies")[partition][0]]
        assert len(leader_copy) > 0
        # Followers learn of the newest batches at their next fetch: wait for it, not for time.
        wait_for(
            lambda p=partition, c=leader_copy: all(  # type: ignore[misc]
                segment_bytes(b.data_dir, "copies", p) == c for b in cluster.brokers
            ),
            10,
            "followers caught up",
        )
    verdict = history.check(read_partitions(cluster.bootstrap, "copies"))
    assert verdict.ok, verdict


def test_not_enough_replicas_when_the_isr_is_below_min_insync(cluster: Cluster) -> None:
    create_topic(cluster.bootstrap, "lonely", 1)
    wait_for(lambda: fully_replicated(cluster, "lonely"), 30, "ISR of 3")
    leader = partition_states(cluster.brokers[0], "lonely")[0][0]
    followers = [b for b in cluster.brokers if b.broker_id != leader]
    for follower in followers:
        assert follower.proc is not None
        os.kill(follower.proc.pid, signal.SIGSTOP)
    try:
        leader_broker = cluster.broker(leader)
        metrics_port = leader_broker.metrics_port
        assert metrics_port is not None
        # The paused followers leave the ISR within replica.lag.time.max.ms (3 s here). Asked
        # of the leader's own gauge, the ISR it acts on: Metadata may show the shrink a moment
        # earlier (the ZooKeeper watch can come before the leader's write returns to it), and
        # a produce in that moment is appended and answered NOT_ENOUGH_REPLICAS_AFTER_APPEND.
        took = wait_for(
            lambda: (
                scrape(metrics_port).value("tributary_broker_under_min_isr_partitions") == 1
                and partition_states(leader_broker, "lonely")[0][3] == [leader]
            ),
            15,
            "ISR shrank to the leader, in Metadata and as the leader acts on it",
        )
        print(f"ISR shrank to the leader {took:.1f} s after both followers were paused")
        producer = Producer({"bootstrap.servers": leader_broker.bootstrap, "acks": "all",
                             "message.timeout.ms": 3000, "retries": 0})  # fmt: skip
        errors: list[KafkaError] = []
        producer.produce("lonely", b"refused", on_delivery=lambda err, msg: errors.append(err))
        producer.flush(10)
        assert [e.code() for e in errors] == [KafkaError.NOT_ENOUGH_REPLICAS]
    finally:
        for follower in followers:
            assert follower.proc is not None
            os.kill(follower.proc.pid, signal.SIGCONT)
    took = wait_for(lambda: fully_replicated(cluster, "lonely"), 30, "ISR grew back")
    print(f"ISR back to 3 {took:.1f} s after SIGCONT")
    # Nothing was appended by the refused produce.
    assert read_partitions(cluster.bootstrap, "lonely") == {0: []}


def test_killing_leaders_loses_no_acknowledged_record(cluster: Cluster, long_run: bool) -> None:
    """confluent-kafka and kafka-python (acks=all, idempotent) produce, each into its own topic,
    while the leader of a partition is killed with -9 and restarted at once, round after round
    across the brokers (three rounds in CI, five with --long)."""
    topic, kp_topic = "failover", "failover-kp"
    for name in (topic, kp_topic):
        create_topic(cluster.bootstrap, name, 3)
        wait_for(lambda n=name: fully_replicated(cluster, n), 30, "ISR of 3 on every partition")  # type: ignore[misc]
    failovers = []
    with (
        BackgroundProducer(cluster.bootstrap, topic) as background,
        BackgroundKafkaPythonProducer(cluster.bootstrap, kp_topic) as kp_background,
    ):
        for round_ in range(5 if long_run else 3):
            time.sleep(1.5)
            states = partition_states(cluster.brokers[(round_ + 1) % 3], topic)
            victim = cluster.broker(states[round_ % 3][0])
            before = (background.acknowledged(), kp_background.acknowledged())
            assert victim.proc is not None
            killed_at = time.monotonic()
            victim.kill()
            survivor = next(b for b in cluster.brokers if b is not victim)

            def moved(survivor: BrokerProcess = survivor, gone: int = victim.broker_id) -> bool:
                return all(leader not in (-1, gone) for leader, *_ in partition_states(survivor, topic).values())

            wait_for(moved, SESSION_TIMEOUT_MS / 1000 + 15, "new leaders")
            failovers.append(time.monotonic() - killed_at)
            victim.start()  # at once: it waits for its old registration to expire, then joins
            victim.wait_ready(expected_brokers=3)
            wait_for(lambda: fully_replicated(cluster, topic), 60, "ISR of 3 again")
            assert background.acknowledged() > before[0], "confluent-kafka made no progress"
            assert kp_background.acknowledged() > before[1], "kafka-python made no progress"
    print("kill -9 to new leader (s):", ", ".join(f"{t:.1f}" for t in failovers))
    for name, history in ((topic, background.history), (kp_topic, kp_background.history)):
        wait_until_served(cluster.bootstrap, name, history)
        verdict = history.check(read_partitions(cluster.bootstrap, name))
        print(f"{name}: {verdict}")
        assert verdict.ok, verdict
        assert verdict.acknowledged > 0 and not history.failed, list(history.failed.items())[:3]


def preferred_lead(cluster: Cluster, topic: str) -> bool:
    states = partition_states(cluster.brokers[0], topic)
    return all(leader == replicas[0] for leader, _, replicas, _ in states.values())


def test_controlled_shutdown_costs_producers_nothing_and_leaders_come_back(cluster: Cluster) -> None:
    """A rolling restart: each broker stopped with SIGTERM hands its leaderships over first, so
    an acks=all producer sees no error; the restarted broker gets its preferred leaderships
    back from the controller (auto.leader.rebalance.enable, checked every 2 s here)."""
    topic = "rolling"
    create_topic(cluster.bootstrap, topic, 3)
    wait_for(lambda: fully_replicated(cluster, topic), 30, "ISR of 3")
    with BackgroundProducer(cluster.bootstrap, topic) as producer:
        for broker in cluster.brokers:
            led_before = producer.acknowledged()
            assert broker.stop() == 0
            # It left only after its leaderships had moved: no partition waits for a new leader.
            others = [b for b in cluster.brokers if b is not broker]
            leaders = {leader for leader, *_ in partition_states(others[0], topic).values()}
            assert broker.broker_id not in leaders and -1 not in leaders, leaders
            broker.start()
            broker.wait_ready(expected_brokers=3)
            wait_for(lambda: fully_replicated(cluster, topic), 30, "ISR of 3 again")
            took = wait_for(lambda: preferred_lead(cluster, topic), 15, "preferred leaders back")
            print(f"broker {broker.broker_id}: preferred leadership back {took:.1f} s after it rejoined")
            wait_for(lambda n=led_before: producer.acknowledged() > n + 100, 15, "producer progress")  # type: ignore[misc]
    wait_until_served(cluster.bootstrap, topic, producer.history)
    verdict = producer.history.check(read_partitions(cluster.bootstrap, topic))
    print(verdict)
    assert verdict.ok, verdict
    assert not producer.history.failed, list(producer.history.failed.items())[:3]


def test_elect_leaders_moves_leadership_to_the_preferred_replica(zookeeper: ZooKeeperHandle, tmp_path: Path) -> None:
    settings = {**SETTINGS, "auto.leader.rebalance.enable": "false"}
    with Cluster(zookeeper.hosts, tmp_path, 3, settings) as cluster:
        create_topic(cluster.bootstrap, "elect", 3)
        wait_for(lambda: fully_replicated(cluster, "elect"), 30, "ISR of 3")
        victim = cluster.brokers[0]
        assert victim.stop() == 0
        victim.start()
        victim.wait_ready(expected_brokers=3)
        wait_for(lambda: fully_replicated(cluster, "elect"), 30, "ISR of 3 again")
        assert not preferred_lead(cluster, "elect")  # nothing moves it back by itself here
        # The operator's command first (Kafka's kafka-leader-election), then confluent-kafka's admin.
        cli = subprocess.run(
            [sys.executable, "-m", "tributary.deploy.cli", "topics", "--bootstrap", cluster.bootstrap,
             "--output", "json", "elect-leaders", "--topic", "elect"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert cli.returncode == 0, cli.stderr
        results = {row["partition"]: row["result"] for row in json.loads(cli.stdout)}
        assert "NONE" in results.values() and set(results.values()) <= {"NONE", "ELECTION_NOT_NEEDED"}, results
        assert preferred_lead(cluster, "elect")
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        partitions = [TopicPartition("elect", p) for p in range(3)]
        again = admin.elect_leaders(ElectionType.PREFERRED, partitions).result(timeout=30)
        assert {err.code() for err in again.values() if err} == {KafkaError.ELECTION_NOT_NEEDED}
        assert all(err is not None for err in again.values())

        # A manual replica assignment is taken as given (first replica leads; confluent-kafka wants
        # the partition count given too, and sends -1 as Kafka requires)...
        placed = NewTopic("placed", num_partitions=2, replica_assignment=[[3, 1], [2, 3]])
        admin.create_topics([placed], operation_timeout=30)["placed"].result(timeout=30)
        wait_for(lambda: partition_states(cluster.brokers[0], "placed").get(1, (-1,))[0] == 2, 10, "placed")
        states = partition_states(cluster.brokers[0], "placed")
        assert {p: (s[0], s[2]) for p, s in states.items()} == {0: (3, [3, 1]), 1: (2, [2, 3])}
        # ...and one naming a broker that does not exist is refused, saying which.
        wrong = NewTopic("misplaced", num_partitions=1, replica_assignment=[[1, 9]])
        with pytest.raises(KafkaException) as refused:
            admin.create_topics([wrong], operation_timeout=30)["misplaced"].result(timeout=30)
        assert refused.value.args[0].code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
        assert "[9]" in refused.value.args[0].str()


def test_leader_epochs_on_the_wire(cluster: Cluster) -> None:
    """OffsetForLeaderEpoch answers where an epoch ends; Fetch, ListOffsets and it fence a
    client whose leader epoch is older, and hold off one whose epoch is newer (KIP-320)."""
    create_topic(cluster.bootstrap, "epochs", 1)
    wait_for(lambda: fully_replicated(cluster, "epochs"), 30, "ISR of 3")
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(10):
        producer.produce("epochs", b"%d" % i)
    assert producer.flush(10) == 0
    leader_id, epoch, replicas, _ = partition_states(cluster.brokers[0], "epochs")[0]
    leader = cluster.broker(leader_id)
    follower = cluster.broker(next(r for r in replicas if r != leader_id))

    def ask(broker: BrokerProcess, current: int, wanted: int) -> tuple[int, int, int]:
        response = request(broker.address, OffsetForLeaderEpochRequest(topics=[
            OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic="epochs", partitions=[
                OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                    partition=0, current_leader_epoch=current, leader_epoch=wanted)])]), 3)  # fmt: skip
        (answer,) = response.topics[0].partitions
        return answer.error_code, answer.leader_epoch, answer.end_offset

    assert ask(leader, epoch, epoch) == (0, epoch, 10)
    assert ask(leader, -1, epoch) == (0, epoch, 10)
    assert ask(leader, epoch + 1, epoch)[0] == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert ask(follower, epoch, epoch)[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    fetch = FetchRequest(max_wait_ms=0, topics=[FetchRequest.FetchTopic(topic="epochs", partitions=[
        FetchRequest.FetchPartition(partition=0, current_leader_epoch=epoch + 1, fetch_offset=0,
                                    partition_max_bytes=1 << 20)])])  # fmt: skip
    (data,) = request(leader.address, fetch, 11).responses[0].partitions
    assert data.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    # A leader change later, the old epoch is fenced.
    leader.kill()
    leader.start()
    leader.wait_ready(expected_brokers=3)
    wait_for(lambda: partition_states(follower, "epochs")[0][1] > epoch, 30, "a new epoch")
    new_leader = cluster.broker(partition_states(follower, "epochs")[0][0])
    old = FetchRequest(max_wait_ms=0, topics=[FetchRequest.FetchTopic(topic="epochs", partitions=[
        FetchRequest.FetchPartition(partition=0, current_leader_epoch=epoch, fetch_offset=0,
                                    partition_max_bytes=1 << 20)])])  # fmt: skip
    (data,) = request(new_leader.address, old, 11).responses[0].partitions
    assert data.error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert ask(new_leader, epoch, epoch)[0] == ErrorCode.FENCED_LEADER_EPOCH
    # Where the old epoch ends in the new leader's log: after the ten records it had.
    new_epoch = partition_states(follower, "epochs")[0][1]
    assert ask(new_leader, new_epoch, epoch) == (0, epoch, 10)


def test_a_new_leader_holds_off_list_offsets_until_its_high_watermark_is_known(
    zookeeper: ZooKeeperHandle, tmp_path: Path
) -> None:
    """A follower that takes over may hold committed batches its high watermark does not cover
    yet. Until it does, a consumer's ListOffsets gets OFFSET_NOT_AVAILABLE (LEADER_NOT_AVAILABLE
    before v5), as in Kafka: an end offset answered then would move past data already there
    (the mirror, reconciling against it, would copy those batches twice)."""
    # Long enough that the paused replica stays registered and in sync throughout.
    settings = {**SETTINGS, "zookeeper.session.timeout.ms": "15000", "replica.lag.time.max.ms": "15000"}
    with Cluster(zookeeper.hosts, tmp_path, 3, settings) as cluster:
        controller = request(cluster.brokers[0].address, MetadataRequest(topics=[]), 1).controller_id
        # The controller stays up and running; the two others are the leader and the paused one.
        leader, paused = (b for b in cluster.brokers if b.broker_id != controller)
        successor = cluster.broker(controller)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        topic = NewTopic("hw", num_partitions=1, replica_assignment=[[leader.broker_id, controller, paused.broker_id]])
        admin.create_topics([topic], operation_timeout=30)["hw"].result(timeout=30)
        wait_for(lambda: fully_replicated(cluster, "hw"), 30, "ISR of 3")
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for i in range(10):
            producer.produce("hw", b"%d" % i)
        assert producer.flush(10) == 0
        assert paused.proc is not None
        os.kill(paused.proc.pid, signal.SIGSTOP)
        try:
            # acks=1: the leader and the running follower hold five more; the paused one, still
            # in sync, holds the high watermark at 10.
            producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "1"})
            for i in range(10, 15):
                producer.produce("hw", b"%d" % i)
            assert producer.flush(10) == 0
            wait_for(lambda: segment_bytes(successor.data_dir, "hw", 0) == segment_bytes(leader.data_dir, "hw", 0),
                     10, "the running follower to copy the five")  # fmt: skip
            assert leader.stop() == 0  # controlled shutdown: leadership moves to the running follower
            wait_for(lambda: partition_states(successor, "hw")[0][0] == controller, 30, "the new leader")

            def latest(version: int, timestamp: int = -1) -> tuple[int, int]:
                listed = ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(
                    name="hw", partitions=[ListOffsetsRequest.ListOffsetsPartition(
                        partition_index=0, timestamp=timestamp, current_leader_epoch=-1)])])  # fmt: skip
                (answer,) = request(successor.address, listed, version).topics[0].partitions
                return answer.error_code, answer.offset

            assert latest(5)[0] == ErrorCode.OFFSET_NOT_AVAILABLE
            assert latest(1)[0] == ErrorCode.LEADER_NOT_AVAILABLE
            assert latest(5, timestamp=-2) == (0, 0)  # the log start does not wait (as in Kafka)
        finally:
            os.kill(paused.proc.pid, signal.SIGCONT)
        # The paused replica fetches from the new leader, and the high watermark reaches all 15.
        wait_for(lambda: latest(5) == (0, 15), 30, "the end offset")
        assert latest(1) == (0, 15)
