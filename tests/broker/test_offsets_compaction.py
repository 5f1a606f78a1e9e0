"""``__consumer_offsets`` compacted: a coordinator loading the compacted log (offset gaps,
rewritten batches, tombstones of deleted groups) finds the latest commit of every group and no
deleted group; a topic created without compaction is switched to it by the broker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CKTopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from tests.fixtures.brokers import module_cluster
from tests.fixtures.zookeeper import ZooKeeperServer
from tributary.client.blocking import BlockingFetcher
from tributary.testing.cluster import Cluster
from tributary.testing.polling import eventually

OFFSETS = "__consumer_offsets"
SETTINGS = {
    "log.cleaner.backoff.ms": "100",
    "offsets.topic.num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.segment.bytes": "8192",
}
TIMEOUT = 30.0


@pytest.fixture(scope="module")
def cluster(zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from module_cluster(zookeeper_server, tmp_path_factory.mktemp("offsets-compaction"), SETTINGS, size=1)


def _policy(admin: AdminClient, topic: str) -> str:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    value: str = admin.describe_configs([resource])[resource].result(TIMEOUT)["cleanup.policy"].value
    return value


def _committed(cluster: Cluster, group: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    try:
        got = consumer.committed([CKTopicPartition(topic, p) for p in range(3)], timeout=TIMEOUT)
        return {tp.partition: tp.offset for tp in got if tp.offset >= 0}
    finally:
        consumer.close()


def _offsets_records(cluster: Cluster) -> int:
    with BlockingFetcher(cluster.bootstrap) as fetcher:
        start, end = fetcher.offset_bounds(OFFSETS)[0]
        fetches = fetcher.fetch_range(OFFSETS, 0, start, end)
        return sum(1 for fetched in fetches for _ in fetched.iter_records(start, end))


def test_a_coordinator_loads_the_compacted_offsets_and_an_uncompacted_topic_is_switched(cluster: Cluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    # Made by hand before any group needed it, without compaction (as a tool might have).
    made = {"cleanup.policy": "delete", "segment.bytes": "8192"}
    admin.create_topics([NewTopic(OFFSETS, 1, 1, config=made)])[OFFSETS].result(TIMEOUT)
    admin.create_topics([NewTopic("orders", 3, 1)])["orders"].result(TIMEOUT)

    kept = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "billing", "enable.auto.commit": False})
    gone = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "audit", "enable.auto.commit": False})
    commits = 1500
    for i in range(commits):
        offsets = [CKTopicPartition("orders", p, i * 3 + p) for p in range(3)]
        kept.commit(offsets=offsets, asynchronous=False)
        if i < 100:
            gone.commit(offsets=offsets, asynchronous=False)
    kept.close()
    gone.close()
    # The broker switched the topic to compaction when a group first needed it.
    assert _policy(admin, OFFSETS) == "delete,compact"
    admin.delete_consumer_groups(["audit"], request_timeout=TIMEOUT)["audit"].result(TIMEOUT)  # tombstones

    compacted = eventually(
        lambda: n if (n := _offsets_records(cluster)) < commits else None, TIMEOUT, "__consumer_offsets compacted"
    )
    assert compacted < commits  # 4,600 records written

    cluster.restart()  # the coordinator loads the compacted log
    assert _committed(cluster, "billing", "orders") == {p: (commits - 1) * 3 + p for p in range(3)}
    assert _committed(cluster, "audit", "orders") == {}
    log = cluster.brokers[0].log_path.read_text()
    assert f"loaded {OFFSETS}-0 in" in log
