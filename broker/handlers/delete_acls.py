"""DeleteAcls: remove the ACLs each filter matches (Alter on the Cluster).

Each filter's answer lists the bindings it removed (a binding two filters match is listed under
the first); INVALID_REQUEST for a filter with a code this broker does not know. A filter naming
one resource pattern exactly (a type, a name, LITERAL or PREFIXED) also finds ACLs created on
another broker a moment ago that this one has not heard of yet; wider filters work from the cache.
"""

from __future__ import annotations

import logging

from tributary.broker.context import RequestContext
from tributary.protocol.acl import AclBindingFilter, AclOperation, filter_error
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import DeleteAclsRequest, DeleteAclsResponse

log = logging.getLogger(__name__)
Response = DeleteAclsResponse
Result = Response.DeleteAclsFilterResult


def _refused(request: DeleteAclsRequest, code: ErrorCode, message: str) -> DeleteAclsResponse:
    return Response(filter_results=[Result(error_code=code, error_message=message) for _ in request.filters])


async def handle(ctx: RequestContext, request: DeleteAclsRequest) -> DeleteAclsResponse:
    if not ctx.authorize_cluster(AclOperation.ALTER):
        return _refused(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Alter on the Cluster")
    store = ctx.broker.authorizer.store
    if store is None:
        return _refused(request, ErrorCode.SECURITY_DISABLED, "no authorizer is configured")
    results = [Result(error_code=ErrorCode.NONE, error_message=None) for _ in request.filters]
    valid: list[tuple[int, AclBindingFilter]] = []
    for index, f in enumerate(request.filters):
        wanted = AclBindingFilter.from_wire(
            resource_type=f.resource_type_filter, name=f.resource_name_filter, pattern_type=f.pattern_type_filter,
            principal=f.principal_filter, host=f.host_filter, operation=f.operation, permission=f.permission_type,
        )  # fmt: skip
        if (why := filter_error(wanted)) is not None:
            results[index] = Result(error_code=ErrorCode.INVALID_REQUEST, error_message=why)
        else:
            valid.append((index, wanted))
    deletions = await store.delete([f for _, f in valid])
    for (index, _), deletion in zip(valid, deletions, strict=True):
        for binding, error in deletion.deleted:
            pattern, entry = binding.pattern, binding.entry
            results[index].matching_acls.append(
                Response.DeleteAclsMatchingAcl(
                    error_code=ErrorCode.UNKNOWN_SERVER_ERROR if error else ErrorCode.NONE,
                    error_message=error,
                    resource_type=pattern.resource_type,
                    resource_name=pattern.name,
                    pattern_type=pattern.pattern_type,
                    principal=entry.principal,
                    host=entry.host,
                    operation=entry.operation,
                    permission_type=entry.permission_type,
                )
            )
            if error is None:
                log.info("ACL removed for %s: %s: %s", ctx.principal, pattern, entry)
    return Response(filter_results=results)
