"""DescribeAcls: the ACLs a filter matches, from this broker's cache (Describe on the Cluster).

As Kafka answers: CLUSTER_AUTHORIZATION_FAILED without Describe on the Cluster, SECURITY_DISABLED
when no authorizer is configured, INVALID_REQUEST for a filter with a code this broker does not
know; otherwise every matching binding, grouped by resource pattern.
"""

from __future__ import annotations

from tributary.broker.context import RequestContext
from tributary.protocol.acl import AclBindingFilter, AclOperation, filter_error
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import DescribeAclsRequest, DescribeAclsResponse

Response = DescribeAclsResponse


async def handle(ctx: RequestContext, request: DescribeAclsRequest) -> DescribeAclsResponse:
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        return Response(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message="Describe on the Cluster")
    store = ctx.broker.authorizer.store
    if store is None:
        return Response(error_code=ErrorCode.SECURITY_DISABLED, error_message="no authorizer is configured")
    wanted = AclBindingFilter.from_wire(
        resource_type=request.resource_type_filter, name=request.resource_name_filter,
        pattern_type=request.pattern_type_filter, principal=request.principal_filter, host=request.host_filter,
        operation=request.operation, permission=request.permission_type,
    )  # fmt: skip
    if (why := filter_error(wanted)) is not None:
        return Response(error_code=ErrorCode.INVALID_REQUEST, error_message=why)
    resources: dict[tuple[int, str, int], Response.DescribeAclsResource] = {}
    for binding in store.describe(wanted):
        pattern, entry = binding.pattern, binding.entry
        key = (pattern.resource_type, pattern.name, pattern.pattern_type)
        resource = resources.get(key)
        if resource is None:
            resource = resources[key] = Response.DescribeAclsResource(
                resource_type=pattern.resource_type, resource_name=pattern.name, pattern_type=pattern.pattern_type
            )
        resource.acls.append(
            Response.AclDescription(
                principal=entry.principal,
                host=entry.host,
                operation=entry.operation,
                permission_type=entry.permission_type,
            )
        )
    return Response(error_code=ErrorCode.NONE, error_message=None, resources=list(resources.values()))
