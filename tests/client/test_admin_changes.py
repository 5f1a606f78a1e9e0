"""Admin operations that change a cluster, on three live brokers: adding partitions,
describing and altering configs, sizes on disk, resetting and deleting groups."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from tributary.client.admin.admin import Admin
from tributary.client.admin.configs import ConfigSource, ResourceType
from tributary.client.consumer.consumer import Consumer
from tributary.client.errors import (
    GroupIdNotFoundError,
    GroupNotEmptyError,
    InvalidConfigError,
    InvalidPartitionsError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
)
from tributary.client.raw.client import RawClient
from tributary.client.wire.cluster import Cluster
from tributary.client.wire.metadata import TopicPartition
from tributary.protocol.records import build_batch
from tributary.testing.cluster import Cluster as Brokers

from .conftest import topic_name

TIMEOUT = 30.0


async def test_create_partitions_grows_topics_and_refuses_shrinking(shared_cluster: Brokers) -> None:
    topic = topic_name("grow")
    async with Cluster(shared_cluster.bootstrap) as cluster:
        admin = Admin(cluster)
        await admin.create_topic(topic, 2)
        await admin.create_partitions({topic: 5})
        # Returns once the metadata shows every new partition with a leader.
        info = cluster.metadata.topics[topic]
        assert sorted(info.partitions) == [0, 1, 2, 3, 4]
        assert all(p.leader in (1, 2, 3) for p in info.partitions.values())
        # The new partitions take records at once.
        results = await RawClient(cluster).produce_partition(topic, 4, build_batch([(None, b"v", (), None)]))
        assert results.base_offset == 0

        with pytest.raises(InvalidPartitionsError, match=topic) as caught:
            await admin.create_partitions({topic: 5})
        assert caught.value.topic == topic
        with pytest.raises(UnknownTopicOrPartitionError):
            await admin.create_partitions({topic_name("missing"): 3})
        await admin.create_partitions({topic: 9}, validate_only=True)
        assert len((await admin.list_topics())[topic].partitions) == 5


async def test_describe_and_alter_topic_configs(shared_cluster: Brokers) -> None:
    topic = topic_name("cfg")
    async with Cluster(shared_cluster.bootstrap) as cluster:
        admin = Admin(cluster)
        await admin.create_topic(topic, 1, {"retention.ms": "3600000"})
        configs = (await admin.describe_configs(ResourceType.TOPIC, [topic]))[topic]
        assert configs["retention.ms"].value == "3600000"
        assert not configs["retention.ms"].is_default
        assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG
        assert configs["segment.bytes"].value == str(1 << 30) and configs["segment.bytes"].is_default

        await admin.alter_topic_configs({topic: {"retention.ms": None, "retention.bytes": "1048576"}})
        configs = (await admin.describe_configs(ResourceType.TOPIC, [topic], keys=["retention.ms", "retention.bytes"]))[
            topic
        ]
        assert set(configs) == {"retention.ms", "retention.bytes"}
        assert configs["retention.ms"].is_default and configs["retention.ms"].value == str(7 * 24 * 3600 * 1000)
        assert configs["retention.bytes"].value == "1048576"

        with pytest.raises(InvalidConfigError, match=r"segment\.bytes must be at least 14"):
            await admin.alter_topic_configs({topic: {"segment.bytes": "1"}})
        with pytest.raises(UnknownTopicOrPartitionError):
            await admin.describe_configs(ResourceType.TOPIC, [topic_name("missing")])

        broker = (await admin.describe_configs(ResourceType.BROKER, ["2"]))["2"]
        assert broker["log.retention.ms"].read_only
        assert broker["log.segment.bytes"].value == str(1 << 30)


async def test_log_dir_sizes_match_the_files(shared_cluster: Brokers) -> None:
    topic = topic_name("sizes")
    async with Cluster(shared_cluster.bootstrap) as cluster:
        admin = Admin(cluster)
        await admin.create_topic(topic, 3)
        raw = RawClient(cluster)
        for partition, count in ((0, 1), (1, 5)):
            for _ in range(count):
                await raw.produce_partition(topic, partition, build_batch([(None, b"x" * 500, (), None)]))
        sizes = await admin.log_dir_sizes([topic])
    assert set(sizes) == {TopicPartition(topic, p) for p in range(3)}
    for p in range(3):
        leader = cluster.metadata.leader(topic, p)
        files = Path(shared_cluster.brokers[leader - 1].data_dir, f"{topic}-{p}").glob("*.log")
        assert sizes[TopicPartition(topic, p)] == sum(f.stat().st_size for f in files)
    assert sizes[TopicPartition(topic, 2)] == 0
    assert sizes[TopicPartition(topic, 1)] > 5 * 500 > sizes[TopicPartition(topic, 0)] > 500


async def test_reset_and_delete_a_group(shared_cluster: Brokers) -> None:
    topic, group = topic_name("reset"), topic_name("group")
    tp = TopicPartition(topic, 0)
    async with Cluster(shared_cluster.bootstrap) as cluster:
        admin = Admin(cluster)
        await admin.create_topic(topic, 1)
        await admin.alter_committed_offsets(group, {tp: 4})
        assert (await admin.committed_offsets(group))[tp].offset == 4

        async with Consumer(
            shared_cluster.bootstrap, group_id=group, enable_auto_commit=False, session_timeout_ms=6000
        ) as consumer:
            consumer.subscribe([topic])
            with trio.fail_after(TIMEOUT):
                while not consumer.assignment():
                    await consumer.poll(0.1)
            # An admin cannot commit under live members, nor delete their group.
            with pytest.raises(UnknownMemberIdError):
                await admin.alter_committed_offsets(group, {tp: 0})
            with pytest.raises(GroupNotEmptyError):
                await admin.delete_groups([group])
        assert (await admin.committed_offsets(group))[tp].offset == 4

        await admin.delete_groups([group])
        assert await admin.committed_offsets(group) == {}
        assert group not in {g.group_id for g in await admin.list_groups()}
        with pytest.raises(GroupIdNotFoundError):
            await admin.delete_groups([group])
