"""JoinGroup: join (or rejoin) a group; waits until the rebalance completes. Read on the group is
needed (GROUP_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from tributary.broker.context import RequestContext
from tributary.broker.group.messages import JoinRequest
from tributary.protocol.acl import AclOperation, ResourceType
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import JoinGroupRequest, JoinGroupResponse

#: From this version a new dynamic member first gets MEMBER_ID_REQUIRED (KIP-394).
MEMBER_ID_REQUIRED_VERSION = 4


def client_host(peer: str) -> str:
    """How Kafka shows a member's address: the host with a leading slash."""
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return "/" + host.strip("[]")


async def handle(ctx: RequestContext, request: JoinGroupRequest) -> JoinGroupResponse:
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return JoinGroupResponse(
            error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, generation_id=-1, member_id=request.member_id
        )
    # v0 has no rebalance timeout: the session timeout served for both.
    rebalance_timeout = request.session_timeout_ms if ctx.api_version == 0 else request.rebalance_timeout_ms
    result = await ctx.broker.groups.join(
        JoinRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            group_instance_id=request.group_instance_id,
            protocol_type=request.protocol_type,
            protocols=tuple((p.name, p.metadata) for p in request.protocols),
            session_timeout_ms=request.session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout,
            require_known_member_id=ctx.api_version >= MEMBER_ID_REQUIRED_VERSION,
            client_id=ctx.client_id or "",
            client_host=client_host(ctx.peer),
        )
    )
    return JoinGroupResponse(
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name or "",
        leader=result.leader,
        member_id=result.member_id,
        members=[
            JoinGroupResponse.JoinGroupResponseMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata
            )
            for m in result.members
        ],
    )
