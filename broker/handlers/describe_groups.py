"""DescribeGroups: state, protocol and members of groups this broker coordinates. Each group needs
Describe (else GROUP_AUTHORIZATION_FAILED for it)."""

from __future__ import annotations

from tributary.broker.context import RequestContext
from tributary.broker.group.messages import GroupSummary
from tributary.protocol.acl import AclOperation, ResourceType
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import DescribeGroupsRequest, DescribeGroupsResponse

#: From this version a group that is not classic is GROUP_ID_NOT_FOUND (Kafka 4.0); before
#: it, a Dead group with no error, as for an unknown group.
NOT_FOUND_VERSION = 6


def _described(summary: GroupSummary, version: int) -> DescribeGroupsResponse.DescribedGroup:
    error = summary.error
    if summary.consumer_group and version >= NOT_FOUND_VERSION:
        error = ErrorCode.GROUP_ID_NOT_FOUND
    return DescribeGroupsResponse.DescribedGroup(
        error_code=error,
        group_id=summary.group_id,
        group_state=summary.state,
        protocol_type=summary.protocol_type,
        protocol_data=summary.protocol,
        members=[
            DescribeGroupsResponse.DescribedGroupMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata,
                member_assignment=m.assignment,
            )
            for m in summary.members
        ],
    )


def _describe(ctx: RequestContext, group_id: str) -> DescribeGroupsResponse.DescribedGroup:
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return _described(GroupSummary(ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id), ctx.api_version)
    return _described(ctx.broker.groups.describe(group_id), ctx.api_version)


async def handle(ctx: RequestContext, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
    groups = [_describe(ctx, g) for g in request.groups]
    if request.include_authorized_operations:
        for group in groups:
            if group.error_code == ErrorCode.NONE:
                group.authorized_operations = ctx.authorized_operations(ResourceType.GROUP, group.group_id)
    return DescribeGroupsResponse(groups=groups)
