"""A group's committed offsets: OffsetCommit and OffsetFetch, with the coordinator's retries.

Commits carry the member's generation and member id (and group instance id)
when the consumer is a group member, so the coordinator refuses a commit from
a member that lost its partitions in a rebalance (UNKNOWN_MEMBER_ID,
ILLEGAL_GENERATION: :class:`~client.consumer_errors.CommitFailedError`). A
consumer that assigns its partitions itself commits with generation -1 and no
member id, which the coordinator accepts while the group has no members.

Both requests go to the group coordinator on its own connection
(``send_to_coordinator``). Coordinator moves and loads (NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, a broken
connection) are retried until the timeout; a commit retries only the
partitions that failed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

import trio

from tributary.client.consumer.errors import CommitFailedError
from tributary.client.errors import KafkaError, error_for
from tributary.client.wire.cluster import Cluster
from tributary.client.wire.metadata import TopicPartition
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)


@dataclass(frozen=True, slots=True)
class Generation:
    """Who commits: a group member's generation and ids, or nobody in particular (-1)."""

    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


#: The generation of a consumer outside group management (and of a member between generations).
NO_GENERATION = Generation()


class OffsetAndMetadata(NamedTuple):
    """A committed position: the offset of the next record to consume, and a note."""

    offset: int
    metadata: str = ""


_COORDINATOR_MOVED = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
_RETRY = _COORDINATOR_MOVED | {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.REQUEST_TIMED_OUT,
                               ErrorCode.UNSTABLE_OFFSET_COMMIT}  # fmt: skip
_LOST_MEMBERSHIP = frozenset({ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION})


def offset_commit_request(
    group_id: str, generation: Generation, offsets: Mapping[TopicPartition, OffsetAndMetadata]
) -> OffsetCommitRequest:
    topics: dict[str, OffsetCommitRequest.OffsetCommitRequestTopic] = {}
    for tp, committed in offsets.items():
        topic = topics.setdefault(tp.topic, OffsetCommitRequest.OffsetCommitRequestTopic(name=tp.topic))
        topic.partitions.append(
            OffsetCommitRequest.OffsetCommitRequestPartition(
                partition_index=tp.partition, committed_offset=committed.offset, committed_metadata=committed.metadata
            )
        )
    return OffsetCommitRequest(
        group_id=group_id,
        generation_id_or_member_epoch=generation.generation_id,
        member_id=generation.member_id,
        group_instance_id=generation.group_instance_id,
        topics=list(topics.values()),
    )


def offset_fetch_request(group_id: str, partitions: Iterable[TopicPartition]) -> OffsetFetchRequest:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return OffsetFetchRequest(
        group_id=group_id,
        topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()],
    )


class GroupOffsets:
    """Commit and look up one group's offsets through a cluster."""

    def __init__(self, cluster: Cluster, group_id: str) -> None:
        self.cluster = cluster
        self.group_id = group_id

    async def _retry_or_raise(self, error: KafkaError, code: int, deadline: float) -> None:
        if code in _COORDINATOR_MOVED or error.invalidates_metadata:
            self.cluster.forget_coordinator(self.group_id)
        backoff = self.cluster.config.retry_backoff
        if trio.current_time() + backoff > deadline:
            raise error
        await trio.sleep(backoff)

    async def commit(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        generation: Callable[[], Generation],
        *,
        timeout: float | None = None,
    ) -> None:
        """Commit ``offsets`` as ``generation()`` (asked again before each attempt)."""
        deadline = trio.current_time() + (self.cluster.config.api_timeout if timeout is None else timeout)
        remaining = dict(offsets)
        while remaining:
            current = generation()
            request = offset_commit_request(self.group_id, current, remaining)
            try:
                response: OffsetCommitResponse = await self.cluster.send_to_coordinator(self.group_id, request)
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                await self._retry_or_raise(exc, int(exc.error_code), deadline)
                continue
            retry: tuple[KafkaError, int] | None = None
            for topic in response.topics:
                for p in topic.partitions:
                    tp = TopicPartition(topic.name, p.partition_index)
                    if tp not in remaining:
                        continue
                    if not p.error_code:
                        del remaining[tp]
                        continue
                    error = self._commit_error(tp, p.error_code, current)
                    if p.error_code not in _RETRY:
                        raise error
                    retry = retry or (error, p.error_code)
            if retry is not None:
                await self._retry_or_raise(*retry, deadline)
            elif remaining:
                missing = sorted(remaining)
                raise KafkaError(f"the coordinator of group {self.group_id!r} left {missing} out of its answer")

    def _commit_error(self, tp: TopicPartition, code: int, generation: Generation) -> KafkaError:
        context = f"commit for group {self.group_id!r}"
        if code in _LOST_MEMBERSHIP:
            who = f"member {generation.member_id!r} of generation {generation.generation_id}"
            return CommitFailedError(
                f"{context}: {ErrorCode(code).name} ({tp}): {who} is no longer in the group's current generation; "
                "the group has rebalanced and the partition may belong to another member",
                error_code=code, topic=tp.topic, partition=tp.partition,
            )  # fmt: skip
        return error_for(code, topic=tp.topic, partition=tp.partition, context=context)

    async def fetch(
        self, partitions: Iterable[TopicPartition], *, timeout: float | None = None
    ) -> dict[TopicPartition, int | None]:
        """Each partition's committed offset, None where nothing was committed."""
        committed = await self.fetch_committed(partitions, timeout=timeout)
        return {tp: (None if c is None else c.offset) for tp, c in committed.items()}

    async def fetch_committed(
        self, partitions: Iterable[TopicPartition], *, timeout: float | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """Each partition's committed offset and its metadata, None where nothing was committed."""
        wanted = list(dict.fromkeys(partitions))
        if not wanted:
            return {}
        deadline = trio.current_time() + (self.cluster.config.api_timeout if timeout is None else timeout)
        request = offset_fetch_request(self.group_id, wanted)
        while True:
            try:
                response: OffsetFetchResponse = await self.cluster.send_to_coordinator(self.group_id, request)
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                await self._retry_or_raise(exc, int(exc.error_code), deadline)
                continue
            code = response.error_code or next(
                (p.error_code for t in response.topics for p in t.partitions if p.error_code), 0
            )
            if not code:
                found = {
                    TopicPartition(t.name, p.partition_index): OffsetAndMetadata(p.committed_offset, p.metadata or "")
                    for t in response.topics
                    for p in t.partitions
                    if p.committed_offset >= 0
                }
                return {tp: found.get(tp) for tp in wanted}
            error = error_for(code, context=f"fetch committed offsets of group {self.group_id!r}")
            if code not in _RETRY:
                raise error
            await self._retry_or_raise(error, code, deadline)


__all__ = [
    "NO_GENERATION",
    "Generation",
    "GroupOffsets",
    "OffsetAndMetadata",
    "offset_commit_request",
    "offset_fetch_request",
]
