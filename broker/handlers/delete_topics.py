"""DeleteTopics: ask the controller to remove topics; every broker drops its logs.

Authorization as Kafka's: a topic the principal may not Describe is refused with
TOPIC_AUTHORIZATION_FAILED before its existence is looked at; one it may Describe but not
Delete, after.
"""

from __future__ import annotations

import logging

import trio

from tributary.broker.cluster.errors import ClusterError, UnknownTopicError
from tributary.broker.context import RequestContext
from tributary.protocol.acl import AclOperation, ResourceType
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import DeleteTopicsRequest, DeleteTopicsResponse

log = logging.getLogger(__name__)


async def _delete(ctx: RequestContext, name: str) -> DeleteTopicsResponse.DeletableTopicResult:
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
        return DeleteTopicsResponse.DeletableTopicResult(name=name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    if name not in ctx.broker.snapshot().topics:
        return DeleteTopicsResponse.DeletableTopicResult(name=name, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if not ctx.authorize(AclOperation.DELETE, ResourceType.TOPIC, name):
        return DeleteTopicsResponse.DeletableTopicResult(name=name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    try:
        await ctx.broker.registry.delete_topic(name)
    except UnknownTopicError:
        return DeleteTopicsResponse.DeletableTopicResult(name=name, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    except ClusterError as exc:
        log.warning("deleting topic %s failed: %s", name, exc)
        return DeleteTopicsResponse.DeletableTopicResult(name=name, error_code=ErrorCode.REQUEST_TIMED_OUT)
    log.info("deleted topic %s for %s", name, ctx.peer)
    return DeleteTopicsResponse.DeletableTopicResult(name=name, error_code=ErrorCode.NONE)


async def handle(ctx: RequestContext, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
    results: list[DeleteTopicsResponse.DeletableTopicResult] = []
    with trio.move_on_after(max(request.timeout_ms, 1) / 1000):
        for name in request.topic_names:
            results.append(await _delete(ctx, name))
    done = {r.name for r in results}
    results += [
        DeleteTopicsResponse.DeletableTopicResult(name=n, error_code=ErrorCode.REQUEST_TIMED_OUT)
        for n in request.topic_names
        if n not in done
    ]
    return DeleteTopicsResponse(responses=results)
