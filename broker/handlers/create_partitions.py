"""CreatePartitions: grow topics; the controller spreads the new partitions.

Partitions only grow (as in Kafka): a record's partition is its key's hash
modulo the count, so consumers keyed by partition see new keys land in new
partitions from then on. A manual assignment places the new partitions itself,
checked as Kafka checks it: one replica list per new partition, no broker twice,
the topic's replication factor, and only live brokers (INVALID_REPLICA_ASSIGNMENT,
naming the unknown ones).
"""

from __future__ import annotations

import logging

import trio

from tributary.broker.cluster.errors import (
    ClusterError,
    InvalidPartitionsError,
    TopicCreationRejectedError,
    UnknownTopicError,
)
from tributary.broker.context import RequestContext
from tributary.broker.handlers.create_topics import MAX_PARTITIONS
from tributary.protocol.acl import AclOperation, ResourceType
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import CreatePartitionsRequest, CreatePartitionsResponse

log = logging.getLogger(__name__)

Result = CreatePartitionsResponse.CreatePartitionsTopicResult


def _assignment_problem(
    ctx: RequestContext, topic: CreatePartitionsRequest.CreatePartitionsTopic, current: int, replication_factor: int
) -> str | None:
    """Why a manual assignment of the new partitions cannot be (Kafka's checks), or None."""
    assert topic.assignments is not None
    added = topic.count - current
    if len(topic.assignments) != added:
        return f"increasing the partition count by {added} but {len(topic.assignments)} assignments provided"
    for index, entry in enumerate(topic.assignments, start=current):
        replicas = entry.broker_ids
        if not replicas:
            return f"partition {index} is assigned no replicas"
        if len(set(replicas)) != len(replicas):
            return f"duplicate brokers in the replica assignment of partition {index}: {replicas}"
        if len(replicas) != replication_factor:
            return (
                f"inconsistent replication factor: the topic has {replication_factor}, "
                f"partition {index} is assigned {len(replicas)}"
            )
    live = ctx.broker.snapshot().brokers
    unknown = sorted({b for entry in topic.assignments for b in entry.broker_ids} - set(live))
    if unknown:
        return f"unknown broker(s) in the replica assignment: {', '.join(map(str, unknown))}"
    return None


def manual_assignment(topic: CreatePartitionsRequest.CreatePartitionsTopic, current: int) -> dict[int, tuple[int, ...]]:
    return {current + i: tuple(entry.broker_ids) for i, entry in enumerate(topic.assignments or ())}


def _invalid(ctx: RequestContext, topic: CreatePartitionsRequest.CreatePartitionsTopic) -> Result | None:
    info = ctx.broker.snapshot().topics.get(topic.name)
    # A topic missing here may be too new for this broker's view: the registry asks ZooKeeper.
    current = len(info.partitions) if info is not None else 0
    if info is not None and topic.count <= current:
        return Result(
            topic.name,
            ErrorCode.INVALID_PARTITIONS,
            f"topic {topic.name!r} has {current} partitions: the new count must be larger, not {topic.count}",
        )
    if topic.count > MAX_PARTITIONS:
        return Result(topic.name, ErrorCode.INVALID_PARTITIONS, f"partition count must be at most {MAX_PARTITIONS}")
    if topic.assignments is not None and info is not None:
        replication_factor = max((len(state.replicas) for state in info.partitions.values()), default=1)
        if (why := _assignment_problem(ctx, topic, current, replication_factor)) is not None:
            return Result(topic.name, ErrorCode.INVALID_REPLICA_ASSIGNMENT, why)
    return None


async def _grow(
    ctx: RequestContext, topic: CreatePartitionsRequest.CreatePartitionsTopic, validate_only: bool, timeout: float
) -> Result:
    if (refused := _invalid(ctx, topic)) is not None:
        return refused
    if validate_only:
        known = topic.name in ctx.broker.snapshot().topics
        code = ErrorCode.NONE if known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return Result(topic.name, code, None if known else f"topic {topic.name!r} does not exist")
    info = ctx.broker.snapshot().topics.get(topic.name)
    assignment = None
    if topic.assignments is not None and info is not None:
        assignment = manual_assignment(topic, len(info.partitions))
    try:
        await ctx.broker.registry.create_partitions(topic.name, topic.count, timeout=timeout, assignment=assignment)
    except UnknownTopicError as exc:
        return Result(topic.name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, str(exc))
    except (InvalidPartitionsError, TopicCreationRejectedError) as exc:
        return Result(topic.name, ErrorCode.INVALID_PARTITIONS, str(exc))
    except ClusterError as exc:
        return Result(topic.name, ErrorCode.REQUEST_TIMED_OUT, str(exc))
    log.info("topic %s now has %d partitions (for %s)", topic.name, topic.count, ctx.peer)
    return Result(topic.name, ErrorCode.NONE, None)


async def handle(ctx: RequestContext, request: CreatePartitionsRequest) -> CreatePartitionsResponse:
    timeout = max(request.timeout_ms, 1) / 1000
    results: list[Result] = []
    names = [t.name for t in request.topics]
    with trio.move_on_after(timeout):
        for topic in request.topics:
            if names.count(topic.name) > 1:
                results.append(Result(topic.name, ErrorCode.INVALID_REQUEST, "topic named twice in one request"))
                continue
            if not ctx.authorize(AclOperation.ALTER, ResourceType.TOPIC, topic.name):
                results.append(Result(topic.name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Alter on the topic"))
                continue
            results.append(await _grow(ctx, topic, request.validate_only, timeout))
    done = {r.name for r in results}
    results += [Result(n, ErrorCode.REQUEST_TIMED_OUT, "timed out") for n in names if n not in done]
    return CreatePartitionsResponse(results=results)
