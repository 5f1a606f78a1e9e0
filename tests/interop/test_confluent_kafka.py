"""confluent-kafka (librdkafka) against a real three-broker cluster: admin, idempotent zstd
producer with the Java client's partitioner, and an assigning consumer."""

from __future__ import annotations

from collections import Counter, defaultdict

from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.interop.wire import broker_by_id, read_from_beginning, stored_batches, wait_for_topic
from tributary.protocol.compression import Compression
from tributary.protocol.murmur2 import partition_for_key
from tributary.testing.cluster import Cluster

TOPIC = "ck-six"
PARTITIONS = 6
MESSAGES = 6_000
KEYS = 600
TIMEOUT = 30.0


def create_topic(cluster: Cluster) -> dict[int, int]:
    """Creates the topic with the AdminClient; returns partition -> leader from its metadata."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)])
    futures[TOPIC].result(timeout=TIMEOUT)
    expected = wait_for_topic(cluster, TOPIC, PARTITIONS)
    metadata = admin.list_topics(topic=TOPIC, timeout=TIMEOUT)
    topic = metadata.topics[TOPIC]
    assert topic.error is None
    assert {b.id: (b.host, b.port) for b in metadata.brokers.values()} == {
        b.broker_id: b.address for b in cluster.brokers
    }
    leaders = {p.id: p.leader for p in topic.partitions.values()}
    assert leaders == expected
    return leaders


def produce(bootstrap: str) -> dict[int, list[tuple[int, bytes, bytes]]]:
    """Produces MESSAGES keyed records; returns partition -> [(offset, key, value)] in produce order."""
    delivered: dict[int, list[tuple[int, bytes, bytes]]] = defaultdict(list)
    failures: list[str] = []

    def on_delivery(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            failures.append(f"{message.key()!r}: {error}")
            return
        delivered[message.partition()].append((message.offset(), message.key(), message.value()))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.type": "zstd",
            "acks": "all",
            "enable.idempotence": True,
            "partitioner": "murmur2_random",
            "linger.ms": 5,
            "message.timeout.ms": int(TIMEOUT * 1000),
        }
    )
    try:
        for i in range(MESSAGES):
            producer.produce(TOPIC, key=b"key-%d" % (i % KEYS), value=b"value-%d" % i, on_delivery=on_delivery)
            producer.poll(0)
        assert producer.flush(TIMEOUT) == 0, "messages still queued after the flush timeout"
    finally:
        producer.purge()
        producer.close()
    assert failures == []
    return dict(delivered)


def consume(bootstrap: str) -> dict[int, list[tuple[int, bytes, bytes]]]:
    """Reads every partition from the beginning to its end; partition -> [(offset, key, value)]."""
    consumed, watermarks = read_from_beginning(bootstrap, TOPIC, PARTITIONS, "ck-interop")
    for partition, (low, high) in watermarks.items():
        assert (low, high) == (0, len(consumed[partition])), f"partition {partition}"
    return {p: [(m.offset(), m.key(), m.value()) for m in messages] for p, messages in consumed.items()}


def test_idempotent_zstd_producer_and_assigning_consumer(broker_cluster: Cluster) -> None:
    leaders = create_topic(broker_cluster)
    assert sorted(leaders) == list(range(PARTITIONS))
    # Round-robin placement: every broker leads two of the six partitions.
    assert Counter(leaders.values()) == {1: 2, 2: 2, 3: 2}

    delivered = produce(broker_cluster.bootstrap)
    assert sum(len(records) for records in delivered.values()) == MESSAGES
    for partition, records in delivered.items():
        # The Java client's partitioner: each key on murmur2(key) mod 6.
        assert {partition_for_key(key, PARTITIONS) for _, key, _ in records} == {partition}
        # Delivered in produce order, offsets dense from 0: no gap, no duplicate.
        assert [offset for offset, _, _ in records] == list(range(len(records)))
        # ... and in the order they were produced.
        sequence = [int(value.removeprefix(b"value-")) for _, _, value in records]
        assert sequence == sorted(sequence)
    values = [value for records in delivered.values() for _, _, value in records]
    assert sorted(values) == sorted(b"value-%d" % i for i in range(MESSAGES))

    consumed = consume(broker_cluster.bootstrap)
    assert consumed == delivered

    for partition, leader in leaders.items():
        headers = list(
            stored_batches(broker_by_id(broker_cluster, leader), TOPIC, partition, len(delivered[partition]))
        )
        assert {h.compression for h in headers} == {Compression.ZSTD}
        # One idempotent producer: one producer id, sequences continuing batch after batch.
        assert len({h.producer_id for h in headers}) == 1
        assert headers[0].producer_id >= 0
        assert [h.base_sequence for h in headers] == [h.base_offset for h in headers]
