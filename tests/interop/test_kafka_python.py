"""kafka-python's KafkaProducer and KafkaConsumer, with their default settings, against a real
three-broker cluster. Its producer is idempotent by default (acks=all, InitProducerId)."""

from __future__ import annotations

import time
from collections import defaultdict

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.interop.wire import broker_by_id, create_topics, stored_batches, wait_for_topic
from tributary.protocol.murmur2 import partition_for_key
from tributary.testing.cluster import Cluster

TOPIC = "kp-three"
PARTITIONS = 3
MESSAGES = 3_000
TIMEOUT = 30.0


def test_default_producer_and_consumer(broker_cluster: Cluster) -> None:
    create_topics(broker_cluster, {TOPIC: PARTITIONS})
    leaders = wait_for_topic(broker_cluster, TOPIC, PARTITIONS)
    sent = [(b"key-%d" % (i % 97), b"value-%d" % i) for i in range(MESSAGES)]

    producer = KafkaProducer(bootstrap_servers=broker_cluster.bootstrap)
    try:
        futures = [producer.send(TOPIC, key=key, value=value) for key, value in sent]
        producer.flush(timeout=TIMEOUT)
        metadata = [future.get(timeout=TIMEOUT) for future in futures]
    finally:
        producer.close(timeout=TIMEOUT)

    produced: dict[int, list[tuple[int, bytes, bytes]]] = defaultdict(list)
    for (key, value), record in zip(sent, metadata, strict=True):
        assert record.topic == TOPIC
        assert record.partition == partition_for_key(key, PARTITIONS)
        produced[record.partition].append((record.offset, key, value))
    for partition, records in produced.items():
        assert [offset for offset, _, _ in records] == list(range(len(records))), f"partition {partition}"
    # Idempotence was on by default: every batch carries the producer's id and its sequence.
    for partition, leader in leaders.items():
        headers = list(stored_batches(broker_by_id(broker_cluster, leader), TOPIC, partition, len(produced[partition])))
        assert len({h.producer_id for h in headers}) == 1
        assert headers[0].producer_id >= 0
        assert [h.base_sequence for h in headers] == [h.base_offset for h in headers]

    consumer = KafkaConsumer(bootstrap_servers=broker_cluster.bootstrap)
    consumed: dict[int, list[tuple[int, bytes, bytes]]] = defaultdict(list)
    try:
        partitions = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        consumer.assign(partitions)
        consumer.seek_to_beginning()
        deadline = time.monotonic() + TIMEOUT
        while sum(len(records) for records in consumed.values()) < MESSAGES:
            assert time.monotonic() < deadline, f"consumed {sum(map(len, consumed.values()))} of {MESSAGES}"
            for tp, records in consumer.poll(timeout_ms=500).items():
                consumed[tp.partition] += [(r.offset, r.key, r.value) for r in records]
        end_offsets = consumer.end_offsets(partitions)
        positions = {tp.partition: consumer.position(tp) for tp in partitions}
    finally:
        consumer.close()

    assert dict(consumed) == dict(produced)
    assert {tp.partition: offset for tp, offset in end_offsets.items()} == {
        p: len(records) for p, records in produced.items()
    }
    assert positions == {p: len(records) for p, records in produced.items()}
