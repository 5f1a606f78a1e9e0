"""Consumer groups (KIP-848) through the trio driver, on trio's autojump MockClock: the
heartbeat waits for its records to be flushed, the service's timer task fences a silent
member after ``group.consumer.session.timeout.ms``, and the cluster's topics reach the
coordinator from registry snapshots (ids as the registry keeps them)."""

from __future__ import annotations

import base64
import uuid
from collections.abc import AsyncIterator

import pytest
import trio
import trio.testing

from tributary.broker.cluster.model import ClusterSnapshot, PartitionState, TopicInfo
from tributary.broker.group.coordinator import GroupCoordinator
from tributary.broker.group.messages import ConsumerHeartbeatRequest
from tributary.broker.group.service import GroupService, topic_image, topic_uuid
from tributary.protocol.error_codes import ErrorCode

from .consumer_harness import CONSUMER_CONFIG
from .test_service import MemoryStorage, clock_ms, lead_everything

TOPIC_ID = uuid.UUID("11111111-2222-3333-4444-555555555555")
SESSION_S = CONSUMER_CONFIG.consumer_session_timeout_ms / 1000


def snapshot(partitions: int) -> ClusterSnapshot:
    text_id = base64.urlsafe_b64encode(TOPIC_ID.bytes).rstrip(b"=").decode()
    states = {p: PartitionState(leader=1, leader_epoch=0, replicas=(1,), isr=(1,)) for p in range(partitions)}
    return ClusterSnapshot(brokers={}, topics={"t": TopicInfo("t", states, topic_id=text_id)}, controller_id=1,
                           cluster_id="c")  # fmt: skip


@pytest.fixture
async def storage() -> MemoryStorage:
    return MemoryStorage()


@pytest.fixture
async def service(storage: MemoryStorage) -> AsyncIterator[GroupService]:
    svc = GroupService(GroupCoordinator(CONSUMER_CONFIG), storage, clock_ms)
    async with trio.open_nursery() as nursery:
        await lead_everything(nursery, svc)
        await svc.update_topics(snapshot(4))
        yield svc
        nursery.cancel_scope.cancel()


def join(member: str) -> ConsumerHeartbeatRequest:
    return ConsumerHeartbeatRequest(
        "g", member, 0, rebalance_timeout_ms=30_000, subscribed_topic_names=("t",), owned={}
    )


def test_topic_ids_as_the_registry_keeps_them() -> None:
    assert topic_uuid(base64.urlsafe_b64encode(TOPIC_ID.bytes).rstrip(b"=").decode()) == TOPIC_ID
    assert topic_uuid("") is None and topic_uuid("not base64!") is None
    assert topic_image(snapshot(3)).by_name["t"].partitions == 3


async def test_a_join_is_answered_once_flushed(
    service: GroupService, storage: MemoryStorage, autojump_clock: trio.testing.MockClock
) -> None:
    storage.flush_gate = trio.Event()
    results = []

    async def member() -> None:
        results.append(await service.consumer_heartbeat(join("a")))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(member)
        await trio.sleep(1)
        assert not results  # the records are written, not yet flushed
        storage.flush_gate.set()
    (result,) = results
    assert (result.error, result.member_epoch) == (ErrorCode.NONE, 1)
    assert result.assignment == {TOPIC_ID: frozenset(range(4))}


async def test_the_timer_task_fences_a_silent_member(
    service: GroupService, autojump_clock: trio.testing.MockClock
) -> None:
    a = await service.consumer_heartbeat(join("a"))
    b = await service.consumer_heartbeat(join("b"))
    assert a.error == b.error == ErrorCode.NONE
    start = trio.current_time()
    # a keeps heartbeating every second (at the epoch it has), b never again.
    epoch = a.member_epoch
    while "b" in service.coordinator.consumers.groups["g"].members:
        await trio.sleep(1)
        beat = await service.consumer_heartbeat(
            ConsumerHeartbeatRequest("g", "a", epoch, owned={TOPIC_ID: frozenset()})
        )
        assert beat.error == ErrorCode.NONE, beat
        epoch = beat.member_epoch
        assert trio.current_time() - start <= SESSION_S + 2
    assert trio.current_time() - start >= SESSION_S - 1
    described = service.consumer_describe("g")
    assert [m.member_id for m in described.members] == ["a"]


async def test_more_partitions_reach_the_members_from_a_snapshot(
    service: GroupService, autojump_clock: trio.testing.MockClock
) -> None:
    first = await service.consumer_heartbeat(join("a"))
    await service.update_topics(snapshot(6))
    owned = {TOPIC_ID: frozenset(range(4))}
    again = await service.consumer_heartbeat(ConsumerHeartbeatRequest("g", "a", first.member_epoch, owned=owned))
    assert again.assignment == {TOPIC_ID: frozenset(range(6))}
    assert again.member_epoch == first.member_epoch + 1
