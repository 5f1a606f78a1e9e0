"""OffsetDelete: remove single committed offsets of a group (not of topics it consumes now). Delete
on the group is needed (GROUP_AUTHORIZATION_FAILED), and Read on each topic (its partitions get
TOPIC_AUTHORIZATION_FAILED and keep their offsets)."""

from __future__ import annotations

from tributary.broker.context import RequestContext
from tributary.protocol.acl import AclOperation, ResourceType
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import OffsetDeleteRequest, OffsetDeleteResponse


async def handle(ctx: RequestContext, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
    if not ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, request.group_id):
        return OffsetDeleteResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    readable = ctx.authorized(AclOperation.READ, ResourceType.TOPIC, (t.name for t in request.topics))
    asked = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    error, deleted = await ctx.broker.groups.delete_offsets(request.group_id, [tp for tp in asked if tp[0] in readable])
    if error != ErrorCode.NONE:
        return OffsetDeleteResponse(error_code=error)
    results = dict.fromkeys(asked, ErrorCode.TOPIC_AUTHORIZATION_FAILED) | deleted
    return OffsetDeleteResponse(
        error_code=ErrorCode.NONE,
        topics=[
            OffsetDeleteResponse.OffsetDeleteResponseTopic(
                name=t.name,
                partitions=[
                    OffsetDeleteResponse.OffsetDeleteResponsePartition(
                        partition_index=p.partition_index, error_code=results[t.name, p.partition_index]
                    )
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ],
    )
