"""CreateAcls: store ACLs in ZooKeeper, from where every broker's cache picks them up (Alter on
the Cluster).

Each creation gets its own answer: INVALID_REQUEST with the reason for a binding that cannot be
stored (an unknown or filter-only code, an empty name or one ZooKeeper cannot hold, a Cluster not
named ``kafka-cluster``, a principal not of the form ``TYPE:NAME``), UNKNOWN_SERVER_ERROR when
ZooKeeper could not take it, NONE otherwise (also for an ACL that already existed). The answer
comes once this broker's cache holds the new ACLs; the other brokers hear of them through their
watches.
"""

from __future__ import annotations

import logging

from tributary.broker.context import RequestContext
from tributary.protocol.acl import AclBinding, AclOperation, binding_error
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import CreateAclsRequest, CreateAclsResponse

log = logging.getLogger(__name__)
Result = CreateAclsResponse.AclCreationResult


def _refused(request: CreateAclsRequest, code: ErrorCode, message: str) -> CreateAclsResponse:
    return CreateAclsResponse(results=[Result(error_code=code, error_message=message) for _ in request.creations])


async def handle(ctx: RequestContext, request: CreateAclsRequest) -> CreateAclsResponse:
    if not ctx.authorize_cluster(AclOperation.ALTER):
        return _refused(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Alter on the Cluster")
    store = ctx.broker.authorizer.store
    if store is None:
        return _refused(request, ErrorCode.SECURITY_DISABLED, "no authorizer is configured")
    results = [Result(error_code=ErrorCode.NONE, error_message=None) for _ in request.creations]
    valid: list[tuple[int, AclBinding]] = []
    for index, c in enumerate(request.creations):
        binding = AclBinding.from_wire(
            resource_type=c.resource_type, name=c.resource_name, pattern_type=c.resource_pattern_type,
            principal=c.principal, host=c.host, operation=c.operation, permission=c.permission_type,
        )  # fmt: skip
        if (why := binding_error(binding) or store.name_error(binding.pattern.name)) is not None:
            results[index] = Result(error_code=ErrorCode.INVALID_REQUEST, error_message=why)
        else:
            valid.append((index, binding))
    stored = await store.create([binding for _, binding in valid])
    for (index, binding), error in zip(valid, stored, strict=True):
        if error is not None:
            results[index] = Result(error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message=error)
        else:
            log.info("ACL added for %s: %s: %s", ctx.principal, binding.pattern, binding.entry)
    return CreateAclsResponse(results=results)
