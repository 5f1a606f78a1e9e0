"""SyncGroup: the leader hands in the assignment; every member waits for its share. Read on the
group is needed (GROUP_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from tributary.broker.context import RequestContext
from tributary.broker.group.messages import SyncRequest
from tributary.protocol.acl import AclOperation, ResourceType
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import SyncGroupRequest, SyncGroupResponse


async def handle(ctx: RequestContext, request: SyncGroupRequest) -> SyncGroupResponse:
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return SyncGroupResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, assignment=b"")
    result = await ctx.broker.groups.sync(
        SyncRequest(
            group_id=request.group_id,
            generation_id=request.generation_id,
            member_id=request.member_id,
            group_instance_id=request.group_instance_id,
            assignments={a.member_id: a.assignment for a in request.assignments},
            protocol_type=request.protocol_type,
            protocol_name=request.protocol_name,
        )
    )
    return SyncGroupResponse(
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )
