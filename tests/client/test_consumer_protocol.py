"""Our Consumer with ``group_protocol="consumer"`` (KIP-848) on a real three-broker cluster:
members join and leave while no partition has two owners and nobody gives up what it keeps;
every record once across the changes; a regex the broker matches; a group shared with
librdkafka's KIP-848 consumer and with a member of the classic protocol."""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest
import trio

from tests.fixtures.zookeeper import ZooKeeperServer, server_chroot
from tributary.client.admin.admin import Admin
from tributary.client.wire.cluster import Cluster
from tributary.client.wire.metadata import TopicPartition
from tributary.protocol.messages import ApiKey
from tributary.protocol.supported import SUPPORTED_VERSIONS
from tributary.testing.cluster import Cluster as Brokers
from tributary.testing.cluster import start_cluster

from .conftest import topic_name
from .test_consumer import produce, values
from .test_group_membership import Member, Ownership, run_member

PARTITIONS = 12
TIMEOUT = 30
BROKER_SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "500",
    "offsets.topic.num.partitions": "3",
    "group.consumer.heartbeat.interval.ms": "200",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.session.timeout.ms": "4000",
    "group.consumer.min.session.timeout.ms": "1000",
}
CONSUMER: dict[str, Any] = {"group_protocol": "consumer", "fetch_max_wait_ms": 100}

# The protocol names topics by id: the broker must serve Metadata v10+ (the protocol-levels work).
pytestmark = pytest.mark.skipif(
    (SUPPORTED_VERSIONS[ApiKey.METADATA].hi or 0) < 10, reason="the broker serves no topic ids (Metadata < v10)"
)


@pytest.fixture(scope="module")
def brokers(zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Brokers]:
    root = tmp_path_factory.mktemp("kip848-brokers")
    yield from start_cluster(server_chroot(zookeeper_server, "client"), root, 3, BROKER_SETTINGS)


def settled(members: list[Member], ownership: Ownership, partitions: set[TopicPartition]) -> bool:
    """Every partition owned by one active member, balanced, every member at one epoch."""
    if set(ownership.owner) != partitions or set(ownership.owner.values()) - {m.name for m in members}:
        return False
    epochs = set()
    for m in members:
        group = m.consumer.group if m.consumer is not None else None
        if group is None or group.generation.generation_id <= 0:
            return False
        epochs.add(group.generation.generation_id)
    sizes = [len(ownership.of(m.name)) for m in members]
    return len(epochs) == 1 and max(sizes) - min(sizes) <= 1


async def wait_settled(members: list[Member], ownership: Ownership, partitions: set[TopicPartition]) -> None:
    with trio.fail_after(TIMEOUT):
        while not settled(members, ownership, partitions):
            await trio.sleep(0.02)


async def test_members_join_and_leave_keeping_what_they_keep(brokers: Brokers) -> None:
    topic, group = topic_name("kip848"), topic_name("g")
    partitions = {TopicPartition(topic, p) for p in range(PARTITIONS)}
    ownership = Ownership()
    async with Cluster(brokers.bootstrap) as cluster:
        await Admin(cluster).create_topic(topic, PARTITIONS)
    active: list[Member] = []
    async with trio.open_nursery() as nursery:
        for i in range(4):
            before = dict(ownership.owner)
            revoked_before = dict(ownership.revoked)
            newcomer = Member(f"m{i}")
            active.append(newcomer)
            nursery.start_soon(partial(run_member, brokers, group, [topic], newcomer, ownership, **CONSUMER))
            await wait_settled(active, ownership, partitions)
            # Only what the newcomer needs moved, and only to it; what each member kept it
            # never gave up (the uniform assignor is sticky, the reconciliation incremental).
            moved = {tp: (m, ownership.owner[tp]) for tp, m in before.items() if ownership.owner[tp] != m}
            assert {new for _, new in moved.values()} <= {newcomer.name}, moved
            for m in active[:-1]:
                gave_up = ownership.revoked.get(m.name, 0) - revoked_before.get(m.name, 0)
                assert gave_up == sum(1 for old, _ in moved.values() if old == m.name)
        for leaving in list(active[:-1]):
            before = dict(ownership.owner)
            leaving.stop.set()
            with trio.fail_after(TIMEOUT):
                await leaving.stopped.wait()
            active.remove(leaving)
            await wait_settled(active, ownership, partitions)
            moved = {tp: m for tp, m in before.items() if ownership.owner[tp] != m}
            assert set(moved.values()) <= {leaving.name}, moved
        active[-1].stop.set()
    assert ownership.violations == []
    assert ownership.owner == {}


async def test_every_record_once_across_changes(brokers: Brokers) -> None:
    """Auto-commit commits what a member gives up before it acknowledges, so the next owner
    starts there: no record is read twice or skipped."""
    topic, group = topic_name("once"), topic_name("g")
    per_partition = 30
    ownership = Ownership()
    settings = {**CONSUMER, "auto_offset_reset": "earliest", "max_poll_records": 7}
    async with Cluster(brokers.bootstrap) as cluster:
        await Admin(cluster).create_topic(topic, 4)
        for p in range(4):
            await produce(cluster, topic, p, values(f"a{p}", per_partition))
        members = [Member("first"), Member("second"), Member("third")]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(partial(run_member, brokers, group, [topic], members[0], ownership, **settings))
            with trio.fail_after(TIMEOUT):
                while len(members[0].records) < 20:
                    await trio.sleep(0.01)
            nursery.start_soon(partial(run_member, brokers, group, [topic], members[1], ownership, **settings))
            await wait_settled(members[:2], ownership, {TopicPartition(topic, p) for p in range(4)})
            for p in range(4):
                await produce(cluster, topic, p, values(f"b{p}", per_partition))
            nursery.start_soon(partial(run_member, brokers, group, [topic], members[2], ownership, **settings))
            members[0].stop.set()
            with trio.fail_after(TIMEOUT):
                while sum(len(m.records) for m in members) < 8 * per_partition:
                    await trio.sleep(0.02)
            for m in members:
                m.stop.set()
    seen = sorted((r.partition, r.offset) for m in members for r in m.records)
    assert seen == [(p, o) for p in range(4) for o in range(2 * per_partition)]
    assert ownership.violations == []


async def test_a_regex_the_broker_matches(brokers: Brokers) -> None:
    prefix = topic_name("rx")
    ownership = Ownership()
    async with Cluster(brokers.bootstrap) as cluster:
        admin = Admin(cluster)
        await admin.create_topic(f"{prefix}-a", 2)
        await admin.create_topic(f"{prefix}-b", 1)
        await admin.create_topic(f"other-{prefix}", 1)
        member = Member("m")
        async with trio.open_nursery() as nursery:
            pattern = re.compile(re.escape(prefix) + r"-.*")
            nursery.start_soon(partial(run_member, brokers, topic_name("g"), pattern, member, ownership, **CONSUMER))
            expected = {
                TopicPartition(f"{prefix}-a", 0),
                TopicPartition(f"{prefix}-a", 1),
                TopicPartition(f"{prefix}-b", 0),
            }
            await wait_settled([member], ownership, expected)
            # A topic created later that matches joins the subscription.
            await admin.create_topic(f"{prefix}-c", 1)
            await wait_settled([member], ownership, {*expected, TopicPartition(f"{prefix}-c", 0)})
            member.stop.set()
    assert ownership.violations == []


async def test_one_group_with_a_classic_member(brokers: Brokers) -> None:
    """A member of the classic protocol in a consumer group is served through JoinGroup
    and SyncGroup from the coordinator's assignment; no partition has two owners."""
    topic, group = topic_name("mixed"), topic_name("g")
    partitions = {TopicPartition(topic, p) for p in range(6)}
    ownership = Ownership()
    async with Cluster(brokers.bootstrap) as cluster:
        await Admin(cluster).create_topic(topic, 6)
    modern, classic = Member("modern"), Member("classic")
    classic_settings = {"session_timeout_ms": 3000, "heartbeat_interval_ms": 100, "fetch_max_wait_ms": 100}
    async with trio.open_nursery() as nursery:
        nursery.start_soon(partial(run_member, brokers, group, [topic], modern, ownership, **CONSUMER))
        await wait_settled([modern], ownership, partitions)
        nursery.start_soon(partial(run_member, brokers, group, [topic], classic, ownership, **classic_settings))
        with trio.fail_after(TIMEOUT):
            while not (set(ownership.owner) == partitions and len(ownership.of("classic")) == 3):
                await trio.sleep(0.02)
        assert len(ownership.of("modern")) == 3
        classic.stop.set()
        with trio.fail_after(TIMEOUT):
            while len(ownership.of("modern")) != 6:
                await trio.sleep(0.02)
        modern.stop.set()
    assert ownership.violations == []
