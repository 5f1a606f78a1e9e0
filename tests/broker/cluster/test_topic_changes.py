"""Growing topics and changing their configs through the cluster registry, against a real
ZooKeeper with several registries in one process."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping

import pytest
import trio

from tests.broker.cluster.conftest import Brokers
from tributary.broker.cluster import InvalidPartitionsError, ReplicaKey, UnknownTopicError, zk_paths
from tributary.broker.cluster.znodes import CreatePartitionsRequest, encode_create_partitions_request


async def test_partitions_grow_through_the_controller_and_every_broker_sees_them(brokers: Brokers) -> None:
    registries = await brokers.start_all(1, 2, 3)
    first = registries[0]
    info = await first.create_topic("growing", 2, {"retention.ms": "60000"})
    await registries[1].wait_for(lambda s: "growing" in s.topics)
    changes = registries[1].assignment_changes()
    with trio.fail_after(10):
        await anext(changes)  # everything assigned now

    grown = await registries[2].create_partitions("growing", 8)

    assert sorted(grown.partitions) == list(range(8))
    assert grown.topic_id == info.topic_id and grown.config == {"retention.ms": "60000"}
    # The old partitions keep their leaders; the new ones are spread round robin.
    assert {p: grown.partitions[p] for p in (0, 1)} == dict(info.partitions)
    assert sorted(Counter(grown.partitions[p].leader for p in range(2, 8)).values()) == [2, 2, 2]
    for p in range(2, 8):
        assert grown.partitions[p].leader_epoch == 0 and grown.partitions[p].isr == grown.partitions[p].replicas
    for registry in registries:
        snapshot = await registry.wait_for(lambda s: len(s.topics["growing"].partitions) == 8)
        assert snapshot.topics["growing"] == grown
    # A broker learns of the replicas it gained through its assignment feed.
    gained = {ReplicaKey("growing", p, info.topic_id) for p in range(2, 8) if 2 in grown.partitions[p].replicas}
    with trio.fail_after(10):
        change = await anext(changes)
    assert change.added == gained and change.removed == frozenset()

    with pytest.raises(InvalidPartitionsError):
        await first.create_partitions("growing", 8)
    with pytest.raises(UnknownTopicError):
        await first.create_partitions("absent", 3)


async def test_a_growth_request_for_a_deleted_topic_is_dropped(brokers: Brokers) -> None:
    (registry,) = await brokers.start_all(1)
    info = await registry.create_topic("old", 1)
    await registry.delete_topic("old")
    await registry.create_topic("old", 1)  # the same name, a new topic id
    session = registry._session
    assert session is not None
    # A request that outlived its topic (written by a requester that saw the old id).
    await session.create(
        zk_paths.create_partitions_request("old"),
        encode_create_partitions_request(CreatePartitionsRequest(info.topic_id, 5, 1)),
    )
    with trio.fail_after(10):
        while await session.exists(zk_paths.create_partitions_request("old")) is not None:
            await trio.sleep(0.05)
    assert len(registry.snapshot.topics["old"].partitions) == 1


async def test_config_changes_compose_and_reach_every_broker(brokers: Brokers) -> None:
    registries = await brokers.start_all(1, 2)
    info = await registries[0].create_topic("cfg", 1, {"retention.ms": "60000"})
    # The feed of the broker holding the replica: config changes come only for topics held there.
    holder = next(r for r in registries if r.broker_id == info.partitions[0].leader)
    await holder.wait_for(lambda s: "cfg" in s.topics)
    changes = holder.assignment_changes()
    with trio.fail_after(10):
        await anext(changes)

    def setting(key: str, value: str) -> Callable[[Mapping[str, str]], Mapping[str, str]]:
        def change(current: Mapping[str, str]) -> Mapping[str, str]:
            return {**current, key: value}

        return change

    # Concurrent read-modify-writes from two brokers: neither loses the other's key.
    async with trio.open_nursery() as nursery:
        nursery.start_soon(registries[0].alter_topic_config, "cfg", setting("segment.bytes", "1048576"))
        nursery.start_soon(registries[1].alter_topic_config, "cfg", setting("flush.messages", "10"))
    expected = {"retention.ms": "60000", "segment.bytes": "1048576", "flush.messages": "10"}
    for registry in registries:
        snapshot = await registry.wait_for(lambda s: "cfg" in s.topics and dict(s.topics["cfg"].config) == expected)
        assert snapshot.topics["cfg"].config == expected
    # A config change is an assignment change with nothing added or removed, so brokers apply it.
    with trio.fail_after(10):
        while True:
            change = await anext(changes)
            assert change.added == frozenset() and change.removed == frozenset()
            if dict(change.snapshot.topics["cfg"].config) == expected:
                break

    assert await registries[0].alter_topic_config("cfg", lambda _: {}) == {}
    with pytest.raises(UnknownTopicError):
        await registries[0].alter_topic_config("absent", lambda c: c)
