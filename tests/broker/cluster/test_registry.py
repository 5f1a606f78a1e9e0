"""The cluster registry against a real ZooKeeper: several brokers in one process, each its own session."""

from __future__ import annotations

import itertools
import threading
from collections import Counter

import pytest
import trio

from tests.broker.cluster.conftest import Brokers
from tributary.broker.cluster import (
    NO_LEADER,
    BrokerIdInUseError,
    BrokerInfo,
    ClusterRegistry,
    ClusterSnapshot,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    ReplicaKey,
    TopicExistsError,
    UnknownTopicError,
    ZooKeeperUnavailableError,
)
from tributary.broker.security.listeners import Endpoint
from tributary.testing.ports import free_port


def _controllers(registries: list[ClusterRegistry]) -> list[int]:
    return [registry.broker_id for registry in registries if registry.is_controller]


async def _agree_on_one_controller(registries: list[ClusterRegistry], live: set[int]) -> int:
    for registry in registries:
        await registry.wait_for(lambda s: set(s.brokers) == live and s.controller_id in live)
    (controller_id,) = {registry.snapshot.controller_id for registry in registries}
    assert controller_id is not None
    by_id = {registry.broker_id: registry for registry in registries}
    await by_id[controller_id].wait_for(lambda _: by_id[controller_id].is_controller)
    assert _controllers(registries) == [controller_id]
    return controller_id


async def test_brokers_see_each_other_and_elect_exactly_one_controller(brokers: Brokers) -> None:
    registries = await brokers.start_all(1, 2, 3)
    await _agree_on_one_controller(registries, {1, 2, 3})
    for registry in registries:
        snapshot = registry.snapshot
        seen = snapshot.brokers[2]
        plaintext = Endpoint("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9002)
        assert seen == BrokerInfo(2, "127.0.0.1", 9002, "dc-2", epoch=seen.epoch, endpoints=(plaintext,))
        assert seen.epoch > 0  # the registration's czxid: Kafka's broker epoch
        assert registry.registered and registry.connected
    cluster_ids = {registry.snapshot.cluster_id for registry in registries}
    assert len(cluster_ids) == 1 and "" not in cluster_ids


async def test_a_new_controller_is_elected_when_the_controller_leaves(brokers: Brokers) -> None:
    registries = await brokers.start_all(1, 2, 3)
    old = await _agree_on_one_controller(registries, {1, 2, 3})
    await brokers.stop(old)
    remaining = [registry for registry in registries if registry.broker_id != old]
    new = await _agree_on_one_controller(remaining, {1, 2, 3} - {old})
    assert new != old


async def test_created_topic_is_spread_evenly_and_seen_by_every_broker(brokers: Brokers) -> None:
    registries = await brokers.start_all(1, 2, 3)
    controller_id = await _agree_on_one_controller(registries, {1, 2, 3})
    # Any broker may create a topic, not only the controller.
    requester = next(r for r in registries if r.broker_id != controller_id)

    info = await requester.create_topic("events", 6, {"retention.ms": "60000"})

    assert sorted(info.partitions) == list(range(6))
    assert Counter(state.leader for state in info.partitions.values()) == {1: 2, 2: 2, 3: 2}
    for state in info.partitions.values():
        assert state.replicas == (state.leader,)
        assert state.isr == (state.leader,)
        assert state.leader_epoch == 0
    assert info.config == {"retention.ms": "60000"}
    assert info.topic_id
    for registry in registries:
        snapshot = await registry.wait_for(lambda s: "events" in s.topics)
        assert snapshot.topics["events"] == info
        leader = snapshot.leader_for("events", 0)
        assert leader is not None and leader.id == info.partitions[0].leader
        assert snapshot.leader_for("events", 6) is None
        assert snapshot.leader_for("nope", 0) is None

    with pytest.raises(TopicExistsError):
        await registries[0].create_topic("events", 1)
    with pytest.raises(InvalidReplicationFactorError):
        await registries[0].create_topic("wide", 1, replication_factor=4)
    with pytest.raises(InvalidPartitionsError):
        await registries[0].create_topic("empty", 0)


async def test_leaders_go_offline_with_their_broker_and_return_with_a_new_epoch(brokers: Brokers) -> None:
    registries = await brokers.start_all(1, 2, 3)
    info = await registries[0].create_topic("t", 6)
    victim = 2
    theirs = {index for index, state in info.partitions.items() if state.leader == victim}
    assert len(theirs) == 2
    await brokers.stop(victim)

    survivors = [registry for registry in registries if registry.broker_id != victim]

    def offline(snapshot: ClusterSnapshot) -> bool:
        partitions = snapshot.topics["t"].partitions
        return victim not in snapshot.brokers and all(partitions[index].leader == NO_LEADER for index in theirs)

    for registry in survivors:
        snapshot = await registry.wait_for(offline)
        for index, state in snapshot.topics["t"].partitions.items():
            if index in theirs:
                assert state.leader_epoch == 0
                assert state.isr == (victim,)
                assert snapshot.leader_for("t", index) is None
            else:
                assert state == info.partitions[index]

    returned = await brokers.start(victim)

    def back(snapshot: ClusterSnapshot) -> bool:
        partitions = snapshot.topics["t"].partitions
        return all(partitions[index].leader == victim for index in theirs)

    for registry in [*survivors, returned]:
        snapshot = await registry.wait_for(back)
        for index, state in snapshot.topics["t"].partitions.items():
            assert state.leader_epoch == (1 if index in theirs else 0)


async def test_a_broker_id_held_by_a_live_session_is_refused(brokers: Brokers) -> None:
    first = await brokers.start(1)
    with pytest.raises(BrokerIdInUseError, match="broker id 1 is already registered"):
        await brokers.start(1)
    assert first.registered
    assert set(first.snapshot.brokers) == {1}


async def test_deleted_topic_disappears_everywhere(brokers: Brokers) -> None:
    registries = await brokers.start_all(1, 2, 3)
    doomed = await registries[0].create_topic("doomed", 3)
    await registries[0].create_topic("kept", 1)
    for registry in registries:
        await registry.wait_for(lambda s: {"doomed", "kept"} <= set(s.topics))

    await registries[2].delete_topic("doomed")

    for registry in registries:
        snapshot = await registry.wait_for(lambda s: "doomed" not in s.topics)
        assert "kept" in snapshot.topics
    with pytest.raises(UnknownTopicError):
        await registries[1].delete_topic("doomed")
    again = await registries[1].create_topic("doomed", 2)
    assert again.topic_id != doomed.topic_id
    assert len(again.partitions) == 2


async def test_producer_id_blocks_never_overlap(brokers: Brokers) -> None:
    registries = await brokers.start_all(1, 2, 3)
    blocks: list[range] = []

    async def allocate(registry: ClusterRegistry) -> None:
        blocks.append(await registry.allocate_producer_id_block())

    async with trio.open_nursery() as nursery:
        for registry in registries:
            for _ in range(8):
                nursery.start_soon(allocate, registry)

    blocks.sort(key=lambda block: block.start)
    assert len(blocks) == 24
    assert blocks[0].start == 0
    assert all(len(block) == 1000 for block in blocks)
    assert all(earlier.stop == later.start for earlier, later in itertools.pairwise(blocks))


async def test_an_expired_session_registers_again(brokers: Brokers) -> None:
    registries = await brokers.start_all(1, 2, 3)
    await registries[0].create_topic("t", 3)
    controller_id = await _agree_on_one_controller(registries, {1, 2, 3})
    victim = brokers[controller_id]
    old_session = victim.session_id
    client_id = victim.zk_client_id
    assert old_session is not None and client_id is not None

    await trio.to_thread.run_sync(brokers.zookeeper.expire_session, client_id)

    await victim.wait_for(
        lambda s: victim.session_id not in (None, old_session) and victim.registered and set(s.brokers) == {1, 2, 3}
    )

    def healthy(snapshot: ClusterSnapshot) -> bool:
        partitions = snapshot.topics["t"].partitions.values()
        return set(snapshot.brokers) == {1, 2, 3} and all(state.leader in state.replicas for state in partitions)

    for registry in registries:
        await registry.wait_for(healthy)
    await _agree_on_one_controller(registries, {1, 2, 3})
    # Watches were re-armed in the new session: a change made now still reaches the victim.
    await registries[1].create_topic("later", 1)
    await victim.wait_for(lambda s: "later" in s.topics)


async def test_an_outage_keeps_the_last_snapshot_and_recovers(brokers: Brokers) -> None:
    registries = await brokers.start_all(1, 2)
    await registries[0].create_topic("t", 2)
    for registry in registries:
        await registry.wait_for(lambda s: "t" in s.topics)
    before = {registry.broker_id: registry.snapshot for registry in registries}

    brokers.zookeeper.stop()
    for registry in registries:
        await registry.wait_for(lambda _, registry=registry: not registry.connected)
        assert registry.snapshot == before[registry.broker_id]
        assert registry.snapshot.leader_for("t", 0) is not None

    brokers.zookeeper.start()
    for registry in registries:
        await registry.wait_for(
            lambda s, registry=registry: registry.connected and registry.registered and set(s.brokers) == {1, 2},
            timeout=20,
        )
    await registries[1].create_topic("after", 1)
    await registries[0].wait_for(lambda s: "after" in s.topics)


async def test_assignment_changes_follow_topics(brokers: Brokers) -> None:
    first, second = await brokers.start_all(1, 2)
    changes = first.assignment_changes()
    with trio.fail_after(10):
        initial = await anext(changes)
    assert initial.added == frozenset() and initial.removed == frozenset()

    info = await second.create_topic("t", 4)
    mine = frozenset(ReplicaKey("t", index, info.topic_id) for index, s in info.partitions.items() if 1 in s.replicas)
    assert len(mine) == 2
    with trio.fail_after(10):
        created = await anext(changes)
    assert created.added == mine and created.removed == frozenset()
    assert "t" in created.snapshot.topics

    await second.delete_topic("t")
    with trio.fail_after(10):
        deleted = await anext(changes)
    assert deleted.added == frozenset() and deleted.removed == mine

    # The feed ends with the registry, so a broker's consuming loop ends with it.
    await brokers.stop(1)
    with trio.fail_after(10):
        assert [change async for change in changes] == []


async def test_stopped_registries_leave_no_threads_behind(brokers: Brokers) -> None:
    before = set(threading.enumerate())
    await brokers.start_all(1, 2)
    assert set(threading.enumerate()) - before
    await brokers.stop(1)
    await brokers.stop(2)
    assert set(threading.enumerate()) - before == set()


async def test_a_registry_stops_promptly_while_zookeeper_is_down(brokers: Brokers) -> None:
    (registry,) = await brokers.start_all(1)
    brokers.zookeeper.stop()
    await registry.wait_for(lambda _: not registry.connected)
    with trio.fail_after(15):
        await brokers.stop(1)
    assert not registry.running


async def test_start_fails_when_zookeeper_does_not_answer() -> None:
    before = set(threading.enumerate())
    registry = ClusterRegistry(f"127.0.0.1:{free_port()}", BrokerInfo(1, "127.0.0.1", 9001), connect_timeout=0.5)
    async with trio.open_nursery() as nursery:
        with pytest.raises(ZooKeeperUnavailableError):
            await nursery.start(registry.run)
    assert set(threading.enumerate()) - before == set()
