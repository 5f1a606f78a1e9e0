"""What the interop tests ask brokers directly, over our own protocol package: topic creation,
leaders, and the batches a broker stores (to see what a client actually sent)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import CreateTopicsRequest, FetchRequest
from tributary.protocol.records import BatchHeader, iter_batches
from tributary.testing.cluster import BrokerProcess, Cluster, wait_for_leaders
from tributary.testing.wire import WireConnection

TIMEOUT = 30.0


def create_topics(cluster: Cluster, topics: dict[str, int]) -> None:
    """Creates ``topics`` (name -> partition count) through the first broker."""
    request = CreateTopicsRequest(
        topics=[
            CreateTopicsRequest.CreatableTopic(name=name, num_partitions=count, replication_factor=1)
            for name, count in topics.items()
        ],
        timeout_ms=10_000,
    )
    with WireConnection(*cluster.brokers[0].address) as conn:
        created = conn.request(request, 4)
    assert {t.name: t.error_code for t in created.topics} == dict.fromkeys(topics, ErrorCode.NONE), created


def wait_for_topic(cluster: Cluster, topic: str, partitions: int) -> dict[int, int]:
    """partition -> leader, once every broker lists ``topic`` with the same live leaders."""
    return wait_for_leaders(cluster.brokers, topic, partitions)


def broker_by_id(cluster: Cluster, broker_id: int) -> BrokerProcess:
    return next(b for b in cluster.brokers if b.broker_id == broker_id)


def stored_batches(broker: BrokerProcess, topic: str, partition: int, end_offset: int) -> Iterator[BatchHeader]:
    """The headers of the batches ``broker`` stores for the partition, up to ``end_offset``."""
    for header, _ in stored_batch_bytes(broker, topic, partition, end_offset):
        yield header


def stored_batch_bytes(
    broker: BrokerProcess, topic: str, partition: int, end_offset: int
) -> Iterator[tuple[BatchHeader, bytes]]:
    """Each batch ``broker`` stores for the partition up to ``end_offset``: its header and its bytes."""
    offset = 0
    with WireConnection(*broker.address) as conn:
        while offset < end_offset:
            request = FetchRequest(
                max_wait_ms=0,
                topics=[
                    FetchRequest.FetchTopic(
                        topic=topic,
                        partitions=[
                            FetchRequest.FetchPartition(
                                partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20
                            )
                        ],
                    )
                ],
            )
            (data,) = conn.request(request, 11).responses[0].partitions
            assert data.error_code == ErrorCode.NONE, data
            buf = bytes(data.records or b"")
            assert buf, f"nothing served at offset {offset}, below {end_offset}"
            for pos, header in iter_batches(buf):
                yield header, buf[pos : pos + header.size]
                offset = header.next_offset


def read_from_beginning(
    bootstrap: str, topic: str, partitions: int, group: str, timeout: float = TIMEOUT
) -> tuple[dict[int, list[Any]], dict[int, tuple[int, int]]]:
    """Every message of every partition from its beginning to its end, through confluent-kafka
    (CRCs checked), and each partition's (low, high) watermarks once read."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError  # noqa: PLC0415 (a test extra)
    from confluent_kafka import TopicPartition as CKTopicPartition  # noqa: PLC0415

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "check.crcs": True,
        }
    )
    consumed: dict[int, list[Any]] = {p: [] for p in range(partitions)}
    try:
        consumer.assign([CKTopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"only partitions {sorted(at_end)} reached their end"
            message = consumer.poll(0.5)
            if message is None:
                continue
            if (error := message.error()) is not None:
                assert error.code() == KafkaError._PARTITION_EOF, error
                at_end.add(message.partition())
                continue
            at_end.discard(message.partition())
            consumed[message.partition()].append(message)
        watermarks = {
            p: consumer.get_watermark_offsets(CKTopicPartition(topic, p), timeout=10) for p in range(partitions)
        }
    finally:
        consumer.close()
    return consumed, watermarks
