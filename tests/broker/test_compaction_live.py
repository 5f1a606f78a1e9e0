"""Compaction in a running broker, seen by real clients: a compacted topic ends with the latest
value of each key at the offset it was produced at, tombstones stay readable for
delete.retention.ms and then go, a consumer reading while the cleaner works sees a consistent
log, and compaction can be switched on for a topic that exists (AlterConfigs, APPEND).

The cleaner runs in its worker processes, every 100 ms when a log is due; topics here have
small segments and a low min.cleanable.dirty.ratio so that they are due at once.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator, Sequence

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from tests.fixtures.brokers import module_cluster
from tests.fixtures.zookeeper import ZooKeeperServer
from tributary.client.blocking import BlockingFetcher
from tributary.testing.cluster import Cluster
from tributary.testing.polling import eventually

TIMEOUT = 30.0
SETTINGS = {"log.cleaner.backoff.ms": "100"}
COMPACTED = {"cleanup.policy": "compact", "segment.bytes": "16384", "min.cleanable.dirty.ratio": "0.01"}

Produced = dict[int, tuple[bytes, bytes | None]]
Records = list[tuple[int, bytes | None, bytes | None]]


@pytest.fixture(scope="module")
def cluster(zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from module_cluster(zookeeper_server, tmp_path_factory.mktemp("compaction"), SETTINGS, size=1)


def new_topic(cluster: Cluster, configs: dict[str, str]) -> str:
    name = f"compacted-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(name, 1, 1, config=configs)])[name].result(TIMEOUT)
    return name


def produce(cluster: Cluster, topic: str, pairs: Sequence[tuple[bytes, bytes | None]]) -> Produced:
    """Produces ``pairs`` in order; what each offset got."""
    produced: Produced = {}

    def delivered(error: KafkaError | None, message: object) -> None:
        assert error is None, error
        produced[message.offset()] = (message.key(), message.value())  # type: ignore[attr-defined]

    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap, "compression.type": "zstd", "linger.ms": 5, "batch.size": 4096}
    )
    for key, value in pairs:
        producer.produce(topic, key=key, value=value, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(TIMEOUT) == 0
    return produced


def read(cluster: Cluster, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record a reader from the log start gets now."""
    out: list[tuple[int, bytes | None, bytes | None]] = []
    with BlockingFetcher(cluster.bootstrap) as fetcher:
        start, end = fetcher.offset_bounds(topic)[0]
        if start < end:
            for fetched in fetcher.fetch_range(topic, 0, start, end):
                out.extend((r.offset, r.key, r.value) for r in fetched.iter_records(start, end))
    return out


def latest(records: list[tuple[int, bytes | None, bytes | None]]) -> dict[bytes | None, bytes | None]:
    final: dict[bytes | None, bytes | None] = {}
    for _, key, value in records:
        final[key] = value
    return {k: v for k, v in final.items() if v is not None}


def check_faithful(records: list[tuple[int, bytes | None, bytes | None]], produced: Produced) -> None:
    offsets = [offset for offset, _, _ in records]
    assert offsets == sorted(set(offsets))
    for offset, key, value in records:
        assert produced[offset] == (key, value), offset


def test_a_compacted_topic_ends_with_the_latest_value_of_each_key(cluster: Cluster) -> None:
    topic = new_topic(cluster, COMPACTED)
    pairs: list[tuple[bytes, bytes | None]] = [(b"key-%03d" % (i % 200), b"value-%06d" % i) for i in range(20_000)]
    pairs += [(b"key-%03d" % k, None) for k in range(0, 200, 10)]  # 20 keys deleted
    produced = produce(cluster, topic, pairs)
    model = {k: v for k, v in dict(pairs).items() if v is not None}
    assert len(model) == 180
    # Compacted: little is left but the active segment.
    compacted = eventually(
        lambda: r if len(r := read(cluster, topic)) < 5000 else None, TIMEOUT, "the topic to be compacted"
    )
    check_faithful(compacted, produced)
    assert latest(compacted) == model
    end = max(produced) + 1
    with BlockingFetcher(cluster.bootstrap) as fetcher:
        assert fetcher.offset_bounds(topic)[0] == (0, end)  # offsets are never reassigned


def test_tombstones_stay_readable_for_delete_retention_ms_then_go(cluster: Cluster) -> None:
    retention_ms = 5000
    topic = new_topic(cluster, {**COMPACTED, "delete.retention.ms": str(retention_ms)})
    pairs: list[tuple[bytes, bytes | None]] = [(b"doomed-%d" % i, b"v") for i in range(10)]
    pairs += [(b"doomed-%d" % i, None) for i in range(10)]
    pairs += [(b"filler-%d" % (i % 50), os.urandom(200)) for i in range(400)]  # rolls the segments past them
    produced = produce(cluster, topic, pairs)
    produced_at = time.monotonic()

    def without(pred: Callable[[bytes, bytes | None], bool]) -> Callable[[], Records | None]:
        def probe() -> Records | None:
            records = read(cluster, topic)
            return None if any(k is not None and pred(k, v) for _, k, v in records) else records

        return probe

    first = eventually(
        without(lambda _k, v: v == b"v"), TIMEOUT, "the first clean (the values before the tombstones gone)"
    )
    check_faithful(first, produced)
    if time.monotonic() - produced_at < retention_ms / 1000:
        # Read within delete.retention.ms of the clean that first kept them: the deletes are there.
        assert sum(1 for _, k, v in first if k is not None and k.startswith(b"doomed") and v is None) == 10
    final = eventually(
        without(lambda k, _v: k.startswith(b"doomed")), TIMEOUT, "the tombstones to go once delete.retention.ms passed"
    )
    check_faithful(final, produced)
    assert time.monotonic() - produced_at >= retention_ms / 1000


def test_a_consumer_reading_while_the_cleaner_works_sees_a_consistent_log(cluster: Cluster) -> None:
    topic = new_topic(cluster, COMPACTED)
    produced: Produced = {}
    pairs: list[tuple[bytes, bytes | None]] = []
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": f"reader-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "max.partition.fetch.bytes": 2048,  # many small fetches, across the cleaner's swaps
            "fetch.max.bytes": 2048,
            "message.max.bytes": 2048,
            # Little read ahead: the reader lags behind the producer, where the cleaner works.
            "queued.min.messages": 1,
            "queued.max.messages.kbytes": 1,
        }
    )
    consumer.subscribe([topic])
    seen: list[tuple[int, bytes | None, bytes | None]] = []
    try:
        for round_ in range(8):
            more = [(b"k%02d" % (i % 40), b"r%d-%d" % (round_, i)) for i in range(2000)]
            pairs += more
            produced.update(produce(cluster, topic, more))
            for _ in range(300):  # read a little between rounds: the cleaner runs meanwhile
                message = consumer.poll(0.01)
                if message is not None and message.error() is None:
                    seen.append((message.offset(), message.key(), message.value()))
        end = max(produced) + 1
        deadline = time.monotonic() + TIMEOUT
        while (not seen or seen[-1][0] < end - 1) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.append((message.offset(), message.key(), message.value()))
    finally:
        consumer.close()
    assert seen and seen[-1][0] == end - 1
    # The cleaner removed records ahead of the reader while it read: it read during compaction.
    assert len(seen) < len(produced)
    check_faithful(seen, produced)
    assert latest(seen) == {k: v for k, v in dict(pairs).items() if v is not None}


def test_compaction_switched_on_for_an_existing_topic(cluster: Cluster) -> None:
    topic = new_topic(cluster, {"segment.bytes": "16384", "min.cleanable.dirty.ratio": "0.01"})
    pairs = [(b"key-%d" % (i % 20), b"value-%05d" % i) for i in range(5000)]
    produced = produce(cluster, topic, pairs)
    time.sleep(0.5)
    assert len(read(cluster, topic)) == 5000  # cleanup.policy=delete: nothing is compacted
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)],
    )
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT)
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
    entries = next(iter(described.values())).result(TIMEOUT)
    assert entries["cleanup.policy"].value == "delete,compact"
    compacted = eventually(lambda: r if len(r := read(cluster, topic)) < 2000 else None, TIMEOUT, "compaction")
    check_faithful(compacted, produced)
    assert latest(compacted) == dict(pairs)
