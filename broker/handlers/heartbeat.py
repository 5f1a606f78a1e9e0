"""Heartbeat: keeps a member's session alive; tells it when to rejoin. Read on the group is needed
(GROUP_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from tributary.broker.context import RequestContext
from tributary.protocol.acl import AclOperation, ResourceType
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import HeartbeatRequest, HeartbeatResponse


async def handle(ctx: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse:
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return HeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    error = await ctx.broker.groups.heartbeat(
        request.group_id, request.generation_id, request.member_id, request.group_instance_id
    )
    return HeartbeatResponse(error_code=error)
