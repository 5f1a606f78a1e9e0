"""ListGroups: the groups this broker coordinates (admin clients ask every broker). With Describe on
the Cluster, all of them; otherwise those the principal may Describe (the others are left out)."""

from __future__ import annotations

from tributary.broker.context import RequestContext
from tributary.protocol.acl import AclOperation, ResourceType
from tributary.protocol.messages import ListGroupsRequest, ListGroupsResponse


async def handle(ctx: RequestContext, request: ListGroupsRequest) -> ListGroupsResponse:
    # v4 filters by state, v5 by type ("classic", "consumer"); older versions send neither.
    error, groups = ctx.broker.groups.list_groups(request.states_filter, request.types_filter)
    if not ctx.authorize_cluster(AclOperation.DESCRIBE, log_denied=False):
        described = ctx.authorized(
            AclOperation.DESCRIBE, ResourceType.GROUP, (g.group_id for g in groups), log_denied=False
        )
        groups = [g for g in groups if g.group_id in described]
    return ListGroupsResponse(
        error_code=error,
        groups=[
            ListGroupsResponse.ListedGroup(
                group_id=g.group_id, protocol_type=g.protocol_type, group_state=g.state, group_type=g.group_type
            )
            for g in groups
        ],
    )
