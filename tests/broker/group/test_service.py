"""The trio driver: real tasks and waiting, on trio's autojump MockClock."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import AsyncIterator, Sequence

import pytest
import trio
import trio.testing

from tributary.broker.group.coordinator import GroupCoordinator
from tributary.broker.group.messages import (
    CommitRequest,
    JoinRequest,
    JoinResult,
    Loaded,
    SyncRequest,
    TxnEnd,
    TxnRecord,
)
from tributary.broker.group.offsets import OffsetAndMetadata
from tributary.broker.group.service import GroupService
from tributary.protocol.error_codes import ErrorCode

from .harness import CONFIG, RANGE, SESSION

DELAY_S = CONFIG.initial_rebalance_delay_ms / 1000


class MemoryStorage:
    """The offsets logs in memory: a transactional write keeps its records as TxnRecords (the
    markers a test adds with :meth:`mark`), as the real storage reads them back."""

    def __init__(self) -> None:
        self.log: dict[int, list[Loaded]] = defaultdict(list)
        self.flushes = 0
        #: What flush() answers per partition (by default every write is durable).
        self.outcomes: dict[int, ErrorCode] = {}
        #: While set, flush() waits for this event.
        self.flush_gate: trio.Event | None = None
        #: While set, read() waits for this event.
        self.read_gate: trio.Event | None = None

    def append(
        self,
        partition: int,
        records: Sequence[tuple[bytes, bytes | None]],
        now_ms: int,
        producer: tuple[int, int] | None = None,
    ) -> ErrorCode:
        if producer is None:
            self.log[partition].extend(records)
        else:
            self.log[partition].extend(TxnRecord(producer[0], key, value) for key, value in records)
        return ErrorCode.NONE

    def mark(self, partition: int, producer_id: int, commit: bool) -> None:
        self.log[partition].append(TxnEnd(producer_id, commit))

    async def flush(self) -> dict[int, ErrorCode]:
        self.flushes += 1
        if self.flush_gate is not None:
            await self.flush_gate.wait()
        return dict(self.outcomes)

    async def read(self, partition: int) -> list[Loaded]:
        if self.read_gate is not None:
            await self.read_gate.wait()
        return list(self.log[partition])


def clock_ms() -> int:
    return int(trio.current_time() * 1000)


@pytest.fixture
async def storage() -> MemoryStorage:
    return MemoryStorage()


@pytest.fixture
async def service(storage: MemoryStorage) -> AsyncIterator[GroupService]:
    """A running service leading every partition. Tests using it must also request
    ``autojump_clock``: pytest-trio takes the clock from the test's own arguments."""
    svc = GroupService(GroupCoordinator(CONFIG), storage, clock_ms)
    async with trio.open_nursery() as nursery:
        await lead_everything(nursery, svc)
        yield svc
        nursery.cancel_scope.cancel()


async def wait_loaded(svc: GroupService) -> None:
    while any(svc.coordinator.is_loading(p) for p in svc.coordinator.owned_partitions):
        await trio.sleep(0.01)


async def lead_everything(nursery: trio.Nursery, svc: GroupService) -> None:
    """Run ``svc`` in ``nursery``, leading every offsets partition, until all are loaded."""
    await nursery.start(svc.run)
    for partition in range(CONFIG.offsets_topic_partitions):
        svc.partition_gained(partition)
    await wait_loaded(svc)


def join_request(member_id: str = "", instance: str | None = None) -> JoinRequest:
    return JoinRequest("g", member_id, instance, "consumer", RANGE, SESSION, 30_000, client_id="c")


async def join(svc: GroupService, member_id: str = "") -> JoinResult:
    if not member_id:
        first = await svc.join(join_request())
        assert first.error == ErrorCode.MEMBER_ID_REQUIRED
        member_id = first.member_id
    return await svc.join(join_request(member_id))


async def test_join_waits_for_the_initial_delay_and_sync_completes(
    service: GroupService, autojump_clock: trio.testing.MockClock
) -> None:
    results: list[JoinResult] = []

    async def member() -> None:
        results.append(await join(service))

    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(member)
        nursery.start_soon(member)
    # Both arrived in the first delay, so it was extended once.
    assert trio.current_time() - start == pytest.approx(2 * DELAY_S, abs=0.05)
    assert {r.generation_id for r in results} == {1}
    leader = next(r for r in results if r.members)
    follower = next(r for r in results if not r.members)
    synced = {}

    async def sync(result: JoinResult, assignments: dict[str, bytes]) -> None:
        reply = await service.sync(SyncRequest("g", 1, result.member_id, None, assignments))
        synced[result.member_id] = reply.assignment

    async with trio.open_nursery() as nursery:
        nursery.start_soon(sync, follower, {})
        await trio.sleep(1)  # the follower waits for the leader
        assert not synced
        nursery.start_soon(sync, leader, {leader.member_id: b"L", follower.member_id: b"F"})
    assert synced == {leader.member_id: b"L", follower.member_id: b"F"}
    assert await service.heartbeat("g", 1, follower.member_id, None) == ErrorCode.NONE


async def test_timers_expire_sessions_and_complete_waiting_joins(
    service: GroupService, autojump_clock: trio.testing.MockClock
) -> None:
    async def pair() -> tuple[JoinResult, JoinResult]:
        out: list[JoinResult] = []

        async def one() -> None:
            out.append(await join(service))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(one)
            nursery.start_soon(one)
        return out[0], out[1]

    a, b = await pair()
    await service.sync(SyncRequest("g", 1, a.leader, None, {}))
    other = b.member_id if a.leader == a.member_id else a.member_id
    await service.sync(SyncRequest("g", 1, other, None, {}))
    # Only the leader rejoins; the other stops heartbeating: the session timer removes
    # it, and the waiting JoinGroup completes without anyone calling in.
    start = trio.current_time()
    result = await service.join(join_request(a.leader))
    assert trio.current_time() - start == pytest.approx(SESSION / 1000, abs=0.05)
    assert result.generation_id == 2 and [m.member_id for m in result.members] == [a.leader]


async def test_cancelled_request_leaves_nothing_behind(
    service: GroupService, autojump_clock: trio.testing.MockClock
) -> None:
    with trio.move_on_after(1):
        await join(service)  # waits for the initial delay: cancelled before
    assert not service._waiting
    await trio.sleep(2 * DELAY_S)  # its reply comes and is dropped
    assert not service._waiting


async def test_replies_wait_for_the_flush(
    service: GroupService, storage: MemoryStorage, autojump_clock: trio.testing.MockClock
) -> None:
    storage.flush_gate = trio.Event()
    done = trio.Event()

    async def commit() -> None:
        result = await service.commit(CommitRequest("g", "", None, -1, {("t", 0): OffsetAndMetadata(5)}))
        assert result.errors == {("t", 0): ErrorCode.NONE}
        done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(commit)
        await trio.sleep(1)
        assert not done.is_set()
        storage.flush_gate.set()
    assert storage.flushes == 1
    value = service.fetch_offsets("g", [("t", 0)]).offsets[("t", 0)]
    assert value is not None and value.offset == 5


@pytest.mark.parametrize(
    ("outcome", "answered"),
    [
        (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_COORDINATOR),  # leadership moved meanwhile
        (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.REQUEST_TIMED_OUT),  # no in-sync replica took it in time
    ],
)
async def test_a_commit_not_on_the_replicas_is_refused_and_not_counted(
    service: GroupService,
    storage: MemoryStorage,
    autojump_clock: trio.testing.MockClock,
    outcome: ErrorCode,
    answered: ErrorCode,
) -> None:
    # A coordinator that took the partition over would not find such a commit: acknowledging
    # it loses it (a CI run saw a commit acknowledged by the old coordinator, then truncated
    # away by the new leader).
    assert (await service.commit(CommitRequest("g", "", None, -1, {("t", 0): OffsetAndMetadata(5)}))).errors == {
        ("t", 0): ErrorCode.NONE
    }
    storage.outcomes = dict.fromkeys(range(CONFIG.offsets_topic_partitions), outcome)
    result = await service.commit(CommitRequest("g", "", None, -1, {("t", 0): OffsetAndMetadata(9)}))
    assert result.errors == {("t", 0): answered}
    value = service.fetch_offsets("g", [("t", 0)]).offsets[("t", 0)]
    assert value is not None and value.offset == 5


async def test_load_in_progress_then_loaded(storage: MemoryStorage, autojump_clock: trio.testing.MockClock) -> None:
    first = GroupService(GroupCoordinator(CONFIG), storage, clock_ms)
    async with trio.open_nursery() as nursery:
        await lead_everything(nursery, first)
        await first.commit(CommitRequest("g", "", None, -1, {("t", 0): OffsetAndMetadata(9)}))
        nursery.cancel_scope.cancel()

    second = GroupService(GroupCoordinator(CONFIG), storage, clock_ms)
    storage.read_gate = trio.Event()
    async with trio.open_nursery() as nursery:
        await nursery.start(second.run)
        partition = second.coordinator.partition_for("g")
        second.partition_gained(partition)
        assert (await second.join(join_request())).error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        assert second.fetch_offsets("g", None).error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        storage.read_gate.set()
        await wait_loaded(second)
        value = second.fetch_offsets("g", [("t", 0)]).offsets[("t", 0)]
        assert value is not None and value.offset == 9
        await second.partition_lost(partition)
        assert second.fetch_offsets("g", None).error == ErrorCode.NOT_COORDINATOR
        nursery.cancel_scope.cancel()
