"""The consumer's side of a rebalance: commit, call back, change the assignment.

:class:`Rebalancer` is what :class:`~client.group.GroupMember` calls to give
partitions up and take new ones. Each change happens with the
:class:`~client.poll_gate.PollGate` held, so the application's callbacks run
while it waits in poll, never while it still works on records:

- giving up: commit the partitions' positions when auto-commit is on (not for
  *lost* partitions: the generation they were consumed in is gone, and the
  coordinator would refuse), call ``on_revoke`` (``on_lost`` for lost ones,
  falling back to ``on_revoke`` as Kafka's default does), then unassign them,
  which drops their buffered records;
- taking: assign the partitions, then call ``on_assign``, which may seek them;
  their positions are looked up (committed offset, else the reset policy) only
  after it returns, so a seek there wins.

Callbacks may be plain functions or coroutine functions. An exception from one
does not stop the rebalance (the group would be left half-done); it is raised
from the next ``poll``.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from tributary.client.consumer.config import ConsumerConfig
from tributary.client.consumer.fetcher import Fetcher
from tributary.client.consumer.poll_gate import PollGate
from tributary.client.consumer.subscription import SubscriptionState
from tributary.client.errors import KafkaError
from tributary.client.group.offsets import OffsetAndMetadata
from tributary.client.wire.metadata import ClusterMetadata, TopicPartition

log = logging.getLogger(__name__)

#: ``on_assign(partitions)``, ``on_revoke(partitions)``, ``on_lost(partitions)``: sync or async.
RebalanceCallback = Callable[[list[TopicPartition]], Any]


async def call_back(callback: RebalanceCallback | None, partitions: list[TopicPartition]) -> None:
    if callback is None:
        return
    result = callback(list(partitions))
    if inspect.isawaitable(result):
        await result


class Rebalancer:
    """Implements :class:`~client.group.ConsumerSide` for the Consumer."""

    def __init__(
        self,
        *,
        subscriptions: SubscriptionState,
        gate: PollGate,
        fetcher: Fetcher,
        config: ConsumerConfig,
        commit: Callable[[Mapping[TopicPartition, OffsetAndMetadata]], Awaitable[None]],
        auto_commit: bool,
    ) -> None:
        self.subscriptions = subscriptions
        self.gate = gate
        self.fetcher = fetcher
        self.config = config
        self._commit = commit
        self.auto_commit = auto_commit
        self.on_assign: RebalanceCallback | None = None
        self.on_revoke: RebalanceCallback | None = None
        self.on_lost: RebalanceCallback | None = None
        #: Raised by the next poll, once: a callback's exception.
        self.callback_error: Exception | None = None
        #: Raised by every poll: membership failed for good.
        self.fatal_error: KafkaError | None = None

    # --- ConsumerSide --------------------------------------------------------------------------

    def subscription(self) -> frozenset[str]:
        return self.subscriptions.topics

    def owned(self) -> list[TopicPartition]:
        return self.subscriptions.assigned()

    def away_for(self) -> float:
        return self.gate.away_for()

    async def wait_for_poll(self) -> None:
        await self.gate.wait_for_poll()

    def match_pattern(self, metadata: ClusterMetadata) -> bool:
        if self.subscriptions.mode != "pattern":
            return False
        matched = self.subscriptions.matching(metadata, self.config.exclude_internal_topics)
        if matched == self.subscriptions.topics:
            return False
        log.info("pattern %s now matches %s", self.subscriptions.pattern, sorted(matched))
        self.subscriptions.topics = matched
        return True

    def pattern(self) -> str | None:
        pattern = self.subscriptions.pattern
        return pattern.pattern if self.subscriptions.mode == "pattern" and pattern is not None else None

    def failed(self, error: KafkaError) -> None:
        self.fatal_error = error
        self.fetcher.interrupt()

    async def revoke(self, partitions: list[TopicPartition], *, lost: bool) -> None:
        async with self.gate.hold():
            await self.give_up(partitions, lost=lost)

    async def rebalanced(self, revoked: list[TopicPartition], added: list[TopicPartition]) -> None:
        async with self.gate.hold():
            if revoked:
                await self.give_up(revoked, lost=False)
            await self.take(added)

    # --- the steps -----------------------------------------------------------------------------

    async def give_up(self, partitions: list[TopicPartition], *, lost: bool, commit: bool = True) -> None:
        """Commit (unless lost), call back, unassign. The caller holds the gate (or closes)."""
        assigned = self.subscriptions.partitions
        if commit and not lost and self.auto_commit:
            offsets = {
                tp: OffsetAndMetadata(state.position)
                for tp in partitions
                if (state := assigned.get(tp)) is not None and state.position is not None
            }
            if offsets:
                try:
                    await self._commit(offsets)
                except KafkaError as exc:
                    log.warning("committing revoked partitions failed: %s", exc)
        callback = (self.on_lost or self.on_revoke) if lost else self.on_revoke
        await self._guarded(callback, partitions, "on_lost" if lost else "on_revoke")
        self.subscriptions.remove(partitions)

    async def take(self, partitions: list[TopicPartition]) -> None:
        self.fetcher.hold_positions = True
        try:
            self.subscriptions.add(partitions)
            await self._guarded(self.on_assign, partitions, "on_assign")
        finally:
            self.fetcher.hold_positions = False
            self.fetcher.wake()

    async def _guarded(self, callback: RebalanceCallback | None, partitions: list[TopicPartition], name: str) -> None:
        try:
            await call_back(callback, partitions)
        except Exception as exc:
            log.exception("the %s callback failed; poll raises its exception", name)
            if self.callback_error is None:
                self.callback_error = exc
            self.fetcher.interrupt()


__all__ = ["RebalanceCallback", "Rebalancer", "call_back"]
