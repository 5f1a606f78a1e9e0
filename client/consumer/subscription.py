"""What a consumer consumes, sans-IO: its subscription, its partitions, their positions.

A consumer either *subscribes* (to topic names, or to a pattern matched
against the cluster's topics) and lets its group assign partitions, or
*assigns* partitions itself; it cannot do both at once, as in Kafka.

Each assigned partition has a :class:`PartitionState`. Two offsets matter:

- ``position``: the next offset handed to the application. None while
  unknown: a new partition's position comes from the group's committed
  offset or, failing that, from ``auto_offset_reset``; ``reset`` holds a
  pending "earliest"/"latest" (``seek_to_beginning``, an out-of-range fetch).
- ``fetch_offset``: where the next fetch starts. It runs ahead of
  ``position`` while fetched records wait in the buffer (prefetching), and
  jumps back to ``position`` on every seek.

Every seek, reset and reassignment bumps ``epoch``: a fetch answer or offset
lookup that was started under an older epoch describes a position that no
longer exists and is dropped.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from typing import Literal

from tributary.client.consumer.config import OffsetReset
from tributary.client.consumer.errors import IllegalStateError
from tributary.client.errors import KafkaError
from tributary.client.wire.metadata import ClusterMetadata, TopicPartition

SubscriptionMode = Literal["none", "topics", "pattern", "assigned"]


class PartitionState:
    """One assigned partition: positions, pause flag, pending reset or error, fetch bookkeeping."""

    __slots__ = (
        "epoch",
        "error",
        "fetch_offset",
        "high_watermark",
        "in_flight",
        "log_start_offset",
        "paused",
        "position",
        "processed",
        "queued",
        "reset",
        "resolving",
        "retry_at",
    )

    def __init__(self) -> None:
        self.position: int | None = None
        #: The position as of the application's last poll: the records before it
        #: were processed (the application came back for more), so auto-commit
        #: commits this, never records still in the application's hands.
        self.processed: int | None = None
        self.fetch_offset = -1
        self.epoch = 0
        self.paused = False
        self.reset: OffsetReset | None = None
        #: An error poll raises until the application seeks (or a reset succeeds).
        self.error: KafkaError | None = None
        self.high_watermark = -1
        self.log_start_offset = -1
        #: Fetches back off after a partition error until this (trio) time.
        self.retry_at = -math.inf
        #: A fetch covering this partition is in flight.
        self.in_flight = False
        #: Fetched answers buffered and not yet being handed out: at most one,
        #: so prefetching stays one fetch ahead of the application.
        self.queued = 0
        #: A committed-offset or reset lookup is under way.
        self.resolving = False

    def seek(self, offset: int) -> None:
        self.position = offset
        self.processed = offset
        self.fetch_offset = offset
        self.reset = None
        self.error = None
        self.retry_at = -math.inf
        self.invalidate()

    def request_reset(self, strategy: OffsetReset | None) -> None:
        """Forget the position; None looks up the committed offset again."""
        self.position = None
        self.processed = None
        self.fetch_offset = -1
        self.reset = strategy
        self.error = None
        self.invalidate()

    def fail(self, error: KafkaError) -> None:
        """Stop fetching until the application seeks; poll raises ``error``."""
        self.error = error
        self.invalidate()

    def invalidate(self) -> None:
        # Everything fetched or looked up so far describes the old position: drop it.
        self.epoch += 1
        self.queued = 0

    def fetchable(self, now: float) -> bool:
        return (
            self.position is not None
            and self.error is None
            and not self.paused
            and not self.in_flight
            and self.queued == 0
            and self.retry_at <= now
        )

    def __repr__(self) -> str:
        return (
            f"PartitionState(position={self.position}, fetch_offset={self.fetch_offset}, epoch={self.epoch}, "
            f"paused={self.paused}, reset={self.reset}, error={self.error!r})"
        )


class SubscriptionState:
    """The subscription and the assigned partitions. ``on_change`` is called after
    every change that could let the fetcher do something new."""

    def __init__(self, on_change: Callable[[], None] | None = None) -> None:
        self.mode: SubscriptionMode = "none"
        #: Subscribed topic names: as given, or those the pattern matched last.
        self.topics: frozenset[str] = frozenset()
        self.pattern: re.Pattern[str] | None = None
        self.partitions: dict[TopicPartition, PartitionState] = {}
        self._on_change = on_change or (lambda: None)

    # --- the subscription ------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str]) -> None:
        self._check_mode("topics")
        names = frozenset(topics)
        if any(not name for name in names):
            raise ValueError("topic names must not be empty")
        self.mode, self.topics, self.pattern = "topics", names, None
        self._on_change()

    def subscribe_pattern(self, pattern: re.Pattern[str], metadata: ClusterMetadata, exclude_internal: bool) -> None:
        self._check_mode("pattern")
        self.mode, self.pattern = "pattern", pattern
        self.topics = self.matching(metadata, exclude_internal)
        self._on_change()

    def matching(self, metadata: ClusterMetadata, exclude_internal: bool) -> frozenset[str]:
        """The topics the pattern matches in ``metadata`` (whole names, as Kafka matches)."""
        if self.pattern is None:
            return self.topics
        return frozenset(
            name
            for name, info in metadata.topics.items()
            if self.pattern.fullmatch(name) and not (exclude_internal and info.is_internal)
        )

    def assign_manually(self, partitions: Iterable[TopicPartition]) -> None:
        self._check_mode("assigned")
        wanted = [TopicPartition(*tp) for tp in partitions]
        self.mode = "assigned" if wanted else "none"
        self.topics, self.pattern = frozenset(tp.topic for tp in wanted), None
        self.set_assignment(wanted)

    def unsubscribe(self) -> None:
        self.mode, self.topics, self.pattern = "none", frozenset(), None
        self.set_assignment(())

    def _check_mode(self, wanted: SubscriptionMode) -> None:
        if wanted == "assigned" and self.uses_group:
            raise IllegalStateError("cannot assign partitions while subscribed: call unsubscribe() first")
        if wanted != "assigned" and self.mode == "assigned":
            raise IllegalStateError("cannot subscribe while partitions are assigned: call unsubscribe() first")

    @property
    def uses_group(self) -> bool:
        return self.mode in ("topics", "pattern")

    # --- assigned partitions ----------------------------------------------------------------

    def set_assignment(self, partitions: Iterable[TopicPartition]) -> tuple[list[TopicPartition], list[TopicPartition]]:
        """Make ``partitions`` the assignment, keeping the state of those already
        assigned; returns (added, removed)."""
        wanted = dict.fromkeys(TopicPartition(*tp) for tp in partitions)
        removed = [tp for tp in self.partitions if tp not in wanted]
        added = [tp for tp in wanted if tp not in self.partitions]
        for tp in removed:
            self.partitions[tp].invalidate()
        self.partitions = {tp: self.partitions.get(tp) or PartitionState() for tp in wanted}
        self._on_change()
        return added, removed

    def add(self, partitions: Iterable[TopicPartition]) -> None:
        self.set_assignment([*self.partitions, *partitions])

    def remove(self, partitions: Iterable[TopicPartition]) -> None:
        gone = set(partitions)
        self.set_assignment([tp for tp in self.partitions if tp not in gone])

    def assigned(self) -> list[TopicPartition]:
        return list(self.partitions)

    def state(self, tp: TopicPartition) -> PartitionState:
        state = self.partitions.get(tp)
        if state is None:
            raise IllegalStateError(f"partition {tp} is not assigned to this consumer")
        return state

    def seek(self, tp: TopicPartition, offset: int) -> None:
        if offset < 0:
            raise ValueError(f"cannot seek {tp} to negative offset {offset}")
        self.state(tp).seek(offset)
        self._on_change()

    def request_reset(self, tp: TopicPartition, strategy: OffsetReset | None) -> None:
        self.state(tp).request_reset(strategy)
        self._on_change()

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self.state(tp).paused = True

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self.state(tp).paused = False
        self._on_change()

    def paused(self) -> list[TopicPartition]:
        return [tp for tp, state in self.partitions.items() if state.paused]

    def mark_processed(self) -> None:
        """The application is back in poll: everything handed out so far is processed."""
        for state in self.partitions.values():
            state.processed = state.position

    def positions(self) -> dict[TopicPartition, int]:
        """The known positions (partitions whose position is being looked up are left out)."""
        return {tp: state.position for tp, state in self.partitions.items() if state.position is not None}

    def unresolved(self) -> list[TopicPartition]:
        """Partitions whose position must be looked up, and no lookup is under way."""
        return [
            tp
            for tp, state in self.partitions.items()
            if state.position is None and state.error is None and not state.resolving
        ]

    def changed(self) -> None:
        """Report a change made to a PartitionState directly."""
        self._on_change()


__all__ = ["PartitionState", "SubscriptionMode", "SubscriptionState"]
