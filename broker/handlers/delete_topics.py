"""DeleteTopics: ask the controller to remove topics; every broker drops its logs.

From v6 a topic is named by name or by id (not both: INVALID_REQUEST); an id nobody knows
gets UNKNOWN_TOPIC_ID. The answer names each topic both ways.

Authorization as Kafka's: a topic the principal may not Describe is refused with
TOPIC_AUTHORIZATION_FAILED before its existence is looked at; one it may Describe but not
Delete, after.
"""

from __future__ import annotations

import logging
import uuid

import trio

from tributary.broker.cluster.errors import ClusterError, UnknownTopicError
from tributary.broker.context import RequestContext
from tributary.protocol.acl import AclOperation, ResourceType
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import DeleteTopicsRequest, DeleteTopicsResponse
from tributary.protocol.primitives import NULL_UUID

log = logging.getLogger(__name__)

#: From this version topics may be named by id (KIP-516).
TOPIC_ID_VERSION = 6

Result = DeleteTopicsResponse.DeletableTopicResult


async def _delete(ctx: RequestContext, name: str, topic_id: uuid.UUID) -> Result:
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
        return Result(name=name, topic_id=topic_id, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    if name not in ctx.broker.snapshot().topics:
        return Result(name=name, topic_id=topic_id, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if not ctx.authorize(AclOperation.DELETE, ResourceType.TOPIC, name):
        return Result(name=name, topic_id=topic_id, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    try:
        await ctx.broker.registry.delete_topic(name)
    except UnknownTopicError:
        return Result(name=name, topic_id=topic_id, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    except ClusterError as exc:
        log.warning("deleting topic %s failed: %s", name, exc)
        return Result(name=name, topic_id=topic_id, error_code=ErrorCode.REQUEST_TIMED_OUT, error_message=str(exc))
    log.info("deleted topic %s for %s", name, ctx.peer)
    return Result(name=name, topic_id=topic_id, error_code=ErrorCode.NONE)


def _named(ctx: RequestContext, request: DeleteTopicsRequest) -> list[tuple[str | None, uuid.UUID, Result | None]]:
    """(name, id, refusal) of each topic asked for; a refusal ends that topic's part."""
    snapshot = ctx.broker.snapshot()
    if ctx.api_version < TOPIC_ID_VERSION:
        return [(name, snapshot.topics[name].uuid if name in snapshot.topics else NULL_UUID, None)
                for name in request.topic_names]  # fmt: skip
    named: list[tuple[str | None, uuid.UUID, Result | None]] = []
    for topic in request.topics:
        if topic.name is not None and topic.topic_id != NULL_UUID:
            both = Result(name=topic.name, topic_id=topic.topic_id, error_code=ErrorCode.INVALID_REQUEST,
                          error_message="name a topic by its name or by its id, not both")  # fmt: skip
            named.append((topic.name, topic.topic_id, both))
        elif topic.name is not None:
            info = snapshot.topics.get(topic.name)
            named.append((topic.name, NULL_UUID if info is None else info.uuid, None))
        else:
            found = snapshot.topic_by_uuid(topic.topic_id)
            refusal = None if found is not None else Result(
                name=None, topic_id=topic.topic_id, error_code=ErrorCode.UNKNOWN_TOPIC_ID
            )  # fmt: skip
            named.append((None if found is None else found.name, topic.topic_id, refusal))
    return named


async def handle(ctx: RequestContext, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
    named = _named(ctx, request)
    results: list[Result] = []
    with trio.move_on_after(max(request.timeout_ms, 1) / 1000):
        for name, topic_id, refusal in named:
            if refusal is not None:
                results.append(refusal)
            elif name is not None:  # always: an unknown id comes with its refusal
                results.append(await _delete(ctx, name, topic_id))
    results += [
        Result(name=name, topic_id=topic_id, error_code=ErrorCode.REQUEST_TIMED_OUT)
        for name, topic_id, _ in named[len(results) :]
    ]
    return DeleteTopicsResponse(responses=results)
