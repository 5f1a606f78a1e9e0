"""DeleteGroups: remove Empty groups and their committed offsets from this coordinator. Each group
needs Delete (else GROUP_AUTHORIZATION_FAILED for it, and it is left alone)."""

from __future__ import annotations

from tributary.broker.context import RequestContext
from tributary.protocol.acl import AclOperation, ResourceType
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import DeleteGroupsRequest, DeleteGroupsResponse


async def handle(ctx: RequestContext, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
    # dict.fromkeys: a group named twice is deleted (and answered) once.
    named = list(dict.fromkeys(request.groups_names))
    deletable = ctx.authorized(AclOperation.DELETE, ResourceType.GROUP, named)
    deleted = await ctx.broker.groups.delete_groups([g for g in named if g in deletable])
    results = {g: deleted.get(g, ErrorCode.GROUP_AUTHORIZATION_FAILED) for g in named}
    return DeleteGroupsResponse(
        results=[
            DeleteGroupsResponse.DeletableGroupResult(group_id=group_id, error_code=code)
            for group_id, code in results.items()
        ]
    )
