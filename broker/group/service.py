"""The trio driver of the group coordinator: it feeds requests, time and the
cluster's leadership changes into the state machine, and carries out what comes
out of it.

- A request handler calls one of the ``async`` methods. Requests that may wait
  (JoinGroup, SyncGroup, OffsetCommit) get a ticket; the handler sleeps on it
  until a :class:`~.messages.Reply` for that ticket comes out of the state
  machine, whichever call produced it (another member's JoinGroup, a timer).
- :class:`~.messages.Write` effects are appended at once, in the order the state
  machine made them; their outcome is fed back once they are durable (on every
  in-sync replica, and on disk when the flush policy asks for it), or with why not,
  as Kafka's coordinator appends with acks=all: an OffsetCommit is answered only
  once a coordinator that takes the partition over will find it. Other requests
  run meanwhile; the state machine keeps what a write carries pending until its
  outcome (an offset commit counts once written). Replies are delivered after
  the writes of the same call are settled.
- One task sleeps until the state machine's next deadline (``trio.sleep_until``
  semantics through a cancel scope, so tests can use trio's MockClock) and fires
  the timers; any call that changes the deadlines wakes it.
- :meth:`GroupService.follow_leadership` loads the ``__consumer_offsets``
  partitions this broker comes to lead and unloads those it stops leading.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import logging
import time
import uuid
from collections import deque
from collections.abc import Callable, Collection
from typing import Any

import trio

from tributary.broker.cluster.model import ClusterSnapshot, same_topic
from tributary.broker.cluster.registry import ClusterRegistry
from tributary.broker.group.consumer_group import TopicImage
from tributary.broker.group.consumer_records import TopicMetadata
from tributary.broker.group.coordinator import GroupCoordinator
from tributary.broker.group.messages import (
    CommitRequest,
    CommitResult,
    ConsumerGroupSummary,
    ConsumerHeartbeatRequest,
    ConsumerHeartbeatResult,
    Effect,
    FetchResult,
    GroupSummary,
    JoinRequest,
    JoinResult,
    LeaveResult,
    LeavingMember,
    ListedGroup,
    Reply,
    SyncRequest,
    SyncResult,
    TxnCommitRequest,
    Write,
)
from tributary.broker.group.offsets import TopicPartition
from tributary.broker.group.placement import OFFSETS_TOPIC
from tributary.broker.group.storage import Storage, StorageError
from tributary.protocol.error_codes import ErrorCode

log = logging.getLogger(__name__)

Clock = Callable[[], int]
#: How long to wait before reading a partition again after a failed load.
LOAD_RETRY_S = 1.0


_WALL_AT_START_MS = time.time_ns() // 1_000_000
_MONOTONIC_AT_START_NS = time.monotonic_ns()


def wall_clock_ms() -> int:
    """Wall-clock milliseconds that never jump: the wall clock at start plus the
    monotonic time since. Commit timestamps are compared with wall-clock time (they
    outlive the process), while the timers need a clock that a step of the system
    clock cannot stall or fire early."""
    return _WALL_AT_START_MS + (time.monotonic_ns() - _MONOTONIC_AT_START_NS) // 1_000_000


def topic_uuid(topic_id: str) -> uuid.UUID | None:
    """A topic id as the registry keeps it (Kafka's base64url text) as a UUID; None for a
    topic without one, which consumer groups then cannot name."""
    if not topic_id:
        return None
    try:
        raw = base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4))
    except (binascii.Error, ValueError):
        return None
    return uuid.UUID(bytes=raw) if len(raw) == 16 else None


def topic_image(snapshot: ClusterSnapshot) -> TopicImage:
    """The topics consumer groups subscribe to, with their ids and partition counts."""
    topics = {}
    for name, info in snapshot.topics.items():
        topic_id = topic_uuid(info.topic_id)
        if topic_id is not None and info.partitions:
            topics[name] = TopicMetadata(topic_id, name, len(info.partitions))
    return TopicImage(topics)


class _Waiter:
    __slots__ = ("event", "result")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.result: Any = None


class GroupService:
    def __init__(self, coordinator: GroupCoordinator, storage: Storage, clock: Clock = wall_clock_ms) -> None:
        self.coordinator = coordinator
        self._storage = storage
        self._clock = clock
        self._tickets = itertools.count(1)
        self._waiting: dict[int, _Waiter] = {}
        self._deadlines_changed = trio.Event()
        self._loads: dict[int, trio.CancelScope] = {}
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Runs the timers (and the loads started by :meth:`partition_gained`) until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._run_timers)
            task_status.started()

    # --- requests --------------------------------------------------------------------------

    async def join(self, req: JoinRequest) -> JoinResult:
        result: JoinResult = await self._wait(lambda now, ticket: self.coordinator.join(now, ticket, req))
        return result

    async def sync(self, req: SyncRequest) -> SyncResult:
        result: SyncResult = await self._wait(lambda now, ticket: self.coordinator.sync(now, ticket, req))
        return result

    async def commit(self, req: CommitRequest) -> CommitResult:
        result: CommitResult = await self._wait(lambda now, ticket: self.coordinator.commit(now, ticket, req))
        return result

    async def consumer_heartbeat(self, req: ConsumerHeartbeatRequest) -> ConsumerHeartbeatResult:
        result: ConsumerHeartbeatResult = await self._wait(
            lambda now, ticket: self.coordinator.consumer_heartbeat(now, ticket, req)
        )
        return result

    def consumer_describe(self, group_id: str) -> ConsumerGroupSummary:
        return self.coordinator.consumer_describe(group_id)

    async def update_topics(self, snapshot: ClusterSnapshot) -> None:
        await self._apply(self.coordinator.update_topics(self._clock(), topic_image(snapshot)))

    async def txn_commit(self, req: TxnCommitRequest) -> CommitResult:
        result: CommitResult = await self._wait(lambda now, ticket: self.coordinator.txn_commit(now, ticket, req))
        return result

    async def complete_txn(self, partition: int, producer_id: int, commit: bool) -> None:
        """A transaction's marker is in ``partition`` (WriteTxnMarkers appended it)."""
        await self._apply(self.coordinator.complete_txn(self._clock(), partition, producer_id, commit))

    async def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> ErrorCode:
        now = self._clock()
        error, effects = self.coordinator.heartbeat(now, group_id, generation_id, member_id, group_instance_id)
        await self._apply(effects)
        return error

    async def leave(self, group_id: str, leaving: list[LeavingMember]) -> LeaveResult:
        result, effects = self.coordinator.leave(self._clock(), group_id, leaving)
        await self._apply(effects)
        return result

    async def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        results, effects = self.coordinator.delete_groups(self._clock(), group_ids)
        await self._apply(effects)
        return results

    async def delete_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        error, results, effects = self.coordinator.delete_offsets(self._clock(), group_id, partitions)
        await self._apply(effects)
        return error, results

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None) -> FetchResult:
        return self.coordinator.fetch_offsets(group_id, partitions)

    def describe(self, group_id: str) -> GroupSummary:
        return self.coordinator.describe(group_id)

    def list_groups(
        self, states: Collection[str] = (), types: Collection[str] = ()
    ) -> tuple[ErrorCode, list[ListedGroup]]:
        return self.coordinator.list_groups(states, types)

    async def _wait(self, call: Callable[[int, int], list[Effect]]) -> Any:
        ticket = next(self._tickets)
        waiter = self._waiting[ticket] = _Waiter()
        try:
            await self._apply(call(self._clock(), ticket))
            await waiter.event.wait()
            return waiter.result
        finally:
            # A cancelled handler (its connection closed) leaves nothing behind; the
            # state machine's later reply to this ticket is then dropped.
            self._waiting.pop(ticket, None)

    # --- effects -------------------------------------------------------------------------------

    async def _apply(self, effects: list[Effect]) -> None:
        replies: list[Reply] = []
        queue = deque(effects)
        while queue:
            appended: list[Write] = []
            while queue:
                effect = queue.popleft()
                if isinstance(effect, Reply):
                    replies.append(effect)
                    continue
                now = self._clock()
                error = self._storage.append(effect.partition, effect.records, now, effect.producer)
                if error == ErrorCode.NONE:
                    appended.append(effect)
                else:  # refused: nothing to wait for
                    queue.extend(self.coordinator.write_completed(now, effect.write_id, error))
            if appended:
                self._deadlines_changed.set()  # the timer task need not wait for the replicas
                # Shielded: the outcomes and replies may belong to other requests than the caller's.
                with trio.CancelScope(shield=True):
                    outcomes = await self._storage.flush()
                for write in appended:
                    error = outcomes.get(write.partition, ErrorCode.NONE)
                    queue.extend(self.coordinator.write_completed(self._clock(), write.write_id, error))
        self._deadlines_changed.set()  # (a call that made no effect may still have set a timer)
        for reply in replies:
            waiter = self._waiting.pop(reply.ticket, None)
            if waiter is not None:
                waiter.result = reply.result
                waiter.event.set()

    async def _run_timers(self) -> None:
        while True:
            self._deadlines_changed = trio.Event()
            deadline = self.coordinator.next_deadline()
            if deadline is None:
                await self._deadlines_changed.wait()
                continue
            delay = (deadline - self._clock()) / 1000
            if delay > 0:
                with trio.move_on_after(delay):
                    await self._deadlines_changed.wait()
                continue
            await self._apply(self.coordinator.advance(self._clock()))

    # --- leadership of __consumer_offsets partitions -------------------------------------------

    def partition_gained(self, partition: int) -> None:
        """This broker now leads ``partition``: load it in the background."""
        assert self._nursery is not None, "GroupService.run is not running"
        token = self.coordinator.begin_loading(partition)
        scope = trio.CancelScope()
        self._loads[partition] = scope
        self._nursery.start_soon(self._load, partition, token, scope)

    async def partition_lost(self, partition: int) -> None:
        scope = self._loads.pop(partition, None)
        if scope is not None:
            scope.cancel()
        await self._apply(self.coordinator.unload(self._clock(), partition))

    async def _load(self, partition: int, token: int, scope: trio.CancelScope) -> None:
        with scope:
            started = time.monotonic()
            while True:
                try:
                    records = await self._storage.read(partition)
                    break
                except StorageError as exc:
                    log.warning("loading %s-%d failed, retrying: %s", OFFSETS_TOPIC, partition, exc)
                    await trio.sleep(LOAD_RETRY_S)
            await self._apply(self.coordinator.finish_loading(self._clock(), partition, token, records))
            log.info("loaded %s-%d in %.3f s", OFFSETS_TOPIC, partition, time.monotonic() - started)
        if self._loads.get(partition) is scope:
            del self._loads[partition]

    async def follow_leadership(
        self, registry: ClusterRegistry, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Keeps the coordinator in line with the registry: loads and unloads offsets
        partitions as their leadership moves, and drops the offsets of deleted topics.
        Started once the current leadership has been applied (loads may still run)."""
        previous: ClusterSnapshot | None = None
        async for snapshot in registry.snapshots():
            await self.update_topics(snapshot)
            if previous is not None:
                await self._forget_deleted_topics(previous, snapshot)
            await self._follow_offsets_partitions(previous, snapshot, registry.broker_id)
            if previous is None:
                task_status.started()
            previous = snapshot

    async def _follow_offsets_partitions(
        self, previous: ClusterSnapshot | None, snapshot: ClusterSnapshot, broker_id: int
    ) -> None:
        info = snapshot.topics.get(OFFSETS_TOPIC)
        led: set[int] = set()
        if info is not None:
            self.coordinator.set_partition_count(len(info.partitions))
            led = {p for p, state in info.partitions.items() if state.leader == broker_id}
        owned = set(self.coordinator.owned_partitions)
        before = previous.topics.get(OFFSETS_TOPIC) if previous is not None else None
        recreated = before is not None and not same_topic(before, info)
        # A deleted (maybe recreated) topic: nothing carries over.
        lost = owned if recreated else owned - led
        for partition in sorted(lost):
            await self.partition_lost(partition)
        for partition in sorted(led - (owned - lost)):
            self.partition_gained(partition)

    async def _forget_deleted_topics(self, previous: ClusterSnapshot, snapshot: ClusterSnapshot) -> None:
        gone = {
            name
            for name, info in previous.topics.items()
            if name != OFFSETS_TOPIC and not same_topic(info, snapshot.topics.get(name))
        }
        if gone:
            await self._apply(self.coordinator.remove_topic_offsets(self._clock(), gone))
