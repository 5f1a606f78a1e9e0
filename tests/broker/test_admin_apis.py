"""The admin APIs the topics and groups commands need (CreatePartitions,
DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, DeleteGroups,
DescribeLogDirs), driven by unmodified clients: confluent-kafka's (librdkafka)
AdminClient and kafka-python's KafkaAdminClient, on a live three-broker cluster.

Each test checks what the cluster does afterwards, not only the response:
partitions appear in Metadata with leaders and take records, configs land in
ZooKeeper (``/config/topics/<t>``, as Kafka stores them) and change how the logs
behave, deleted groups lose their committed offsets.
"""

from __future__ import annotations

import json
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as CKTopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)
from kafka import TopicPartition as KPTopicPartition
from kafka.admin import ConfigResource as KPConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.errors import GroupSubscribedToTopicError, InvalidPartitionsError, NoError
from kazoo.client import KazooClient

from tests.fixtures.brokers import module_cluster
from tests.fixtures.zookeeper import ZooKeeperServer
from tributary.testing.cluster import Cluster, wait_for_leaders
from tributary.testing.polling import eventually

TIMEOUT = 30.0
SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "3",
    # Retention runs often, so a changed retention shows within the test.
    "log.retention.check.interval.ms": "200",
}
T = TypeVar("T")


@pytest.fixture(scope="module")
def cluster(zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from module_cluster(zookeeper_server, tmp_path_factory.mktemp("admin-apis"), SETTINGS)


@pytest.fixture
def admin(cluster: Cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap})


@pytest.fixture
def kp_admin(cluster: Cluster) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=int(TIMEOUT * 1000))
    try:
        yield client
    finally:
        client.close()


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = TIMEOUT) -> T:
    return eventually(probe, timeout, what)


def new_topic(admin: AdminClient, partitions: int, configs: dict[str, str] | None = None) -> str:
    name = f"t-{uuid.uuid4().hex[:10]}"
    admin.create_topics([NewTopic(name, partitions, config=configs or {})])[name].result(TIMEOUT)
    return name


def partition_leaders(admin: AdminClient, topic: str) -> dict[int, int]:
    meta = admin.list_topics(topic, timeout=TIMEOUT).topics[topic]
    return {p.id: p.leader for p in meta.partitions.values()}


def zk_config(cluster: Cluster, topic: str) -> dict[str, str]:
    client = KazooClient(hosts=cluster.brokers[0].zookeeper, timeout=5.0)
    client.start(timeout=10)
    try:
        data, _ = client.get(f"/config/topics/{topic}")
    finally:
        client.stop()
        client.close()
    config: dict[str, str] = json.loads(data)["config"]
    return config


def produce(cluster: Cluster, topic: str, partition: int, count: int, size: int = 100) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    for i in range(count):
        producer.produce(topic, value=b"x" * size, key=str(i).encode(), partition=partition)
        producer.flush(TIMEOUT)  # one batch per record: several segments when segment.bytes is small
    assert producer.flush(TIMEOUT) == 0


def watermarks(cluster: Cluster, topic: str, partition: int) -> tuple[int, int]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "watermarks"})
    try:
        low, high = consumer.get_watermark_offsets(CKTopicPartition(topic, partition), timeout=TIMEOUT)
        return int(low), int(high)
    finally:
        consumer.close()


def described(admin: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries: dict[str, ConfigEntry] = admin.describe_configs([resource])[resource].result(TIMEOUT)
    return entries


# --- CreatePartitions ----------------------------------------------------------------------------


def test_confluent_create_partitions_grows_the_topic_and_new_partitions_take_records(
    cluster: Cluster, admin: AdminClient
) -> None:
    topic = new_topic(admin, 2)
    admin.create_partitions([NewPartitions(topic, 5)])[topic].result(TIMEOUT)

    leaders = partition_leaders(admin, topic)
    assert sorted(leaders) == [0, 1, 2, 3, 4]
    assert all(leader in (1, 2, 3) for leader in leaders.values())
    # Every broker's metadata comes to show the new count, not only the one that was asked
    # (each learns it from its ZooKeeper watch, a moment apart, as in Kafka).
    for broker in cluster.brokers:
        single = AdminClient({"bootstrap.servers": broker.bootstrap})
        wait_for(
            f"broker {broker.broker_id} to show 5 partitions",
            lambda single=single: len(single.list_topics(topic, timeout=TIMEOUT).topics[topic].partitions) == 5 or None,
        )
    produce(cluster, topic, 4, 3)
    assert watermarks(cluster, topic, 4) == (0, 3)


def test_confluent_create_partitions_refuses_shrinking_and_unknown_topics(admin: AdminClient) -> None:
    topic = new_topic(admin, 3)
    with pytest.raises(KafkaException) as shrink:
        admin.create_partitions([NewPartitions(topic, 2)])[topic].result(TIMEOUT)
    assert shrink.value.args[0].name() == "INVALID_PARTITIONS"
    with pytest.raises(KafkaException) as unknown:
        admin.create_partitions([NewPartitions("no-such-topic", 4)])["no-such-topic"].result(TIMEOUT)
    assert unknown.value.args[0].name() == "UNKNOWN_TOPIC_OR_PART"
    # validate_only changes nothing.
    admin.create_partitions([NewPartitions(topic, 6)], validate_only=True)[topic].result(TIMEOUT)
    assert len(partition_leaders(admin, topic)) == 3


def test_kafka_python_create_partitions(cluster: Cluster, admin: AdminClient, kp_admin: KafkaAdminClient) -> None:
    topic = new_topic(admin, 1)
    wait_for_leaders(cluster.brokers, topic, 1)  # whichever broker kafka-python asks knows the topic
    kp_admin.create_partitions({topic: 4})
    # (The answer waits for the receiving broker's view; the others follow ZooKeeper a moment later.)
    assert sorted(wait_for_leaders(cluster.brokers, topic, 4)) == [0, 1, 2, 3]
    assert sorted(partition_leaders(admin, topic)) == [0, 1, 2, 3]
    with pytest.raises(InvalidPartitionsError):
        kp_admin.create_partitions({topic: 4})


# --- DescribeConfigs, AlterConfigs, IncrementalAlterConfigs -----------------------------------------


def test_confluent_describe_configs_reports_defaults_and_overrides(admin: AdminClient) -> None:
    topic = new_topic(admin, 1, {"retention.ms": "3600000"})
    entries = described(admin, topic)
    assert entries["retention.ms"].value == "3600000"
    assert entries["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert not entries["retention.ms"].is_default
    assert entries["segment.bytes"].value == str(1024 * 1024 * 1024)
    assert entries["segment.bytes"].is_default
    assert entries["cleanup.policy"].value == "delete"


def test_confluent_incremental_alter_configs_persists_and_takes_effect(cluster: Cluster, admin: AdminClient) -> None:
    topic = new_topic(admin, 1)
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("segment.bytes", "1024", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("retention.bytes", "2048", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT)
    assert zk_config(cluster, topic) == {"segment.bytes": "1024", "retention.bytes": "2048"}
    assert described(admin, topic)["segment.bytes"].value == "1024"

    # 40 batches of ~170 bytes roll a segment every ~6 batches; retention keeps about 2 KiB.
    produce(cluster, topic, 0, 40)
    low, high = wait_for(
        "retention to delete old segments", lambda: w if (w := watermarks(cluster, topic, 0))[0] > 0 else None
    )
    assert high == 40
    assert 0 < low < 40

    # DELETE puts a key back to its default.
    reset = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[ConfigEntry("retention.bytes", None, incremental_operation=AlterConfigOpType.DELETE)],
    )
    admin.incremental_alter_configs([reset])[reset].result(TIMEOUT)
    assert zk_config(cluster, topic) == {"segment.bytes": "1024"}
    assert described(admin, topic)["retention.bytes"].is_default


def test_confluent_alter_configs_replaces_the_whole_config(cluster: Cluster, admin: AdminClient) -> None:
    topic = new_topic(admin, 1, {"retention.ms": "3600000", "segment.ms": "600000"})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config={"retention.bytes": "1048576"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # deprecated in the client, still sent as AlterConfigs
        futures = admin.alter_configs([resource])
    futures[resource].result(TIMEOUT)
    assert zk_config(cluster, topic) == {"retention.bytes": "1048576"}
    entries = described(admin, topic)
    assert entries["retention.ms"].is_default
    assert entries["retention.bytes"].value == "1048576"


def test_confluent_alter_configs_refuses_bad_values_and_changes_nothing(cluster: Cluster, admin: AdminClient) -> None:
    topic = new_topic(admin, 1, {"retention.ms": "3600000"})
    for entry in (
        ConfigEntry("segment.bytes", "5", incremental_operation=AlterConfigOpType.SET),  # below Kafka's minimum
        ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("no.such.config", "1", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "shred", incremental_operation=AlterConfigOpType.SET),
    ):
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[entry])
        with pytest.raises(KafkaException) as refused:
            admin.incremental_alter_configs([resource])[resource].result(TIMEOUT)
        assert refused.value.args[0].name() == "INVALID_CONFIG", entry.name
    assert zk_config(cluster, topic) == {"retention.ms": "3600000"}


def test_kafka_python_describe_and_alter_configs(
    cluster: Cluster, admin: AdminClient, kp_admin: KafkaAdminClient
) -> None:
    topic = new_topic(admin, 1)
    # kafka-python describes the topic's configs first, at any broker, and takes an error there
    # (the topic not known yet: brokers learn of it from ZooKeeper each on its own) for a topic
    # without configs. So every broker knows the topic first.
    wait_for_leaders(cluster.brokers, topic, 1)
    # kafka-python uses IncrementalAlterConfigs when the broker offers it, AlterConfigs when told not to.
    result = kp_admin.alter_configs(
        [KPConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "7200000"})]
    )
    assert result == {"topic": {topic: "OK"}}
    result = kp_admin.alter_configs(
        [KPConfigResource(ConfigResourceType.TOPIC, topic, configs={"flush.messages": "10"})], incremental=False
    )
    assert result == {"topic": {topic: "OK"}}
    # The non-incremental path re-sent the modified keys it read back, so both are kept.
    assert zk_config(cluster, topic) == {"retention.ms": "7200000", "flush.messages": "10"}
    modified = kp_admin.describe_configs([KPConfigResource(ConfigResourceType.TOPIC, topic)])
    assert {name: entry["value"] for name, entry in modified["topic"][topic].items()} == {
        "retention.ms": "7200000",
        "flush.messages": "10",
    }
    broker = kp_admin.describe_configs([KPConfigResource(ConfigResourceType.BROKER, "1")], config_filter="all")
    assert broker["broker"]["1"]["log.retention.ms"]["value"] == str(7 * 24 * 3600 * 1000)


def test_configs_survive_a_restart_of_every_broker(cluster: Cluster, admin: AdminClient) -> None:
    topic = new_topic(admin, 2, {"retention.ms": "123456"})
    cluster.restart()
    fresh = AdminClient({"bootstrap.servers": cluster.bootstrap})
    assert described(fresh, topic)["retention.ms"].value == "123456"


# --- DeleteGroups ----------------------------------------------------------------------------------


#: Retriable answers to a commit while the group's coordinator moves in or loads: librdkafka
#: retries a synchronous commit only twice, 100 ms apart, and then hands them to the application.
COORDINATOR_MOVING = (KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.NOT_COORDINATOR,
                      KafkaError.COORDINATOR_NOT_AVAILABLE)  # fmt: skip


def commit_as_group(cluster: Cluster, group: str, topic: str, offsets: dict[int, int]) -> Consumer:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False})

    def commit() -> bool:
        try:
            consumer.commit(offsets=[CKTopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
        except KafkaException as exc:
            if exc.args[0].code() not in COORDINATOR_MOVING:
                raise
            return False
        return True

    eventually(commit, TIMEOUT, f"group {group}'s commit")
    return consumer


def committed(cluster: Cluster, group: str, topic: str, partitions: list[int]) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    try:
        got = consumer.committed([CKTopicPartition(topic, p) for p in partitions], timeout=TIMEOUT)
        return {tp.partition: tp.offset for tp in got if tp.offset >= 0}
    finally:
        consumer.close()


def test_confluent_delete_groups_removes_offsets_and_refuses_active_groups(
    cluster: Cluster, admin: AdminClient
) -> None:
    topic = new_topic(admin, 2)
    produce(cluster, topic, 0, 5)
    group = f"g-{uuid.uuid4().hex[:8]}"
    commit_as_group(cluster, group, topic, {0: 3, 1: 0}).close()
    assert committed(cluster, group, topic, [0, 1]) == {0: 3, 1: 0}

    active_group = f"active-{uuid.uuid4().hex[:8]}"
    member = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": active_group, "session.timeout.ms": 6000})
    try:
        member.subscribe([topic])
        wait_for("an assignment", lambda: member.poll(0.2) or member.assignment() or None)
        results = admin.delete_consumer_groups([group, active_group, "never-existed"], request_timeout=TIMEOUT)
        results[group].result(TIMEOUT)
        with pytest.raises(KafkaException) as non_empty:
            results[active_group].result(TIMEOUT)
        assert non_empty.value.args[0].name() == "NON_EMPTY_GROUP"
        with pytest.raises(KafkaException) as missing:
            results["never-existed"].result(TIMEOUT)
        assert missing.value.args[0].name() == "GROUP_ID_NOT_FOUND"
    finally:
        member.close()
    assert committed(cluster, group, topic, [0, 1]) == {}
    listed = {g.group_id for g in admin.list_consumer_groups(request_timeout=TIMEOUT).result(TIMEOUT).valid}
    assert group not in listed


def test_kafka_python_delete_groups_and_offsets_stay_deleted_after_restart(
    cluster: Cluster, admin: AdminClient, kp_admin: KafkaAdminClient
) -> None:
    topic = new_topic(admin, 1)
    group = f"g-{uuid.uuid4().hex[:8]}"
    commit_as_group(cluster, group, topic, {0: 7}).close()
    assert kp_admin.delete_groups([group]) == {group: "OK"}
    assert kp_admin.delete_groups([group]) == {group: "GroupIdNotFoundError"}
    # The tombstones are in __consumer_offsets: a restarted coordinator does not bring the group back.
    kp_admin.close()  # before its brokers go: it would leave sockets of failed reconnections behind
    cluster.restart()
    # After a whole-cluster restart the group's coordinator answers NOT_COORDINATOR or
    # COORDINATOR_LOAD_IN_PROGRESS until it has taken over and loaded its __consumer_offsets
    # partition (as in Kafka; clients retry): wait for it, then look.
    assert wait_for("the group's coordinator to load", lambda: committed_once_loaded(cluster, group, topic)) == {}


def committed_once_loaded(cluster: Cluster, group: str, topic: str) -> dict[int, int] | None:
    try:
        return committed(cluster, group, topic, [0])
    except KafkaException as exc:
        if exc.args[0].code() in (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS):
            return None
        raise


# --- DescribeLogDirs -------------------------------------------------------------------------------


def test_kafka_python_describe_log_dirs_reports_partition_sizes(
    cluster: Cluster, admin: AdminClient, kp_admin: KafkaAdminClient
) -> None:
    topic = new_topic(admin, 1)
    produce(cluster, topic, 0, 4, size=1000)
    leader = partition_leaders(admin, topic)[0]
    answers: list[dict[str, Any]] = kp_admin.describe_log_dirs({topic: [0]}, brokers=[leader])
    (answer,) = answers
    (log_dir,) = answer["log_dirs"]
    assert log_dir["log_dir"] == str(cluster.brokers[leader - 1].data_dir)
    (entry,) = log_dir["topics"]
    (partition,) = entry["partitions"]
    on_disk = sum(f.stat().st_size for f in Path(log_dir["log_dir"], f"{topic}-0").glob("*.log"))
    assert partition["partition_size"] == on_disk
    assert on_disk > 4 * 1000


# --- OffsetDelete ----------------------------------------------------------------------------------


def test_kafka_python_delete_group_offsets_spares_subscribed_topics(
    cluster: Cluster, admin: AdminClient, kp_admin: KafkaAdminClient
) -> None:
    consumed, other = new_topic(admin, 1), new_topic(admin, 2)
    group = f"g-{uuid.uuid4().hex[:8]}"
    member = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "session.timeout.ms": 6000,
                       "enable.auto.commit": False})  # fmt: skip
    try:
        member.subscribe([consumed])
        wait_for("an assignment", lambda: member.poll(0.2) or member.assignment() or None)
        member.commit(
            offsets=[CKTopicPartition(consumed, 0, 3), CKTopicPartition(other, 0, 5), CKTopicPartition(other, 1, 6)],
            asynchronous=False,
        )
        results = kp_admin.delete_group_offsets(group, [KPTopicPartition(consumed, 0), KPTopicPartition(other, 0)])
        assert results == {KPTopicPartition(consumed, 0): GroupSubscribedToTopicError,
                           KPTopicPartition(other, 0): NoError}  # fmt: skip
    finally:
        member.close()
    assert committed(cluster, group, consumed, [0]) == {0: 3}
    assert committed(cluster, group, other, [0, 1]) == {1: 6}
