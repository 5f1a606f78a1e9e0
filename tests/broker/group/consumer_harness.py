"""The sans-IO coordinator driven through ConsumerGroupHeartbeat (KIP-848), on the fake clock
of :class:`.harness.Harness`, with simulated consumers that follow the protocol."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tributary.broker.group.config import GroupConfig
from tributary.broker.group.consumer_group import ConsumerGroup, TopicImage
from tributary.broker.group.consumer_records import TopicMetadata
from tributary.broker.group.messages import ConsumerHeartbeatRequest, ConsumerHeartbeatResult
from tributary.protocol.error_codes import ErrorCode

from .harness import CONFIG, Harness

CONSUMER_CONFIG = GroupConfig(
    initial_rebalance_delay_ms=CONFIG.initial_rebalance_delay_ms,
    min_session_timeout_ms=CONFIG.min_session_timeout_ms,
    max_session_timeout_ms=CONFIG.max_session_timeout_ms,
    offsets_topic_partitions=CONFIG.offsets_topic_partitions,
    offsets_retention_minutes=CONFIG.offsets_retention_minutes,
    offsets_retention_check_interval_ms=CONFIG.offsets_retention_check_interval_ms,
    consumer_heartbeat_interval_ms=1000,
    consumer_min_heartbeat_interval_ms=100,
    consumer_session_timeout_ms=10_000,
    consumer_min_session_timeout_ms=1000,
)
REBALANCE_TIMEOUT = 30_000

Owned = dict[uuid.UUID, frozenset[int]]


def topic_id(name: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_DNS, name)


class ConsumerHarness(Harness):
    def __init__(self, config: GroupConfig = CONSUMER_CONFIG, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self._member_ids = itertools.count(1)

    def set_topics(self, topics: Mapping[str, int]) -> None:
        image = TopicImage({n: TopicMetadata(topic_id(n), n, count) for n, count in topics.items()})
        self.apply(self.coordinator.update_topics(self.now, image))

    def group(self, group_id: str = "g") -> ConsumerGroup:
        return self.coordinator.consumers.groups[group_id]

    def cgh(
        self,
        member_id: str,
        epoch: int,
        *,
        group: str = "g",
        topics: Iterable[str] | None = None,
        regex: str | None = None,
        owned: Owned | None = None,
        rebalance_timeout: int = -1,
        instance: str | None = None,
        assignor: str | None = None,
        api_version: int = 1,
    ) -> ConsumerHeartbeatResult:
        ticket = next(self._tickets)
        req = ConsumerHeartbeatRequest(
            group_id=group,
            member_id=member_id,
            member_epoch=epoch,
            instance_id=instance,
            rebalance_timeout_ms=rebalance_timeout,
            subscribed_topic_names=tuple(topics) if topics is not None else None,
            subscribed_topic_regex=regex,
            server_assignor=assignor,
            owned=owned,
            client_id="client",
            client_host="/127.0.0.1",
            api_version=api_version,
        )
        self.apply(self.coordinator.consumer_heartbeat(self.now, ticket, req))
        result = self.replies[ticket]
        assert isinstance(result, ConsumerHeartbeatResult)
        return result

    def join_consumer(self, member_id: str | None = None, topics: Iterable[str] = ("t",), **kwargs: Any) -> Member:
        member = Member(member_id or f"m{next(self._member_ids)}", tuple(topics), self, **kwargs)
        member.join()
        return member


@dataclass
class Member:
    """A consumer that follows KIP-848: it revokes what its new assignment lacks before
    reporting it owns less, and takes what it is given."""

    member_id: str
    topics: tuple[str, ...]
    harness: ConsumerHarness
    group: str = "g"
    instance: str | None = None
    #: Revocations only happen when :meth:`revoke` is called (a slow application).
    lazy: bool = False
    epoch: int = 0
    owned: Owned = field(default_factory=dict)
    #: The last assignment the coordinator gave.
    assignment: Owned = field(default_factory=dict)
    errors: list[ErrorCode] = field(default_factory=list)

    def join(self) -> ConsumerHeartbeatResult:
        self.epoch, self.owned, self.assignment = 0, {}, {}
        result = self.harness.cgh(
            self.member_id,
            0,
            group=self.group,
            topics=self.topics,
            owned={},
            rebalance_timeout=REBALANCE_TIMEOUT,
            instance=self.instance,
        )
        return self._handle(result)

    def heartbeat(self, *, full: bool = False) -> ConsumerHeartbeatResult:
        if self.epoch == 0:
            return self.join()  # fenced or new: (re)join with a full request
        result = self.harness.cgh(
            self.member_id,
            self.epoch,
            group=self.group,
            owned=dict(self.owned),
            topics=self.topics if full else None,
            rebalance_timeout=REBALANCE_TIMEOUT if full else -1,
            instance=self.instance,
        )
        return self._handle(result)

    def _handle(self, result: ConsumerHeartbeatResult) -> ConsumerHeartbeatResult:
        if result.error != ErrorCode.NONE:
            self.errors.append(result.error)
            if result.error in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
                self.owned, self.epoch = {}, 0  # lost: give everything up and rejoin
            return result
        self.epoch = result.member_epoch
        if result.assignment is not None:
            self.assignment = dict(result.assignment)
            # Take what is new at once; give up what is gone unless lazy.
            for topic, partitions in self.assignment.items():
                self.owned[topic] = self.owned.get(topic, frozenset()) | partitions
            if not self.lazy:
                self.revoke()
        return result

    def revoke(self) -> None:
        self.owned = {t: ps & self.assignment.get(t, frozenset()) for t, ps in self.owned.items()}
        self.owned = {t: ps for t, ps in self.owned.items() if ps}

    def leave(self) -> ConsumerHeartbeatResult:
        result = self.harness.cgh(self.member_id, -1, group=self.group, instance=self.instance)
        self.owned = {}
        return result

    def partitions(self, topic: str = "t") -> frozenset[int]:
        return self.owned.get(topic_id(topic), frozenset())
