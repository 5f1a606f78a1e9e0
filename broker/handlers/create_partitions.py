"""CreatePartitions: grow topics; the controller spreads the new partitions.

Partitions only grow (as in Kafka): a record's partition is its key's hash
modulo the count, so consumers keyed by partition see new keys land in new
partitions from then on. Manual assignments are refused like in CreateTopics.
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


def _invalid(ctx: RequestContext, topic: CreatePartitionsRequest.CreatePartitionsTopic) -> Result | None:
    if topic.assignments is not None:
        return Result(topic.name, ErrorCode.INVALID_REPLICA_ASSIGNMENT, "manual replica assignment is not supported")
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
    try:
        await ctx.broker.registry.create_partitions(topic.name, topic.count, timeout=timeout)
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
