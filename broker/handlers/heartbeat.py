"""Heartbeat: keeps a member's session alive; tells it when to rejoin."""

from __future__ import annotations

from tributary.broker.context import RequestContext
from tributary.protocol.messages import HeartbeatRequest, HeartbeatResponse


async def handle(ctx: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse:
    error = await ctx.broker.groups.heartbeat(
        request.group_id, request.generation_id, request.member_id, request.group_instance_id
    )
    return HeartbeatResponse(error_code=error)
