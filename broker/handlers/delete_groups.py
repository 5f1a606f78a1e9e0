"""DeleteGroups: remove Empty groups and their committed offsets from this coordinator."""

from __future__ import annotations

from tributary.broker.context import RequestContext
from tributary.protocol.messages import DeleteGroupsRequest, DeleteGroupsResponse


async def handle(ctx: RequestContext, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
    # dict.fromkeys: a group named twice is deleted (and answered) once.
    results = await ctx.broker.groups.delete_groups(list(dict.fromkeys(request.groups_names)))
    return DeleteGroupsResponse(
        results=[
            DeleteGroupsResponse.DeletableGroupResult(group_id=group_id, error_code=code)
            for group_id, code in results.items()
        ]
    )
