"""OffsetDelete: remove single committed offsets of a group (not of topics it consumes now)."""

from __future__ import annotations

from tributary.broker.context import RequestContext
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import OffsetDeleteRequest, OffsetDeleteResponse


async def handle(ctx: RequestContext, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
    wanted = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    error, results = await ctx.broker.groups.delete_offsets(request.group_id, wanted)
    if error != ErrorCode.NONE:
        return OffsetDeleteResponse(error_code=error)
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
