"""Transactions with real clients against three brokers: confluent-kafka (librdkafka) and
kafka-python transactional producers commit, abort, abort and retry, commit consumed offsets
inside a transaction (consume-transform-produce), are fenced by a newer instance, and have a
transaction that outlived ``transaction.timeout.ms`` aborted by the coordinator. read_committed
consumers (confluent-kafka, kafka-python, our client) see exactly the committed records;
read_uncommitted consumers see everything."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import pytest
import trio
from confluent_kafka import Consumer as CkConsumer
from confluent_kafka import KafkaError as CkKafkaError
from confluent_kafka import KafkaException
from confluent_kafka import Producer as CkProducer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka.errors import ProducerFencedError
from kafka.structs import OffsetAndMetadata as KpOffsetAndMetadata

from tests.deploy.cli_runner import Result, assert_one_line_error, tributary
from tests.fixtures.brokers import module_cluster
from tributary.client import Admin, Consumer, TopicPartition
from tributary.client.raw.batches import LATEST, READ_COMMITTED, READ_UNCOMMITTED
from tributary.protocol.messages import FetchRequest, FetchResponse, ListOffsetsRequest
from tributary.protocol.records import iter_batches
from tributary.testing.cluster import Cluster, wait_for_leaders
from tributary.testing.polling import eventually
from tributary.testing.wire import request
from tributary.testing.zookeeper import ZooKeeperServer

TIMEOUT = 30.0
SETTINGS = {
    "transaction.state.log.num.partitions": "5",
    "offsets.topic.num.partitions": "5",
    "group.initial.rebalance.delay.ms": "0",
    # Timed-out transactions are looked for often, so a test of it takes seconds.
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
}


@pytest.fixture(scope="module")
def cluster(zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from module_cluster(zookeeper_server, tmp_path_factory.mktemp("txn-interop"), SETTINGS)


def create_topic(cluster: Cluster, name: str, partitions: int = 3) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=3)])[name].result(TIMEOUT)
    wait_for_leaders(cluster.brokers, name, partitions)


# --- three consumers -----------------------------------------------------------------------


def confluent_read(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[bytes]:
    """Every value from the beginning to the end a consumer of ``isolation`` sees."""
    consumer = CkConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{topic}-{isolation}",
            "isolation.level": isolation,
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([CkTopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + TIMEOUT
    while len(at_end) < partitions:
        assert time.monotonic() < deadline, f"confluent-kafka {isolation} read of {topic} did not reach the end"
        message = consumer.poll(1)
        if message is None:
            continue
        if message.error():
            at_end.add(message.partition())
            continue
        at_end.discard(message.partition())
        values.append(message.value())
    consumer.close()
    return values


def kafka_python_read(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False)
    tps = [KpTopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    ends = consumer.end_offsets(tps)
    values: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT
    while any(consumer.position(tp) < ends[tp] for tp in tps):
        assert time.monotonic() < deadline, f"kafka-python {isolation} read of {topic} did not reach {ends}"
        for records in consumer.poll(timeout_ms=500).values():
            values += [r.value for r in records]
    consumer.close()
    return values


def tributary_read(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[bytes]:
    async def read() -> list[bytes]:
        level = READ_COMMITTED if isolation == "read_committed" else READ_UNCOMMITTED
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        async with Consumer(bootstrap, isolation_level=isolation, auto_offset_reset="earliest") as consumer:
            ends = await Admin(consumer.cluster).list_offsets(dict.fromkeys(tps, LATEST), isolation_level=level)
            consumer.assign(tps)
            values: list[bytes] = []
            with trio.fail_after(TIMEOUT):
                while any([await consumer.position(tp) < ends[tp].offset for tp in tps]):
                    values += [r.value for r in await consumer.poll(0.5) if r.value is not None]
            return values

    return trio.run(read)


READERS = {"confluent-kafka": confluent_read, "kafka-python": kafka_python_read, "tributary": tributary_read}


def check_reads(cluster: Cluster, topic: str, partitions: int, committed: list[bytes], everything: list[bytes]) -> None:
    for name, read in READERS.items():
        seen = read(cluster.bootstrap, topic, partitions, "read_committed")
        assert sorted(seen) == sorted(committed), f"{name} read_committed"
        assert len(seen) == len(set(seen)), f"{name} read_committed saw duplicates"
    assert sorted(confluent_read(cluster.bootstrap, topic, partitions, "read_uncommitted")) == sorted(everything)
    assert sorted(tributary_read(cluster.bootstrap, topic, partitions, "read_uncommitted")) == sorted(everything)


def values(prefix: str, count: int) -> list[bytes]:
    return [b"%s-%d" % (prefix.encode(), i) for i in range(count)]


# --- producers -------------------------------------------------------------------------------


_OPEN: list[CkProducer] = []


@pytest.fixture(autouse=True)
def _close_producers() -> Iterator[None]:
    """librdkafka producers are closed after each test, before the cluster goes."""
    yield
    while _OPEN:
        with contextlib.suppress(KafkaException):  # a fenced one says so again
            _OPEN.pop().close()


def confluent_producer(cluster: Cluster, transactional_id: str, **extra: object) -> CkProducer:
    producer = CkProducer(
        {"bootstrap.servers": cluster.bootstrap, "transactional.id": transactional_id, "linger.ms": 5, **extra}
    )
    _OPEN.append(producer)
    producer.init_transactions(TIMEOUT)
    return producer


def kafka_python_producer(cluster: Cluster, transactional_id: str, **extra: object) -> KafkaProducer:
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, transactional_id=transactional_id, **extra)
    producer.init_transactions()
    return producer


def test_confluent_kafka_commit_abort_and_retry(cluster: Cluster) -> None:
    topic = "txn-ck"
    create_topic(cluster, topic)
    producer = confluent_producer(cluster, "ck-commit-abort")
    first, dropped = values("commit", 30), values("abort", 20)
    producer.begin_transaction()
    for i, value in enumerate(first):
        producer.produce(topic, value=value, partition=i % 3)
    producer.commit_transaction(TIMEOUT)
    producer.begin_transaction()
    for i, value in enumerate(dropped):
        producer.produce(topic, value=value, partition=i % 3)
    producer.flush(TIMEOUT)  # written to the partitions, then aborted
    producer.abort_transaction(TIMEOUT)
    # The same records again, in a transaction that commits: each seen once by committed readers.
    producer.begin_transaction()
    for i, value in enumerate(dropped):
        producer.produce(topic, value=value, partition=i % 3)
    producer.commit_transaction(TIMEOUT)
    check_reads(cluster, topic, 3, first + dropped, first + dropped + dropped)


def test_kafka_python_commit_abort_and_retry(cluster: Cluster) -> None:
    topic = "txn-kp"
    create_topic(cluster, topic)
    producer = kafka_python_producer(cluster, "kp-commit-abort")
    first, dropped = values("commit", 30), values("abort", 20)
    producer.begin_transaction()
    for i, value in enumerate(first):
        producer.send(topic, value=value, partition=i % 3)
    producer.commit_transaction()
    producer.begin_transaction()
    for i, value in enumerate(dropped):
        producer.send(topic, value=value, partition=i % 3)
    producer.flush()
    producer.abort_transaction()
    producer.begin_transaction()
    for i, value in enumerate(dropped):
        producer.send(topic, value=value, partition=i % 3)
    producer.commit_transaction()
    producer.close()
    check_reads(cluster, topic, 3, first + dropped, first + dropped + dropped)


# --- consume-transform-produce ------------------------------------------------------------------


def fill(cluster: Cluster, topic: str, count: int) -> None:
    producer = CkProducer({"bootstrap.servers": cluster.bootstrap})
    for value in values("in", count):
        producer.produce(topic, value=value, partition=0)
    assert producer.flush(TIMEOUT) == 0
    producer.close()


def committed_offset(cluster: Cluster, group: str, topic: str) -> int:
    consumer = CkConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    (found,) = consumer.committed([CkTopicPartition(topic, 0)], TIMEOUT)
    consumer.close()
    return int(found.offset)


def committed_once_marked(cluster: Cluster, group: str, topic: str, offset: int) -> None:
    """A transaction's offsets count once its commit marker reaches the group's partition of
    __consumer_offsets; the coordinator writes markers after answering EndTxn (as Kafka's does)."""
    eventually(lambda: committed_offset(cluster, group, topic) == offset, TIMEOUT, f"{group}'s offset {offset}")


def test_confluent_kafka_consume_transform_produce(cluster: Cluster) -> None:
    source, sink, group = "ctp-ck-in", "ctp-ck-out", "ctp-ck"
    create_topic(cluster, source, 1)
    create_topic(cluster, sink, 1)
    fill(cluster, source, 40)
    consumer = CkConsumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([CkTopicPartition(source, 0)])
    producer = confluent_producer(cluster, "ctp-ck-app")

    def step(commit: bool) -> None:
        messages = consumer.consume(20, TIMEOUT)
        assert len(messages) == 20 and all(m.error() is None for m in messages)
        producer.begin_transaction()
        for m in messages:
            producer.produce(sink, value=b"out:" + m.value(), partition=0)
        position = consumer.position([CkTopicPartition(source, 0)])
        producer.send_offsets_to_transaction(position, consumer.consumer_group_metadata(), TIMEOUT)
        if commit:
            producer.commit_transaction(TIMEOUT)
        else:
            producer.flush(TIMEOUT)
            producer.abort_transaction(TIMEOUT)

    step(commit=True)
    committed_once_marked(cluster, group, source, 20)
    step(commit=False)  # the output of records 20-39 and their offsets go together
    assert committed_offset(cluster, group, source) == 20
    consumer.seek(CkTopicPartition(source, 0, 20))  # where the committed offsets say to resume
    step(commit=True)
    committed_once_marked(cluster, group, source, 40)
    consumer.close()
    expected = [b"out:" + v for v in values("in", 40)]
    assert confluent_read(cluster.bootstrap, sink, 1, "read_committed") == expected  # once each, in order
    assert len(confluent_read(cluster.bootstrap, sink, 1, "read_uncommitted")) == 60


def test_kafka_python_consume_transform_produce(cluster: Cluster) -> None:
    source, sink, group = "ctp-kp-in", "ctp-kp-out", "ctp-kp"
    create_topic(cluster, source, 1)
    create_topic(cluster, sink, 1)
    fill(cluster, source, 40)
    tp = KpTopicPartition(source, 0)
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap,
        group_id=group,
        isolation_level="read_committed",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_poll_records=20,
    )
    consumer.assign([tp])
    producer = kafka_python_producer(cluster, "ctp-kp-app")

    def step(commit: bool) -> None:
        records = []
        deadline = time.monotonic() + TIMEOUT
        while len(records) < 20:
            assert time.monotonic() < deadline
            records += consumer.poll(timeout_ms=500, max_records=20 - len(records)).get(tp, [])
        producer.begin_transaction()
        for r in records:
            producer.send(sink, value=b"out:" + r.value, partition=0)
        offsets = {tp: KpOffsetAndMetadata(consumer.position(tp), "", -1)}
        producer.send_offsets_to_transaction(offsets, group)
        if commit:
            producer.commit_transaction()
        else:
            producer.flush()
            producer.abort_transaction()

    step(commit=True)
    committed_once_marked(cluster, group, source, 20)
    step(commit=False)
    assert committed_offset(cluster, group, source) == 20
    consumer.seek(tp, 20)
    step(commit=True)
    committed_once_marked(cluster, group, source, 40)
    consumer.close()
    producer.close()
    expected = [b"out:" + v for v in values("in", 40)]
    assert kafka_python_read(cluster.bootstrap, sink, 1, "read_committed") == expected
    assert len(kafka_python_read(cluster.bootstrap, sink, 1, "read_uncommitted")) == 60


# --- zombies and timeouts ------------------------------------------------------------------------


def test_confluent_kafka_zombie_is_fenced(cluster: Cluster) -> None:
    topic = "txn-ck-zombie"
    create_topic(cluster, topic)
    zombie = confluent_producer(cluster, "ck-zombie")
    zombie.begin_transaction()
    for i, value in enumerate(values("zombie", 15)):
        zombie.produce(topic, value=value, partition=i % 3)
    zombie.flush(TIMEOUT)
    # A new instance with the same transactional id: the zombie's open transaction is aborted.
    successor = confluent_producer(cluster, "ck-zombie")
    with pytest.raises(KafkaException) as fenced:
        zombie.commit_transaction(TIMEOUT)
    assert fenced.value.args[0].fatal() and fenced.value.args[0].code() == CkKafkaError._FENCED, fenced.value
    successor.begin_transaction()
    for i, value in enumerate(values("successor", 15)):
        successor.produce(topic, value=value, partition=i % 3)
    successor.commit_transaction(TIMEOUT)
    check_reads(cluster, topic, 3, values("successor", 15), values("zombie", 15) + values("successor", 15))


def test_kafka_python_zombie_is_fenced(cluster: Cluster) -> None:
    topic = "txn-kp-zombie"
    create_topic(cluster, topic)
    zombie = kafka_python_producer(cluster, "kp-zombie")
    zombie.begin_transaction()
    for i, value in enumerate(values("zombie", 15)):
        zombie.send(topic, value=value, partition=i % 3)
    zombie.flush()
    successor = kafka_python_producer(cluster, "kp-zombie")
    with pytest.raises(ProducerFencedError):
        zombie.commit_transaction()
    zombie.close(timeout=5)
    successor.begin_transaction()
    for i, value in enumerate(values("successor", 15)):
        successor.send(topic, value=value, partition=i % 3)
    successor.commit_transaction()
    successor.close()
    check_reads(cluster, topic, 3, values("successor", 15), values("zombie", 15) + values("successor", 15))


@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python"])
def test_a_timed_out_transaction_is_aborted_by_the_coordinator(cluster: Cluster, client: str) -> None:
    topic = f"txn-timeout-{client}"
    create_topic(cluster, topic)
    txn_id = f"timeout-{client}"
    if client == "confluent-kafka":
        stale = confluent_producer(cluster, txn_id, **{"transaction.timeout.ms": 1000})
        stale.begin_transaction()
        for i, value in enumerate(values("late", 12)):
            stale.produce(topic, value=value, partition=i % 3)
        stale.flush(TIMEOUT)
        time.sleep(3)  # past transaction.timeout.ms: the coordinator aborts and fences
        with pytest.raises(KafkaException) as aborted:
            stale.commit_transaction(TIMEOUT)
        # As Kafka 2.5+: the coordinator bumped the epoch to abort, which fences this instance.
        assert aborted.value.args[0].code() == CkKafkaError._FENCED, aborted.value
        fresh = confluent_producer(cluster, txn_id)
        fresh.begin_transaction()
        for i, value in enumerate(values("fresh", 12)):
            fresh.produce(topic, value=value, partition=i % 3)
        fresh.commit_transaction(TIMEOUT)
    else:
        kp_stale = kafka_python_producer(cluster, txn_id, transaction_timeout_ms=1000)
        kp_stale.begin_transaction()
        for i, value in enumerate(values("late", 12)):
            kp_stale.send(topic, value=value, partition=i % 3)
        kp_stale.flush()
        time.sleep(3)
        with pytest.raises(ProducerFencedError):
            kp_stale.commit_transaction()
        kp_stale.close(timeout=5)
        kp_fresh = kafka_python_producer(cluster, txn_id)
        kp_fresh.begin_transaction()
        for i, value in enumerate(values("fresh", 12)):
            kp_fresh.send(topic, value=value, partition=i % 3)
        kp_fresh.commit_transaction()
        kp_fresh.close()
    check_reads(cluster, topic, 3, values("fresh", 12), values("late", 12) + values("fresh", 12))


# --- the operator's view: tributary transactions list|describe -------------------------------------


def test_transactions_list_and_describe(cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    topic = "txn-cli"
    create_topic(cluster, topic)
    done = confluent_producer(cluster, "cli-done")
    done.begin_transaction()
    done.produce(topic, value=b"x", partition=0)
    done.commit_transaction(TIMEOUT)
    hung = confluent_producer(cluster, "cli-hung", **{"transaction.timeout.ms": 120_000})
    hung.begin_transaction()
    hung.produce(topic, value=b"y", partition=1)
    hung.produce(topic, value=b"z", partition=2)
    hung.flush(TIMEOUT)
    time.sleep(1)

    def run(*argv: str) -> Result:
        return tributary(capsys, "transactions", "--bootstrap", cluster.bootstrap, *argv)

    listed = {t["transactional_id"]: t for t in run("--output", "json", "list").json()}
    assert listed["cli-done"]["state"] == "CompleteCommit"
    assert listed["cli-hung"]["state"] == "Ongoing"
    ongoing = run("--output", "json", "list", "--state", "Ongoing").json()
    assert "cli-hung" in {t["transactional_id"] for t in ongoing}
    assert "cli-done" not in {t["transactional_id"] for t in ongoing}
    hung_long = {t["transactional_id"] for t in run("--output", "json", "list", "--duration-filter", "500").json()}
    assert "cli-hung" in hung_long and "cli-done" not in hung_long
    (described,) = run("--output", "json", "describe", "cli-hung").json()
    assert described["state"] == "Ongoing" and described["timeout_ms"] == 120_000
    assert described["partitions"] == [{"topic": topic, "partition": 1}, {"topic": topic, "partition": 2}]
    assert described["duration_ms"] >= 1000
    table = run("describe", "cli-hung", "cli-done")
    assert table.status == 0, table.err
    assert f"{topic}:1,2" in table.out and "CompleteCommit" in table.out
    assert "cli-hung" in run("list").out
    assert_one_line_error(run("describe", "nobody"), 1, "no such transactional id: nobody")
    hung.abort_transaction(TIMEOUT)


# --- what the broker answers, field by field ------------------------------------------------------


def fetch(cluster: Cluster, topic: str, isolation: int) -> FetchResponse.PartitionData:
    leader = cluster.broker(wait_for_leaders(cluster.brokers, topic, 1)[0])
    body = FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=isolation,
        topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
            FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])],
    )  # fmt: skip
    (answer,) = request(leader.address, body, 11).responses
    (data,) = answer.partitions
    assert data.error_code == 0, data
    return data


def latest(cluster: Cluster, topic: str, isolation: int) -> int:
    leader = cluster.broker(wait_for_leaders(cluster.brokers, topic, 1)[0])
    body = ListOffsetsRequest(
        replica_id=-1, isolation_level=isolation,
        topics=[ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
            ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])],
    )  # fmt: skip
    (answer,) = request(leader.address, body, 5).topics
    (found,) = answer.partitions
    assert found.error_code == 0, found
    return int(found.offset)


def last_offsets(data: FetchResponse.PartitionData) -> list[int]:
    return [header.last_offset for _, header in iter_batches(data.records or b"")]


def test_fetch_and_list_offsets_by_isolation_level(cluster: Cluster) -> None:
    topic = "txn-wire"
    create_topic(cluster, topic, 1)
    producer = confluent_producer(cluster, "wire")
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, value=b"c%d" % i, partition=0)
    producer.commit_transaction(TIMEOUT)  # offsets 0-4, the commit marker at 5
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, value=b"a%d" % i, partition=0)
    producer.flush(TIMEOUT)  # offsets 6-8, open
    committed, everything = fetch(cluster, topic, 1), fetch(cluster, topic, 0)
    for data in (committed, everything):
        assert (data.high_watermark, data.last_stable_offset) == (9, 6)
    assert max(last_offsets(committed)) == 5  # up to the last stable offset, marker included
    assert committed.aborted_transactions == []
    assert max(last_offsets(everything)) == 8
    assert everything.aborted_transactions is None  # read_uncommitted: no list (null, as Kafka)
    assert (latest(cluster, topic, 1), latest(cluster, topic, 0)) == (6, 9)
    producer.abort_transaction(TIMEOUT)  # the abort marker at 9
    # EndTxn is answered once the abort is decided; the coordinator writes the markers after
    # (WriteTxnMarkers, as Kafka's does), so the marker reaches the partition a moment later.
    committed = eventually(
        lambda: (f := fetch(cluster, topic, 1)).high_watermark == 10 and f, TIMEOUT, "the abort marker at 9"
    )
    assert (committed.high_watermark, committed.last_stable_offset) == (10, 10)
    (aborted,) = committed.aborted_transactions or []
    assert aborted.first_offset == 6
    assert aborted.producer_id == [h for _, h in iter_batches(committed.records or b"")][-1].producer_id
    assert latest(cluster, topic, 1) == 10
