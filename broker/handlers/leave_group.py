"""LeaveGroup: members leave (v3+: several at once, static members by instance id). Read on the
group is needed (GROUP_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from tributary.broker.context import RequestContext
from tributary.broker.group.messages import LeavingMember
from tributary.protocol.acl import AclOperation, ResourceType
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import LeaveGroupRequest, LeaveGroupResponse

#: From this version a request names several members and gets an error for each.
BATCH_VERSION = 3


async def handle(ctx: RequestContext, request: LeaveGroupRequest) -> LeaveGroupResponse:
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return LeaveGroupResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if ctx.api_version >= BATCH_VERSION:
        leaving = [LeavingMember(m.member_id, m.group_instance_id) for m in request.members]
    else:
        leaving = [LeavingMember(request.member_id, None)]
    result = await ctx.broker.groups.leave(request.group_id, leaving)
    if ctx.api_version < BATCH_VERSION:
        # One member, one error: the member's, unless the whole request failed.
        member_errors = [error for _, error in result.members if error != ErrorCode.NONE]
        error = result.error or (member_errors[0] if member_errors else ErrorCode.NONE)
        return LeaveGroupResponse(error_code=error)
    return LeaveGroupResponse(
        error_code=result.error,
        members=[
            LeaveGroupResponse.MemberResponse(
                member_id=who.member_id, group_instance_id=who.group_instance_id, error_code=error
            )
            for who, error in result.members
        ],
    )
