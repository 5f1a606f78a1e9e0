"""FindCoordinator: the broker leading the group's ``__consumer_offsets`` partition (key type 0),
or the transactional id's ``__transaction_state`` partition (key type 1).

Either topic is created on the first request, as Kafka does. Describe on the group (or
transactional id) is needed, else GROUP_AUTHORIZATION_FAILED (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
From v4 one request asks for several keys at once, each answered (and authorized) on its own.
"""

from __future__ import annotations

from tributary.broker.cluster.model import BrokerInfo
from tributary.broker.context import RequestContext
from tributary.protocol.acl import AclOperation, ResourceType
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import FindCoordinatorRequest, FindCoordinatorResponse

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
#: From this version a request names several keys (KIP-699).
BATCHED_KEYS_VERSION = 4

Coordinator = FindCoordinatorResponse.Coordinator


def _unauthorized(ctx: RequestContext, key: str, key_type: int) -> ErrorCode | None:
    if key_type == GROUP_KEY_TYPE:
        resource_type, code = ResourceType.GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED
    elif key_type == TRANSACTION_KEY_TYPE:
        resource_type, code = ResourceType.TRANSACTIONAL_ID, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    else:
        return None
    return None if ctx.authorize(AclOperation.DESCRIBE, resource_type, key) else code


async def _find(ctx: RequestContext, key: str, key_type: int) -> Coordinator:
    if (refused := _unauthorized(ctx, key, key_type)) is not None:
        return Coordinator(key=key, error_code=refused, error_message=refused.name, node_id=-1, host="", port=-1)
    error: ErrorCode
    coordinator: BrokerInfo | None
    if key_type == GROUP_KEY_TYPE:
        error, coordinator = await ctx.broker.offsets_topic.coordinator_for(key)
    elif key_type == TRANSACTION_KEY_TYPE:
        if not key:
            error, coordinator = ErrorCode.INVALID_REQUEST, None
        else:
            error, coordinator = await ctx.broker.transaction_topic.coordinator_for(key)
    else:
        error, coordinator = ErrorCode.INVALID_REQUEST, None
    if coordinator is None:
        return Coordinator(key=key, error_code=error, error_message=error.name, node_id=-1, host="", port=-1)
    # The coordinator's address on the listener this client uses.
    address = coordinator.address(ctx.listener)
    if address is None:
        return Coordinator(
            key=key,
            error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
            error_message=f"the coordinator has no listener {ctx.listener}",
            node_id=-1,
            host="",
            port=-1,
        )
    return Coordinator(
        key=key, error_code=ErrorCode.NONE, error_message=None, node_id=coordinator.id, host=address[0], port=address[1]
    )


async def handle(ctx: RequestContext, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    if ctx.api_version >= BATCHED_KEYS_VERSION:
        return FindCoordinatorResponse(
            coordinators=[await _find(ctx, key, request.key_type) for key in request.coordinator_keys]
        )
    found = await _find(ctx, request.key, request.key_type)
    return FindCoordinatorResponse(
        error_code=found.error_code,
        error_message=found.error_message,
        node_id=found.node_id,
        host=found.host,
        port=found.port,
    )
