"""ListGroups: the groups this broker coordinates (admin clients ask every broker). With Describe on
the Cluster, all of them; otherwise those the principal may Describe (the others are left out).

v4 may ask only for groups in given states, v5 only for groups of given types; both filters
are case-insensitive, and an empty one lets everything through (Kafka's rules). Every group
here is a ``classic`` one.
"""

from __future__ import annotations

from tributary.broker.context import RequestContext
from tributary.protocol.acl import AclOperation, ResourceType
from tributary.protocol.messages import ListGroupsRequest, ListGroupsResponse

CLASSIC = "classic"


async def handle(ctx: RequestContext, request: ListGroupsRequest) -> ListGroupsResponse:
    error, groups = ctx.broker.groups.list_groups()
    if not ctx.authorize_cluster(AclOperation.DESCRIBE, log_denied=False):
        described = ctx.authorized(
            AclOperation.DESCRIBE, ResourceType.GROUP, (g.group_id for g in groups), log_denied=False
        )
        groups = [g for g in groups if g.group_id in described]
    states = {s.lower() for s in request.states_filter}
    types = {t.lower() for t in request.types_filter}
    return ListGroupsResponse(
        error_code=error,
        groups=[
            ListGroupsResponse.ListedGroup(
                group_id=g.group_id, protocol_type=g.protocol_type, group_state=g.state, group_type=CLASSIC
            )
            for g in groups
            if (not states or g.state.lower() in states) and (not types or CLASSIC in types)
        ],
    )
