"""Admin operations on a three-broker cluster: topics, offsets, cluster, groups."""

from __future__ import annotations

import uuid

import pytest
import trio

from tributary.client.admin.admin import Admin, NewTopic
from tributary.client.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    KafkaError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from tributary.client.raw.batches import EARLIEST, LATEST
from tributary.client.raw.client import RawClient
from tributary.client.wire.cluster import COORDINATOR, Cluster
from tributary.client.wire.metadata import TopicPartition
from tributary.protocol.messages import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
)
from tributary.protocol.records import build_batch
from tributary.testing.cluster import Cluster as Brokers

from .conftest import topic_name


async def test_create_describe_and_delete_topics(shared_cluster: Brokers) -> None:
    first, second = topic_name("admin-a"), topic_name("admin-b")
    async with Cluster(shared_cluster.bootstrap) as cluster:
        admin = Admin(cluster)
        await admin.create_topics([NewTopic(first, 3), NewTopic(second, 1, {"retention.ms": "60000"})])
        # create_topics waits until every partition has a leader.
        topics = await admin.list_topics()
        assert topics[first].partition_count == 3
        assert topics[second].partition_count == 1
        assert all(p.leader in (1, 2, 3) for p in topics[first].partitions.values())

        with pytest.raises(TopicAlreadyExistsError, match=f"TOPIC_ALREADY_EXISTS \\(topic '{first}'\\)") as caught:
            await admin.create_topic(first, 3)
        assert caught.value.topic == first and not caught.value.retriable
        await admin.create_topic(first, 3, exist_ok=True)

        await admin.delete_topics([first, second])
        assert not {first, second} & set(await admin.list_topics())
        with pytest.raises(
            UnknownTopicOrPartitionError, match=f"delete topic: UNKNOWN_TOPIC_OR_PARTITION \\(topic '{first}'\\)"
        ):
            await admin.delete_topics([first])


async def test_refused_topics_are_named_and_the_others_created(shared_cluster: Brokers) -> None:
    good, bad_partitions, bad_config = topic_name("good"), topic_name("nopart"), topic_name("badcfg")
    async with Cluster(shared_cluster.bootstrap) as cluster:
        admin = Admin(cluster)
        with pytest.raises(InvalidPartitionsError, match=bad_partitions) as caught:
            await admin.create_topics(
                [NewTopic(bad_partitions, 0), NewTopic(good, 2), NewTopic(bad_config, 1, {"retention.ms": "soon"})]
            )
        assert caught.value.topic == bad_partitions
        assert good in cluster.metadata.topics
        assert bad_partitions not in cluster.metadata.topics and bad_config not in cluster.metadata.topics
        with pytest.raises(InvalidConfigError, match=f"INVALID_CONFIG \\(topic '{bad_config}'\\)"):
            await admin.create_topic(bad_config, 1, {"retention.ms": "soon"})


async def test_describe_cluster(shared_cluster: Brokers) -> None:
    async with Cluster(shared_cluster.bootstrap) as cluster:
        description = await Admin(cluster).describe_cluster()
    assert [b.node_id for b in description.brokers] == [1, 2, 3]
    assert [b.address for b in description.brokers] == [b.bootstrap for b in shared_cluster.brokers]
    assert description.controller_id in (1, 2, 3)
    assert description.cluster_id


async def test_list_offsets_earliest_latest_and_by_timestamp(shared_cluster: Brokers) -> None:
    topic = topic_name("offsets")
    async with Cluster(shared_cluster.bootstrap) as cluster:
        admin, raw = Admin(cluster), RawClient(cluster)
        await admin.create_topic(topic, 3)
        assert sorted({cluster.metadata.leader(topic, p) for p in range(3)}) == [1, 2, 3]
        # Partition p: p + 1 batches of 5 records; batch b's records carry timestamp (b + 1) * 1000.
        for p in range(3):
            for b in range(p + 1):
                records = [(None, b"v", (), (b + 1) * 1000) for _ in range(5)]
                await raw.produce_partition(topic, p, build_batch(records))
        tps = [TopicPartition(topic, p) for p in range(3)]

        assert await admin.earliest_offsets(tps) == dict.fromkeys(tps, 0)
        assert await admin.latest_offsets(tps) == {tp: 5 * (tp.partition + 1) for tp in tps}
        listed = await admin.list_offsets({tps[0]: 500, tps[1]: 1500, tps[2]: 3000})
        assert (listed[tps[0]].offset, listed[tps[0]].timestamp) == (0, 1000)
        assert (listed[tps[1]].offset, listed[tps[1]].timestamp) == (5, 2000)
        assert (listed[tps[2]].offset, listed[tps[2]].timestamp) == (10, 3000)
        late = await admin.list_offsets({tps[2]: 10_000})
        assert late[tps[2]].offset == -1  # no record that recent

        with pytest.raises(UnknownTopicOrPartitionError, match=f"topic '{topic}' has no partition 9"):
            await admin.list_offsets({TopicPartition(topic, 9): EARLIEST, tps[0]: LATEST}, timeout=0.5)


# --- groups ------------------------------------------------------------------------------------


async def _commit(cluster: Cluster, group: str, offsets: dict[TopicPartition, int]) -> None:
    """A standalone consumer's commit (no generation, no member), as Kafka's admin tools make."""
    by_topic: dict[str, list[OffsetCommitRequest.OffsetCommitRequestPartition]] = {}
    for tp, offset in offsets.items():
        by_topic.setdefault(tp.topic, []).append(
            OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=tp.partition, committed_offset=offset)
        )
    request = OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
    )
    with trio.fail_after(30):
        while True:
            response: OffsetCommitResponse = await cluster.send_to_coordinator(group, request)
            codes = {p.error_code for t in response.topics for p in t.partitions}
            if codes == {0}:
                return
            assert codes <= {14, 15, 16}, codes  # the coordinator is loading or moved: again
            cluster.forget_coordinator(group)
            await trio.sleep(0.1)


async def check_group_operations(cluster: Cluster, *, check_lag: bool = True) -> None:
    """Commit offsets for a fresh group, then read them back every way the admin can."""
    admin, raw = Admin(cluster), RawClient(cluster)
    topic, group = topic_name("grouped"), topic_name("group")
    await admin.create_topic(topic, 2)
    tps = [TopicPartition(topic, p) for p in range(2)]
    for tp in tps:
        for _ in range(3):
            await raw.produce_partition(tp.topic, tp.partition, build_batch([(None, b"x", (), None)] * 4))

    assert await admin.committed_offsets(group) == {}
    await _commit(cluster, group, {tps[0]: 5, tps[1]: 12})

    committed = await admin.committed_offsets(group)
    assert {tp: c.offset for tp, c in committed.items()} == {tps[0]: 5, tps[1]: 12}
    only = await admin.committed_offsets(group, [tps[1]])
    assert {tp: c.offset for tp, c in only.items()} == {tps[1]: 12}
    if check_lag:
        lag = await admin.group_lag(group)
        assert {tp: (g.committed, g.latest, g.lag) for tp, g in lag.items()} == {
            tps[0]: (5, 12, 7),
            tps[1]: (12, 12, 0),
        }

    groups = {g.group_id: g for g in await admin.list_groups()}
    assert group in groups
    described = (await admin.describe_groups([group]))[group]
    assert described.state == "Empty"
    assert described.members == ()
    coordinator = await cluster.coordinator_for(group)
    assert described.coordinator == coordinator
    # Group traffic has a connection of its own, apart from fetches and produces.
    assert await cluster.connection(coordinator, purpose=COORDINATOR) is not await cluster.connection(coordinator)


async def test_group_offsets_and_lag(shared_cluster: Brokers) -> None:
    async with Cluster(shared_cluster.bootstrap) as cluster:
        if not await Admin(cluster).supports_groups():
            pytest.skip("the broker does not advertise FindCoordinator/ListGroups/DescribeGroups/OffsetFetch yet")
        await check_group_operations(cluster)


async def test_errors_of_admin_operations_are_kafka_errors(shared_cluster: Brokers) -> None:
    async with Cluster(shared_cluster.bootstrap) as cluster:
        with pytest.raises(KafkaError):
            await Admin(cluster).partitions_of(topic_name("missing"))


async def test_a_kip848_consumer_group_is_listed_and_described_as_one(shared_cluster: Brokers) -> None:
    """DescribeGroups answers "Dead" for a consumer (KIP-848) group, as Kafka does: the admin
    client then asks ConsumerGroupDescribe, and shows the members, epochs and assignments."""
    topic, group = topic_name("kip848-admin"), topic_name("kip848-group")
    member_id = uuid.uuid4().hex
    async with Cluster(shared_cluster.bootstrap) as cluster:
        admin = Admin(cluster)
        await admin.create_topic(topic, 4)

        async def heartbeat(epoch: int) -> ConsumerGroupHeartbeatResponse:
            request = ConsumerGroupHeartbeatRequest(
                group_id=group,
                member_id=member_id,
                member_epoch=epoch,
                rebalance_timeout_ms=30_000 if epoch == 0 else -1,
                subscribed_topic_names=[topic] if epoch == 0 else None,
                topic_partitions=[] if epoch == 0 else None,
            )
            response: ConsumerGroupHeartbeatResponse = await cluster.send_to_coordinator(group, request)
            assert response.error_code == 0, response
            return response

        joined = await heartbeat(0)
        assert joined.assignment is not None
        assert sorted(p for t in joined.assignment.topic_partitions for p in t.partitions) == [0, 1, 2, 3]

        listed = {g.group_id: g for g in await admin.list_groups()}[group]
        assert (listed.protocol_type, listed.group_type, listed.state) == ("consumer", "consumer", "Stable")
        described = (await admin.describe_groups([group]))[group]
        assert (described.group_type, described.state, described.protocol) == ("consumer", "Stable", "uniform")
        assert described.group_epoch == 1
        (member,) = described.members
        assert (member.member_id, member.member_epoch, member.subscription) == (member_id, 1, (topic,))
        assert sorted(member.assignment) == [TopicPartition(topic, p) for p in range(4)]

        await heartbeat(-1)  # leaves
        described = (await admin.describe_groups([group]))[group]
        assert (described.group_type, described.state, described.members) == ("consumer", "Empty", ())
        # An unknown group is still "Dead", after both questions.
        missing = topic_name("no-group")
        assert (await admin.describe_groups([missing]))[missing].state == "Dead"
