"""FindCoordinator: the broker leading the group's ``__consumer_offsets`` partition (key type 0),
or the transactional id's ``__transaction_state`` partition (key type 1).

Either topic is created on the first request, as Kafka does. Describe on the group (or
transactional id) is needed, else GROUP_AUTHORIZATION_FAILED (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from tributary.broker.cluster.model import BrokerInfo
from tributary.broker.context import RequestContext
from tributary.protocol.acl import AclOperation, ResourceType
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import FindCoordinatorRequest, FindCoordinatorResponse

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1


def _unauthorized(ctx: RequestContext, request: FindCoordinatorRequest) -> FindCoordinatorResponse | None:
    if request.key_type == GROUP_KEY_TYPE:
        resource_type, code = ResourceType.GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED
    elif request.key_type == TRANSACTION_KEY_TYPE:
        resource_type, code = ResourceType.TRANSACTIONAL_ID, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    else:
        return None
    if ctx.authorize(AclOperation.DESCRIBE, resource_type, request.key):
        return None
    return FindCoordinatorResponse(error_code=code, error_message=code.name, node_id=-1, host="", port=-1)


async def handle(ctx: RequestContext, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    if (refused := _unauthorized(ctx, request)) is not None:
        return refused
    error: ErrorCode
    coordinator: BrokerInfo | None
    if request.key_type == GROUP_KEY_TYPE:
        error, coordinator = await ctx.broker.offsets_topic.coordinator_for(request.key)
    elif request.key_type == TRANSACTION_KEY_TYPE:
        if not request.key:
            error, coordinator = ErrorCode.INVALID_REQUEST, None
        else:
            error, coordinator = await ctx.broker.transaction_topic.coordinator_for(request.key)
    else:
        error, coordinator = ErrorCode.INVALID_REQUEST, None
    if coordinator is None:
        return FindCoordinatorResponse(error_code=error, error_message=error.name, node_id=-1, host="", port=-1)
    # The coordinator's address on the listener this client uses.
    address = coordinator.address(ctx.listener)
    if address is None:
        return FindCoordinatorResponse(
            error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
            error_message=f"the coordinator has no listener {ctx.listener}",
            node_id=-1,
            host="",
            port=-1,
        )
    return FindCoordinatorResponse(
        error_code=ErrorCode.NONE, error_message=None, node_id=coordinator.id, host=address[0], port=address[1]
    )
