"""The admin calls operators and libraries make, through unmodified admin clients: kafka-python's
KafkaAdminClient and confluent-kafka's AdminClient, each doing the same against a live cluster.

delete_records (DeleteRecords, and what consumers see afterwards), describe_configs of a broker
(its real configuration), create_partitions with a replica assignment (placed as asked; an
unknown broker refused by name), list offsets by MAX_TIMESTAMP (ListOffsets v7), and the cluster
and producers described.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as CKTopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic, OffsetSpec
from kafka import TopicPartition as KPTopicPartition
from kafka.admin import ConfigResource as KPConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.admin import NewPartitions as KPNewPartitions
from kafka.admin import OffsetSpec as KPOffsetSpec
from kafka.errors import InvalidReplicationAssignmentError

from tests.fixtures.brokers import module_cluster
from tests.interop.wire import read_from_beginning, wait_for_topic
from tributary.testing.cluster import Cluster
from tributary.testing.polling import eventually
from tributary.testing.zookeeper import ZooKeeperServer

TIMEOUT = 30.0
T0 = 1_700_000_000_000
#: Ten records; the largest timestamp is on offset 6.
STAMPS = [T0 + 10 * i for i in range(10)]
STAMPS[6] = T0 + 10_000


@pytest.fixture(scope="module")
def cluster(zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from module_cluster(
        zookeeper_server, tmp_path_factory.mktemp("admin-clients"), {"replica.fetch.wait.max.ms": "100"}
    )


@pytest.fixture
def kp_admin(cluster: Cluster) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=int(TIMEOUT * 1000))
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def ck_admin(cluster: Cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap})


def topic_with_records(cluster: Cluster, admin: AdminClient) -> str:
    """A topic of one partition, replicated on two brokers, holding ten records (acks=all)."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    admin.create_topics([NewTopic(name, 1, 2)])[name].result(TIMEOUT)
    wait_for_topic(cluster, name, 1)
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0, "enable.idempotence": True}
    )
    for i, stamp in enumerate(STAMPS):
        producer.produce(name, value=b"%d" % i, timestamp=stamp)
        producer.flush(TIMEOUT)  # one batch each: offsets keep their own timestamps
    assert producer.flush(TIMEOUT) == 0
    return name


def replicas_of(admin: AdminClient, topic: str) -> dict[int, list[int]]:
    described = admin.list_topics(topic, timeout=TIMEOUT).topics[topic]
    return {p.id: list(p.replicas) for p in described.partitions.values()}


def low_watermark_seen_by_a_consumer(cluster: Cluster, topic: str) -> tuple[int, list[bytes]]:
    consumed, watermarks = read_from_beginning(cluster.bootstrap, topic, 1, f"g-{uuid.uuid4().hex[:8]}")
    return watermarks[0][0], [m.value() for m in consumed[0]]


# --- kafka-python ----------------------------------------------------------------------------------


def test_kafka_python_admin(cluster: Cluster, kp_admin: KafkaAdminClient, ck_admin: AdminClient) -> None:
    # kafka-python infers the broker's release from its ApiVersions: Kafka 4.0 now (2.4 before).
    assert kp_admin.get_broker_version_data(cluster.brokers[0].broker_id).broker_version >= (4, 0)
    topic = topic_with_records(cluster, ck_admin)
    tp = KPTopicPartition(topic, 0)

    # ListOffsets by MAX_TIMESTAMP (KIP-734): the record stamped last, not the last record.
    newest = kp_admin.list_partition_offsets({tp: KPOffsetSpec.MAX_TIMESTAMP})[tp]
    assert (newest.offset, newest.timestamp) == (6, T0 + 10_000)

    # DeleteRecords: the low watermark moves, consumers start there.
    deleted = kp_admin.delete_records({tp: 4})
    assert _low_watermark(deleted[tp]) == 4
    assert low_watermark_seen_by_a_consumer(cluster, topic) == (4, [b"%d" % i for i in range(4, 10)])
    assert kp_admin.list_partition_offsets({tp: KPOffsetSpec.EARLIEST})[tp].offset == 4

    # DescribeConfigs of a broker: its own configuration, not only log defaults.
    broker = cluster.brokers[0]
    described = kp_admin.describe_configs(
        [KPConfigResource(ConfigResourceType.BROKER, str(broker.broker_id))], config_filter="all"
    )
    configs = _kp_configs(described, str(broker.broker_id))
    assert configs["listeners"] == f"PLAINTEXT://{broker.address[0]}:{broker.address[1]}"
    assert configs["log.dirs"] == str(broker.data_dir)
    assert configs["replica.fetch.wait.max.ms"] == "100"

    # CreatePartitions with an assignment: placed as asked; an unknown broker refused by name.
    with pytest.raises(InvalidReplicationAssignmentError, match="42"):
        kp_admin.create_partitions({topic: KPNewPartitions(total_count=2, new_assignments=[[1, 42]])})
    kp_admin.create_partitions({topic: KPNewPartitions(total_count=3, new_assignments=[[2, 3], [3, 1]])})
    assert _eventually_replicas(ck_admin, topic, 3) == {0: replicas_of(ck_admin, topic)[0], 1: [2, 3], 2: [3, 1]}

    # DescribeProducers: the idempotent producer (confluent-kafka's default) that wrote the records.
    (producer,) = kp_admin.describe_producers([tp])[tp].active_producers
    assert producer.producer_id >= 0 and producer.last_sequence == 9
    assert producer.last_timestamp == STAMPS[9]

    cluster_view = kp_admin.describe_cluster()
    assert sorted(b["broker_id"] for b in cluster_view["brokers"]) == [b.broker_id for b in cluster.brokers]


# --- confluent-kafka -------------------------------------------------------------------------------


def test_confluent_kafka_admin(cluster: Cluster, ck_admin: AdminClient) -> None:
    topic = topic_with_records(cluster, ck_admin)
    tp = CKTopicPartition(topic, 0)

    newest = ck_admin.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(TIMEOUT)
    assert (newest.offset, newest.timestamp) == (6, T0 + 10_000)

    (future,) = ck_admin.delete_records([CKTopicPartition(topic, 0, 7)]).values()
    assert future.result(TIMEOUT).low_watermark == 7
    assert low_watermark_seen_by_a_consumer(cluster, topic) == (7, [b"7", b"8", b"9"])
    assert ck_admin.list_offsets({tp: OffsetSpec.earliest()})[tp].result(TIMEOUT).offset == 7

    broker = cluster.brokers[1]
    resource = ConfigResource(ConfigResource.Type.BROKER, str(broker.broker_id))
    configs = ck_admin.describe_configs([resource])[resource].result(TIMEOUT)
    assert configs["advertised.listeners"].value == f"PLAINTEXT://{broker.address[0]}:{broker.address[1]}"
    assert configs["log.dirs"].value == str(broker.data_dir)
    assert configs["broker.id"].value == str(broker.broker_id)
    assert configs["replica.fetch.wait.max.ms"].value == "100"
    assert configs["replica.fetch.wait.max.ms"].source == ConfigResource.Type.BROKER.value  # STATIC_BROKER_CONFIG
    assert configs["num.partitions"].is_default

    refused = ck_admin.create_partitions([NewPartitions(topic, 2, replica_assignment=[[3, 42]])])[topic]
    with pytest.raises(Exception, match="42"):
        refused.result(TIMEOUT)
    ck_admin.create_partitions([NewPartitions(topic, 3, replica_assignment=[[1, 3], [2, 1]])])[topic].result(TIMEOUT)
    assert _eventually_replicas(ck_admin, topic, 3) == {0: replicas_of(ck_admin, topic)[0], 1: [1, 3], 2: [2, 1]}

    described = ck_admin.describe_cluster().result(TIMEOUT)
    assert sorted(n.id for n in described.nodes) == [b.broker_id for b in cluster.brokers]


# --- helpers -----------------------------------------------------------------------------------------


def _low_watermark(result: Any) -> int:
    """kafka-python answers a low watermark, or a dict holding one, depending on the release."""
    if isinstance(result, dict):
        return int(result["low_watermark"])
    return int(getattr(result, "low_watermark", result))


def _kp_configs(described: Any, broker: str) -> dict[str, Any]:
    """name -> value from kafka-python's answer: {resource type: {resource name: {key: data}}}."""
    (by_name,) = (named for named in described.values() if broker in named)
    return {key: data["value"] if isinstance(data, dict) else data for key, data in by_name[broker].items()}


def _eventually_replicas(admin: AdminClient, topic: str, partitions: int) -> dict[int, list[int]]:
    def probe() -> dict[int, list[int]] | None:
        found = replicas_of(admin, topic)
        return found if len(found) == partitions else None

    return eventually(probe, TIMEOUT, f"{topic} to have {partitions} partitions")
