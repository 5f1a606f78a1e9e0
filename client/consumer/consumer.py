"""The Consumer: subscribe or assign, poll records, seek, pause, commit.

::

    async with Consumer("host:9092", group_id="clicks", auto_offset_reset="earliest") as consumer:
        consumer.subscribe(["clicks"], on_assign=..., on_revoke=...)   # or a re.Pattern
        async for record in consumer:
            ...

A Consumer owns a :class:`~client.cluster.Cluster` and runs its background
tasks in its own nursery: the fetcher (``fetcher.py``), the group membership
(``group.py``, while subscribed), the committer and auto-commit. Settings are
:class:`~client.consumer_config.ConsumerConfig`'s and
:class:`~client.config.ClientConfig`'s, as keyword arguments.

Positions and commits follow Kafka's consumer. ``poll`` returns records and
moves each partition's position past them; ``commit()`` commits positions
(everything returned so far), while auto-commit, every
``auto_commit_interval_ms``, commits what was *processed*: the positions as of
the application's latest ``poll`` (with ``async for``, of its latest request
for a record), since an application that asks for more is done with what it
had. Commits go out in order, one at a time, whether sync (:meth:`commit`),
asynchronous (:meth:`commit_async`) or automatic. Closing commits (with
auto-commit) the positions, or after an exception only what was processed,
gives up the partitions (``on_revoke``) and leaves the group.

Rebalance callbacks run only while the application is inside ``poll`` (see
``poll_gate.py``), as Kafka runs them inside ``poll()``.
"""

from __future__ import annotations

import inspect
import logging
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import trio

from tributary.client._tasks import background_nursery
from tributary.client.config import ClientConfig
from tributary.client.consumer.config import ConsumerConfig, split_settings
from tributary.client.consumer.errors import CommitFailedError, IllegalStateError
from tributary.client.consumer.fetcher import Fetcher
from tributary.client.consumer.poll_gate import PollGate
from tributary.client.consumer.rebalance import RebalanceCallback, Rebalancer
from tributary.client.consumer.record import ConsumerRecord
from tributary.client.consumer.subscription import SubscriptionState
from tributary.client.errors import KafkaError, RebalanceInProgressError, RequestTimedOutError
from tributary.client.group.consumer_protocol import ConsumerProtocolMember
from tributary.client.group.membership import GroupMember, MemberState
from tributary.client.group.offsets import NO_GENERATION, Generation, GroupOffsets, OffsetAndMetadata
from tributary.client.wire.cluster import Cluster
from tributary.client.wire.metadata import TopicPartition

log = logging.getLogger(__name__)

#: ``commit_async``'s callback: ``(offsets, error or None)``, sync or async.
CommitCallback = Callable[[dict[TopicPartition, OffsetAndMetadata], KafkaError | None], Any]
Offsets = Mapping[TopicPartition, int | OffsetAndMetadata]


@dataclass(eq=False)
class _Commit:
    offsets: dict[TopicPartition, OffsetAndMetadata]
    timeout: float | None = None
    callback: CommitCallback | None = None
    done: trio.Event = field(default_factory=trio.Event)
    error: KafkaError | None = None


#: Membership with the classic protocol or the consumer protocol (``group_protocol``).
Membership = GroupMember | ConsumerProtocolMember


@dataclass(eq=False)
class _MemberTask:
    member: Membership
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    done: trio.Event = field(default_factory=trio.Event)
    #: Membership runs until stopped; commits use its generation until it has left.
    stopped: bool = False


def _normalise(offsets: Offsets) -> dict[TopicPartition, OffsetAndMetadata]:
    return {
        TopicPartition(*tp): value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(value)
        for tp, value in offsets.items()
    }


class Consumer:
    """A Kafka consumer for trio (see the module docstring)."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        group_id: str | None = None,
        *,
        client_config: ClientConfig | None = None,
        **settings: Any,
    ) -> None:
        self.config, client = split_settings(settings, client_config)
        if group_id is not None and not group_id:
            raise ValueError("group_id must not be empty")
        self.group_id = group_id
        self.cluster = Cluster(bootstrap_servers, client)
        self._subscriptions = SubscriptionState(on_change=self._wake_fetcher)
        self._offsets = GroupOffsets(self.cluster, group_id) if group_id is not None else None
        self._fetcher = Fetcher(self.cluster, self._subscriptions, self.config, self._offsets)
        self._gate = PollGate()
        self._auto_commit = self.config.auto_commit(group_id)
        self._rebalancer = Rebalancer(
            subscriptions=self._subscriptions,
            gate=self._gate,
            fetcher=self._fetcher,
            config=self.config,
            commit=self._commit_now,
            auto_commit=self._auto_commit,
        )
        self._member_task: _MemberTask | None = None
        self._commits_send, self._commits = trio.open_memory_channel[_Commit](math.inf)
        self._commits_pending = 0
        self._commits_idle = trio.Event()
        self._auto_commit_pending = False
        self._last_committed: dict[TopicPartition, int] = {}
        self._nursery: trio.Nursery | None = None
        self._stack: AsyncExitStack | None = None
        self._closed = False

    def _wake_fetcher(self) -> None:
        self._fetcher.wake()

    # --- lifetime ------------------------------------------------------------------------------

    async def __aenter__(self) -> Consumer:
        if self._stack is not None:
            raise RuntimeError("a Consumer can be entered once")
        stack = AsyncExitStack()
        await stack.enter_async_context(self.cluster)
        try:
            nursery = await stack.enter_async_context(background_nursery())
        except BaseException as exc:
            await stack.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        nursery.start_soon(self._fetcher.run)
        nursery.start_soon(self._commit_worker)
        if self._auto_commit:
            nursery.start_soon(self._auto_commit_loop)
        self._nursery, self._stack = nursery, stack
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        assert self._stack is not None
        try:
            # Shielded: leaving the group cleanly matters even when the block was cancelled.
            with trio.CancelScope(shield=True) as scope:
                scope.deadline = trio.current_time() + self.cluster.config.request_timeout
                await self._close(clean=exc_type is None)
            if scope.cancelled_caught:
                log.warning("closing the consumer took longer than %g s", self.cluster.config.request_timeout)
        finally:
            self._closed = True
            result = await self._stack.__aexit__(exc_type, exc, tb)
        return result

    async def _close(self, *, clean: bool) -> None:
        self._closed = True
        self._gate.open = True
        owned = self._subscriptions.assigned()
        if self._member_task is not None:
            member = await self._stop_member()
            if owned:
                if self._auto_commit and member.generation.generation_id >= 0:
                    await self._commit_quietly(self._close_offsets(owned, clean))
                lost = member.generation.generation_id < 0
                await self._rebalancer.give_up(owned, lost=lost, commit=False)
            await self._leave(member, "the consumer is closing")
        elif self._auto_commit and owned:
            await self._commit_quietly(self._close_offsets(owned, clean))
        await self._wait_commits()

    def _close_offsets(self, partitions: Iterable[TopicPartition], clean: bool) -> dict[TopicPartition, int]:
        # A clean exit is done with every record it got; after an exception only
        # what it came back to poll for is known to be processed.
        offsets = {}
        for tp in partitions:
            state = self._subscriptions.partitions[tp]
            offset = state.position if clean else state.processed
            if offset is not None:
                offsets[tp] = offset
        return offsets

    async def _commit_quietly(self, offsets: Mapping[TopicPartition, int]) -> None:
        if not offsets:
            return
        try:
            await self._commit_now(offsets)
        except KafkaError as exc:
            log.warning("commit on close failed: %s", exc)

    def _check_open(self) -> trio.Nursery:
        if self._closed:
            raise IllegalStateError("the consumer is closed")
        if self._nursery is None:
            raise IllegalStateError("use the Consumer inside `async with`")
        return self._nursery

    # --- subscribing and assigning -------------------------------------------------------------

    def subscribe(
        self,
        topics: str | Iterable[str] | re.Pattern[str],
        *,
        on_assign: RebalanceCallback | None = None,
        on_revoke: RebalanceCallback | None = None,
        on_lost: RebalanceCallback | None = None,
    ) -> None:
        """Subscribe to topic names, or to a pattern: a ``re.Pattern``, or a string
        starting with ``^`` (as librdkafka); a pattern must match a whole topic name
        and is matched again on every metadata refresh. Replaces any earlier
        subscription. The callbacks get lists of partitions; they run inside poll."""
        nursery = self._check_open()
        if self.group_id is None:
            raise IllegalStateError("subscribe needs a group_id (use assign() without one)")
        if isinstance(topics, str) and topics.startswith("^"):
            topics = re.compile(topics)
        if isinstance(topics, re.Pattern):
            self._subscriptions.subscribe_pattern(topics, self.cluster.metadata, self.config.exclude_internal_topics)
        else:
            self._subscriptions.subscribe([topics] if isinstance(topics, str) else list(topics))
        rebalancer = self._rebalancer
        rebalancer.on_assign, rebalancer.on_revoke, rebalancer.on_lost = on_assign, on_revoke, on_lost
        if self._member_task is None or self._member_task.stopped:
            kind = ConsumerProtocolMember if self.config.group_protocol == "consumer" else GroupMember
            member = kind(self.cluster, self.group_id, self.config, rebalancer)
            task = self._member_task = _MemberTask(member)
            nursery.start_soon(self._run_member, task)
        else:
            self._member_task.member.request_rejoin("the subscription changed")

    async def _run_member(self, task: _MemberTask) -> None:
        try:
            with task.scope:
                await task.member.run()
        finally:
            task.done.set()

    async def _stop_member(self) -> Membership:
        """Stop the membership tasks; the member keeps its generation for the last commits."""
        task = self._member_task
        assert task is not None
        task.stopped = True
        task.scope.cancel()
        await task.done.wait()
        return task.member

    async def _leave(self, member: Membership, reason: str) -> None:
        await member.leave(reason)
        self._member_task = None

    async def unsubscribe(self) -> None:
        """Give up every partition (calling ``on_revoke``), leave the group, and forget
        the subscription or the manual assignment."""
        self._check_open()
        owned = self._subscriptions.assigned()
        if self._member_task is not None:
            member = await self._stop_member()
            if owned:
                await self._rebalancer.give_up(owned, lost=member.generation.generation_id < 0)
            await self._leave(member, "the consumer unsubscribed")
        elif owned and self._auto_commit:
            self._enqueue_commit(self._subscriptions.positions(), None)
        self._subscriptions.unsubscribe()

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Consume exactly these partitions, without group membership (commits, if
        there is a group_id, use no generation). With auto-commit, the positions
        of partitions that are dropped are committed first."""
        self._check_open()
        wanted = [TopicPartition(*tp) for tp in partitions]
        if self._auto_commit and self._subscriptions.mode == "assigned":
            keep = set(wanted)
            dropped = {tp: p for tp, p in self._subscriptions.positions().items() if tp not in keep}
            if dropped:
                self._enqueue_commit(dropped, None)
        self._subscriptions.assign_manually(wanted)

    def assignment(self) -> set[TopicPartition]:
        return set(self._subscriptions.partitions)

    def subscription(self) -> frozenset[str]:
        """The subscribed topics (a pattern's current matches); empty when assigning."""
        return self._subscriptions.topics if self._subscriptions.uses_group else frozenset()

    @property
    def group(self) -> Membership | None:
        """The group membership while subscribed (member id, generation, state), for inspection."""
        task = self._member_task
        return task.member if task is not None and not task.stopped else None

    # --- records -------------------------------------------------------------------------------

    async def poll(self, timeout: float | None = None, *, max_records: int | None = None) -> list[ConsumerRecord]:
        """Up to ``max_records`` (default ``max_poll_records``) records, waiting up to
        ``timeout`` seconds (None: until there are some) for the first; an empty list
        when none came in time. Raises a partition's error (no offset, out of range,
        corrupt batch), an exception a rebalance callback raised, or a fatal group error."""
        self._check_open()
        limit = self.config.max_poll_records if max_records is None else max_records
        if limit < 1:
            raise ValueError(f"max_records must be at least 1, not {max_records}")
        deadline = math.inf if timeout is None else trio.current_time() + timeout
        gate, fetcher = self._gate, self._fetcher
        gate.enter()
        try:
            self._subscriptions.mark_processed()
            await trio.lowlevel.checkpoint()
            while True:
                if gate.held:
                    await gate.wait_released()
                    continue
                self._raise_pending()
                records = fetcher.take(limit)
                if records:
                    return records
                if trio.current_time() >= deadline:
                    return []
                with trio.move_on_at(deadline):
                    await fetcher.wait_for_data()
        finally:
            gate.leave()

    def _raise_pending(self) -> None:
        rebalancer = self._rebalancer
        if rebalancer.fatal_error is not None:
            raise rebalancer.fatal_error
        if rebalancer.callback_error is not None:
            error, rebalancer.callback_error = rebalancer.callback_error, None
            raise error
        if self._subscriptions.mode == "none":
            raise IllegalStateError("the consumer is neither subscribed nor assigned any partitions")
        self._fetcher.raise_partition_errors()

    def __aiter__(self) -> Consumer:
        return self

    async def __anext__(self) -> ConsumerRecord:
        # The per-record path: no checkpoint, no clock, no list; poll() takes over
        # at every batch boundary, so trio still gets a checkpoint every batch.
        gate = self._gate
        if not gate.wanted and not gate.held:
            record = self._fetcher.next_record()
            if record is not None:
                gate.polls += 1
                return record
        if self._closed:
            raise StopAsyncIteration
        return (await self.poll(max_records=1))[0]

    # --- positions -----------------------------------------------------------------------------

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Consume ``partition`` from ``offset`` on (records buffered for it are dropped)."""
        self._subscriptions.seek(TopicPartition(*partition), offset)

    def seek_to_beginning(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Move to the earliest offset (looked up before the next fetch); default: every partition."""
        for tp in self._subscriptions.assigned() if partitions is None else partitions:
            self._subscriptions.request_reset(TopicPartition(*tp), "earliest")

    def seek_to_end(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        for tp in self._subscriptions.assigned() if partitions is None else partitions:
            self._subscriptions.request_reset(TopicPartition(*tp), "latest")

    async def position(self, partition: TopicPartition, *, timeout: float | None = None) -> int:
        """The offset of the next record poll returns for ``partition``, waiting for it to
        be looked up if needed; raises the partition's error, if any."""
        tp = TopicPartition(*partition)
        limit = self.cluster.config.api_timeout if timeout is None else timeout
        with trio.move_on_after(limit):
            while True:
                state = self._subscriptions.state(tp)
                if state.error is not None:
                    raise state.error
                if state.position is not None:
                    return state.position
                await self._fetcher.wait_for_positions()
        raise RequestTimedOutError(f"the position of {tp} was not found within {limit:g} s")

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop fetching and returning records of these partitions until resumed."""
        self._subscriptions.pause(TopicPartition(*tp) for tp in partitions)

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        self._subscriptions.resume(TopicPartition(*tp) for tp in partitions)

    def paused(self) -> set[TopicPartition]:
        return set(self._subscriptions.paused())

    def highwater(self, partition: TopicPartition) -> int | None:
        """The partition's high watermark as of its latest fetch (None before one)."""
        state = self._subscriptions.state(TopicPartition(*partition))
        return state.high_watermark if state.high_watermark >= 0 else None

    # --- commits -------------------------------------------------------------------------------

    def _generation(self) -> Generation:
        """The generation to commit in. A subscribed consumer outside any generation
        cannot commit (its partitions may be someone else's), as in Kafka."""
        task = self._member_task
        if task is None:
            return NO_GENERATION
        generation = task.member.commit_generation()
        if generation.generation_id < 0:
            if task.member.rebalances == 0:
                raise RebalanceInProgressError(f"group {self.group_id!r}: this member has not joined the group yet")
            raise CommitFailedError(
                f"group {self.group_id!r}: this member is not part of the current generation (it was dropped "
                "or left, for instance after max_poll_interval_ms without a poll); its partitions may belong "
                "to another member"
            )
        return generation

    def _commit_offsets(self, offsets: Offsets | None) -> dict[TopicPartition, OffsetAndMetadata]:
        if self._offsets is None:
            raise IllegalStateError("commits need a group_id")
        if offsets is None:
            return {tp: OffsetAndMetadata(p) for tp, p in self._subscriptions.positions().items()}
        return _normalise(offsets)

    async def commit(self, offsets: Offsets | None = None, *, timeout: float | None = None) -> None:
        """Commit ``offsets`` (each the offset of the *next* record to consume; default:
        every position) and wait for the coordinator to store them. Raises
        CommitFailedError if the group rebalanced this member's partitions away."""
        self._check_open()
        await self._commit_now(self._commit_offsets(offsets), timeout)

    async def _commit_now(self, offsets: Offsets, timeout: float | None = None) -> None:
        commit = _Commit(_normalise(offsets), timeout)
        if not commit.offsets:
            return
        self._send_commit(commit)
        await commit.done.wait()
        if commit.error is not None:
            raise commit.error

    def commit_async(self, offsets: Offsets | None = None, callback: CommitCallback | None = None) -> None:
        """Commit without waiting; ``callback(offsets, error)`` runs when the coordinator answered."""
        self._check_open()
        self._enqueue_commit(self._commit_offsets(offsets), callback)

    def _enqueue_commit(self, offsets: Offsets, callback: CommitCallback | None) -> None:
        normalised = _normalise(offsets)
        if normalised:
            self._send_commit(_Commit(normalised, callback=callback))

    def _send_commit(self, commit: _Commit) -> None:
        self._commits_pending += 1
        self._commits_send.send_nowait(commit)

    async def _commit_worker(self) -> None:
        async for commit in self._commits:
            try:
                if self._offsets is None:
                    raise IllegalStateError("commits need a group_id")
                await self._offsets.commit(commit.offsets, self._generation, timeout=commit.timeout)
                for tp, value in commit.offsets.items():
                    self._last_committed[tp] = value.offset
            except KafkaError as exc:
                commit.error = exc
                if commit.callback is None and not commit.done.statistics().tasks_waiting:
                    log.warning("asynchronous commit failed: %s", exc)
            finally:
                commit.done.set()
                self._commits_pending -= 1
                if not self._commits_pending:
                    self._commits_idle.set()
                    self._commits_idle = trio.Event()
            if commit.callback is not None:
                await self._call_commit_callback(commit)

    async def _call_commit_callback(self, commit: _Commit) -> None:
        assert commit.callback is not None
        try:
            result = commit.callback(commit.offsets, commit.error)
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("a commit callback failed")

    async def _wait_commits(self) -> None:
        while self._commits_pending:
            await self._commits_idle.wait()

    async def _auto_commit_loop(self) -> None:
        interval = self.config.auto_commit_interval_ms / 1000
        while True:
            await trio.sleep(interval)
            self._auto_commit_once()

    def _auto_commit_once(self) -> None:
        task = self._member_task
        if task is not None and (task.stopped or task.member.state is not MemberState.STABLE):
            return  # mid-rebalance: the partitions' commits happen as they are given up
        if self._auto_commit_pending or self._offsets is None:
            return
        offsets = {
            tp: OffsetAndMetadata(state.processed)
            for tp, state in self._subscriptions.partitions.items()
            if state.processed is not None and self._last_committed.get(tp) != state.processed
        }
        if not offsets:
            return
        self._auto_commit_pending = True

        def done(_: dict[TopicPartition, OffsetAndMetadata], error: KafkaError | None) -> None:
            self._auto_commit_pending = False
            if error is not None:
                log.warning("auto-commit failed: %s", error)

        self._send_commit(_Commit(offsets, callback=done))

    async def committed(
        self, partitions: Iterable[TopicPartition], *, timeout: float | None = None
    ) -> dict[TopicPartition, int | None]:
        """The group's committed offsets (None where nothing was committed)."""
        self._check_open()
        if self._offsets is None:
            raise IllegalStateError("committed offsets need a group_id")
        return await self._offsets.fetch([TopicPartition(*tp) for tp in partitions], timeout=timeout)


__all__ = ["CommitCallback", "Consumer", "ConsumerConfig", "ConsumerRecord", "OffsetAndMetadata"]
