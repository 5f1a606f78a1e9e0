"""aiokafka (the newest release, on asyncio) against a live cluster: an idempotent, compressed
producer, two consumers of one group that share the partitions, commit, and a third that resumes
where the group committed."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from confluent_kafka import TopicPartition as CKTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from tests.fixtures.brokers import module_cluster
from tests.interop.wire import wait_for_topic
from tributary.testing.cluster import Cluster
from tributary.testing.zookeeper import ZooKeeperServer

TIMEOUT = 60.0
PARTITIONS = 4
RECORDS = 400


@pytest.fixture(scope="module")
def cluster(zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    settings = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3"}
    yield from module_cluster(zookeeper_server, tmp_path_factory.mktemp("aiokafka"), settings)


async def _produce(bootstrap: str, topic: str) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, enable_idempotence=True, acks="all", compression_type="gzip", linger_ms=5
    )
    await producer.start()
    try:
        sent = [await producer.send(topic, key=b"k%d" % (i % 13), value=b"v-%04d" % i) for i in range(RECORDS)]
        await asyncio.gather(*sent)
    finally:
        await producer.stop()


async def _consume_in_a_group(bootstrap: str, topic: str, group: str) -> tuple[list[bytes], list[set[int]]]:
    """Two members of ``group`` read everything, each its own partitions, and commit."""
    members = [
        AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            client_id=f"member-{i}",
        )
        for i in range(2)
    ]
    for member in members:
        await member.start()
    seen: list[bytes] = []
    try:
        # Both have a share before either reads: no rebalance under the reads, so no record twice.
        async with asyncio.timeout(TIMEOUT):
            while (
                not all(member.assignment() for member in members)
                or sum(len(m.assignment()) for m in members) != PARTITIONS
            ):
                await asyncio.gather(*(m.getmany(timeout_ms=100) for m in members if not m.assignment()))
                await asyncio.sleep(0.1)
        assignments = [{tp.partition for tp in m.assignment()} for m in members]
        async with asyncio.timeout(TIMEOUT):
            while len(seen) < RECORDS:
                for member in members:
                    batches = await member.getmany(timeout_ms=200)
                    seen += [record.value for records in batches.values() for record in records]
                    await member.commit()
    finally:
        for member in members:
            await member.stop()
    return seen, assignments


async def _committed(bootstrap: str, topic: str, group: str) -> dict[int, int | None]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group)
    await consumer.start()
    try:
        return {p: await consumer.committed(TopicPartition(topic, p)) for p in range(PARTITIONS)}
    finally:
        await consumer.stop()


def test_aiokafka_produces_and_a_group_consumes_and_commits(cluster: Cluster) -> None:
    topic, group = f"aio-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 2)])[topic].result(TIMEOUT)
    wait_for_topic(cluster, topic, PARTITIONS)

    asyncio.run(_produce(cluster.bootstrap, topic))
    seen, assignments = asyncio.run(_consume_in_a_group(cluster.bootstrap, topic, group))

    assert sorted(seen) == sorted(b"v-%04d" % i for i in range(RECORDS))  # each once
    assert assignments[0] and assignments[1] and assignments[0].isdisjoint(assignments[1])
    # The group committed each partition's end, as a third consumer (and ListOffsets) sees it.
    committed = asyncio.run(_committed(cluster.bootstrap, topic, group))
    ends = admin.list_offsets({CKTopicPartition(topic, p): OffsetSpec.latest() for p in range(PARTITIONS)})
    assert committed == {tp.partition: future.result(TIMEOUT).offset for tp, future in ends.items()}
    assert sum(v or 0 for v in committed.values()) == RECORDS
